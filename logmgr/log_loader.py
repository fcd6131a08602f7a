"""Opening a partition directory: Kafka's ``LogLoader`` (format doc §6.4) and producer-state rebuild (§4).

1. Transient files: ``*.deleted`` (not ``*.checkpoint.deleted``) and ``*.cleaned`` are removed; ``.swap`` files
   at or above the smallest ``.cleaned`` offset belong to an unfinished split and are removed; the remaining
   ``.log.swap`` segments replace the files they cover and are renamed to their final names. The ``.tmp`` files
   an interrupted atomic write leaves (``leader-epoch-checkpoint.tmp``, ``partition.metadata.tmp``,
   ``<offset>.snapshot.tmp``) are removed too, which Kafka leaves for its next write to replace.
2. Segments: an index without its ``.log`` is removed; a ``.log`` without ``.index`` (or with a corrupt
   ``.txnindex``) is recovered.
3. After an unclean shutdown every segment from the one holding the recovery point onward is recovered; the first
   truncation deletes every later segment. A segment keeps its longest valid prefix: batches with a valid CRC
   whose offsets continue it (increasing, from its base, below the next segment's base; see
   :meth:`~segments.log_segment.LogSegment.rebuild_indexes`), where Kafka would empty a segment whose damaged
   base offset breaks an index append.
4. Log start / recovery point from the checkpoints; producer state from the newest valid snapshot plus replay.

A segment whose recovery meets a legacy batch overflowing its 32-bit relative offsets (a segment written before
KAFKA-5413; see :class:`~segments.errors.LogSegmentOffsetOverflowError`) is split there instead of truncated
(Kafka's ``splitOverflowedSegment``, :class:`OverflowSplit`) and the segments are loaded again, as Kafka's
``retryOnOffsetOverflow`` does; the new segments have no index yet, so that load recovers them (and splits again
at a further overflow).

Every action is recorded in :class:`~logmgr.log.RecoveryStats` so callers (the ``recover`` command, the
manager's progress log) can report it.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from checkpoints.atomic import TMP_SUFFIX, fsync_dir, remove_temporaries, sync_filesystem
from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE
from checkpoints.partition_metadata import PARTITION_METADATA_FILE
from logmgr.clock import Clock, SystemClock
from logmgr.config import LogConfig
from logmgr.leader_epoch_cache import LeaderEpochCache
from logmgr.log import _JITTER_RNG, Log, RecoveryStats, _synchronous
from logmgr.log_segments import LogSegments
from logmgr.producer_state import ProducerStateManager
from logmgr.segment_deleter import SegmentDeleter, SegmentReaders
from segments._native.batches import tail_next_offset
from segments._native.listing import canonical_offsets, list_directory
from segments.errors import (
    CorruptIndexError,
    InvalidOffsetError,
    LogSegmentOffsetOverflowError,
    StorageFormatError,
)
from segments.key_index import KEY_INDEX_SUFFIX
from segments.log_segment import LogSegment
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
    PartitionDirName,
    filename_prefix_from_offset,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from segments.records import MAGIC_V2, RecordBatch
from segments.transaction_index import AbortedTxn
from segments.transactions import TransactionTracker

logger = logging.getLogger("logmgr.loader")

_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# The final suffixes of the files step 1 acts on: a listing with none of them is left as it is.
_TRANSIENT_SUFFIXES = (TMP_SUFFIX, DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
# The final suffixes a listing groups its names by (each with one dot): every test of a load's clean path.
_LISTED_SUFFIXES = (*_SEGMENT_SUFFIXES, *_TRANSIENT_SUFFIXES)


def load_log(
    partition_dir: Path,
    config: LogConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    had_clean_shutdown: bool = False,
    clock: Clock | None = None,
    deleter: SegmentDeleter | None = None,
    readers: SegmentReaders | None = None,
    run_async: Callable[[Callable[[], None]], None] = _synchronous,
    producer_id_expiration_ms: int = 86_400_000,
    remove_stray_snapshots: bool = True,
    recovery_point_written_ns: int | None = None,
    sync_snapshots: bool = True,
    dir_name: PartitionDirName | None = None,
) -> Log:
    """Open (creating if needed) the log in ``partition_dir``, recovering as Kafka does. O(bytes recovered).

    ``remove_stray_snapshots=False`` keeps the producer snapshots Kafka's loader deletes (those of no segment
    base offset but the newest): for an offline writer that must change nothing but what it writes, leaving them
    to the broker's next load. Producer state is the same either way: it is rebuilt from the newest snapshot at
    or below the log end, which is never a deleted one.

    ``recovery_point_written_ns``: when the recovery-point checkpoint ``recovery_point`` comes from was written
    (its modification time). After a clean shutdown, a log whose active segment files are older than it takes its
    log end offset from the listing and that checkpoint once the active segment's last batch headers confirm it
    (:func:`_clean_log_end`: one ``pread`` of the last ``.index`` entry and a header hop to the end of the ``.log``,
    both files closed at once), so a clean load keeps no segment file open and maps no index: every file opens
    on first use, the active segment's indexes growing to ``segment.index.bytes`` then (Kafka's lazy index).
    Otherwise the active segment's last batches are read through its objects.

    The producer snapshots the load writes (Kafka's, one after each recovered segment and those of the rebuild)
    are written without fsync, as are a recovered segment's rebuilt indexes and truncated ``.log``, and made durable
    together at the end (``Log.recovery.needs_sync``, snapshots counted in ``Log.recovery.unsynced_snapshots``):
    by one :func:`~checkpoints.atomic.sync_filesystem` of ``partition_dir`` here, or, with
    ``sync_snapshots=False``, by the caller before anything relies on them (the LogManager syncs each log dir once
    after loading all its logs, before startup returns). Kafka fsyncs each (``takeSnapshot``), about two journal
    commits per recovered segment. Deferring is safe because a snapshot is a cache of what replaying the log
    gives: a crash before the sync leaves each snapshot complete, absent (the load replays from an older one or
    from the log start) or empty/torn (size, version and CRC are checked: :class:`CorruptSnapshotError`, deleted,
    an older one tried), and nothing trusts one before the sync: a load never advances the recovery point, the
    marker that a clean start trusts is written at shutdown, and the LogManager removes it before loading.
    ``tests/faults/test_crash.py`` cuts the snapshots a recovery wrote and checks the next load's producer state.

    ``dir_name``: ``partition_dir``'s name as the caller already parsed it (the LogManager's listing of a log dir),
    else it is parsed here."""
    clock = clock or SystemClock()
    parsed = PartitionDirName.parse(partition_dir.name) if dir_name is None else dir_name
    stats = RecoveryStats()
    is_deleted_dir = parsed.kind == "delete"
    listing = _complete_swaps_and_remove_temporaries(partition_dir, stats)
    take_snapshot = partial(_take_unsynced_snapshot, stats)
    while True:
        # One listing per attempt serves the segments and the producer snapshots.
        if listing is None:
            listing = _list_files(partition_dir)
        producer_state = ProducerStateManager(
            partition_dir, producer_id_expiration_ms, clock, snapshot_names=listing.named(SNAPSHOT_SUFFIX)
        )
        leader_epochs = LeaderEpochCache(partition_dir)
        segments, needs_recovery = _open_segments(partition_dir, listing, config, stats, clock)
        context = _LoadContext(
            partition_dir, config, segments, producer_state, leader_epochs, stats, log_start_offset, take_snapshot
        )
        try:
            for segment in needs_recovery:
                if segment.base_offset in segments:
                    context.recover_segment(
                        segment, reason="index missing or corrupt",
                        following=segments.higher_segment(segment.base_offset),
                    )
            if not had_clean_shutdown and not is_deleted_dir:
                context.recover_from(recovery_point)
            last = segments.last_segment()
            last_next_offset = None
            if last is not None:
                if had_clean_shutdown and not needs_recovery and recovery_point_written_ns is not None:
                    last_next_offset = _clean_log_end(
                        partition_dir, last, recovery_point, recovery_point_written_ns, producer_state, config
                    )
                if last_next_offset is None:
                    last_next_offset = context.next_offset_of(last)
            # Recovery is over: what it set aside and did not write again goes (before the stray sweep lists them).
            stats.unsynced_snapshots += len(producer_state.delete_set_aside_snapshots())
            break
        except _Overflowed as overflowed:
            listing = None
            split = OverflowSplit.plan(overflowed.segment, overflowed.error)
            for segment in segments.values():
                segment.close()
            split.apply()
            stats.actions.append(split.describe())
            logger.info("%s: %s", partition_dir.name, split.describe())
    if last_next_offset is not None and last_next_offset < log_start_offset:
        stats.actions.append(f"every segment ends below the log start offset {log_start_offset}: deleted")
        for segment in segments.clear():
            segment.delete()
        # Kafka's clearAndFlush: the epochs of offsets that no longer exist say nothing about the new log.
        leader_epochs.clear()
    if segments.is_empty():
        base = 0 if is_deleted_dir else log_start_offset
        segments.add(_open_segment(partition_dir, base, config, partial(_seconds, clock)))
        stats.actions.append(f"created an empty segment at offset {base}")
        last_next_offset = base
    # The active segment keeps preallocated indexes (trimmed ones are re-expanded), as after Kafka's load; an
    # index not mapped yet is resized when first used.
    segments.active_segment.resize_indexes(config.segment_index_bytes)
    first = segments.first_segment()
    assert first is not None and last_next_offset is not None
    log_end_offset = last_next_offset
    effective_start = max(log_start_offset, first.base_offset)
    effective_recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
    leader_epochs.truncate_from_end(log_end_offset)
    leader_epochs.truncate_from_start(effective_start)
    log = Log(
        partition_dir,
        parsed.topic_partition,
        config,
        segments,
        log_start_offset=effective_start,
        log_end_offset=log_end_offset,
        recovery_point=effective_recovery_point,
        producer_state=producer_state,
        leader_epochs=leader_epochs,
        clock=clock,
        deleter=deleter,
        readers=readers,
        run_async=run_async,
        recovery=stats,
    )
    if remove_stray_snapshots:
        # The manager was made from this load's listing and has tracked its own writes since: no rescan.
        producer_state.remove_straggling_snapshots(segments.base_offsets(), rescan=False)
    rebuild_producer_state(
        log, log_end_offset, reload_from_clean_shutdown=had_clean_shutdown, take_snapshot=take_snapshot
    )
    if sync_snapshots and stats.needs_sync:
        sync_filesystem(partition_dir)
    return log


def _take_unsynced_snapshot(stats: RecoveryStats, state: ProducerStateManager) -> None:
    """A load's producer snapshot: written without fsync, counted for the load's one sync (see :func:`load_log`)."""
    if state.write_snapshot(sync=False) is not None:
        stats.unsynced_snapshots += 1


def _take_synced_snapshot(state: ProducerStateManager) -> None:
    state.write_snapshot(sync=True)


SnapshotTaker = Callable[[ProducerStateManager], None]
"""How a producer-state rebuild writes its snapshots: fsynced each (:func:`_take_synced_snapshot`, a running log's
truncation) or deferred to one sync (a load)."""


def _seconds(clock: Clock) -> float:
    """``clock``'s time in seconds, the clock a segment takes. O(1)."""
    return clock.time_ms() / 1000


