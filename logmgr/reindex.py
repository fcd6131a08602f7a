"""Rebuild a partition's ``.index``, ``.timeindex`` and ``.txnindex`` files from its ``.log`` files.

The rule is Kafka's segment-recovery rule (``kafka-format.md`` §6.3 and the last section of §9): one offset entry
``(batch.lastOffset, batchStart)`` whenever more than ``index.interval.bytes`` were passed since the last entry,
a time entry beside it when the max timestamp so far grew, one final time entry, files trimmed as after a clean
shutdown. A ``.txnindex`` is written only for segments holding ABORT markers of non-empty transactions; open
transactions are carried from segment to segment in offset order.

The ``.log`` files are never modified. New index files are built in a temporary directory inside the target
directory (the broker's loader only looks at regular files), fsynced, then renamed over the old ones and the
directory fsynced: a crash leaves either the old or the new index, never a partial one.

:func:`rebuild_segment_indexes` does the same for one segment of a partition dir (the ``RebuildIndexes`` action
of an offline plan), finding the transactions open at the segment's start by walking the earlier segments.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from checkpoints.atomic import fsync_dir
from logmgr.offline.plan import (
    Action,
    DeleteFiles,
    LogDirPlan,
    PartitionPlan,
    RebuildIndexes,
    RebuildKeyIndex,
)
from logmgr.offline.scan import ValidPrefix, partition_files, walk_valid_prefix
from segments.abstract_index import DEFAULT_MAX_INDEX_SIZE
from segments.errors import StorageFormatError
from segments.file_records import FileRecords
from segments.key_index import KEY_INDEX_SUFFIX, KeyIndexReader, key_index_file
from segments.log_segment import DEFAULT_INDEX_INTERVAL_BYTES, LogSegment
from segments.naming import (
    LOG_SUFFIX,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from segments.offset_index import OffsetIndex
from segments.time_index import TimeIndex
from segments.transaction_index import TransactionIndex
from segments.transactions import TransactionTracker


@dataclass(frozen=True, slots=True)
class SegmentReindex:
    """What was rebuilt for one segment."""

    log: Path
    base_offset: int
    batches: int
    offset_entries: int
    time_entries: int
    aborted_txns: int
    valid_bytes: int
    invalid_tail_bytes: int
    error: StorageFormatError | None
    written: tuple[Path, ...]


@dataclass(slots=True)
class ReindexReport:
    """Per-segment results of :func:`reindex`."""

    segments: list[SegmentReindex] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every ``.log`` was valid to its end."""
        return all(s.error is None and s.invalid_tail_bytes == 0 for s in self.segments)


def find_logs(target: Path) -> list[Path]:
    """The ``.log`` files of a partition dir (sorted by base offset), or ``[target]`` for a ``.log`` file. O(n log n)."""
    if target.is_dir():
        logs = [p for p in target.iterdir() if p.is_file() and p.name.endswith(LOG_SUFFIX)]
        return sorted(logs, key=lambda p: offset_from_file_name(p.name))
    if not target.name.endswith(LOG_SUFFIX):
        raise ValueError(f"{target} is neither a partition directory nor a .log file")
    return [target]


def reindex(
    target: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    progress: Callable[[Path], None] | None = None,
) -> ReindexReport:
    """Rebuild the indexes of every segment of ``target`` (partition dir or ``.log`` file). O(total log bytes).

    Writes into ``out`` when given (created if needed), else next to the ``.log`` files, replacing the old indexes
    atomically. A segment whose ``.log`` has invalid bytes gets indexes over its valid prefix and reports the
    error; the ``.log`` is left as it is (``recover`` truncates).
    """
    target_path = Path(target)
    logs = find_logs(target_path)
    report = ReindexReport()
    tracker = TransactionTracker()
    for log_path in logs:
        if progress is not None:
            progress(log_path)
        destination = Path(out) if out is not None else log_path.parent
        destination.mkdir(parents=True, exist_ok=True)
        report.segments.append(
            _reindex_segment(log_path, destination, tracker, index_interval_bytes, max_index_size)
        )
    return report


