"""Producer state of one partition: Kafka's ``ProducerStateManager`` (format doc §4).

For every producer id the manager keeps the epoch, up to :data:`NUM_BATCHES_TO_RETAIN` recent batches (sequence
and offset ranges, for duplicate detection), the coordinator epoch, the first offset of its open transaction and
the max timestamp of its last batch. It validates appends (:class:`ProducerAppendInfo`), tracks open and
completed-but-unreplicated transactions (the first unstable offset bounds READ_COMMITTED reads), and persists its
state in ``<20-digit map end offset>.snapshot`` files through :mod:`checkpoints.producer_snapshot`.

An append follows Kafka's protocol: ``info = manager.prepare_update(pid, origin)``;
``ended = info.append(batch, base_offset, append_time)`` for each batch of that producer; ``manager.update(info)``; for an ended transaction compute
``manager.last_stable_offset(ended)``, write the aborted transaction to the ``.txnindex``, then
``manager.complete_txn(ended)``; finally ``manager.map_end_offset = last_offset + 1``.
:meth:`ProducerStateManager.on_batch` does all of this for one batch.

Not thread-safe: the owning log serializes every call, as Kafka's log lock does.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from checkpoints.atomic import read_file_bytes
from checkpoints.producer_snapshot import (
    ProducerSnapshotEntry,
    parse_producer_snapshot,
    write_producer_snapshot,
)
from logmgr.clock import Clock, SystemClock
from logmgr.errors import (
    ConfigError,
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from segments._native.append import ProducerStateManagerState
from segments._native.listing import canonical_offsets
from segments.append_origin import AppendOrigin
from segments.errors import CorruptRecordError, CorruptSnapshotError, InvalidOffsetError
from segments.java_numbers import INT32_MAX
from segments.naming import (
    DELETED_SUFFIX,
    SNAPSHOT_SUFFIX,
    filename_prefix_from_offset,
    offset_from_file_name,
)
from segments.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ControlRecordType,
    EndTransactionMarker,
    RecordBatch,
)
from segments.transactions import CompletedTxn

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "NUM_BATCHES_TO_RETAIN",
    "AppendOrigin",
    "BatchMetadata",
    "EndedTxn",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TxnMetadata",
    "decrement_sequence",
    "snapshots_to_prune",
    "stray_snapshots",
]

_log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
"""Recent batches kept per producer: a client has at most 5 requests in flight, so a retry matches one of them."""

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Default of ``producer.id.expiration.ms`` (one day)."""