def _open_segment(partition_dir: Path, base_offset: int, config: LogConfig, seconds: Callable[[], float]) -> LogSegment:
    """A new (created) segment at ``base_offset``, its indexes mapped, its ``.log`` preallocated when the topic
    says so (Kafka's loader creates the first segment with ``preallocate`` as a roll does). O(1)."""
    # Kafka draws each segment's roll jitter when the segment object is created, loaded segments included.
    return LogSegment.open(
        partition_dir,
        base_offset,
        create=True,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        roll_jitter_ms=config.random_segment_jitter(_JITTER_RNG),
        clock=seconds,
        preallocate_bytes=config.segment_bytes if config.preallocate else 0,
    )


def _clean_log_end(
    partition_dir: Path,
    active: LogSegment,
    recovery_point: int,
    recovery_point_written_ns: int,
    producer_state: ProducerStateManager,
    config: LogConfig,
) -> int | None:
    """The log end offset a clean shutdown left, from the active segment's files, the recovery-point checkpoint and
    the newest producer snapshot, or None when they do not agree (the caller then reads the active segment through
    its objects, as Kafka's load does). A clean shutdown flushes every log (its recovery point becomes its log end
    offset), closes it (writing the producer snapshot named by that offset) and then writes the checkpoint. They
    agree when the active segment's ``.log`` and ``.index`` were last modified strictly before the checkpoint was
    written (nothing appended, cut or damaged since: a change in the same clock tick counts as after) and, for a
    non-empty ``.log``, the recovery point lies above the segment's base, names the newest producer snapshot and is
    the offset after the last batch (a checkpoint lowered by hand agrees with everything else); the log end is then
    the recovery point, or the base of an empty ``.log``. The files are read by one compiled call
    (:func:`tail_next_offset`: both opened and ``fstat``-ed, the last ``.index`` entry and the batch headers from
    there to the end of the ``.log`` read, nothing mapped, both closed at once), whose ``fstat`` gives the active
    segment its ``.log`` length; the offset after the last batch disagrees when that tail is longer than what
    follows an index entry after a clean shutdown (``index.interval.bytes`` plus one ``max.message.bytes`` batch),
    the entry does not point into the ``.log``, or a read fails: the segment's objects then report the flaw.
    O(snapshots) plus the headers after the last index entry."""
    stem = f"{partition_dir}/{filename_prefix_from_offset(active.base_offset)}"
    found = tail_next_offset(
        stem + INDEX_SUFFIX, stem + LOG_SUFFIX, active.base_offset,
        config.index_interval_bytes + config.max_message_bytes, recovery_point_written_ns,
    )
    if found is None:
        return None
    log_size, next_offset = found
    active._learn_size(log_size)
    if log_size == 0:
        return active.base_offset
    if recovery_point <= active.base_offset or producer_state.latest_snapshot_offset() != recovery_point:
        return None
    return recovery_point if next_offset == recovery_point else None


