"""Plan ``recover``: what a broker's log loader would change in a log dir, as one :class:`LogDirPlan`.

The rules are those of Kafka's ``LogLoader`` (and of :mod:`logmgr.log_loader`, which runs them online), per live
partition dir, in the loader's order:

1. Leftovers: ``*.deleted`` (not ``*.checkpoint.deleted``) and ``*.cleaned`` files are deleted; ``.swap`` files
   at or above the smallest ``.cleaned`` offset (an unfinished split) too; the files a remaining ``.log.swap``
   replaces (offsets in ``[its base, its next offset)``) are deleted and the ``.swap`` files renamed; index files
   without their ``.log`` are deleted.
2. A segment without ``.index`` or with a corrupt ``.txnindex`` is recovered: ``.log`` cut to its valid prefix
   (:func:`~logmgr.offline.scan.walk_valid_prefix`), indexes rebuilt. Such a cut drops no later segment.
3. Without the clean-shutdown marker (or with ``full``) every segment from the one holding the recovery point
   (every segment with ``full``) is recovered the same way; the first one cut drops every later segment.
4. When every segment ends below the checkpointed log start offset they are all deleted; a partition left
   without a segment gets an empty one at the log start offset.
5. ``leader-epoch-checkpoint``: the epochs of the recovered batches are assigned as the loader does, then the
   entries are truncated at the new log end and at the log start (:mod:`logmgr.leader_epoch_cache`).
6. Producer snapshots above the new log end are deleted (Kafka's ``truncateAndReload`` bound): a broker rebuilds
   producer state from the newest remaining one by replaying the log after it.
7. Recovery-point checkpoint: after a recovery (no marker, or ``full``) each partition's entry is its recovered
   log end; otherwise an entry above the log end is lowered to it.

With the marker (and without ``full``), steps 5-7 apply only to a partition whose data the plan changes (a cut,
a deleted or created segment): the files of the others are left as a broker found them.

Beyond the loader, a segment whose ``.index`` or ``.timeindex`` breaks its format (or has no ``.timeindex``) gets
its indexes rebuilt: a broker would not notice, and would answer lookups from the broken file. No record changes.

Repairs, with or without the marker (a broker would fail on the file, or serve from it): a malformed
``leader-epoch-checkpoint`` is rebuilt from the batches' partition leader epochs; producer snapshots failing their
size or CRC are deleted (Kafka deletes them on load and replays); malformed offset checkpoints are rewritten from
the partitions as the plan leaves them (recovery points at the log ends, log starts at the first segment bases,
high watermarks and cleaner positions dropped), each reason saying what was lost. What cannot be rebuilt from the
log (``partition.metadata``, ``meta.properties``) is quarantined as ``<name>.corrupt``. A ``.keyindex`` that
``verify`` refuses, or whose segment the plan cuts, replaces or deletes, is deleted (the key index rebuilds it).
A segment a recovery walks whole and finds valid still gets its indexes rebuilt when they disagree with its
batches (``verify``'s check).

The clean-shutdown marker is never written. Left absent after a recovery, with every recovery point at its log
end, a broker's own recovery re-reads only the last segment of each partition and changes nothing, and it
rebuilds producer state by replay; with the marker it would skip that replay for a partition left without a
producer snapshot. For the same reason ``full`` deletes the marker of a marked dir when the plan changes data.
"""

from __future__ import annotations

import functools
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE
from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)
from checkpoints.meta_properties import META_PROPERTIES_FILE, parse_meta_properties
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, parse_partition_metadata
from checkpoints.producer_snapshot import parse_producer_snapshot
from logmgr.leader_epoch_cache import epochs_as_loaded, epochs_truncated_from_start
from logmgr.log_loader import OverflowSplit, _next_offset_of_swap
from logmgr.offline.plan import (
    CORRUPT_SUFFIX,
    UNKNOWN_SIZE,
    Action,
    CreateEmptySegment,
    DeleteFiles,
    LogDirPlan,
    PartitionPlan,
    QuarantineFile,
    RebuildIndexes,
    RenameFile,
    SplitSegment,
    TruncateFile,
    WriteFile,
)
from logmgr.offline.scan import (
    SEGMENT_FILE_SUFFIXES,
    CheckpointView,
    LogDirView,
    PartitionView,
    SegmentView,
    ValidPrefix,
    index_findings,
    partition_files,
    read_regular_file,
    walk_valid_prefix,
)
from logmgr.verify import segment_index_problems
from segments.abstract_index import DEFAULT_MAX_INDEX_SIZE
from segments.errors import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    LogSegmentOffsetOverflowError,
    StorageFormatError,
)
from segments.file_records import FileRecords
from segments.key_index import KEY_INDEX_SUFFIX
from segments.lazy_index import LazyIndex
from segments.log_segment import DEFAULT_INDEX_INTERVAL_BYTES, LogSegment
from segments.naming import (
    CHECKPOINT_SUFFIX,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    filename_prefix_from_offset,
    is_index_file,
    offset_from_file_name,
)
from segments.offset_index import OffsetIndex
from segments.records import MAGIC_V2, RecordBatch
from segments.time_index import TimeIndex
from segments.transaction_index import TransactionIndex


