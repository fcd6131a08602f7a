"""An intra-broker move's copy: Kafka's ``ReplicaAlterLogDirsThread`` fetching from the current log into the future.

The future log (``<topic>-<partition>.<uniqueId>-future`` in the target log dir) receives the current log's batches
as a follower append (offsets, leader epochs and producer ids kept; its producer state, leader-epoch cache and
indexes are built by those appends, as Kafka's future replica builds them), from the current log start on. Magic
0/1 entries (a log written before magic 2) are appended as they are, as Kafka's follower takes any magic: the
moved ``.log`` bytes are the current's. The
copier reads the current log without its writer lock; the :class:`~logmgr.log_manager.LogManager` then takes the
lock for the final catch-up and the swap.

What can change the current log under the copier, and how the future follows:

* appends: the next step copies them;
* retention and DeleteRecords (the log start moves): each step raises the future's log start to the current's, and
  a future left below it starts again there (Kafka's out-of-range handling of a fetcher);
* truncation: the current log's :attr:`~logmgr.log.Log.truncation_observer` truncates the future under the
  current's writer lock, and a step whose read overlapped a truncation (the truncation sequence moved) is dropped
  before its append: it checks the sequence under the future's lock, which the observer needs too;
* a crash: the future, loaded at the next start, may hold a tail the current lost in its recovery;
  :meth:`LogMove.realign` cuts it before any append can reach the current again.

Lock order: the current's writer lock, then the future's (the observer, the final catch-up); the copier alone
holds only the future's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from logmgr.errors import LogmgrError, OffsetOutOfRangeError
from logmgr.log import Isolation, Log
from segments.errors import CorruptRecordError
from segments.file_records import iter_batches
from segments.naming import TopicPartition

COPY_CHUNK_BYTES = 1 << 20
"""Bytes one copy step reads from the current log (at least one whole batch)."""

MoveEvent = Callable[[str], None]
"""Told the name of each step of a move as it passes (tests inject appends, failures and crashes there)."""


class LogMoveCancelledError(LogmgrError):
    """The move stopped before its swap (shutdown, or the log deleted); a future log left on disk resumes at the
    next start."""


class LogMove:
    """One move of ``current`` (in ``source``) into ``future`` (a ``-future`` dir of ``target``)."""

    def __init__(
        self, current: Log, future: Log, source: Path, target: Path, *, chunk_bytes: int = COPY_CHUNK_BYTES
    ) -> None:
        self.current = current
        self.future = future
        self.source = source
        self.target = target
        self.chunk_bytes = chunk_bytes
        # One copier at a time (a resumed move's job and a move_log call for the same partition).
        self.run_lock = threading.Lock()
        self.cancelled = False
        self.committed = False
        """Set once the swap began renaming the current log away: the future log must then never be deleted."""
        self.done = False
        self.failure: BaseException | None = None
        current.truncation_observer = self._current_truncated
        # Kafka's fetcher gives the future log the current's high watermark (updateHighWatermark, clamped to the
        # future's end): retention of the future log (LogManager.cleanup_logs) never passes it.
        future.set_high_watermark_provider(lambda: current.high_watermark)

    @property
    def topic_partition(self) -> TopicPartition:
        return self.current.topic_partition

    @property
    def lag(self) -> int:
        """Offsets the future log is behind the current log (Kafka's ``offsetLag`` of a future replica). O(1)."""
        return max(0, self.current.log_end_offset - self.future.log_end_offset)

    def detach(self) -> None:
        """Stop following the current log's truncations (the move ended). O(1)."""
        if self.current.truncation_observer == self._current_truncated:
            self.current.truncation_observer = None

    def _current_truncated(self, end: int, full: bool) -> None:
        # Under the current's writer lock: nothing is appended to the current before the future lost the same tail.
        try:
            if full:
                self.future.truncate_fully_and_start_at(end)
            else:
                self.future.truncate_to(end)
        except LogmgrError as err:
            # The current's truncation stands; the move fails at its next step instead.
            self.failure = err

    def check(self) -> None:
        """Raise when the move must stop: cancelled, or the future failed to follow a truncation. O(1)."""
        if self.cancelled:
            raise LogMoveCancelledError(f"move of {self.topic_partition} to {self.target} cancelled")
        if self.failure is not None:
            raise LogmgrError(f"move of {self.topic_partition} to {self.target} failed: {self.failure}") from self.failure

    def realign(self) -> None:
        """Cut a future tail beyond the current log end (records the current lost to its crash recovery, which
        the current will append anew). Called at startup, before the current takes appends. O(truncation)."""
        if self.future.log_end_offset > self.current.log_end_offset:
            self.future.truncate_to(self.current.log_end_offset)

    def copy_step(self) -> int | None:
        """Copy the next batches (about :attr:`chunk_bytes`) into the future log; None once it has caught up with
        the current log end, else the bytes fetched (0 when the step only realigned or was dropped). O(chunk)."""
        self.check()
        current, future = self.current, self.future
        sequence = current.truncation_sequence
        start = future.log_end_offset
        if start > current.log_end_offset:
            with future._lock:
                if current.truncation_sequence == sequence:
                    future.truncate_to(current.log_end_offset)
            return 0
        read_from = max(start, current.log_start_offset)
        try:
            fetched = current.read(read_from, self.chunk_bytes, isolation=Isolation.LOG_END)
        except OffsetOutOfRangeError:
            # Retention or a truncation moved the current's bounds since they were read: the next step sees them.
            return 0
        batches = list(iter_batches(fetched.records))
        if not batches:
            return None
        try:
            first_base = batches[0].batch.base_offset
        except CorruptRecordError:
            # A legacy wrapper whose first offset cannot be decompressed: the follower append refuses it, typed and
            # located, before anything of it is written.
            first_base = read_from
        # A fetch may end inside a batch (a byte limit); the partial batch is fetched again by the next step.
        records = fetched.records[: batches[-1].end_position]
        with future._lock:
            if sequence % 2 or current.truncation_sequence != sequence:
                # The read overlapped a truncation of the current: it may hold the removed tail.
                return 0
            if read_from != start:
                # The current's log start passed the future's end (Kafka's out-of-range fetch): start over there.
                future.truncate_fully_and_start_at(first_base)
            elif first_base < future.log_end_offset:
                # The batch holding the future's end starts below it (Kafka's UnexpectedAppendOffsetException on
                # the first append): the future restarts at the batch's base.
                future.truncate_to(first_base)
            future.append_as_follower(records)
            self.follow_log_start()
        return len(fetched.records)

    def follow_log_start(self) -> None:
        """Raise the future's log start to the current's (Kafka's ``maybeIncrementLogStartOffset`` with the
        fetched log start), never past the future's end. O(epochs)."""
        target = min(self.current.log_start_offset, self.future.log_end_offset)
        if target > self.future.log_start_offset:
            self.future.delete_records_before(target)

    def copy_unlocked(self, on_event: MoveEvent) -> None:
        """The bulk copy, appends flowing meanwhile: steps until the future reaches the current log end, so the
        final catch-up under the writer lock copies only what arrived since (appends faster than the copy delay
        the swap, as in Kafka, which swaps only a caught-up future). O(bytes copied)."""
        while self.copy_step() is not None:
            on_event("copied")
            if self.lag == 0:
                return

    def catch_up(self) -> None:
        """Copy until the future's end is the current's; the caller holds the current's writer lock, so nothing
        arrives meanwhile. O(bytes copied)."""
        while self.copy_step() is not None:
            pass
        self.follow_log_start()
        if self.future.log_end_offset != self.current.log_end_offset:
            raise LogmgrError(
                f"move of {self.topic_partition}: the future log ends at {self.future.log_end_offset}, the current "
                f"at {self.current.log_end_offset} after the catch-up"
            )