def _is_partition_temporary_target(name: str) -> bool:
    """Whether ``name`` is a file of a partition dir written through a ``.tmp`` (checkpoints, metadata,
    producer snapshots, key indexes rebuilt offline)."""
    if name in (LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE):
        return True
    return name.endswith((SNAPSHOT_SUFFIX, KEY_INDEX_SUFFIX)) and _offset_or_none(name) is not None


@dataclass(frozen=True, slots=True)
class _Listing:
    """One read of a partition dir (:func:`~segments._native.listing.list_directory`): the names of its regular
    files (links to one included, as ``Path.is_file`` counts them), which of them are symbolic links, and their
    names by final suffix, for every suffix of ``_LISTED_SUFFIXES`` (the text from the last dot, what
    ``str.endswith`` of a one-dot suffix tests), in listing order: each step of the load looks up the kind of file
    it wants instead of testing every name."""

    directory: str
    files: set[str]
    links: frozenset[str]
    by_suffix: dict[str, list[str]]

    def named(self, *suffixes: str) -> list[str]:
        """The names ending with one of ``suffixes`` (of ``_LISTED_SUFFIXES``), suffix by suffix. O(names returned)."""
        by_suffix = self.by_suffix
        return [name for suffix in suffixes for name in by_suffix[suffix]]

    def path(self, name: str) -> str:
        """The path of the listed file ``name``. O(1)."""
        return f"{self.directory}/{name}"

    def forget(self, name: str) -> None:
        """Drop ``name`` (a file the load removed) from the listing. O(names listed)."""
        self.files.discard(name)
        for names in self.by_suffix.values():
            if name in names:
                names.remove(name)


