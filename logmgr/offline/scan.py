"""Read-only views of a log dir, the input of every offline plan.

:func:`scan_log_dir` opens nothing for writing, creates, renames or locks nothing, so it works on a read-only dir
and next to a running broker. It is strict where a plan depends on what it reads: a malformed checkpoint, an index
that breaks its format, a batch failing its CRC or framing among those it reads raise the format error naming the
file and the byte position (or line). What it reads of each segment: the ``.index`` and ``.timeindex`` structure
(length, order, positions inside the ``.log``; Kafka's ``sanityCheck`` and more), and the batches after the last
offset-index entry (the largest timestamp and, for the last segment, the log end offset), each with its CRC.

After an unclean shutdown (no ``.kafka_cleanshutdown``) a broker recovers every segment from the one holding the
recovery point; :func:`scan_log_dir` then walks those segments whole (CRC, offsets continuing the segment, as
:meth:`~segments.log_segment.LogSegment.rebuild_indexes` does), as it does a segment without ``.index``, and records
in :attr:`PartitionView.needs_recovery` the invalid bytes a broker's recovery would truncate.

``lenient=True`` (what ``recover`` and ``cleanup --recover-first`` scan with) records instead of raising what a
recovery repairs: a segment whose indexes fail their checks, or whose batches after the last index entry are
invalid, is walked whole and the problem is listed in :attr:`PartitionView.needs_recovery`; a malformed offset
checkpoint is read as empty, its error kept in :attr:`CheckpointView.damage` (``recover`` rewrites it from the
segments).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE
from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE
from checkpoints.meta_properties import META_PROPERTIES_FILE
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    parse_offset_checkpoint,
)
from logmgr.dir_lock import LOCK_FILE_NAME
from logmgr.errors import PlanError
from logmgr.retention import LogSnapshot, SegmentInfo
from segments.abstract_index import UNTRIMMED_INDEX
from segments.errors import CorruptRecordError, InvalidOffsetError, StorageFormatError
from segments.log_segment import LogSegment
from segments.naming import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    PartitionDirName,
    TopicPartition,
    filename_prefix_from_offset,
    offset_from_file_name,
)
from segments.records import MAGIC_V2, RecordBatch
from segments.transactions import TransactionTracker

METADATA_TOPIC = "__cluster_metadata"
OFFSET_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE)
KAFKA_DIR_FILES = (
    *OFFSET_CHECKPOINTS,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE_NAME,
)
"""Files a broker keeps at the top of a log dir: one of them (or a partition dir) makes a dir a Kafka log dir."""
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)


@dataclass(frozen=True)
class SegmentView:
    """One segment as planning sees it."""

    base_offset: int
    log_size: int
    largest_timestamp: int
    """Kafka's ``largestTimestamp``: the last time-index entry's timestamp or a later batch's, else the mtime."""
    files: tuple[tuple[str, int], ...]
    """``(name, size)`` of the files named after this base offset: ``.log``, indexes, producer ``.snapshot``."""
    has_offset_index: bool
    next_offset: int
    """Offset after its last batch, from the batches read (base offset when empty)."""

    def info(self) -> SegmentInfo:
        """The retention policy's view. O(1)."""
        return SegmentInfo(self.base_offset, self.log_size, self.largest_timestamp, self.log_size == 0)

    @property
    def prefix(self) -> str:
        return filename_prefix_from_offset(self.base_offset)


@dataclass(frozen=True)
class PartitionView:
    """One live partition dir: its segments oldest first and the checkpoint entries about it."""

    topic_partition: TopicPartition
    name: str
    segments: tuple[SegmentView, ...]
    recovery_point: int | None
    checkpointed_log_start: int | None
    high_watermark: int | None
    leader_epoch_checkpoint: bytes | None
    needs_recovery: tuple[str, ...] = ()
    """Why a broker loading this dir would change the partition's data: invalid bytes its recovery would truncate
    (empty: none). Index rebuilds and leftover files are not listed: they change no record."""

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset if self.segments else 0

    @property
    def log_start_offset(self) -> int:
        """Kafka's effective log start: the checkpoint's, at least the first segment's base, at most the LEO. O(1)."""
        first = self.segments[0].base_offset if self.segments else 0
        return min(max(self.checkpointed_log_start or 0, first), self.log_end_offset)

    def retention_snapshot(self) -> LogSnapshot:
        """What the retention policies see: the high watermark is the checkpointed one bounded to
        ``[log start, LEO]``, the LEO when none is checkpointed (an offline dir has no replication). O(segments)."""
        start, end = self.log_start_offset, self.log_end_offset
        watermark = end if self.high_watermark is None else self.high_watermark
        return LogSnapshot(tuple(s.info() for s in self.segments), end, start, max(start, min(watermark, end)))