def rebuild_segment_indexes(
    directory: Path,
    base_offset: int,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
) -> SegmentReindex:
    """Rebuild, in place and atomically, the indexes of the segment of ``directory`` at ``base_offset`` exactly as
    :func:`reindex` of the whole partition dir would (the ``.log`` is not changed). The transactions open at its
    start come from the earlier segments' valid batches (transactional ones only are tracked).

    O(bytes of the segment) when the previous call rebuilt the segment just before it in the same dir, unchanged
    since (a plan rebuilds in offset order); else O(bytes of the earlier segments) more.
    """
    logs = find_logs(directory)
    earlier = [p for p in logs if offset_from_file_name(p.name) < base_offset]
    key = _earlier_logs_key(directory, earlier)
    cached = _open_at_next_segment
    if cached is not None and cached[0] == key:
        tracker = TransactionTracker(cached[1])
    else:
        tracker = TransactionTracker()
        for log_path in earlier:
            segment = LogSegment.open(directory, offset_from_file_name(log_path.name), writable=False)
            try:
                # reindex() rebuilds each segment without bounding it by the next one: the same walk here.
                walk_valid_prefix(segment, None, transactions=tracker)
            finally:
                segment.close()
    log_path = log_file(directory, base_offset)
    result = _reindex_segment(log_path, directory, tracker, index_interval_bytes, max_index_size)
    _remember_open_transactions(_earlier_logs_key(directory, [*earlier, log_path]), tracker)
    return result


_LogsKey = tuple[str, tuple[tuple[str, int, int, int], ...]]
# The transactions open after the last segment rebuilt, keyed by the identity of the logs walked to get them: the
# next rebuild of the same dir starts from there instead of walking every earlier segment again.
_open_at_next_segment: tuple[_LogsKey, dict[int, int]] | None = None


def _earlier_logs_key(directory: Path, logs: list[Path]) -> _LogsKey:
    identities = []
    for path in logs:
        info = os.stat(path)
        identities.append((path.name, info.st_ino, info.st_size, info.st_mtime_ns))
    return str(directory.resolve()), tuple(identities)


def _remember_open_transactions(key: _LogsKey, tracker: TransactionTracker) -> None:
    global _open_at_next_segment
    _open_at_next_segment = (key, tracker.open_transactions)