def _list_files(partition_dir: Path) -> _Listing:
    """The listing of ``partition_dir`` (created if missing): one compiled directory read, file types from it (no
    stat but for a link). O(entries)."""
    directory = os.fspath(partition_dir)
    try:
        files, links, by_suffix = list_directory(directory, _LISTED_SUFFIXES)
    except FileNotFoundError:
        # A new log: its directory is made here (loading an existing one costs no mkdir call).
        partition_dir.mkdir(parents=True, exist_ok=True)
        files, links, by_suffix = list_directory(directory, _LISTED_SUFFIXES)
    return _Listing(directory, files, links, by_suffix)


def _complete_swaps_and_remove_temporaries(partition_dir: Path, stats: RecoveryStats) -> _Listing | None:
    """Step 1 of §6.4, plus the temporaries of interrupted atomic writes. Returns the directory's listing when
    nothing changed it (a clean dir: step 2 reuses it), else None. O(entries)."""
    listing = _list_files(partition_dir)
    files = listing.files
    by_suffix = listing.by_suffix
    if not any(by_suffix[suffix] for suffix in _TRANSIENT_SUFFIXES):
        # No temporary, pending delete, cleaning or swap (a clean dir): nothing below would act.
        return listing
    changed = False
    if by_suffix[TMP_SUFFIX]:
        for name in remove_temporaries(partition_dir, _is_partition_temporary_target):
            stats.actions.append(f"removed {name} (temporary of an interrupted write)")
            listing.forget(name)
            changed = True
    swaps: list[Path] = []
    min_cleaned: int | None = None
    for name in sorted(files):
        if name.endswith(DELETED_SUFFIX) and not name.endswith(CHECKPOINT_SUFFIX + DELETED_SUFFIX):
            (partition_dir / name).unlink()
            stats.actions.append(f"removed {name} (pending delete)")
            changed = True
        elif name.endswith(CLEANED_SUFFIX):
            offset = _offset_or_none(name)
            if offset is not None:
                min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
            (partition_dir / name).unlink()
            stats.actions.append(f"removed {name} (unfinished cleaning)")
            changed = True
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(partition_dir / name)
    if not swaps:
        return None if changed else listing
    kept = []
    for swap in swaps:
        offset = _offset_or_none(swap.name)
        if min_cleaned is not None and offset is not None and offset >= min_cleaned:
            swap.unlink()
            stats.actions.append(f"removed {swap.name} (unfinished split)")
        else:
            kept.append(swap)
    log_swaps = [s for s in kept if s.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
    if log_swaps:
        low = min(offset_from_file_name(s.name) for s in log_swaps)
        high = max(_next_offset_of_swap(s) for s in log_swaps)
        for path in sorted(partition_dir.iterdir()):
            offset = _offset_or_none(path.name)
            if (
                path.is_file()
                and not path.name.endswith(SWAP_SUFFIX)
                and offset is not None
                and low <= offset < high
                and path.name.endswith(_SEGMENT_SUFFIXES)
            ):
                path.unlink()
                stats.actions.append(f"removed {path.name} (replaced by a .swap segment)")
    for swap in kept:
        final = swap.with_name(swap.name[: -len(SWAP_SUFFIX)])
        os.replace(swap, final)
        stats.actions.append(f"renamed {swap.name} to {final.name}")
    return None


def _next_offset_of_swap(path: Path) -> int:
    segment = LogSegment.open(path.parent, offset_from_file_name(path.name), file_suffix=SWAP_SUFFIX, writable=False)
    try:
        return segment.read_next_offset()
    finally:
        segment.close()


def _offset_or_none(name: str) -> int | None:
    try:
        return offset_from_file_name(name)
    except StorageFormatError:
        return None


def _open_segments(
    partition_dir: Path,
    listing: _Listing,
    config: LogConfig,
    stats: RecoveryStats,
    clock: Clock,
) -> tuple[LogSegments, list[LogSegment]]:
    """Step 2 of §6.4 from the directory listing: a segment per ``.log``, nothing opened or stat'ed (each file
    opens on first use, and a segment learns its ``.log`` length then, or from the read of the clean path's
    :func:`_clean_log_end`); return them and those that need recovery. Only a non-empty
    ``.txnindex`` is read, by Kafka's sanity check. A segment file that is a symbolic link is refused here
    (``OSError(ELOOP)`` naming it), as opening it would be. O(files)."""
    files = listing.files
    log_names = sorted(listing.named(LOG_SUFFIX))
    stems = [name[: -len(LOG_SUFFIX)] for name in log_names]
    # Names as Kafka writes them (20 ASCII digits, then the suffix) are parsed in bulk; any other name goes through
    # offset_from_file_name one by one.
    bases = canonical_offsets(log_names, LOG_SUFFIX)
    canonical = bases is not None
    if bases is None:
        bases = [offset_from_file_name(name) for name in log_names]
    by_suffix = listing.by_suffix
    # Every index named as Kafka writes it, by the offset of a .log: no orphan, and one .index per .log at most.
    indexes_canonical = canonical and _index_offsets_within(listing, set(bases))
    if any(by_suffix[suffix] for suffix in _INDEX_SUFFIXES) and not indexes_canonical:
        _remove_orphan_indexes(partition_dir, listing, sorted(listing.named(*_INDEX_SUFFIXES)), stats)
    links = listing.links
    if links:
        for prefix in stems:
            for kind in _SEGMENT_FILE_SUFFIXES:
                if prefix + kind in links:
                    raise OSError(errno.ELOOP, "is a symbolic link, which is never followed", listing.path(prefix + kind))
    # Most logs have no .txnindex (Kafka writes one only for an aborted transaction).
    txn_names = (
        [prefix + TXN_INDEX_SUFFIX if prefix + TXN_INDEX_SUFFIX in files else None for prefix in stems]
        if by_suffix[TXN_INDEX_SUFFIX]
        else None
    )
    # Every segment in one call, one clock function and one creation time for them all; Kafka draws each
    # segment's roll jitter when its object is created.
    opened = LogSegment.listed(
        partition_dir,
        bases,
        txn_indexes_listed=[False] * len(bases) if txn_names is None else [name is not None for name in txn_names],
        roll_jitters_ms=config.random_segment_jitters(_JITTER_RNG, len(bases)),
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        clock=partial(_seconds, clock),
        created_ms=clock.time_ms(),
    )
    needs_recovery: list[LogSegment] = []
    if txn_names is None and indexes_canonical and len(by_suffix[INDEX_SUFFIX]) == len(log_names):
        # Every .log has its .index, and there is no .txnindex to check: nothing to recover.
        return LogSegments(opened), needs_recovery
    for prefix, segment, txn_name in zip(stems, opened, txn_names or [None] * len(stems), strict=True):
        txn_corrupt = False
        if txn_name is not None and os.stat(listing.path(txn_name)).st_size >= AbortedTxn.SIZE:
            try:
                segment.txn_index.sanity_check()
            except CorruptIndexError:
                txn_corrupt = True
            segment.txn_index.close()
        if prefix + INDEX_SUFFIX not in files or txn_corrupt:
            needs_recovery.append(segment)
    # Built in one go from the ascending listing (a later name with the same offset replaces an earlier one).
    return LogSegments(opened), needs_recovery


def _index_offsets_within(listing: _Listing, bases: set[int]) -> bool:
    """Whether every index file of ``listing`` is named as Kafka writes it and its offset is one of ``bases`` (the
    canonical ``.log`` offsets): no orphan to look for. O(index files)."""
    for suffix in _INDEX_SUFFIXES:
        offsets = canonical_offsets(listing.by_suffix[suffix], suffix)
        if offsets is None or not bases.issuperset(offsets):
            return False
    return True


def _remove_orphan_indexes(
    partition_dir: Path, listing: _Listing, index_names: list[str], stats: RecoveryStats
) -> None:
    """Remove (from the dir and ``listing``) each index named by an offset whose ``.log`` is not listed.
    O(len(index_names))."""
    files = listing.files
    for name in index_names:
        offset = _offset_or_none(name)
        if offset is not None and filename_prefix_from_offset(offset) + LOG_SUFFIX not in files:
            (partition_dir / name).unlink()
            stats.actions.append(f"removed {name} (no .log)")
            listing.forget(name)


class _LoadContext:
    """State shared by the recovery steps of one load."""

    def __init__(
        self,
        partition_dir: Path,
        config: LogConfig,
        segments: LogSegments,
        producer_state: ProducerStateManager,
        leader_epochs: LeaderEpochCache,
        stats: RecoveryStats,
        log_start_offset: int,
        take_snapshot: SnapshotTaker,
    ) -> None:
        self.dir_name = partition_dir.name
        # Asked once per load rather than per recovered segment (a logger call and its level check each).
        self.log_recoveries = logger.isEnabledFor(logging.INFO)
        self.config = config
        self.segments = segments
        self.producer_state = producer_state
        self.leader_epochs = leader_epochs
        self.stats = stats
        self.log_start_offset = log_start_offset
        self.take_snapshot = take_snapshot
        # The latest recovered segment, the next offset its recovery found (None: not known, read it) and the
        # segment that followed it (None: it was the last).
        self._recovered: tuple[LogSegment, int | None, LogSegment | None] | None = None

    def recover_from(self, recovery_point: int) -> None:
        """Step 3: recover every segment from the one holding ``recovery_point``; the first truncation (or a
        segment that cannot be recovered) deletes every later segment."""
        start = self.segments.floor_segment(recovery_point)
        candidates = self.segments.values(start.base_offset if start is not None else None)
        reason = f"unclean shutdown (recovery point {recovery_point})"
        for index, segment in enumerate(candidates):
            # The next candidate is the segment that follows (no lookup per segment).
            following = candidates[index + 1] if index + 1 < len(candidates) else None
            truncated = self.recover_segment(segment, reason=reason, following=following)
            if truncated > 0:
                for later in candidates[index + 1 :]:
                    self.segments.remove(later.base_offset)
                    later.delete()
                    self.stats.actions.append(f"deleted segment {later.base_offset} after a truncation")
                break

    def next_offset_of(self, segment: LogSegment) -> int:
        """The segment's next offset: the one its recovery found when it was the latest segment recovered (nothing
        has changed it since: no read, no index mapped), else read; a segment whose offset index points before its
        log (a damaged entry with a negative position) is recovered first, rebuilding the index. O(1) after a
        recovery, else O(bytes after the last index entry)."""
        recovered = self._recovered
        if recovered is not None and recovered[0] is segment and recovered[1] is not None:
            return recovered[1]
        try:
            return segment.read_next_offset()
        except CorruptIndexError as err:
            self.recover_segment(
                segment, reason=f"corrupt index ({err.message})",
                following=self.segments.higher_segment(segment.base_offset),
            )
            return segment.read_next_offset()

    def _observe(self, batch: RecordBatch) -> None:
        """A recovered batch's effect on the leader-epoch cache and the producer state. O(1)."""
        if batch.partition_leader_epoch >= 0:
            self.leader_epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        self.producer_state.on_batch(batch)

    def _continues_recovery(self, segment: LogSegment) -> bool:
        """Whether the producer state is already rebuilt to ``segment``'s base, so :func:`rebuild_state_to` would
        change nothing (a recovery of consecutive segments, Kafka's loop, rebuilds before each): the latest
        recovered segment is the one before it, at or above the log start offset (no transaction of it lies below
        the log start, which the rebuild would forget), and its recovery left the map ending at this base with
        the snapshot taken there. That rebuild, or an earlier one of this load, set aside every snapshot above its
        base and deleted those at or below the log start; the snapshots written since are each above the last, so
        none lies above this base or at or below the log start, the newest is at it, and the replay is empty.
        O(1)."""
        recovered = self._recovered
        return (
            recovered is not None
            and recovered[2] is segment
            and recovered[0].base_offset >= self.log_start_offset
            and self.producer_state.is_snapshot_at_map_end(segment.base_offset)
        )

    def recover_segment(self, segment: LogSegment, *, reason: str, following: LogSegment | None) -> int:
        """Rebuild producer state to the segment's base, recover it (Kafka's ``recoverSegment``), snapshot.
        ``following``: the segment after it (None: it is the last). O(segment bytes)."""
        if not self._continues_recovery(segment):
            rebuild_state_to(
                self.segments, self.producer_state, segment.base_offset, self.log_start_offset, self.take_snapshot
            )
        tracker = TransactionTracker(self.producer_state.ongoing_txns)
        try:
            # A batch reaching the next segment's base is damage (rolls start at the log end), not data. The scan
            # shows no batch whose only effect would be an assign of the epoch the cache already ends with.
            result = segment.recover(
                transactions=tracker,
                observer=self._observe,
                next_segment_base=None if following is None else following.base_offset,
                leader_epoch=self.leader_epochs.latest_epoch(),
            )
            if result.quiet_next_offset is not None:
                # The valid batches after the last one the observer saw hold no producer id and change no epoch: the
                # map end offset past them is all their producer-state effect (the scan does not show them).
                self.producer_state.map_end_offset = result.quiet_next_offset
            truncated = result.truncated_bytes
            next_offset = result.next_offset
            detail = f"{result.batches} valid batches"
            if result.error is not None:
                detail += f", stopped at {result.error}"
        except LogSegmentOffsetOverflowError as err:
            raise _Overflowed(segment, err) from err
        except (InvalidOffsetError, OSError) as err:
            # Kafka truncates a segment it cannot recover to empty (and the caller drops later ones).
            truncated = segment.size
            segment.truncate_to(segment.base_offset)
            next_offset = segment.base_offset
            detail = f"could not be recovered ({err}); truncated to empty"
        self._recovered = (segment, next_offset, following)
        self.take_snapshot(self.producer_state)
        if following is not None:
            # Not the last segment. Recovery opened its files; nobody reads the log yet, so let inactive segments
            # reopen them lazily.
            segment.release()
        self.stats.recovered_segments += 1
        self.stats.truncated_bytes += truncated
        self.stats.actions.append(
            f"recovered segment {segment.base_offset} ({reason}): {detail}, {truncated} bytes truncated"
        )
        if self.log_recoveries:
            logger.info("%s: recovered segment %d, %d bytes truncated", self.dir_name, segment.base_offset, truncated)
        return truncated


class _Overflowed(Exception):
    """Ends a load attempt: ``segment`` overflows at ``error.position`` and is split before the next attempt."""

    def __init__(self, segment: LogSegment, error: LogSegmentOffsetOverflowError) -> None:
        super().__init__(str(error))
        self.segment = segment
        self.error = error


_COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class OverflowSplit:
    """Kafka's ``splitOverflowedSegment`` for the first overflow of a segment: its bytes before ``position`` stay a
    segment at ``base``, the rest become a segment at ``new_base`` (the first offset of the overflowing batch), so
    the two hold exactly the original bytes. Kafka cuts at every overflow in one pass; here the second segment is
    recovered by the next load, which splits it again at a further overflow, with the same result.

    The swap is Kafka's ``replaceSegments``, crash-safe through the loader's step 1: both ``.log.cleaned`` files
    written and fsynced (a crash leaves ``.cleaned`` files, removed, and the original intact); renamed ``.swap``
    highest first (a crash leaves a ``.cleaned`` below every ``.swap``: an unfinished split, removed); the old
    segment's files deleted (the ``.swap`` files now replace what they cover); ``.swap`` renamed to final names
    lowest first. The new ``.log`` files keep the original's modification time (time retention may fall back on
    it), and get no indexes: the next load rebuilds them."""

    directory: Path
    base: int
    position: int
    new_base: int
    size: int
    mtime_ns: int

    @classmethod
    def plan(cls, segment: LogSegment, error: LogSegmentOffsetOverflowError) -> OverflowSplit:
        """The split of ``segment`` at the batch where recovery raised ``error``. O(1) reads (one batch)."""
        assert error.position is not None
        # Recovery checked this batch: CRC-valid, and its first offset (decompressed) continues the segment.
        found = next(segment.log.batches(error.position))
        return cls(
            segment.log.path.parent, segment.base_offset, error.position, found.batch.base_offset, segment.size,
            segment.log.path.stat().st_mtime_ns,
        )

    def describe(self) -> str:
        return (
            f"split segment {self.base} at position {self.position}: offsets from {self.new_base} overflow 32 bits "
            f"relative to {self.base} (a legacy segment), a new segment starts there"
        )

    def _pieces(self) -> list[tuple[int, int, int]]:
        return [(self.base, 0, self.position), (self.new_base, self.position, self.size)]

    def _write(self, base: int, start: int, end: int) -> None:
        target = log_file(self.directory, base, CLEANED_SUFFIX)
        with open(log_file(self.directory, self.base), "rb") as source, open(target, "wb") as out:
            source.seek(start)
            remaining = end - start
            while remaining > 0:
                chunk = source.read(min(_COPY_CHUNK, remaining))
                if not chunk:
                    raise OSError(f"{source.name}: ends before position {end}")
                out.write(chunk)
                remaining -= len(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.utime(target, ns=(self.mtime_ns, self.mtime_ns))

    def _delete_old(self) -> None:
        for make in (log_file, offset_index_file, time_index_file, transaction_index_file):
            make(self.directory, self.base).unlink(missing_ok=True)

    def steps(self) -> list[Callable[[], None]]:
        """The writes in order; a crash after any prefix of them loads the same log (tests run prefixes). O(1)."""
        bases = [base for base, _, _ in self._pieces()]
        sync = partial(fsync_dir, self.directory)
        return [
            *(partial(self._write, base, start, end) for base, start, end in self._pieces()),
            sync,
            *(
                partial(os.replace, log_file(self.directory, base, CLEANED_SUFFIX), log_file(self.directory, base, SWAP_SUFFIX))
                for base in reversed(bases)
            ),
            sync,
            self._delete_old,
            sync,
            *(partial(os.replace, log_file(self.directory, base, SWAP_SUFFIX), log_file(self.directory, base)) for base in bases),
            sync,
        ]

    def apply(self) -> None:
        """Run every step. O(size of the segment)."""
        for step in self.steps():
            step()


def _offsets_to_snapshot(segments: LogSegments, last_offset: int) -> set[int]:
    """Kafka's ``offsetsToSnapshot``: the base offsets of the last two segments and ``last_offset``."""
    last = segments.active_segment
    before_last = segments.lower_segment(last.base_offset)
    return {last.base_offset, last_offset} | ({before_last.base_offset} if before_last is not None else set())


def rebuild_state_to(
    segments: LogSegments,
    producer_state: ProducerStateManager,
    offset: int,
    log_start_offset: int,
    take_snapshot: SnapshotTaker,
) -> None:
    """Producer state as of ``offset`` (Kafka's ``rebuildProducerState`` before a segment's recovery): reload the
    newest snapshot at or below it, replay the batches after, snapshotting at the base offsets of the last two
    segments and at ``offset`` so later recoveries and truncations start close by. O(bytes replayed)."""
    producer_state.truncate_and_reload(log_start_offset, offset, set_aside=True)
    _replay(segments, producer_state, offset, log_start_offset, take_snapshot)
    producer_state.map_end_offset = offset
    take_snapshot(producer_state)


def rebuild_producer_state(
    log: Log,
    last_offset: int,
    *,
    reload_from_clean_shutdown: bool = False,
    take_snapshot: SnapshotTaker = _take_synced_snapshot,
) -> None:
    """Kafka's ``rebuildProducerState``: after a clean shutdown with no snapshot (or on pre-v2 data) write empty
    snapshots; otherwise reload the newest snapshot and replay the log up to ``last_offset``, snapshotting at the
    base offsets of the last two segments and at ``last_offset``."""
    state = log.producer_state
    segments = log.segments
    if state.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in sorted(_offsets_to_snapshot(segments, last_offset)):
            state.map_end_offset = offset
            take_snapshot(state)
        return
    state.truncate_and_reload(log.log_start_offset, last_offset)
    _replay(segments, state, last_offset, log.log_start_offset, take_snapshot)
    state.map_end_offset = last_offset
    take_snapshot(state)


def _replay(
    segments: LogSegments,
    state: ProducerStateManager,
    last_offset: int,
    log_start_offset: int,
    take_snapshot: SnapshotTaker,
) -> None:
    """Replay the batches from the state's map end offset up to ``last_offset``, snapshotting at the base offsets
    of :func:`_offsets_to_snapshot` on the way; nothing (no lookup) when the state already ends there (a recovery
    of consecutive segments: each starts where the previous one's left the state). O(bytes replayed)."""
    if last_offset <= state.map_end_offset:
        return
    snapshot_at = _offsets_to_snapshot(segments, last_offset)
    start = segments.floor_segment(state.map_end_offset)
    for segment in segments.values(start.base_offset if start is not None else None, last_offset):
        from_offset = max(segment.base_offset, state.map_end_offset, log_start_offset)
        state.map_end_offset = from_offset
        if segment.base_offset in snapshot_at:
            take_snapshot(state)
        begin = segment.translate_offset(from_offset)
        if begin is None:
            continue
        for found in segment.batches(begin.position):
            batch = found.batch
            if batch.magic < MAGIC_V2:
                # Producer state comes from v2 batches only (Kafka's loader); a legacy wrapper's base offset would
                # need its (possibly hostile) compressed content decoded.
                if batch.last_offset >= last_offset:
                    break
                continue
            if batch.base_offset >= last_offset:
                break
            if batch.last_offset >= from_offset:
                state.on_batch(batch)