_NO_COORDINATOR_EPOCH = -1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: the inverse of
    :func:`segments.records.increment_sequence`, wrapping below 0 to ``Int.MAX``. O(1)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch as remembered for duplicate detection (Kafka's ``BatchMetadata``).

    ``offset_delta`` is ``last_offset - first_offset``, which is also the sequence delta of the batch.
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """First sequence of the batch (wrapping as Kafka does). O(1)."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """First offset of the batch. O(1)."""
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class TxnMetadata:
    """A transaction of one producer: its first offset and, once its marker is appended, the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class EndedTxn:
    """A transaction ended by a COMMIT/ABORT marker, before its last stable offset is known (Kafka's
    ``CompletedTxn``).

    :class:`segments.transactions.CompletedTxn` also carries the last stable offset, which depends on the other
    producers' open transactions *after* every producer of the append has been updated, so the marker alone
    cannot supply it. :meth:`ProducerStateManager.complete_txn` turns this into that ``CompletedTxn``.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool

    def with_last_stable_offset(self, last_stable_offset: int) -> CompletedTxn:
        """The :class:`~segments.transactions.CompletedTxn` for a known last stable offset. O(1)."""
        return CompletedTxn(
            self.producer_id, self.first_offset, self.last_offset, self.is_aborted, last_stable_offset
        )


class ProducerStateEntry:
    """The state of one producer id (Kafka's ``ProducerStateEntry``).

    ``batches`` holds at most :data:`NUM_BATCHES_TO_RETAIN` batches of the current epoch, oldest first; a new
    epoch empties it. ``current_txn_first_offset`` is ``None`` when no transaction is open. ``last_timestamp`` is
    the max timestamp of the producer's last batch or marker (record time, used for expiry).

    Invariant (:meth:`_check`): at most 5 batches, with strictly increasing last offsets and non-negative deltas.
    """

    __slots__ = (
        "_batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = _NO_COORDINATOR_EPOCH,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self._batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self._batches.extend(batches)

    @property
    def batch_metadata(self) -> tuple[BatchMetadata, ...]:
        """The cached batches, oldest first. O(1) (at most 5)."""
        return tuple(self._batches)

    @property
    def is_empty(self) -> bool:
        """Whether no batch is cached (new producer, new epoch, or state loaded without batch). O(1)."""
        return not self._batches

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest cached batch, or ``NO_SEQUENCE``. O(1)."""
        return self._batches[0].first_seq if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest cached batch, or ``NO_SEQUENCE``. O(1)."""
        return self._batches[-1].last_seq if self._batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        """First offset of the oldest cached batch, or −1. O(1)."""
        return self._batches[0].first_offset if self._batches else -1

    @property
    def last_data_offset(self) -> int:
        """Last offset of the newest cached batch, or −1. O(1)."""
        return self._batches[-1].last_offset if self._batches else -1

    @property
    def last_offset_delta(self) -> int:
        """Offset delta of the newest cached batch, or 0. O(1)."""
        return self._batches[-1].offset_delta if self._batches else 0

    def copy_without_batches(self) -> ProducerStateEntry:
        """A new entry with the same epoch, coordinator epoch, timestamp and open transaction but no batch: the
        starting point of an append's updated state. O(1)."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """Switch to ``producer_epoch``, dropping the cached batches, if it differs; return whether it did. O(1)."""
        if self.producer_epoch == producer_epoch:
            return False
        self._batches.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        """Record an appended data batch (evicting the oldest beyond 5). O(1)."""
        self.maybe_update_producer_epoch(producer_epoch)
        self._batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """Apply an end-transaction marker: epoch, coordinator epoch and timestamp; no open transaction. O(1)."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Merge the state an append produced (``next_entry``) into this entry. O(1) (at most 5 batches)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self._batches.extend(next_entry._batches)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range, if any. O(1) (at most 5)."""
        for metadata in self._batches:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None

    def find_duplicate_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        """The cached batch ``batch`` duplicates: same epoch and same sequence range. O(1)."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        """The snapshot form: only the newest batch survives, as in Kafka. O(1)."""
        return ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_seq,
            self.last_data_offset,
            self.last_offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset,
        )

    @classmethod
    def from_snapshot_entry(cls, entry: ProducerSnapshotEntry) -> ProducerStateEntry:
        """Rebuild an entry from a snapshot; its batch is restored only when ``last_offset >= 0``. O(1)."""
        batches = (
            [BatchMetadata(entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp)]
            if entry.last_offset >= 0
            else []
        )
        return cls(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.timestamp,
            entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None,
            batches,
        )

    def _check(self) -> None:
        assert len(self._batches) <= NUM_BATCHES_TO_RETAIN
        previous = None
        for metadata in self._batches:
            assert metadata.offset_delta >= 0, metadata
            assert previous is None or metadata.last_offset > previous.last_offset, (previous, metadata)
            previous = metadata

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, batches={list(self._batches)})"
        )


class ProducerAppendInfo:
    """Validation and accumulated state of one producer's batches in one append (Kafka's
    ``ProducerAppendInfo``).

    ``current_entry`` is the producer's state before the append (left untouched); the validated state builds up
    in :attr:`updated_entry` until :meth:`ProducerStateManager.update` merges it. After an error the info must be
    discarded: the append is refused as a whole.
    """

    __slots__ = ("_current", "_started", "_updated", "origin", "producer_id")

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self._current = current_entry
        self._updated = current_entry.copy_without_batches()
        self._started: list[TxnMetadata] = []

    @property
    def current_entry(self) -> ProducerStateEntry:
        """The producer's state before this append. O(1)."""
        return self._current

    @property
    def updated_entry(self) -> ProducerStateEntry:
        """The state this append produces, batches of this append only (Kafka's ``toEntry``). O(1)."""
        return self._updated

    @property
    def started_transactions(self) -> tuple[TxnMetadata, ...]:
        """Transactions opened by this append. O(1)."""
        return tuple(self._started)

    def append(self, batch: RecordBatch, base_offset: int, append_time: int | None) -> EndedTxn | None:
        """Validate and account for one batch of this producer, placed at ``base_offset`` (a leader's append
        reads the batch as the producer sent it, before its header is stamped) and, when ``append_time`` is given,
        stamped with that LogAppendTime (then its max timestamp and its records' timestamps); return the
        transaction its marker ends. O(1) for data batches; a control batch's single record is decoded.

        Raises :class:`DuplicateSequenceError` (CLIENT origin, carrying the cached original as ``duplicate``),
        :class:`OutOfOrderSequenceError`, :class:`InvalidProducerEpochError`, :class:`InvalidTxnStateError`,
        :class:`TransactionCoordinatorFencedError`, or :class:`CorruptRecordError` for a control batch that is not
        a valid COMMIT/ABORT marker.
        """
        if batch.is_control:
            records = batch.records()
            if not records:
                # The cleaner removed the whole transaction; its marker ends nothing any more.
                return None
            record = records[0]
            control_type = ControlRecordType.parse(record.key)
            if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                raise CorruptRecordError(
                    f"control batch of producer {self.producer_id} at offset {base_offset} is a "
                    f"{control_type.name} record, not an end-transaction marker"
                )
            marker = EndTransactionMarker.parse(control_type, record.value)
            return self.append_end_txn_marker(
                marker, batch.producer_epoch, base_offset, record.timestamp if append_time is None else append_time
            )
        if self.origin is AppendOrigin.CLIENT:
            duplicate = self._current.find_duplicate_batch(batch)
            if duplicate is not None:
                raise DuplicateSequenceError(
                    f"producer {self.producer_id} epoch {batch.producer_epoch} resent sequences "
                    f"{batch.base_sequence}..{batch.last_sequence}, already appended at offsets "
                    f"{duplicate.first_offset}..{duplicate.last_offset}",
                    duplicate,
                )
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp if append_time is None else append_time,
            base_offset,
            base_offset + batch.last_offset - batch.base_offset,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Validate and record one data batch. O(1).

        Checks run in Kafka's order (epoch, then sequence for CLIENT origin, then transaction state) before any
        state changes, so a refused batch leaves this info as it was.
        """
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        open_txn = self._updated.current_txn_first_offset
        if open_txn is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"producer {self.producer_id} wrote a non-transactional batch at offset {first_offset} while its "
                f"transaction from offset {open_txn} is open"
            )
        self._updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if open_txn is None and is_transactional:
            self._updated.current_txn_first_offset = first_offset
            self._started.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> EndedTxn | None:
        """Validate and apply a COMMIT/ABORT marker at ``offset``; return the transaction it ends, or ``None``
        when no transaction is open (an empty transaction changes no stable offset). O(1).

        Epochs follow Kafka's transaction versions 0/1: a marker epoch below the producer's is refused (only logged
        for REPLICATION), as is an older coordinator epoch (:class:`TransactionCoordinatorFencedError`).
        """
        self._check_producer_epoch(producer_epoch, offset)
        if self._updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"marker of producer {self.producer_id} at offset {offset} has coordinator epoch "
                f"{marker.coordinator_epoch}, older than the known {self._updated.coordinator_epoch}"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            _log.info("%s", message)
        first_offset = self._updated.current_txn_first_offset
        ended = (
            None
            if first_offset is None
            else EndedTxn(
                self.producer_id, first_offset, offset, marker.control_type is ControlRecordType.ABORT
            )
        )
        self._updated.end_transaction(producer_epoch, marker.coordinator_epoch, timestamp)
        return ended

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self._updated.producer_epoch
        if producer_epoch >= current:
            return
        message = (
            f"epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, "
            f"older than the last seen epoch {current}"
        )
        if self.origin is AppendOrigin.REPLICATION:
            # The leader accepted it; a follower or a recovery replay keeps what the log holds.
            _log.warning("%s", message)
            return
        raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated = self._updated
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id} at offset {offset} starts new epoch {producer_epoch} with "
                    f"sequence {first_seq}, expected 0 (current epoch {updated.producer_epoch})"
                )
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif producer_epoch == self._current.producer_epoch:
            last_seq = self._current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # A producer whose records were all removed (retention, DeleteRecords) has no epoch: any sequence goes.
        if self._current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {self.producer_id} at offset {offset} sent sequence {first_seq} after {last_seq}"
            )

    def __repr__(self) -> str:
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, origin={self.origin.name}, "
            f"updated={self._updated!r}, started={self._started!r})"
        )


def snapshots_to_prune(
    snapshot_offsets: Iterable[int], segment_base_offsets: Iterable[int], recovery_point: int
) -> list[int]:
    """The snapshots the pre-2.8 rule deletes after a recovery-point checkpoint, ascending.
    O(s + b log b) for s snapshots and b segments.

    Kafka before 2.8 (``Log.deleteSnapshotsAfterRecoveryPointCheckpoint``) deleted every snapshot below
    ``min(R, T)``, where ``R`` is the base of the segment strictly below ``recovery_point`` (or
    ``recovery_point`` itself when none is) and ``T`` is the base of the segment before the active one (or the
    active base when there is one segment). That keeps the last two segments' snapshots and everything from the
    recovery point's segment on. Snapshots below the first segment's base belong to deleted segments and go
    too (needed only when the recovery point lies below every segment). Raises ``ValueError`` for an empty
    ``segment_base_offsets``: a log always has an active segment.
    """
    bases = sorted(set(segment_base_offsets))
    if not bases:
        raise ValueError("snapshots_to_prune needs the base offsets of at least the active segment")
    two_segments_min = bases[-2] if len(bases) >= 2 else bases[-1]
    below_recovery = [base for base in bases if base < recovery_point]
    recovery_segment = below_recovery[-1] if below_recovery else recovery_point
    keep_from = max(min(recovery_segment, two_segments_min), bases[0])
    return sorted(offset for offset in set(snapshot_offsets) if offset < keep_from)


def stray_snapshots(snapshot_offsets: Iterable[int], segment_base_offsets: Iterable[int]) -> list[int]:
    """The snapshots Kafka's ``removeStraySnapshots`` deletes at load, ascending. O(s log s + b).

    A stray snapshot has no segment with its base offset. All strays go except the largest one when it lies
    above every segment base (or there is no segment): that is the snapshot written at clean shutdown.
    """
    bases = set(segment_base_offsets)
    strays = sorted(offset for offset in set(snapshot_offsets) if offset not in bases)
    if strays and (not bases or strays[-1] > max(bases)):
        strays.pop()
    return strays


class ProducerStateManager(ProducerStateManagerState):
    """Producer ids of one partition and their open transactions, with snapshots in ``partition_dir``.

    Invariants (:meth:`_check`, which holds between complete appends, i.e. after :meth:`on_batch` or after
    ``update`` + ``complete_txn``): entries are keyed by their producer id and valid; open transactions are keyed
    by first offset, at most one per producer, and every entry's open transaction is among them; unreplicated
    transactions all have a marker offset; the map end offset is not negative. Its fields are those of the compiled
    :class:`~segments._native.append.ProducerStateManagerState` (the append stores the map end offset from C).
    """

    map_end_offset: int
    _dir: Path
    _dir_name: str
    producer_id_expiration_ms: int
    _clock: Clock
    _producers: dict[int, ProducerStateEntry]
    _ongoing: dict[int, TxnMetadata]
    _unreplicated: dict[int, TxnMetadata]
    _snapshots: dict[int, str]
    _set_aside: dict[int, str]
    _last_snap_offset: int

    def __init__(
        self,
        partition_dir: str | os.PathLike[str],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        clock: Clock | None = None,
        *,
        snapshot_names: list[str] | None = None,
    ) -> None:
        """``snapshot_names``: the names of the regular ``*.snapshot`` files of ``partition_dir`` when the caller
        has just listed it (a log load), so the snapshots are found without listing it again; None lists it."""
        if producer_id_expiration_ms < 1:
            raise ConfigError(
                "producer.id.expiration.ms", f"must be at least 1, got {producer_id_expiration_ms}"
            )
        # A load passes its Path: Path(path) would parse it again.
        self._dir = partition_dir if isinstance(partition_dir, Path) else Path(partition_dir)
        # The snapshot reads and writes of a load (one per recovered segment) name their files from this string, no
        # Path.
        self._dir_name = os.fspath(self._dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._clock = SystemClock() if clock is None else clock
        self._producers = {}
        # first offset -> transaction; few at a time, so min() scans replace Kafka's TreeMap.
        self._ongoing = {}
        # Completed transactions whose marker is not yet below the high watermark: still unstable for readers.
        self._unreplicated = {}
        self._snapshots = _snapshot_files(
            self._dir, _list_snapshot_files(self._dir) if snapshot_names is None else snapshot_names
        )
        # Snapshots a recovery set aside (see truncate_and_reload): not used, deleted unless written again.
        self._set_aside = {}
        self.map_end_offset = 0
        """The state covers every offset below this one: the log sets it after each append (Kafka's
        ``updateMapEndOffset``; a field of the compiled base, which the compiled append stores on every append)."""
        self._last_snap_offset = 0

    # -- queries ------------------------------------------------------------------------------------------------

    @property
    def partition_dir(self) -> Path:
        """The directory holding the snapshots. O(1)."""
        return self._dir

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of ``{producer_id: entry}`` (the entries are live; do not mutate them). O(1)."""
        return MappingProxyType(self._producers)

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """``{producer_id: first_offset}`` of every open transaction, by ascending first offset. O(k log k)."""
        ongoing = self._ongoing
        return {txn.producer_id: first for first, txn in sorted(ongoing.items())} if ongoing else {}

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The producer's live entry, or ``None``. O(1)."""
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        """No producer and no unreplicated transaction. O(1)."""
        return not self._producers and not self._unreplicated

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest open transaction, ignoring replication. O(k)."""
        return min(self._ongoing, default=None)

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction that is open or whose marker is above the high watermark:
        READ_COMMITTED readers stop there. O(k)."""
        return min([*self._ongoing, *self._unreplicated], default=None)

    def last_stable_offset(self, txn: EndedTxn) -> int:
        """The LSO to store with ``txn`` in the ``.txnindex``: the first offset of the earliest open transaction
        of another producer, else the marker offset + 1. O(k)."""
        others = [
            first for first, open_txn in self._ongoing.items() if open_txn.producer_id != txn.producer_id
        ]
        return min(others, default=txn.last_offset + 1)

    # -- appends ------------------------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """Start validating an append of ``producer_id``. O(1)."""
        current = self._producers.get(producer_id)
        return ProducerAppendInfo(
            producer_id, ProducerStateEntry(producer_id) if current is None else current, origin
        )

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Merge a validated append and register the transactions it opened. O(t) for t started transactions.

        Raises ``ValueError`` for an info without producer id.
        """
        producer_id = append_info.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"producer id {producer_id} cannot update producer state")
        updated = append_info.updated_entry
        current = self._producers.get(producer_id)
        if current is None:
            self._producers[producer_id] = updated
        else:
            current.update(updated)
        for txn in append_info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def complete_txn(self, txn: EndedTxn) -> CompletedTxn:
        """Mark ``txn`` complete (it stays unstable until the high watermark passes its marker) and return it
        with its last stable offset. O(k).

        Raises ``ValueError`` when no such transaction was open.
        """
        last_stable_offset = self.last_stable_offset(txn)
        metadata = self._ongoing.get(txn.first_offset)
        if metadata is None or metadata.producer_id != txn.producer_id:
            raise ValueError(f"cannot complete {txn}: no such transaction is open")
        del self._ongoing[txn.first_offset]
        metadata.last_offset = txn.last_offset
        self._unreplicated[txn.first_offset] = metadata
        return txn.with_last_stable_offset(last_stable_offset)

    def on_batch(
        self, batch: RecordBatch, origin: AppendOrigin = AppendOrigin.REPLICATION
    ) -> CompletedTxn | None:
        """Apply one batch with the whole append protocol and advance the map end offset past it; return the
        transaction its marker completes, with its last stable offset (write it to the ``.txnindex`` when
        aborted). O(k); a control batch's record is decoded.

        Batches without producer id (including magic 0/1) only move the map end offset. A refused batch raises
        (see :meth:`ProducerAppendInfo.append`) and changes nothing.
        """
        completed = None
        if batch.producer_id != NO_PRODUCER_ID:
            info = self.prepare_update(batch.producer_id, origin)
            ended = info.append(batch, batch.base_offset, None)
            self.update(info)
            if ended is not None:
                completed = self.complete_txn(ended)
        self.map_end_offset = batch.last_offset + 1
        return completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below ``high_watermark``. O(k)."""
        self._remove_unreplicated_below(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget completed transactions below the new log start and move the map end offset up to it. O(k + s)."""
        self._remove_unreplicated_below(log_start_offset)
        self.map_end_offset = max(self.map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def _remove_unreplicated_below(self, offset: int) -> None:
        if not self._unreplicated:
            return
        for first_offset, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first_offset]

    # -- expiry and truncation ----------------------------------------------------------------------------------

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Drop producers with no open transaction whose last timestamp is ``producer.id.expiration.ms`` or more
        before ``now_ms`` (default: the clock); return their ids. O(n)."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        expired = [pid for pid, entry in self._producers.items() if self._is_expired(entry, now)]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None, *, set_aside: bool = False
    ) -> None:
        """Kafka's ``truncateAndReload``: delete snapshots above ``log_end_offset`` or at or below
        ``log_start_offset``; then, unless the map already ends at ``log_end_offset``, drop all state and load the
        newest valid snapshot (a corrupt one is deleted and the next older one tried), leaving out producers
        expired at ``now_ms`` (default: the clock). Without a snapshot the map restarts at ``log_start_offset``;
        the caller replays the log from :attr:`map_end_offset`. O(s + n) plus the snapshot reads.

        ``set_aside=True`` (a recovery, which writes a snapshot after each segment it recovers) sets the snapshots
        above ``log_end_offset`` aside instead of deleting them: no longer used, as if deleted, but
        :meth:`take_snapshot` keeps one that already holds the bytes it would write (after a crash the recovered
        log is mostly the same, so are its snapshots: a read instead of an unlink and a write), and
        :meth:`delete_set_aside_snapshots` deletes the rest when the recovery ends. A crash in between leaves them
        where they were, still above the recovery point, so the next recovery sets them aside again.
        """
        snapshots = self._snapshots
        # Two C-level scans decide whether any snapshot goes (a recovery's call per segment: usually none).
        doomed = bool(snapshots) and (min(snapshots) <= log_start_offset or max(snapshots) > log_end_offset)
        for offset in list(snapshots) if doomed else ():
            if offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
            elif offset > log_end_offset:
                if set_aside:
                    self._set_aside[offset] = self._snapshots.pop(offset)
                else:
                    self._remove_and_delete_snapshot(offset)
        if log_end_offset == self.map_end_offset:
            self.on_log_start_offset_incremented(log_start_offset)
            return
        self._producers.clear()
        self._ongoing.clear()
        # The log end offset is at or below the high watermark here, so no completed transaction is unreplicated.
        self._unreplicated.clear()
        self._load_from_snapshot(log_start_offset, self._clock.time_ms() if now_ms is None else now_ms)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            path = f"{self._dir_name}/{self._snapshots[offset]}"
            try:
                # The offset is the file's name, parsed when it was listed.
                stored = parse_producer_snapshot(read_file_bytes(path), path)
            except CorruptSnapshotError as err:
                _log.warning("deleting corrupt producer snapshot: %s", err)
                self._remove_and_delete_snapshot(offset)
                continue
            entries = [ProducerStateEntry.from_snapshot_entry(entry) for entry in stored]
            for entry in sorted(entries, key=lambda e: e.producer_id):
                if not self._is_expired(entry, now_ms):
                    self._load_entry(entry)
            self._last_snap_offset = self.map_end_offset = offset
            _log.info("loaded producer state from %s: %d producers", path, len(self._producers))
            return
        self._last_snap_offset = self.map_end_offset = log_start_offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset
            )

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all state and delete every snapshot; the map restarts at ``offset``. O(n + s)."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for snapshot_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(snapshot_offset)
        self._last_snap_offset = 0
        self.map_end_offset = offset

    # -- snapshots ----------------------------------------------------------------------------------------------

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """:meth:`write_snapshot`, returning the snapshot's path (``None`` when nothing was written). O(n log n)
        for n producers."""
        name = self.write_snapshot(sync)
        return None if name is None else self._dir / name

    def write_snapshot(self, sync: bool = True) -> str | None:
        """Write ``<map end offset>.snapshot`` unless the map has not advanced since the last snapshot; return
        its file name, or ``None`` when nothing was written (no ``Path`` made: a recovery writes one per segment).
        ``sync=False`` defers the fsyncs (snapshot at roll, a load). A snapshot set aside at that offset (see
        :meth:`truncate_and_reload`) that holds the same bytes is kept (its name returned: it is the snapshot now,
        as durable as the old one was). O(n log n) for n producers (entries are written by producer id).
        """
        offset = self.map_end_offset
        if offset <= self._last_snap_offset:
            return None
        name = filename_prefix_from_offset(offset) + SNAPSHOT_SUFFIX
        logging_info = _log.isEnabledFor(logging.INFO)
        started = self._clock.monotonic_ms() if logging_info else 0
        producers = self._producers
        entries = [producers[pid].to_snapshot_entry() for pid in sorted(producers)] if producers else []
        set_aside = self._set_aside.pop(offset, None) is not None
        write_producer_snapshot(f"{self._dir_name}/{name}", entries, sync=sync, keep_if_equal=set_aside)
        if logging_info:
            _log.info(
                "wrote producer snapshot at offset %d with %d producer ids in %d ms",
                offset,
                len(entries),
                self._clock.monotonic_ms() - started,
            )
        self._snapshots[offset] = name
        self._last_snap_offset = offset
        return name

    def is_snapshot_at_map_end(self, offset: int) -> bool:
        """Whether the map ends at ``offset`` and the last snapshot written or loaded is at that offset (a
        :meth:`write_snapshot` now would write nothing). O(1)."""
        return self.map_end_offset == offset == self._last_snap_offset

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshots this manager knows, ascending. O(s log s)."""
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        """Offset of the newest snapshot, or ``None``. O(s)."""
        return max(self._snapshots, default=None)

    def oldest_snapshot_offset(self) -> int | None:
        """Offset of the oldest snapshot, or ``None``. O(s)."""
        return min(self._snapshots, default=None)

    def snapshot_path(self, offset: int) -> Path | None:
        """Path of the snapshot at ``offset``, or ``None``. O(1)."""
        name = self._snapshots.get(offset)
        return None if name is None else self._dir / name

    def update_partition_dir(self, partition_dir: str | os.PathLike[str]) -> None:
        """Follow a rename of the partition directory (e.g. to its ``-delete`` name). O(1)."""
        self._dir = Path(partition_dir)
        self._dir_name = os.fspath(self._dir)

    def delete_snapshot(self, offset: int) -> bool:
        """Forget the snapshot at ``offset`` and delete its file; return whether a file was deleted. O(1)."""
        return self._remove_and_delete_snapshot(offset)

    def delete_set_aside_snapshots(self) -> list[int]:
        """Delete the snapshots :meth:`truncate_and_reload` set aside that were not written again; return their
        offsets. O(s)."""
        doomed = sorted(self._set_aside)
        for offset in doomed:
            self._snapshots[offset] = self._set_aside.pop(offset)
            self._remove_and_delete_snapshot(offset)
        return doomed

    def _remove_and_delete_snapshot(self, offset: int) -> bool:
        name = self._snapshots.pop(offset, None)
        if name is None:
            return False
        try:
            (self._dir / name).unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_snapshot_to_deleted(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename its file to ``*.snapshot.deleted`` for delayed deletion
        with its segment; return the new path, or ``None`` when there was no such snapshot (or its file was
        already gone). O(1)."""
        name = self._snapshots.pop(offset, None)
        if name is None:
            return None
        source = self._dir / name
        target = source.with_name(name + DELETED_SUFFIX)
        try:
            os.replace(source, target)
        except FileNotFoundError:
            _log.info("producer snapshot %s was already deleted", source)
            return None
        return target

    def delete_snapshots_below(self, offset: int) -> list[int]:
        """Delete every snapshot with an offset below ``offset`` (Kafka's ``deleteSnapshotsBefore``); return their
        offsets. O(s)."""
        return self._delete_snapshots(snapshot for snapshot in self._snapshots if snapshot < offset)

    def remove_straggling_snapshots(self, segment_base_offsets: Iterable[int], *, rescan: bool = True) -> list[int]:
        """Kafka's ``removeStraySnapshots``: rescan the directory, then delete the snapshots that match no segment
        base offset, keeping the largest one if it lies above every segment (see :func:`stray_snapshots`);
        return the deleted offsets. ``rescan=False`` skips the scan, for a caller that made this manager from a
        listing just taken (a log load): the snapshots it knows, that listing's plus those it wrote or deleted
        since, are then the directory's. O(s log s + b) plus the directory scan."""
        if rescan:
            self._snapshots = _snapshot_files(self._dir, _list_snapshot_files(self._dir))
        return self._delete_snapshots(stray_snapshots(self._snapshots, segment_base_offsets))

    def prune_snapshots_pre_2_8(self, segment_base_offsets: Sequence[int], recovery_point: int) -> list[int]:
        """Delete the snapshots :func:`snapshots_to_prune` selects (run after a recovery-point checkpoint); return
        their offsets. O(s + b log b)."""
        return self._delete_snapshots(
            snapshots_to_prune(self._snapshots, segment_base_offsets, recovery_point)
        )

    def _delete_snapshots(self, offsets: Iterable[int]) -> list[int]:
        doomed = sorted(offsets)
        for offset in doomed:
            self._remove_and_delete_snapshot(offset)
        return doomed

    # -- invariants ---------------------------------------------------------------------------------------------

    def _check(self) -> None:
        assert self.map_end_offset >= 0, self.map_end_offset
        for producer_id, entry in self._producers.items():
            assert producer_id == entry.producer_id >= 0, (producer_id, entry)
            entry._check()
            if entry.current_txn_first_offset is not None:
                txn = self._ongoing.get(entry.current_txn_first_offset)
                assert txn is not None and txn.producer_id == producer_id, (entry, txn)
        owners = [txn.producer_id for txn in self._ongoing.values()]
        assert len(owners) == len(set(owners)), self._ongoing
        for first_offset, txn in self._ongoing.items():
            assert txn.first_offset == first_offset and txn.last_offset is None, txn
        for first_offset, txn in self._unreplicated.items():
            assert txn.first_offset == first_offset and txn.last_offset is not None, txn
            assert txn.last_offset >= first_offset, txn
        for offset, name in self._snapshots.items():
            assert offset_from_file_name(name) == offset and name.endswith(SNAPSHOT_SUFFIX), (offset, name)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({str(self._dir)!r}, producers={len(self._producers)}, "
            f"map_end_offset={self.map_end_offset}, snapshots={self.snapshot_offsets()})"
        )


def _list_snapshot_files(directory: Path) -> list[str]:
    """Names of the regular ``*.snapshot`` files in ``directory`` (none if it is absent). O(entries)."""
    try:
        with os.scandir(directory) as entries:
            return [entry.name for entry in entries if entry.name.endswith(SNAPSHOT_SUFFIX) and entry.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _snapshot_files(directory: Path, names: list[str]) -> dict[int, str]:
    """``{offset: file name}`` of the snapshot files ``names`` (regular ``*.snapshot`` files of ``directory``): in
    bulk when all are named as Kafka names them, else one by one. O(n)."""
    offsets = canonical_offsets(names, SNAPSHOT_SUFFIX)
    if offsets is not None:
        return dict(zip(offsets, names, strict=True))
    found: dict[int, str] = {}
    for name in names:
        try:
            found[offset_from_file_name(name)] = name
        except InvalidOffsetError:
            # Kafka would fail the whole load on such a name; it is not a snapshot Kafka could have written.
            _log.warning("ignoring %s: not named by an offset", Path(directory, name))
    return found