@dataclass(frozen=True)
class RecoveryPlan:
    """A recovery plan and the log dir as it will be after it."""

    plan: LogDirPlan
    view: LogDirView
    """The dir after the plan: segments (sizes, log end offsets), recovery points, leader-epoch checkpoints. Index
    files the plan rebuilds are listed with size :data:`UNKNOWN_SIZE`, and a ``.txnindex`` among them not at all."""
    recovered_segments: int
    """Segments recovered (valid prefix kept, indexes rebuilt), each counted once."""

    @property
    def truncated_bytes(self) -> int:
        """Bytes cut off ``.log`` files. O(actions)."""
        return sum(a.bytes_freed for a in self.plan.actions() if isinstance(a, TruncateFile))

    @property
    def deleted_files(self) -> int:
        """Files the plan deletes. O(actions)."""
        return sum(len(a.files) for a in self.plan.actions() if isinstance(a, DeleteFiles))

    def summary(self) -> str:
        """One line: segments recovered, bytes truncated, files deleted. O(actions)."""
        partitions = sum(1 for p in self.plan.partitions if p.actions)
        return (
            f"{self.recovered_segments} segment(s) recovered, {self.truncated_bytes} bytes truncated, "
            f"{self.deleted_files} file(s) deleted, in {partitions} partition(s)"
        )


def plan_recovery(
    view: LogDirView, *, full: bool = False, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
) -> RecoveryPlan:
    """The plan that leaves ``view``'s dir as a broker's loader would (see the module doc), and the dir after it.
    ``view`` is best scanned with ``lenient=True`` (a corrupt index or offset checkpoint is then something to
    repair, not an error). Reads only; an unreadable ``.swap`` segment raises its format error naming the file. O(bytes of the segments recovered + files)."""
    unclean = full or not view.clean_shutdown
    partitions: list[PartitionPlan] = []
    recovered_views: list[PartitionView] = []
    adjusted: list[PartitionView] = []
    recovered = 0
    warnings: list[str] = []
    for partition in view.partitions:
        planner = _PartitionPlanner(view.path, partition, view.clean_shutdown, full, index_interval_bytes)
        partitions.append(planner.plan())
        unhandled = planner.unhandled_problems()
        # What the plan leaves damaged stays damaged in the view after it, so later planning still refuses it.
        recovered_views.append(replace(planner.recovered_view(), needs_recovery=tuple(unhandled)))
        if planner.adjusted:
            adjusted.append(recovered_views[-1])
        recovered += len(planner.recovered - planner.deleted)
        warnings.extend(planner.warnings)
        warnings.extend(unhandled)
    dir_actions: list[Action] = _quarantine(view.path, META_PROPERTIES_FILE, parse_meta_properties, META_PROPERTIES_LOST)
    checkpoints = dict(view.checkpoints)
    damaged_points = view.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].damage is not None
    points = _recovery_points(view, recovered_views if damaged_points else adjusted, unclean=unclean)
    if points is not None:
        action, checkpoints[RECOVERY_POINT_CHECKPOINT_FILE] = points
        dir_actions.append(action)
    for rewrite in _rebuilt_checkpoints(view, recovered_views):
        dir_actions.append(rewrite)
        checkpoints[rewrite.path] = CheckpointView(
            rewrite.path, rewrite.after, parse_offset_checkpoint(rewrite.after)
        )
    clean_after = view.clean_shutdown
    if full and view.clean_shutdown and any(_changes_data(p) for p in partitions):
        size = os.lstat(view.path / CLEAN_SHUTDOWN_FILE).st_size
        dir_actions.append(
            DeleteFiles(
                "",
                ((CLEAN_SHUTDOWN_FILE, size),),
                "--full changed data in a dir marked clean: without the marker a broker rebuilds producer state by "
                "replaying the log, which it would skip for a partition left without a producer snapshot",
                what="clean-shutdown marker",
            )
        )
        clean_after = False
    points_after = checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].entries
    recovered_views = [
        replace(p, recovery_point=points_after.get(p.topic_partition)) for p in recovered_views
    ]
    plan = LogDirPlan(
        "recover",
        view.path,
        tuple(partitions),
        tuple(dir_actions),
        tuple(warnings),
        (_mode_note(view, full),),
    )
    after = LogDirView(view.path, clean_after, checkpoints, tuple(recovered_views), view.skipped)
    return RecoveryPlan(plan, after, recovered)


def _mode_note(view: LogDirView, full: bool) -> str:
    if full:
        marker = "present" if view.clean_shutdown else "absent"
        return f"--full: every segment of every partition is recovered (clean-shutdown marker {marker})"
    if view.clean_shutdown:
        return (
            "clean-shutdown marker present: as a broker, only leftover files and segments with a missing or "
            "corrupt index are handled"
        )
    return (
        "no clean-shutdown marker (unclean shutdown): as a broker, every segment from the one holding the "
        "recovery point is recovered"
    )


def _changes_data(partition: PartitionPlan) -> bool:
    return any(isinstance(a, TruncateFile | DeleteFiles | CreateEmptySegment) for a in partition.actions)


