"""Delayed, throttled, reader-safe physical deletion of segments.

Kafka renames a deleted segment's files to ``*.deleted`` and removes them ``file.delete.delay.ms`` later. On top of
that, from RocketMQ:

* **reader-safe deletion**: readers hold a segment (:meth:`SegmentReaders.hold`) while they read its bytes; a due
  segment that is still held is not closed. Once ``force_after_ms`` has passed since it became due, its files are
  unlinked anyway (readers keep working on their open descriptors: the files of a segment never opened since
  startup are opened just before) and the descriptors are closed when the last reader releases. No reader ever
  sees a closed file.
* **throttled deletion**: a pause of ``interval_ms`` between two physical deletions, so a burst of expired
  segments does not turn into a burst of disk I/O.

Locks: :class:`SegmentReaders` needs none (its native hold counts are atomic); :class:`SegmentDeleter` has one for
its queue, not held while files are unlinked. A deleted segment is closed with its hold count marked as closing (a
few syscalls), so a reader cannot take it between the check that nobody holds it and the close: it finds it being
closed (or closed) and looks again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from logmgr.clock import Clock
from segments._native.holds import HoldCounts
from segments.log_segment import LogSegment

logger = logging.getLogger("logmgr.deletion")


class SegmentReaders:
    """Counts of readers holding each segment (by identity), kept by the compiled
    :class:`~segments._native.holds.HoldCounts`: taking and releasing a hold is one native call each, atomic
    without a lock (every read takes one, and a lock costs as much as the rest of a lookup's bookkeeping).

    :attr:`acquire` and :attr:`release` are the native calls themselves: every ``acquire`` that returns True is
    paired with one ``release`` (a ``finally``; :meth:`hold` pairs them for other callers). ``acquire`` returns
    False while the segment is being closed (its files unlinked, nobody holding it): the reader takes it for
    deleted and looks again."""

    def __init__(self) -> None:
        counts: HoldCounts[LogSegment] = HoldCounts(_close_unlinked)
        self._counts = counts
        self.acquire: Callable[[LogSegment], bool] = counts.acquire
        """Start holding a segment; False (not held) while it is being closed. O(1)."""
        self.release: Callable[[LogSegment], None] = counts.release
        """Stop holding a segment; the last reader of a segment deleted meanwhile closes it. O(1)."""

    @contextmanager
    def hold(self, segment: LogSegment) -> Iterator[LogSegment]:
        """Hold ``segment`` for the duration of the ``with`` block (:attr:`acquire` / :attr:`release`). O(1)
        (a segment being closed: until its close is over, then the caller finds it closed)."""
        while not self.acquire(segment):
            # Its close runs in another thread and takes a few syscalls: give it the GIL.
            time.sleep(0)
        try:
            yield segment
        finally:
            self.release(segment)

    def readers(self, segment: LogSegment) -> int:
        """How many readers hold ``segment`` now. O(1)."""
        return self._counts.readers(segment)

    def close_when_released(self, segment: LogSegment) -> bool:
        """Close ``segment``, whose files are already unlinked, now if nobody holds it, else when its last reader
        releases it; returns whether the close was deferred. O(1)."""
        return self._counts.close_when_released(segment)


def _close_unlinked(segment: LogSegment) -> None:
    """Close a segment whose files are unlinked. ``LogSegment.close`` would trim the indexes, which reopens them by
    name; an index's ``delete`` unmaps it without trimming (its name is already gone)."""
    segment.discard_indexes()
    segment.txn_index.close()
    segment.log.close()


@dataclass(slots=True)
class PendingDeletion:
    """A segment renamed to ``.deleted`` (plus extra files such as its ``.snapshot.deleted``) awaiting removal."""

    segment: LogSegment
    extra_files: tuple[Path, ...]
    due_ms: int
    size: int

    @property
    def files(self) -> list[Path]:
        seg = self.segment
        paths = [seg.log.path, seg.offset_index_path, seg.time_index_path, seg.txn_index.path]
        return [*paths, *self.extra_files]


@dataclass(slots=True)
class DeletionRun:
    """What one :meth:`SegmentDeleter.run_due` call did."""

    deleted_segments: int = 0
    deleted_bytes: int = 0
    forced: int = 0
    waiting_for_readers: int = 0
    files: list[Path] = field(default_factory=list)
    failures: list[OSError] = field(default_factory=list)
    """Entries whose unlink failed (each names its file): dropped from the queue, their dir's to take offline (a
    restart's loader removes the ``.deleted`` files left)."""


class SegmentDeleter:
    """Queue of segments to delete physically once due."""

    def __init__(
        self,
        clock: Clock,
        readers: SegmentReaders,
        *,
        interval_ms: int = 0,
        force_after_ms: int = 120_000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._readers = readers
        self._interval_ms = interval_ms
        self._force_after_ms = force_after_ms
        self._sleep = sleep
        self._lock = threading.Lock()
        self._pending: list[PendingDeletion] = []

    def schedule(self, segment: LogSegment, delay_ms: int, extra_files: tuple[Path, ...] = ()) -> None:
        """Queue ``segment`` (already renamed to ``.deleted``) for deletion ``delay_ms`` from now. O(1)."""
        entry = PendingDeletion(segment, extra_files, self._clock.time_ms() + max(0, delay_ms), segment.size)
        with self._lock:
            self._pending.append(entry)

    def pending(self) -> list[PendingDeletion]:
        """A copy of the queue. O(n)."""
        with self._lock:
            return list(self._pending)

    def pending_bytes(self) -> int:
        """Bytes of ``.log`` data waiting for deletion. O(n)."""
        with self._lock:
            return sum(p.size for p in self._pending)

    def run_due(self, *, everything: bool = False) -> DeletionRun:
        """Delete every due entry (``everything``: all entries, as at shutdown or when a whole log is deleted),
        pausing ``interval_ms`` between deletions. Held segments wait until released or until ``force_after_ms``
        past due. O(due entries)."""
        run = DeletionRun()
        now = self._clock.time_ms()
        with self._lock:
            due = [p for p in self._pending if everything or p.due_ms <= now]
        for number, entry in enumerate(due):
            held = self._readers.readers(entry.segment) > 0
            force = everything or now - entry.due_ms >= self._force_after_ms
            if held and not force:
                run.waiting_for_readers += 1
                continue
            if number and self._interval_ms > 0 and run.deleted_segments:
                self._sleep(self._interval_ms / 1000)
            files = entry.files
            try:
                # A reader holding the segment (now, or taking it before the close below) keeps reading through
                # descriptors; files a clean startup left unopened are opened before their names go.
                entry.segment.pin()
                for path in files:
                    path.unlink(missing_ok=True)
            except OSError as err:
                # One failing disk must not hold back the deletions queued behind it in other dirs.
                with self._lock:
                    self._pending.remove(entry)
                run.failures.append(err)
                continue
            # A reader may have taken the segment since the check above: its release then closes it.
            still_read = self._readers.close_when_released(entry.segment)
            run.forced += int(still_read)
            with self._lock:
                self._pending.remove(entry)
            run.deleted_segments += 1
            run.deleted_bytes += entry.size
            run.files.extend(files)
            logger.info("deleted %s (%d bytes)%s", files[0], entry.size, " while still read" if still_read else "")
        return run

    def _check(self) -> None:
        with self._lock:
            assert all(p.size >= 0 for p in self._pending)
