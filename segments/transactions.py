"""Ongoing-transaction tracking: which aborted transactions a ``.txnindex`` must hold.

This is the part of Kafka's ``ProducerStateManager`` that segment recovery needs to rebuild a transaction index
(``kafka-format.md`` §3.4, §6.3): a transactional data batch opens a transaction for its producer (first offset =
the batch's base offset) unless one is open; a COMMIT/ABORT marker closes it. An ABORT of a non-empty transaction
yields an index entry whose ``lastStableOffset`` is the first offset of the earliest transaction of *another*
producer still open, else the marker offset + 1. Markers closing no transaction yield nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from segments.errors import CorruptRecordError
from segments.records import ControlRecordType, RecordBatch


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


class TransactionTracker:
    """Open transactions by producer, fed batch by batch in offset order.

    Invariant (:meth:`_check`): at most one open transaction per producer, keyed by producer id, with first
    offsets below the last offset seen.
    """

    __slots__ = ("_last_offset", "_open")

    def __init__(self, open_transactions: dict[int, int] | None = None) -> None:
        # producer id -> first offset of its open transaction; dict order is not relied upon.
        self._open: dict[int, int] = dict(open_transactions or {})
        self._last_offset = -1

    @property
    def open_transactions(self) -> dict[int, int]:
        """Copy of ``{producer_id: first_offset}`` for every open transaction. O(n)."""
        return dict(self._open)

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction, or ``None``. O(n)."""
        return min(self._open.values(), default=None)

    def on_batch(self, batch: RecordBatch) -> CompletedTxn | None:
        """Account for one batch; return the transaction its marker completes, if any. O(n) for markers
        (n = open transactions), O(1) otherwise.

        Control batches are decoded (one small record); a marker whose record is malformed raises
        :class:`CorruptRecordError`, which ends a recovery scan as Kafka's does.
        """
        producer_id = batch.producer_id
        self._last_offset = batch.last_offset
        if producer_id < 0 or not batch.is_transactional:
            return None
        if not batch.is_control:
            self._open.setdefault(producer_id, batch.base_offset)
            return None
        records = batch.records()
        if not records:
            raise CorruptRecordError("control batch holds no record")
        control_type = ControlRecordType.parse(records[0].key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        first_offset = self._open.get(producer_id)
        if first_offset is None:
            return None
        marker_offset = batch.base_offset
        others = [offset for pid, offset in self._open.items() if pid != producer_id]
        last_stable_offset = min(others) if others else marker_offset + 1
        del self._open[producer_id]
        return CompletedTxn(
            producer_id,
            first_offset,
            marker_offset,
            control_type is ControlRecordType.ABORT,
            last_stable_offset,
        )

    def _check(self) -> None:
        for producer_id, first_offset in self._open.items():
            assert producer_id >= 0
            assert self._last_offset < 0 or first_offset <= self._last_offset