def _recovery_points(
    view: LogDirView, partitions: Iterable[PartitionView], *, unclean: bool
) -> tuple[WriteFile, CheckpointView] | None:
    """The recovery-point checkpoint rewrite (None: unchanged): entries in file order, new ones after."""
    current = view.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE]
    entries: dict[TopicPartition, int] = dict(current.entries)
    changes: list[str] = []
    for partition in partitions:
        tp, old = partition.topic_partition, current.entries.get(partition.topic_partition)
        end = partition.log_end_offset
        new = end if unclean or current.damage or (old is not None and old > end) else old
        if new is not None and new != old:
            entries[tp] = new
            changes.append(f"{tp}: {'absent' if old is None else old} -> {new}")
    if not changes:
        return None
    after = format_offset_checkpoint(entries)
    if current.damage is not None:
        reason = (
            f"malformed ({current.damage}): rebuilt with each partition's log end offset (lost: nothing, every "
            "segment was recovered from offset 0 since no recovery point could be read)"
        )
    elif unclean:
        reason = "recovery points moved to the recovered log end offsets"
    else:
        reason = "recovery points above the log end"
    action = WriteFile(RECOVERY_POINT_CHECKPOINT_FILE, current.raw, after, reason, tuple(changes))
    return action, CheckpointView(current.name, after, entries)


META_PROPERTIES_LOST = (
    "it cannot be rebuilt from the log (cluster id, node id, directory id): a KRaft broker refuses to start "
    "until the dir is formatted again with the cluster's id (kafka-storage format --ignore-formatted), a "
    "ZooKeeper broker writes a new one on start"
)
PARTITION_METADATA_LOST = (
    "it cannot be rebuilt from the log (topic id): a broker refuses to load the partition with it, and after "
    "quarantine recreates the file from the topic id the controller sends"
)


def _quarantine(directory: Path, name: str, parse: Callable[[bytes, Path], object], lost: str) -> list[Action]:
    """A :class:`QuarantineFile` for ``directory/name`` when it exists and ``parse`` refuses it; else none. O(size)."""
    path = directory / name
    raw = read_regular_file(path)
    if raw is None:
        return []
    try:
        parse(raw, path)
    except StorageFormatError as err:
        relative = (path.relative_to(directory.parent) if name == PARTITION_METADATA_FILE else Path(name)).as_posix()
        # An earlier quarantine's file is kept: the new one takes the first free name after it.
        target = relative + CORRUPT_SUFFIX
        copies = 0
        while os.path.lexists(directory / Path(target).name):
            copies += 1
            target = f"{relative}{CORRUPT_SUFFIX}.{copies}"
        return [QuarantineFile(relative, target, len(raw), f"malformed ({err}): {lost}")]
    return []


def _rebuilt_checkpoints(view: LogDirView, partitions: list[PartitionView]) -> list[WriteFile]:
    """Rewrites of the malformed log-start, replication and cleaner offset checkpoints from the partitions as the
    plan leaves them, each saying what was lost. O(partitions + checkpoint bytes)."""
    rebuilt: list[tuple[str, str | None, bytes | None, dict[TopicPartition, int], str]] = []
    starts = view.checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE]
    rebuilt.append(
        (
            starts.name,
            starts.damage,
            starts.raw,
            {p.topic_partition: p.log_start_offset for p in partitions},
            "rebuilt with each partition's first segment base offset (lost: a log start above it, set by "
            "DeleteRecords or retention: those records are readable again until retention removes them)",
        )
    )
    watermarks = view.checkpoints[REPLICATION_OFFSET_CHECKPOINT_FILE]
    rebuilt.append(
        (
            watermarks.name,
            watermarks.damage,
            watermarks.raw,
            {},
            "written empty (lost: the high watermarks; a broker starts each at the log start offset and the "
            "partition's leader advances it again)",
        )
    )
    cleaner_path = view.path / CLEANER_OFFSET_CHECKPOINT_FILE
    cleaner_raw = read_regular_file(cleaner_path)
    cleaner_damage = None
    try:
        parse_offset_checkpoint(cleaner_raw or b"", cleaner_path)
    except StorageFormatError as err:
        cleaner_damage = str(err)
    rebuilt.append(
        (
            CLEANER_OFFSET_CHECKPOINT_FILE,
            cleaner_damage,
            cleaner_raw,
            {},
            "written empty (lost: the cleaner's positions; it cleans compacted logs again from their start, "
            "no record is lost)",
        )
    )
    return [
        WriteFile(name, raw, format_offset_checkpoint(entries), f"malformed ({damage}): {how}", (f"{len(entries)} entries",))
        for name, damage, raw, entries, how in rebuilt
        if damage is not None
    ]


@dataclass
class _Segment:
    """What planning learned about one segment (after the leftover step)."""

    base: int
    rebuild_reason: str | None = None
    recovery_reason: str | None = None
    prefix: ValidPrefix | None = None
    truncate: bool = False