@dataclass(frozen=True)
class CheckpointView:
    """A dir-level offset checkpoint as read: its bytes (None: absent) and entries in file order."""

    name: str
    raw: bytes | None
    entries: Mapping[TopicPartition, int]
    damage: str | None = None
    """Why the file could not be parsed (a lenient scan only; ``entries`` is then empty): ``recover`` rewrites it."""


@dataclass(frozen=True)
class LogDirView:
    """A log dir as planning sees it."""

    path: Path
    clean_shutdown: bool
    checkpoints: Mapping[str, CheckpointView]
    partitions: tuple[PartitionView, ...]
    skipped: tuple[str, ...] = field(default=())
    """Entries left out, with why (``-delete`` dirs, the KRaft metadata log, other replicas' dirs)."""

    def partition(self, tp: TopicPartition) -> PartitionView | None:
        return next((p for p in self.partitions if p.topic_partition == tp), None)


def read_regular_file(path: Path) -> bytes | None:
    """The bytes of the regular file at ``path``; None when absent. A link is refused (:class:`PlanError`): plans
    never read or write through one. O(size)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise PlanError(f"{path} is a symbolic link: logmgr does not read or write through links in a log dir")
    if not stat.S_ISREG(info.st_mode):
        raise PlanError(f"{path} is not a regular file")
    with open(path, "rb") as source:
        return source.read()


def require_log_dir(log_dir: Path) -> None:
    """Refuse a path that is not an existing, real directory (never created here). O(1)."""
    if log_dir.is_symlink():
        raise PlanError(f"{log_dir} is a symbolic link: name the directory it points to")
    if not log_dir.is_dir():
        raise PlanError(f"{log_dir}: no such log dir")


def read_offset_checkpoints(log_dir: Path, *, lenient: bool = False) -> dict[str, CheckpointView]:
    """The dir's recovery-point, log-start-offset and replication-offset checkpoints, strictly parsed (a malformed
    one raises its format error naming the file and line; with ``lenient`` it is read as empty and the error kept
    in :attr:`CheckpointView.damage`). O(checkpoint bytes)."""
    checkpoints: dict[str, CheckpointView] = {}
    for name in OFFSET_CHECKPOINTS:
        path = log_dir / name
        raw = read_regular_file(path)
        try:
            checkpoints[name] = CheckpointView(name, raw, parse_offset_checkpoint(raw or b"", path))
        except StorageFormatError as err:
            if not lenient:
                raise
            checkpoints[name] = CheckpointView(name, raw, {}, str(err))
    return checkpoints


def scan_log_dir(
    log_dir: Path, *, only: Collection[TopicPartition] | None = None, lenient: bool = False
) -> LogDirView:
    """Read ``log_dir`` for planning (see the module doc); ``only`` limits the partitions read (an unknown one is a
    :class:`PlanError`). O(checkpoints + index entries + bytes after the last index entries; whole segments from
    the recovery point after an unclean shutdown)."""
    require_log_dir(log_dir)
    clean = read_regular_file(log_dir / CLEAN_SHUTDOWN_FILE) is not None
    checkpoints = read_offset_checkpoints(log_dir, lenient=lenient)
    recovery_points = checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].entries
    starts = checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE].entries
    watermarks = checkpoints[REPLICATION_OFFSET_CHECKPOINT_FILE].entries
    partitions: list[PartitionView] = []
    skipped: list[str] = []
    found: set[TopicPartition] = set()
    kafka_dirs = 0
    for child in sorted(log_dir.iterdir()):
        if child.is_symlink():
            if child.is_dir():
                skipped.append(f"{child.name}: a symbolic link (a broker skips it too)")
            continue
        if not child.is_dir():
            continue
        try:
            parsed = PartitionDirName.parse(child.name)
        except StorageFormatError:
            skipped.append(f"{child.name}: not a partition dir")
            continue
        tp = parsed.topic_partition
        kafka_dirs += 1
        if parsed.kind != "live":
            skipped.append(f"{child.name}: a {parsed.kind} dir")
            continue
        if parsed.topic == METADATA_TOPIC:
            skipped.append(f"{child.name}: the KRaft metadata log (managed by the controller quorum)")
            continue
        if only is not None and tp not in only:
            continue
        found.add(tp)
        partitions.append(
            _scan_partition(
                child, tp, clean, recovery_points.get(tp), starts.get(tp), watermarks.get(tp), lenient=lenient
            )
        )
    if only is not None:
        missing = sorted(str(tp) for tp in set(only) - found)
        if missing:
            raise PlanError(f"{log_dir}: no such partition: {', '.join(missing)}")
    if not kafka_dirs and not any((log_dir / name).exists() for name in KAFKA_DIR_FILES):
        # A typo'd or wrong path must not be taken for an empty broker dir (and get a .lock written into it).
        raise PlanError(
            f"{log_dir} holds no Kafka data: no partition dir, checkpoint, meta.properties or .lock in it "
            "(give a broker's log dir)"
        )
    return LogDirView(log_dir, clean, checkpoints, tuple(partitions), tuple(skipped))


def _scan_partition(
    directory: Path,
    tp: TopicPartition,
    clean: bool,
    recovery_point: int | None,
    log_start: int | None,
    high_watermark: int | None,
    *,
    lenient: bool,
) -> PartitionView:
    sizes = partition_files(directory)
    bases = sorted(offset_from_file_name(name) for name in sizes if name.endswith(LOG_SUFFIX) and _numbered(name))
    reasons: list[str] = []
    # After an unclean shutdown a broker recovers from the segment holding the recovery point on.
    recover_from: int | None = None
    if not clean and bases:
        point = recovery_point or 0
        holding = [b for b in bases if b <= point]
        recover_from = holding[-1] if holding else bases[0]
    segments: list[SegmentView] = []
    for index, base in enumerate(bases):
        following = bases[index + 1] if index + 1 < len(bases) else None
        # A segment without an offset index is read whole: a broker would rebuild its indexes from every batch.
        whole = (recover_from is not None and base >= recover_from) or f"{filename_prefix_from_offset(base)}{INDEX_SUFFIX}" not in sizes
        view, problem = _scan_segment(
            directory, base, sizes, following, is_last=following is None, whole=whole, lenient=lenient
        )
        segments.append(view)
        if problem is not None:
            reasons.append(problem)
    epochs = read_regular_file(directory / LEADER_EPOCH_CHECKPOINT_FILE)
    return PartitionView(
        tp, directory.name, tuple(segments), recovery_point, log_start, high_watermark, epochs, tuple(reasons)
    )


def partition_files(directory: Path) -> dict[str, int]:
    """Name -> size of every regular file of a partition dir; a link is refused (:class:`PlanError`). O(files)."""
    sizes: dict[str, int] = {}
    for entry in os.scandir(directory):
        if entry.is_symlink():
            raise PlanError(f"{entry.path} is a symbolic link: logmgr does not read or write through links in a log dir")
        if entry.is_file(follow_symlinks=False):
            sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
    return sizes


def _numbered(name: str) -> bool:
    try:
        offset_from_file_name(name)
    except StorageFormatError:
        return False
    return True


def _scan_segment(
    directory: Path,
    base: int,
    sizes: Mapping[str, int],
    following: int | None,
    *,
    is_last: bool,
    whole: bool,
    lenient: bool,
) -> tuple[SegmentView, str | None]:
    """One segment's view, and why a broker would recover it (None: it would not). Format errors in what is read
    propagate, except, in a segment a broker recovers anyway (``whole``), the invalid bytes recovery truncates,
    and with ``lenient`` any of them (the segment is then walked whole)."""
    prefix = filename_prefix_from_offset(base)
    files = tuple(
        (prefix + suffix, sizes[prefix + suffix]) for suffix in SEGMENT_FILE_SUFFIXES if prefix + suffix in sizes
    )
    has_index = prefix + INDEX_SUFFIX in sizes
    problem = None
    segment = LogSegment.open(directory, base, writable=False)
    try:
        log_size = segment.size
        try:
            for finding in index_findings(segment, is_last=is_last):
                raise finding
            if not whole:
                next_offset, largest = _walk_tail(segment)
        except StorageFormatError as err:
            if not lenient:
                raise
            problem, whole = str(err), True
        if whole:
            prefix_read = walk_valid_prefix(segment, following)
            next_offset, largest = prefix_read.next_offset, prefix_read.largest_timestamp
            problem = problem or prefix_read.problem
        if largest < 0:
            largest = int(os.stat(segment.log.path).st_mtime * 1000)
    finally:
        segment.close()
    return SegmentView(base, log_size, largest, files, has_index, next_offset), problem


def index_findings(segment: LogSegment, *, is_last: bool) -> list[StorageFormatError]:
    """What breaks the format of a segment's ``.index`` and ``.timeindex`` (Kafka's ``sanityCheck`` and more),
    except the preallocated zero fill the active segment of a running or crashed broker keeps. O(entries)."""
    log_size = segment.size
    findings: list[StorageFormatError] = []
    offsets, times = segment.offset_index, segment.time_index
    for index, found in ((offsets, offsets.check(log_size)), (times, times.check())):
        # The active segment of a running or crashed broker keeps its indexes preallocated (zero-filled), and
        # the first zero slot of an empty one reads as the entry (base, 0), which no 0-byte log can hold. A
        # length that is no multiple of the entry size, or a first slot not zero, is never a preallocation.
        for finding in found:
            zero_fill = finding.message.startswith(UNTRIMMED_INDEX) or (
                log_size == 0
                and finding.position == 0
                and index.length % index.entry_size == 0
                and _first_slot_zero(index.path, index.entry_size)
            )
            if not (is_last and zero_fill):
                findings.append(finding)
    return findings


def _first_slot_zero(path: Path, entry_size: int) -> bool:
    try:
        with open(path, "rb") as source:
            return source.read(entry_size).count(0) == entry_size
    except FileNotFoundError:
        return True


def _walk_tail(segment: LogSegment) -> tuple[int, int]:
    """Next offset and largest timestamp from the last index entries plus the batches after them, each checked. A
    segment whose last entry points past its valid batches fails here, as it would a broker's reads."""
    last_time = segment.time_index.last_entry
    largest = last_time.timestamp
    start = min(
        segment.offset_index.lookup(segment.offset_index.last_offset).position,
        segment.offset_index.lookup(last_time.offset).position,
    )
    next_offset = segment.base_offset
    end = start
    for found in segment.log.checked_batches(start):
        batch = found.batch
        next_offset = batch.next_offset
        largest = max(largest, batch.max_timestamp)
        end = found.position + batch.size_in_bytes
    if end < segment.size:
        # A batch walk stops silently before a tail too short for a header; a segment nobody recovers has none.
        raise CorruptRecordError(
            f"{segment.size - end} bytes after the last batch are not a complete batch",
            path=segment.log.path,
            position=end,
        )
    return next_offset, largest