def _reindex_segment(
    log_path: Path,
    destination: Path,
    tracker: TransactionTracker,
    index_interval_bytes: int,
    max_index_size: int,
) -> SegmentReindex:
    base = offset_from_file_name(log_path.name)
    staging = Path(tempfile.mkdtemp(prefix=".logmgr-reindex-", dir=destination))
    try:
        log = FileRecords(log_path)
        segment = LogSegment(
            log,
            OffsetIndex(offset_index_file(staging, base), base, max_index_size),
            TimeIndex(time_index_file(staging, base), base, max_index_size),
            TransactionIndex(transaction_index_file(staging, base), base),
            base,
            index_interval_bytes=index_interval_bytes,
        )
        try:
            # Written as close() leaves a clean segment's: final time-index entry, both indexes trimmed.
            result = segment.rebuild_indexes(transactions=tracker)
            offset_entries = segment.offset_index.entries
            time_count = segment.time_index.entries
            aborted = len(segment.txn_index.all_aborted_txns())
        finally:
            segment.close()
        written = []
        for build, final in (
            (offset_index_file(staging, base), offset_index_file(destination, base)),
            (time_index_file(staging, base), time_index_file(destination, base)),
            (transaction_index_file(staging, base), transaction_index_file(destination, base)),
        ):
            if build.exists():
                _fsync_file(build)
                os.replace(build, final)
                written.append(final)
            else:
                # No aborted transaction: Kafka has no .txnindex for this segment, so a stale one must go.
                final.unlink(missing_ok=True)
        fsync_dir(destination)
        return SegmentReindex(
            log_path,
            base,
            result.batches,
            offset_entries,
            time_count,
            aborted,
            result.valid_bytes,
            result.truncated_bytes,
            result.error,
            tuple(written),
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rebuild_segment_key_index(directory: Path, base_offset: int) -> int:
    """Rebuild the key index (``.keyindex``) of the segment at ``base_offset`` from its ``.log`` (the valid
    prefix), atomically (see :func:`~logmgr.key_index.write_segment_key_index`), then fsync the dir. Returns the
    entry count. The caller holds the log dir's lock. O(segment bytes)."""
    # Imported here: the key index builds on the log layer, which imports this module.
    from logmgr.key_index import write_segment_key_index

    segment = LogSegment.open(directory, base_offset, writable=False)
    try:
        entries = write_segment_key_index(directory, base_offset, (found.batch for found in segment.batches(0)))
    finally:
        segment.close()
    fsync_dir(directory)
    return entries


def _key_index_reason(path: Path, base: int, prefix: ValidPrefix) -> str:
    """Why the key index at ``path`` of the segment at ``base`` is (re)built: what is there now. O(1) reads."""
    try:
        with KeyIndexReader(path) as reader:
            header = reader.header
    except FileNotFoundError:
        return "none yet"
    except (OSError, StorageFormatError) as err:
        return f"unreadable ({err})"
    if header.base_offset != base:
        return f"its header says base offset {header.base_offset}, not the segment's"
    if header.next_offset > prefix.next_offset:
        return (
            f"it indexes up to offset {header.next_offset}, past the segment's valid end {prefix.next_offset} "
            "(records the log no longer has)"
        )
    if header.next_offset < prefix.next_offset:
        return f"it covers offsets [{header.start_offset}, {header.next_offset}) of [{base}, {prefix.next_offset})"
    return f"up to date ({header.entry_count} entries), rebuilt as asked"


def plan_reindex(
    target: Path, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, key_index: bool = False
) -> LogDirPlan:
    """The in-place reindex of ``target`` (partition dir or ``.log`` file) as a plan: one ``RebuildIndexes`` per
    segment, and a warning per ``.log`` with invalid bytes (its indexes then cover the valid prefix; ``recover``
    cuts the rest). With ``key_index``, also one :class:`RebuildKeyIndex` per segment saying what its
    ``.keyindex`` holds now and, for a partition dir, the deletion of each ``.keyindex`` without a ``.log`` (the
    key index of a segment no longer in the log). Reads only. O(total log bytes)."""
    directory = target if target.is_dir() else target.parent
    sizes = partition_files(directory)
    actions: list[Action] = []
    warnings: list[str] = []
    for log_path in find_logs(target):
        base = offset_from_file_name(log_path.name)
        segment = LogSegment.open(directory, base, writable=False)
        try:
            # Unbounded by the next segment, as reindex() rebuilds each segment.
            prefix = walk_valid_prefix(segment, None)
        finally:
            segment.close()
        problem = prefix.problem
        if problem is not None:
            warnings.append(problem)
        indexes = tuple(
            (path.name, sizes[path.name])
            for path in (
                offset_index_file(directory, base),
                time_index_file(directory, base),
                transaction_index_file(directory, base),
            )
            if path.name in sizes
        )
        reason = "reindex" if problem is None else "reindex over the valid prefix"
        actions.append(RebuildIndexes(directory.name, base, indexes, index_interval_bytes, reason))
        if key_index:
            path = key_index_file(directory, base)
            why = _key_index_reason(path, base, prefix)
            actions.append(RebuildKeyIndex(directory.name, base, sizes[log_path.name], sizes.get(path.name), why))
    if key_index and target.is_dir():
        logs = {name for name in sizes if name.endswith(LOG_SUFFIX)}
        for name in sorted(sizes):
            if name.endswith(KEY_INDEX_SUFFIX) and name.removesuffix(KEY_INDEX_SUFFIX) + LOG_SUFFIX not in logs:
                orphan = ((name, sizes[name]),)
                reason = "no .log of its segment: it indexes a segment no longer in the log (the loader deletes it)"
                actions.append(DeleteFiles(directory.name, orphan, reason, "orphan key index"))
    partition = PartitionPlan(directory.name, tuple(actions))
    return LogDirPlan("reindex", directory.parent, (partition,), warnings=tuple(warnings))