@dataclass
class _PartitionPlanner:
    log_dir: Path
    view: PartitionView
    clean: bool
    full: bool
    index_interval_bytes: int
    actions: list[Action] = field(default_factory=list)
    present: dict[str, int] = field(default_factory=dict)
    """Name -> size of the files as they will be once the actions so far are applied."""
    on_disk: dict[str, str] = field(default_factory=dict)
    """Final name -> name now, for the files a planned rename will give their final name."""
    segments: dict[int, _Segment] = field(default_factory=dict)
    recovered: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    epochs: list[EpochEntry] = field(default_factory=list)
    epochs_changed: bool = False
    created: int | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warned: set[int] = field(default_factory=set)
    epoch_damage: str | None = None
    """Why ``leader-epoch-checkpoint`` could not be parsed: it is rebuilt from the batches' leader epochs."""
    pieces: dict[int, tuple[Path, int, int]] = field(default_factory=dict)
    """Base -> (``.log`` now, start, end) of the segments a planned split creates: bytes of a file of today."""

    @functools.cached_property
    def scanned(self) -> dict[int, SegmentView]:
        """The view's segments by base offset."""
        return {s.base_offset: s for s in self.view.segments}

    @property
    def directory(self) -> Path:
        return self.log_dir / self.view.name

    # -- the plan -------------------------------------------------------------------------------------------------

    def plan(self) -> PartitionPlan:
        self.present = partition_files(self.directory)
        epoch_path = self.directory / LEADER_EPOCH_CHECKPOINT_FILE
        raw_epochs = self.view.leader_epoch_checkpoint
        if raw_epochs is not None:
            try:
                self.epochs = epochs_as_loaded(parse_leader_epoch_checkpoint(raw_epochs, epoch_path), epoch_path)
            except StorageFormatError as err:
                self.epoch_damage = str(err)
        self.actions.extend(
            _quarantine(self.directory, PARTITION_METADATA_FILE, parse_partition_metadata, PARTITION_METADATA_LOST)
        )
        self._leftovers()
        self._delete_corrupt_snapshots()
        bases = sorted(
            offset_from_file_name(name)
            for name in self.present
            if name.endswith(LOG_SUFFIX) and _offset(name) is not None
        )
        self.segments = {base: _Segment(base) for base in bases}
        for index, base in enumerate(bases):
            self._inspect(base, bases[index + 1] if index + 1 < len(bases) else None)
        self._recover_on_load(bases)
        if self.full or not self.clean:
            self._recover_unflushed(bases)
        self._recover_unreadable_end()
        self._below_log_start()
        self._emit_segment_actions()
        self._delete_stale_key_indexes()
        if self.adjusted:
            self._delete_snapshots_above(self.log_end_offset)
        if self.epoch_damage is not None:
            self._epochs_from_batches()
        if self.adjusted or self.epoch_damage is not None:
            self._write_epochs()
        if self.view.log_end_offset != self.log_end_offset:
            self.notes.append(f"log end offset {self.view.log_end_offset} -> {self.log_end_offset}")
        return PartitionPlan(self.view.name, tuple(self.actions), tuple(self.notes))

    def _leftovers(self) -> None:
        """Step 1 (Kafka's ``removeTempFilesAndCollectSwapFiles`` and the swap passes), then orphan indexes."""
        names = sorted(self.present)
        pending = [
            n
            for n in names
            if n.endswith(DELETED_SUFFIX) and not n.endswith(CHECKPOINT_SUFFIX + DELETED_SUFFIX)
        ]
        taken = set(pending)
        cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX) and n not in taken]
        taken.update(cleaned)
        swaps = [n for n in names if n.endswith(SWAP_SUFFIX) and n not in taken]
        cleaned_offsets = [o for o in map(_offset, cleaned) if o is not None]
        min_cleaned = min(cleaned_offsets, default=None)
        split = [
            s
            for s in swaps
            if min_cleaned is not None and (offset := _offset(s)) is not None and offset >= min_cleaned
        ]
        self._delete(pending, "leftover", "pending deletes (.deleted) a broker removes on load")
        self._delete(
            cleaned, "leftover", "output of an unfinished cleaning (.cleaned) a broker removes on load"
        )
        self._delete(
            split, "leftover", "swap files of an unfinished split (at or above the smallest .cleaned offset)"
        )
        taken.update(split)
        swaps = [s for s in swaps if s not in taken]
        log_swaps = [s for s in swaps if s.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        if log_swaps:
            low = min(offset_from_file_name(s) for s in log_swaps)
            high = max(_next_offset_of_swap(self.directory / s) for s in log_swaps)
            replaced = [
                n
                for n in sorted(self.present)
                if not n.endswith(SWAP_SUFFIX)
                and n.endswith(SEGMENT_FILE_SUFFIXES)
                and (offset := _offset(n)) is not None
                and low <= offset < high
            ]
            self._delete(
                replaced,
                "replaced segment files",
                f"replaced by the .swap segment(s) covering [{low}, {high})",
            )
        for swap in swaps:
            final = swap[: -len(SWAP_SUFFIX)]
            if final in self.present:
                self._delete([final], "replaced file", f"replaced by {swap}")
            size = self.present.pop(swap)
            self.actions.append(
                RenameFile(
                    f"{self.view.name}/{swap}",
                    f"{self.view.name}/{final}",
                    size,
                    "finishing an interrupted swap",
                )
            )
            self.present[final] = size
            self.on_disk[final] = swap
        orphans = [
            n
            for n in sorted(self.present)
            if is_index_file(n)
            and (offset := _offset(n)) is not None
            and _name(offset, LOG_SUFFIX) not in self.present
        ]
        self._delete(
            orphans, "orphan index files", "index files without their .log (a broker deletes them on load)"
        )

    def _delete(self, names: list[str], what: str, reason: str) -> None:
        if names:
            self.actions.append(
                DeleteFiles(self.view.name, tuple((n, self.present.pop(n)) for n in names), reason, what)
            )

    def _inspect(self, base: int, following: int | None) -> None:
        """What a load would recover in this segment, and what index is broken without the loader noticing."""
        segment = self._open(base)
        info = self.segments[base]
        try:
            if _name(base, INDEX_SUFFIX) not in self.present:
                info.recovery_reason = "no offset index (a broker recovers the segment on load)"
                return
            if _name(base, TXN_INDEX_SUFFIX) in self.present:
                try:
                    segment.txn_index.sanity_check()
                except CorruptIndexError as err:
                    info.recovery_reason = (
                        f"corrupt transaction index ({err}; a broker recovers the segment on load)"
                    )
                    return
            if _name(base, TIME_INDEX_SUFFIX) not in self.present:
                info.rebuild_reason = "no time index"
                return
            try:
                findings = index_findings(segment, is_last=following is None)
                if _name(base, TXN_INDEX_SUFFIX) in self.present:
                    findings.extend(segment.txn_index.check())
            except StorageFormatError as err:
                findings = [err]
            if findings:
                info.rebuild_reason = f"corrupt index ({findings[0]})"
        finally:
            segment.close()

    def _open(self, base: int) -> LogSegment:
        """The segment read-only, its files found under the names they have now."""

        def path(suffix: str) -> Path:
            name = _name(base, suffix)
            return self.directory / self.on_disk.get(name, name)

        piece = self.pieces.get(base)
        return LogSegment(
            FileRecords(path(LOG_SUFFIX), writable=False) if piece is None else _Piece(*piece),
            LazyIndex(path(INDEX_SUFFIX), lambda p: OffsetIndex(p, base, DEFAULT_MAX_INDEX_SIZE, False)),
            LazyIndex(path(TIME_INDEX_SUFFIX), lambda p: TimeIndex(p, base, DEFAULT_MAX_INDEX_SIZE, False)),
            TransactionIndex(path(TXN_INDEX_SUFFIX), base, False),
            base,
        )

    def _walk(self, base: int, following: int | None) -> ValidPrefix | None:
        """Recover one segment: its valid prefix, the epochs of its batches assigned as the loader does. None when
        the walk meets a real 32-bit overflow: the segment is split instead (see :meth:`_split`)."""
        segment = self._open(base)
        try:
            prefix = walk_valid_prefix(segment, following, observer=self._assign_epoch)
            split = self._overflow(segment, following) if isinstance(prefix.error, IndexOffsetOverflowError) else None
        finally:
            segment.close()
        if split is not None:
            self._split(split)
            return None
        self.recovered.add(base)
        self.segments[base].prefix = prefix
        return prefix

    @staticmethod
    def _overflow(segment: LogSegment, following: int | None) -> OverflowSplit | None:
        """The loader's split of ``segment`` when its recovery stops at a real overflow (a legacy batch continuing
        the segment past 32 bits): found by the loader's own recovery walk, read only. O(bytes of the segment)."""
        try:
            deque(segment.recovery_scan(following), maxlen=0)
        except LogSegmentOffsetOverflowError as err:
            return OverflowSplit.plan(segment, err)
        except StorageFormatError:
            # Damage at an offset out of range (a v2 base offset, a bad CRC): cut, as the loader does.
            return None
        return None

    def _split(self, split: OverflowSplit) -> None:
        """Split as the loader does, then recover both pieces as its next load does (they have no index, so a cut
        drops no later segment); a piece that overflows again is split again. O(bytes of the segment)."""
        base, new_base = split.base, split.new_base
        name = _name(base, LOG_SUFFIX)
        source, start, _ = self.pieces.get(base, (self.directory / self.on_disk.get(name, name), 0, split.size))
        self.actions.append(
            SplitSegment(
                self.view.name,
                base,
                split.position,
                new_base,
                split.size,
                split.mtime_ns,
                f"offsets from {new_base} overflow 32 bits relative to {base} (a legacy segment written before "
                "KAFKA-5413): split as a broker's loader does (Kafka's splitOverflowedSegment), nothing is cut",
            )
        )
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            self.present.pop(_name(base, suffix), None)
        self.present[_name(base, LOG_SUFFIX)] = split.position
        self.present[_name(new_base, LOG_SUFFIX)] = split.size - split.position
        self.pieces[base] = (source, start, start + split.position)
        self.pieces[new_base] = (source, start + split.position, start + split.size)
        reason = f"split from segment {filename_prefix_from_offset(base)}, no index yet (a broker recovers it on load)"
        for piece in (base, new_base):
            self.segments[piece] = _Segment(piece, recovery_reason=reason)
        for piece in (base, new_base):
            following = next((b for b in sorted(self.segments) if b > piece), None)
            prefix = self._walk(piece, following)
            if prefix is not None:
                self.segments[piece].truncate = prefix.problem is not None

    def _assign_epoch(self, batch: RecordBatch) -> None:
        # LeaderEpochCache.assign: a newer epoch starting at or after the latest one's start.
        epoch = batch.partition_leader_epoch
        if batch.magic < MAGIC_V2 or epoch < 0:
            return
        if self.epochs and (
            epoch <= self.epochs[-1].epoch or batch.base_offset < self.epochs[-1].start_offset
        ):
            return
        self.epochs.append(EpochEntry(epoch, batch.base_offset))
        self.epochs_changed = True

    def _recover_on_load(self, bases: list[int]) -> None:
        """Step 2: a cut here drops no later segment (the loader's recovery of step 3 then finds it valid)."""
        for index, base in enumerate(bases):
            info = self.segments[base]
            if info.recovery_reason is not None:
                prefix = self._walk(base, bases[index + 1] if index + 1 < len(bases) else None)
                if prefix is not None:
                    info.truncate = prefix.problem is not None

    def _recover_unflushed(self, bases: list[int]) -> None:
        """Step 3: from the segment holding the recovery point (Kafka's ``logSegments(recoveryPoint, MAX)``). A
        segment found valid to its end keeps indexes that pass their checks: rebuilding them changes nothing a
        broker reads."""
        point = self.view.recovery_point or 0
        holding = [b for b in bases if b <= point]
        start = 0 if self.full or not holding else bases.index(holding[-1])
        why = "--full" if self.full else f"unclean shutdown, recovery point {point}"
        valid: list[str] = []
        for index in range(start, len(bases)):
            base = bases[index]
            info = self.segments[base]
            was_cut = info.truncate
            prefix = self._walk(base, bases[index + 1] if index + 1 < len(bases) else None)
            if prefix is None:
                continue
            if prefix.problem is not None and not was_cut:
                info.truncate = True
                info.recovery_reason = info.recovery_reason or f"recovered ({why}): cut to its valid prefix"
                for later in bases[index + 1 :]:
                    self._drop(later, f"after the truncation of segment {filename_prefix_from_offset(base)}")
                break
            if info.recovery_reason is None and info.rebuild_reason is None:
                # The format checks of planning read no batch: what was just walked is checked against the
                # indexes too (an entry at a wrong offset or position passes them, and misleads a broker's lookups).
                # (A segment finishing a swap is checked once renamed, by the next run.)
                log = _name(base, LOG_SUFFIX)
                problems = [] if log in self.on_disk else segment_index_problems(self.directory / log)
                if problems:
                    info.rebuild_reason = f"index disagrees with the log ({problems[0]})"
                else:
                    valid.append(filename_prefix_from_offset(base))
        if valid:
            self.notes.append(f"recovered ({why}), valid to the end with intact indexes: {', '.join(valid)}")

    def _recover_unreadable_end(self) -> None:
        """Step 3b: the loader reads the last segment's next offset from its last offset-index entry (Kafka's
        ``readNextOffset``); an entry there at a negative position, or at or past the end of the ``.log``, is a
        corrupt index, and the loader recovers the segment (cutting it to its valid prefix) rather than put the log
        end below its batches. A segment already recovered by this plan is read from its walk."""
        alive = self.alive
        if not alive or alive[-1] in self.recovered:
            return
        base = alive[-1]
        segment = self._open(base)
        try:
            segment.read_next_offset()
            return
        except CorruptIndexError as err:
            reason = f"corrupt index ({err.message}; a broker recovers the segment on load)"
        except (StorageFormatError, OSError):
            # A broker's load fails here too; the plan goes by the valid batches (see _next_offset).
            return
        finally:
            segment.close()
        info = self.segments[base]
        info.recovery_reason = reason
        prefix = self._walk(base, None)
        if prefix is not None:
            info.truncate = prefix.problem is not None

    def _drop(self, base: int, reason: str) -> None:
        self.deleted.add(base)
        self.segments[base].recovery_reason = reason

    def _below_log_start(self) -> None:
        """Step 4: segments all ending below the checkpointed log start, or none at all."""
        start = self.view.checkpointed_log_start or 0
        alive = self.alive
        if alive and self._next_offset(alive[-1]) < start:
            for base in alive:
                self._drop(base, f"every segment ends below the log start offset {start}")
            # Kafka's clearAndFlush: the epochs of offsets that no longer exist say nothing about the new log.
            self.epochs = []
            self.epochs_changed = True
        if not self.alive:
            self.created = start

    @property
    def adjusted(self) -> bool:
        """Whether the loader's end-of-load rules (epochs, snapshots, recovery point) apply: after a recovery, or
        when the plan changes the partition's data. With the marker and data left as it is, a broker's reading
        of those files is left alone too."""
        changed = (
            self.created is not None or bool(self.deleted) or any(s.truncate for s in self.segments.values())
        )
        return self.full or not self.clean or changed

    @property
    def alive(self) -> list[int]:
        return sorted(b for b in self.segments if b not in self.deleted)

    def _next_offset(self, base: int) -> int:
        """The segment's next offset as the loader reads it (Kafka's ``readNextOffset``: batch headers after the
        last offset-index entry, unchecked) unless the plan recovers it or rebuilds its indexes."""
        info = self.segments[base]
        if base in self.recovered or (info.rebuild_reason is not None and self._prefix(base).problem is None):
            return self._prefix(base).next_offset
        segment = self._open(base)
        try:
            return segment.read_next_offset()
        except (StorageFormatError, OSError):
            # A broker's load fails here too; the plan goes by the valid batches.
            return self._prefix(base).next_offset
        finally:
            segment.close()

    def _facts(self, base: int) -> tuple[int, int]:
        """Next offset and largest timestamp of a kept segment after the plan: from the recovery walk, else as the
        view read it (the broker's reading of an unchanged segment), else from a walk."""
        prefix = self.segments[base].prefix if base in self.recovered else None
        if prefix is None:
            known = self.scanned.get(base)
            name = _name(base, LOG_SUFFIX)
            if known is not None and name not in self.on_disk and known.log_size == self.present[name]:
                return known.next_offset, known.largest_timestamp
            prefix = self._prefix(base)
        largest = prefix.largest_timestamp
        if largest < 0:
            name = _name(base, LOG_SUFFIX)
            # A split keeps the modification time of the .log it splits.
            source = self.pieces[base][0] if base in self.pieces else self.directory / self.on_disk.get(name, name)
            largest = int(os.stat(source).st_mtime * 1000)
        return prefix.next_offset, largest

    def unhandled_problems(self) -> list[str]:
        """What the scan found wrong in segments this plan leaves as they are (a broker would not recover them)."""
        handled = self.recovered | self.deleted | self.rebuilt | self.warned
        why = "the clean-shutdown marker is present" if self.clean else "it is below the recovery point"
        return [
            f"{problem}: not recovered, as a broker would not ({why}); recover --full does"
            for problem in self.view.needs_recovery
            if not any(filename_prefix_from_offset(base) in problem for base in handled)
        ]

    @property
    def rebuilt(self) -> set[int]:
        return {a.base_offset for a in self.actions if isinstance(a, RebuildIndexes)}

    def _prefix(self, base: int) -> ValidPrefix:
        """The valid prefix of a segment not recovered (read once)."""
        info = self.segments[base]
        if info.prefix is None:
            following = next((b for b in sorted(self.segments) if b > base), None)
            segment = self._open(base)
            try:
                info.prefix = walk_valid_prefix(segment, following)
            finally:
                segment.close()
        return info.prefix

    @property
    def log_end_offset(self) -> int:
        alive = self.alive
        return self._next_offset(alive[-1]) if alive else (self.created or 0)

    def _emit_segment_actions(self) -> None:
        for base in sorted(self.deleted, reverse=True):
            prefix = filename_prefix_from_offset(base)
            reason = self.segments[base].recovery_reason or ""
            self._delete(
                [n for n in (prefix + s for s in SEGMENT_FILE_SUFFIXES) if n in self.present],
                f"segment {prefix}",
                reason,
            )
        for base in self.alive:
            info = self.segments[base]
            name = _name(base, LOG_SUFFIX)
            if info.truncate and info.prefix is not None and info.prefix.problem is not None:
                size = self.present[name]
                self.actions.append(
                    TruncateFile(
                        f"{self.view.name}/{name}", size, info.prefix.valid_bytes, info.prefix.problem
                    )
                )
                self.present[name] = info.prefix.valid_bytes
            why = info.recovery_reason or info.rebuild_reason
            if info.recovery_reason is None and why is not None and (problem := self._prefix(base).problem):
                # Rebuilt indexes over a valid prefix would move the log end a broker reads from this segment.
                self.warnings.append(
                    f"{self.view.name}/{name}: {why}, left as it is: {problem}; a broker does not recover this "
                    "segment (recover --full does)"
                )
                self.warned.add(base)
                continue
            if why is not None:
                indexes = tuple(
                    (n, self.present[n])
                    for n in (_name(base, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
                    if n in self.present
                )
                self.actions.append(
                    RebuildIndexes(self.view.name, base, indexes, self.index_interval_bytes, why)
                )
        if self.created is not None:
            self.actions.append(
                CreateEmptySegment(
                    self.view.name, self.created, "no segment left: an empty one at the log start offset"
                )
            )
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                self.present[_name(self.created, suffix)] = 0

    def _delete_stale_key_indexes(self) -> None:
        """A ``.keyindex`` (logmgr's key index; a broker has none) is rebuilt from the log by the key index
        dispatcher when it is missing, so one that ``verify`` would refuse, or whose segment the plan cuts,
        replaces or deletes, is deleted. O(segment bytes) per segment with a ``.keyindex``."""
        alive = set(self.alive)
        for name in sorted(self.present):
            base = _offset(name) if name.endswith(KEY_INDEX_SUFFIX) else None
            if base is None:
                continue
            log = _name(base, LOG_SUFFIX)
            if base not in alive or base == self.created:
                reason = "its segment is deleted"
            elif self.segments[base].truncate or log in self.on_disk or base in self.pieces:
                reason = "its segment is cut or replaced"
            elif problems := segment_index_problems(self.directory / log, (KEY_INDEX_SUFFIX,)):
                reason = f"corrupt ({problems[0]})"
            else:
                continue
            rebuilt = "the key index rebuilds it from the log (so does reindex --key-index)"
            self._delete([name], "key index", f"{reason}: {rebuilt}")

    def _delete_corrupt_snapshots(self) -> None:
        """Producer snapshots failing their size or CRC: a broker deletes them on load (``CorruptSnapshotException``)
        and rebuilds producer state by replaying the log from an older snapshot or the log start."""
        for name in sorted(self.present):
            if not name.endswith(SNAPSHOT_SUFFIX) or _offset(name) is None:
                continue
            path = self.directory / name
            try:
                parse_producer_snapshot(path.read_bytes(), path)
            except StorageFormatError as err:
                self._delete(
                    [name],
                    "producer snapshot",
                    f"corrupt ({err}): a broker deletes it and rebuilds producer state by replaying the log",
                )

    def _epochs_from_batches(self) -> None:
        """Kafka's epoch cache as the loader builds it from nothing: walk every kept segment's batch headers, an
        entry at each first batch stamped with a higher partition leader epoch. O(bytes of the kept segments)."""
        self.epochs = []
        alive = self.alive
        for index, base in enumerate(alive):
            segment = self._open(base)
            try:
                walk_valid_prefix(
                    segment, alive[index + 1] if index + 1 < len(alive) else None, observer=self._assign_epoch
                )
            finally:
                segment.close()
        self.epochs_changed = True

    def _delete_snapshots_above(self, end: int) -> None:
        above = [
            n
            for n in sorted(self.present)
            if n.endswith(SNAPSHOT_SUFFIX) and (offset := _offset(n)) is not None and offset > end
        ]
        self._delete(
            above,
            "producer snapshots",
            f"above the log end offset {end} (a broker deletes them and replays from the newest one left)",
        )

    def _write_epochs(self) -> None:
        end = self.log_end_offset
        kept = [e for e in self.epochs if e.start_offset < end]
        changed = self.epochs_changed or len(kept) != len(self.epochs)
        alive = self.alive
        first = alive[0] if alive else end
        start = max(self.view.checkpointed_log_start or 0, first)
        truncated = epochs_truncated_from_start(kept, start)
        if truncated is not None:
            kept, changed = truncated, True
        before = self.view.leader_epoch_checkpoint
        after = format_leader_epoch_checkpoint(kept)
        self.epochs = kept
        if not changed or after == before:
            return
        if self.epoch_damage is not None:
            changes: tuple[str, ...] = (f"{len(kept)} entries from the batches",)
            reason = (
                f"malformed ({self.epoch_damage}): rebuilt from the partition leader epochs of the batches (lost: "
                "an epoch no batch of the log carries, such as a leader that wrote nothing)"
            )
        else:
            old = _entries(before, self.directory / LEADER_EPOCH_CHECKPOINT_FILE)
            changes = tuple(
                [f"removed epoch {e.epoch} at {e.start_offset}" for e in old if e not in kept]
                + [f"added epoch {e.epoch} at {e.start_offset}" for e in kept if e not in old]
            )
            reason = f"epochs of the recovered batches assigned, entries truncated at the log end {end} and start {start}"
        self.actions.append(
            WriteFile(f"{self.view.name}/{LEADER_EPOCH_CHECKPOINT_FILE}", before, after, reason, changes)
        )

    # -- the dir after the plan ---------------------------------------------------------------------------------

    def recovered_view(self) -> PartitionView:
        segments = []
        rebuilt = self.rebuilt
        for base in self.alive:
            prefix_name = filename_prefix_from_offset(base)
            files = []
            for suffix in SEGMENT_FILE_SUFFIXES:
                name = prefix_name + suffix
                if base in rebuilt and suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    files.append((name, UNKNOWN_SIZE))
                elif name in self.present and not (base in rebuilt and suffix == TXN_INDEX_SUFFIX):
                    files.append((name, self.present[name]))
            next_offset, largest = self._facts(base)
            log_size = self.present[prefix_name + LOG_SUFFIX]
            segments.append(SegmentView(base, log_size, largest, tuple(files), True, next_offset))
        if self.created is not None:
            name = filename_prefix_from_offset(self.created)
            empty = tuple((name + s, 0) for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX))
            segments.append(SegmentView(self.created, 0, int(time.time() * 1000), empty, True, self.created))
        epochs = next(
            (
                a.after
                for a in self.actions
                if isinstance(a, WriteFile) and a.path.endswith(LEADER_EPOCH_CHECKPOINT_FILE)
            ),
            self.view.leader_epoch_checkpoint,
        )
        return replace(self.view, segments=tuple(segments), leader_epoch_checkpoint=epochs, needs_recovery=())


class _Piece(FileRecords):
    """Bytes ``[start, end)`` of a ``.log`` read as a ``.log`` of their own: a segment a planned split creates,
    which exists only once the plan is applied. Reads only."""

    def __init__(self, path: Path, start: int, end: int) -> None:
        super().__init__(path, size=end - start)
        self._whole = FileRecords(path, size=end)
        self._start = start

    def read(self, position: int, size: int) -> bytes:
        return self._whole.read(self._start + position, max(0, min(size, self.size_in_bytes - position)))

    def close(self) -> None:
        self._whole.close()
        super().close()


def _entries(raw: bytes | None, path: Path) -> list[EpochEntry]:
    return [] if raw is None else parse_leader_epoch_checkpoint(raw, path)


def _name(base: int, suffix: str) -> str:
    return filename_prefix_from_offset(base) + suffix


def _offset(name: str) -> int | None:
    try:
        return offset_from_file_name(name)
    except StorageFormatError:
        return None