@dataclass(frozen=True)
class ValidPrefix:
    """The longest prefix of a ``.log`` that recovery keeps."""

    valid_bytes: int
    next_offset: int
    """Offset after the last valid batch (the base offset when none)."""
    largest_timestamp: int
    """Largest batch max timestamp among the valid batches; -1 when none."""
    problem: str | None
    """Why the bytes after the prefix would be truncated (None: valid to the end)."""
    error: StorageFormatError | None = None
    """The error that ended the walk before the end (None: valid to the end, or a partial batch at the end)."""


def walk_valid_prefix(
    segment: LogSegment,
    following: int | None,
    *,
    transactions: TransactionTracker | None = None,
    observer: Callable[[RecordBatch], None] | None = None,
) -> ValidPrefix:
    """The valid prefix of a segment by the rule of :meth:`~segments.log_segment.LogSegment.rebuild_indexes`
    (Kafka's recovery): batches with a valid CRC and framing, whose offsets continue the segment below
    ``following`` (the next segment's base; None: no bound), whose transaction markers decode. Reads only.
    ``transactions`` is fed each v2 batch (a fresh tracker when None), then ``observer``. O(bytes)."""
    tracker = TransactionTracker() if transactions is None else transactions
    next_offset = segment.base_offset
    largest = -1
    valid = 0
    try:
        for found in segment.log.checked_batches():
            batch = found.batch
            # A legacy wrapper's base offset needs decompression; its last offset carries the same check.
            first = batch.base_offset if batch.magic >= MAGIC_V2 else batch.last_offset
            segment.check_continues(first, batch.last_offset, next_offset, following, found.position)
            if batch.magic >= MAGIC_V2:
                try:
                    tracker.on_batch(batch)
                except CorruptRecordError as err:
                    raise CorruptRecordError(err.message, path=segment.log.path, position=found.position) from None
                if observer is not None:
                    observer(batch)
            next_offset = batch.next_offset
            largest = max(largest, batch.max_timestamp)
            valid = found.position + batch.size_in_bytes
    except (CorruptRecordError, InvalidOffsetError) as err:
        return ValidPrefix(valid, next_offset, largest, f"{err} (recovery truncates {segment.size - valid} bytes)", err)
    if valid < segment.size:
        return ValidPrefix(
            valid,
            next_offset,
            largest,
            f"{segment.log.path}: position {valid}: {segment.size - valid} bytes of a partial batch at the end "
            "(recovery truncates them)",
        )
    return ValidPrefix(valid, next_offset, largest, None)
