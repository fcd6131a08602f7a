"""Leader epoch -> start offset entries of one partition, persisted in ``leader-epoch-checkpoint``.

Kafka's ``LeaderEpochFileCache``: an epoch is assigned when the first batch stamped with a higher partition
leader epoch is appended (or replayed during recovery); truncation at either end rewrites the checkpoint file
atomically. A lock guards the entry list (appends assign from the writer thread; readers may ask for epochs).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCheckpointFile,
)
from segments._native.append import EpochCacheState
from segments.errors import CorruptCheckpointError


def epochs_truncated_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry] | None:
    """Kafka's ``truncateFromStart``: the entries once epochs wholly below ``start_offset`` are forgotten and the
    epoch holding it starts there; None when nothing changes. O(n)."""
    older = [e for e in entries if e.start_offset <= start_offset]
    if not older or (len(older) == 1 and older[0].start_offset == start_offset):
        return None
    newer = [e for e in entries if e.start_offset > start_offset]
    return [EpochEntry(older[-1].epoch, start_offset), *newer]


def epochs_as_loaded(stored: list[EpochEntry], path: Path | str | None = None) -> list[EpochEntry]:
    """Kafka's constructor assigns the stored entries one by one: a negative epoch or offset refuses the file
    (the log does not load); an entry conflicting with earlier ones (an epoch or start offset not above
    theirs) drops those, as a cut or bit-flipped file that still parses may need. O(n)."""
    held: list[EpochEntry] = []
    for number, entry in enumerate(stored):
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CorruptCheckpointError(
                f"negative leader epoch entry {entry.epoch} {entry.start_offset}",
                path=path,
                line=number + 3,  # after the version and count lines
            )
        if held and held[-1].epoch == entry.epoch and entry.start_offset >= held[-1].start_offset:
            continue
        while held and (held[-1].epoch >= entry.epoch or held[-1].start_offset >= entry.start_offset):
            held.pop()
        held.append(entry)
    return held


class LeaderEpochCache(EpochCacheState):
    """Ordered ``(epoch, start_offset)`` entries, both strictly increasing. :meth:`assign` (asked by every append)
    and the state are compiled (:class:`~segments._native.append.EpochCacheState`)."""

    _entries: list[EpochEntry]
    _lock: threading.Lock
    _file: LeaderEpochCheckpointFile

    def __init__(self, partition_dir: Path) -> None:
        # A string join: a Path join and its conversion back cost more than the read of a small checkpoint.
        self._file = LeaderEpochCheckpointFile(os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT_FILE))
        self._lock = threading.Lock()
        # Nothing is rewritten on load.
        self._entries = epochs_as_loaded(self._file.read(), self._file.path)

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first. O(n)."""
        with self._lock:
            return list(self._entries)

    def latest_epoch(self) -> int | None:
        """The newest epoch, or ``None``. O(1)."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    def _add_entry(self, epoch: int, start_offset: int) -> bool:
        """:meth:`assign`'s addition of an epoch newer than the latest (the compiled ``assign`` checked that
        without the lock): checked again under the lock, with the start offset, then persisted. O(n)."""
        with self._lock:
            if self._entries and (epoch <= self._entries[-1].epoch or start_offset < self._entries[-1].start_offset):
                return False
            self._entries.append(EpochEntry(epoch, start_offset))
            self._flush()
            return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncation). O(n)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below ``start_offset``; the epoch holding it now starts there. O(n)."""
        with self._lock:
            truncated = epochs_truncated_from_start(self._entries, start_offset)
            if truncated is not None:
                self._entries = truncated
                self._flush()

    def clear(self) -> None:
        """Remove every entry (full truncation). O(1)."""
        with self._lock:
            self._entries = []
            self._flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> int | None:
        """Kafka's ``endOffsetFor``: the start offset of the first epoch above ``epoch``, or the log end offset
        when ``epoch`` is the latest; ``None`` for an epoch below every entry. O(n)."""
        with self._lock:
            if not self._entries or epoch < self._entries[0].epoch:
                return None
            for entry in self._entries:
                if entry.epoch > epoch:
                    return entry.start_offset
            return log_end_offset

    def _flush(self) -> None:
        self._file.write(self._entries)

    def _check(self) -> None:
        with self._lock:
            for a, b in zip(self._entries, self._entries[1:], strict=False):
                assert a.epoch < b.epoch and a.start_offset <= b.start_offset
