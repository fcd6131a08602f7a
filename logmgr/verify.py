"""Offline verification of Kafka data: log dirs, partition dirs or single files.

:func:`verify_paths` walks every batch (CRC-checked and decoded, so record counts are real), every index (order,
range, positions inside the ``.log``, agreement with the batches), every producer snapshot and every checkpoint or
metadata file, and returns a :class:`VerifyReport` listing each problem with its file and byte position or line.
A path holding no file Kafka writes is a problem too (so a wrong path never verifies "OK"), and an index without
its ``.log`` is a warning: Kafka's ``LogLoader`` deletes such orphans when it loads the log. Nothing is modified:
files are opened read-only.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE, parse_clean_shutdown
from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, parse_leader_epoch_checkpoint
from checkpoints.meta_properties import META_PROPERTIES_FILE, parse_meta_properties
from checkpoints.offset_checkpoint import OFFSET_CHECKPOINT_FILES, parse_offset_checkpoint
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, parse_partition_metadata
from checkpoints.producer_snapshot import parse_producer_snapshot
from segments.abstract_index import UNTRIMMED_INDEX
from segments.errors import CorruptIndexError, CorruptRecordError, StorageFormatError
from segments.file_records import FileRecords
from segments.key_index import ENTRY_SIZE, HEADER_SIZE, KEY_INDEX_SUFFIX, KeyIndexReader
from segments.naming import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    is_partition_dir_name,
    offset_from_file_name,
    parse_kraft_snapshot_name,
)
from segments.offset_index import OffsetIndex
from segments.records import DEFAULT_DECODE_LIMITS, DecodeLimits
from segments.time_index import TimeIndex
from segments.transaction_index import TransactionIndex

BOOTSTRAP_CHECKPOINT_FILE = "bootstrap.checkpoint"
QUORUM_STATE_FILE = "quorum-state"
LOCK_FILE = ".lock"


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: the file, the byte position (binary files) or line (text files), and what is wrong."""

    file: str
    error: str
    position: int | None = None
    line: int | None = None

    @classmethod
    def from_error(cls, err: StorageFormatError, default_file: str | os.PathLike[str]) -> Problem:
        return cls(err.path or str(default_file), err.message, err.position, err.line)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "position": self.position, "error": self.error}
        if self.line is not None:
            out["line"] = self.line
        return out

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else f"position {self.position}"
        if self.line is None and self.position is None:
            return f"{self.file}: {self.error}"
        return f"{self.file}: {where}: {self.error}"


@dataclass(slots=True)
class VerifyReport:
    """Totals, problems and warnings of a verification run; only problems make it not ``ok``."""

    files: int = 0
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files": self.files,
            "segments": self.segments,
            "batches": self.batches,
            "records": self.records,
            "bytes": self.bytes,
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [w.to_dict() for w in self.warnings],
        }


@dataclass(frozen=True, slots=True)
class _BatchInfo:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class _LogScan:
    """What the ``.log`` walk learned, for cross-checking the segment's indexes."""

    size: int
    valid_bytes: int
    batches: list[_BatchInfo]

    def positions(self) -> list[int]:
        return [b.position for b in self.batches]


def verify_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    progress: Callable[[Path], None] | None = None,
    limits: Callable[[Path], DecodeLimits] | None = None,
) -> VerifyReport:
    """Verify each path (log dir, partition dir or file) and merge the results. O(total bytes).

    Each path must hold Kafka data: a path where no file other than ``.lock`` was found (a text file, an empty
    dir, a dir of unrelated files) is reported as a problem. ``progress`` is called with each file as it is
    verified (for progress bars). Records of a segment are decoded within ``limits(segment path)`` (the limits of
    its topic, :meth:`logmgr.topic_configs.TopicDecodeLimits.for_segment`), by default within
    :data:`~segments.records.DEFAULT_DECODE_LIMITS`; a record or batch above them is a problem.
    """
    report = VerifyReport()
    for given in paths:
        path = Path(given)
        verifier = _Verifier(report, progress, limits)
        verifier.verify(path)
        if path.exists() and not verifier.kafka_files:
            report.problems.append(Problem(str(path), NO_KAFKA_FILE if path.is_file() else NO_KAFKA_DATA))
    return report


def segment_index_problems(
    log_path: Path, suffixes: tuple[str, ...] = (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
) -> list[Problem]:
    """What ``verify`` finds wrong in the indexes beside ``log_path`` named by ``suffixes`` (by default ``.index``
    and ``.timeindex``) when checked against its batches (entries at batch starts, offsets and timestamps those
    batches hold); problems of the ``.log`` itself are left out. ``recover`` rebuilds the indexes of a segment with
    any, and deletes a ``.keyindex`` with any. O(segment bytes + entries)."""
    report = VerifyReport()
    verifier = _Verifier(report, None)
    base = offset_from_file_name(log_path.name)
    log_scans = {base: verifier.verify_batches(log_path, base)}
    report.problems.clear()
    for suffix in suffixes:
        index = log_path.with_name(log_path.name[: -len(LOG_SUFFIX)] + suffix)
        if index.exists():
            verifier.verify_file(index, log_scans)
    return report.problems


NO_KAFKA_DATA = (
    "holds no Kafka data: no log segment, index, snapshot or checkpoint file in it or below it "
    "(give a Kafka log dir, partition dir or data file)"
)
NO_KAFKA_FILE = (
    "not a Kafka data file (expected a segment .log, .index, .timeindex, .txnindex, producer .snapshot, KRaft "
    ".checkpoint or a checkpoint/metadata file such as recovery-point-offset-checkpoint)"
)
# The problems saying a path given to verify_paths is not Kafka data at all.
NO_KAFKA_DATA_ERRORS = frozenset({NO_KAFKA_DATA, NO_KAFKA_FILE})
ORPHANED_INDEX = "orphaned index: no {log} beside it (Kafka deletes it when it loads the log)"


class _Verifier:
    def __init__(
        self,
        report: VerifyReport,
        progress: Callable[[Path], None] | None,
        limits: Callable[[Path], DecodeLimits] | None = None,
    ) -> None:
        self.report = report
        self.progress = progress
        self.limits = limits
        # Files that show the path holds Kafka data (not the .lock, which logmgr itself may leave).
        self.kafka_files = 0

    def problem(self, err: StorageFormatError, default_file: Path) -> None:
        self.report.problems.append(Problem.from_error(err, default_file))

    def verify(self, path: Path) -> None:
        if not path.exists():
            self.report.problems.append(Problem(str(path), "no such file or directory"))
        elif path.is_dir():
            children = list(path.iterdir())
            holds_segments = any(_is_segment_file(child.name) for child in children)
            # A log dir may itself be named like a partition dir (``kafka-logs-1``); one holding partition
            # dirs and no segment of its own is a log dir.
            holds_partitions = any(child.is_dir() and is_partition_dir_name(child.name) for child in children)
            if holds_segments or (is_partition_dir_name(path.name) and not holds_partitions):
                self.verify_partition_dir(path)
            else:
                self.verify_log_dir(path)
        else:
            self.verify_file(path, log_scans={})

    def verify_log_dir(self, path: Path) -> None:
        """Files at the root of a log dir, then every partition dir; other directories are searched for log
        dirs (so a folder holding several log dirs can be verified at once). Symlinks are not followed."""
        for child in sorted(path.iterdir()):
            if child.is_symlink():
                continue
            if child.is_dir():
                self.verify(child)
            elif child.is_file():
                self.verify_file(child, log_scans={})

    def verify_partition_dir(self, path: Path) -> None:
        children = sorted(p for p in path.iterdir() if p.is_file())
        # Logs first, so each index is checked against its segment's batches.
        log_scans: dict[int, _LogScan] = {}
        for child in children:
            if child.name.endswith(LOG_SUFFIX):
                self.verify_file(child, log_scans)
        for child in children:
            if not child.name.endswith(LOG_SUFFIX):
                self.verify_file(child, log_scans)
        self._check_segment_order(path, log_scans)

    def _check_segment_order(self, path: Path, log_scans: dict[int, _LogScan]) -> None:
        previous_end: int | None = None
        for base in sorted(log_scans):
            scan = log_scans[base]
            if previous_end is not None and base < previous_end:
                self.report.problems.append(
                    Problem(
                        str(path / f"{base:020d}{LOG_SUFFIX}"),
                        f"segment base offset {base} overlaps the previous segment, which ends at offset "
                        f"{previous_end - 1}",
                    )
                )
            if scan.batches:
                previous_end = scan.batches[-1].last_offset + 1

    def verify_file(self, path: Path, log_scans: dict[int, _LogScan]) -> None:
        name = path.name
        if not _is_known_file(name):
            return
        if self.progress is not None:
            self.progress(path)
        self.report.files += 1
        self.report.bytes += path.stat().st_size
        if _is_index_file(name):
            # Kafka's LogLoader checks the .log on disk, not among the verified ones: so does this. The index is
            # still checked on its own (a ``reindex --out`` dir holds only indexes).
            log = path.with_name(f"{offset_from_file_name(name):020d}{LOG_SUFFIX}")
            if not log.exists():
                self.report.warnings.append(Problem(str(path), ORPHANED_INDEX.format(log=log.name)))
        if name != LOCK_FILE:
            self.kafka_files += 1
        try:
            if name.endswith(LOG_SUFFIX):
                self.report.segments += 1
                base = offset_from_file_name(name)
                scan = self.verify_batches(path, base)
                log_scans[base] = scan
            elif parse_kraft_snapshot_name(name) is not None or name == BOOTSTRAP_CHECKPOINT_FILE:
                self.verify_batches(path, None)
            elif name.endswith(INDEX_SUFFIX):
                self.verify_offset_index(path, log_scans)
            elif name.endswith(TIME_INDEX_SUFFIX):
                self.verify_time_index(path, log_scans)
            elif name.endswith(TXN_INDEX_SUFFIX):
                self.verify_txn_index(path)
            elif name.endswith(KEY_INDEX_SUFFIX):
                self.verify_key_index(path, log_scans)
            elif name.endswith(SNAPSHOT_SUFFIX):
                parse_producer_snapshot(path.read_bytes(), path)
            else:
                self.verify_metadata_file(path)
        except StorageFormatError as err:
            self.problem(err, path)

    def verify_metadata_file(self, path: Path) -> None:
        name = path.name
        data = path.read_bytes() if name != LOCK_FILE else b""
        if name in OFFSET_CHECKPOINT_FILES:
            parse_offset_checkpoint(data, path)
        elif name == LEADER_EPOCH_CHECKPOINT_FILE:
            parse_leader_epoch_checkpoint(data, path)
        elif name == PARTITION_METADATA_FILE:
            parse_partition_metadata(data, path)
        elif name == META_PROPERTIES_FILE:
            parse_meta_properties(data, path)
        elif name == CLEAN_SHUTDOWN_FILE:
            parse_clean_shutdown(data)
        elif name == QUORUM_STATE_FILE:
            try:
                json.loads(data)
            except ValueError as err:
                self.report.problems.append(Problem(str(path), f"quorum-state is not valid JSON: {err}"))

    def verify_batches(self, path: Path, base_offset: int | None) -> _LogScan:
        """Walk and decode every batch; check CRCs, offsets increasing and within the segment. O(size)."""
        infos: list[_BatchInfo] = []
        limits = DEFAULT_DECODE_LIMITS if self.limits is None else self.limits(path)
        with FileRecords(path) as log:
            valid_bytes = 0
            previous_last: int | None = None
            try:
                for found in log.batches():
                    batch = found.batch
                    try:
                        batch.ensure_valid()
                    except CorruptRecordError as err:
                        raise err.at(path, position_base=found.position) from None
                    # Streamed within the topic's decode limits: a hostile batch costs O(largest record).
                    count = sum(1 for _ in found.iter_records(limits, check_crc=False))
                    if base_offset is not None and batch.base_offset < base_offset:
                        self.report.problems.append(
                            Problem(
                                str(path),
                                f"batch base offset {batch.base_offset} is below the segment base offset {base_offset}",
                                found.position,
                            )
                        )
                    if previous_last is not None and batch.base_offset <= previous_last:
                        self.report.problems.append(
                            Problem(
                                str(path),
                                f"batch base offset {batch.base_offset} does not follow the previous batch's last "
                                f"offset {previous_last}",
                                found.position,
                            )
                        )
                    previous_last = batch.last_offset
                    self.report.batches += 1
                    self.report.records += count
                    infos.append(_BatchInfo(found.position, batch.base_offset, batch.last_offset, batch.max_timestamp))
                    valid_bytes = found.end_position
            except CorruptRecordError as err:
                self.problem(err, path)
            else:
                if valid_bytes < log.size_in_bytes:
                    self.report.problems.append(
                        Problem(
                            str(path),
                            f"found {log.size_in_bytes - valid_bytes} invalid bytes at the end (a partial batch)",
                            valid_bytes,
                        )
                    )
            return _LogScan(log.size_in_bytes, valid_bytes, infos)

    def index_finding(self, err: CorruptIndexError, path: Path, base: int, log_scans: dict[int, _LogScan]) -> None:
        # The active segment of a running (or crashed) broker keeps its index preallocated: not a problem.
        is_active = not log_scans or base >= max(log_scans)
        if is_active and err.message.startswith(UNTRIMMED_INDEX):
            return
        self.problem(err, path)

    def verify_key_index(self, path: Path, log_scans: dict[int, _LogScan]) -> None:
        """Check a ``.keyindex``: its layout, and every entry against the segment's batches. O(entries)."""
        base = offset_from_file_name(path.name)
        with KeyIndexReader(path) as reader:
            for message, position in _key_index_problems(reader, base, log_scans.get(base)):
                self.report.problems.append(Problem(str(path), message, position))
            torn = sum(1 for head in reader.slot_heads() if head > reader.header.entry_count)
            if torn:
                # A crash between a slot write and the header's: harmless (readers stop there), overwritten next.
                self.report.warnings.append(
                    Problem(str(path), f"{torn} slot(s) name entries past the entry count (torn write)", HEADER_SIZE)
                )

    def verify_offset_index(self, path: Path, log_scans: dict[int, _LogScan]) -> None:
        base = offset_from_file_name(path.name)
        scan = log_scans.get(base)
        with OffsetIndex(path, base, writable=False) as index:
            for err in index.check(None if scan is None else scan.size):
                self.index_finding(err, path, base, log_scans)
            if scan is None:
                return
            positions = scan.positions()
            for slot, entry in enumerate(index.entries_for_dump()):
                at = bisect.bisect_left(positions, entry.position)
                if at == len(positions) or positions[at] != entry.position:
                    if entry.position < scan.valid_bytes:
                        self.problem(
                            CorruptIndexError(
                                f"entry ({entry.offset}, {entry.position}) does not point at a batch start",
                                path=path,
                                position=slot * 8,
                            ),
                            path,
                        )
                    continue
                batch = scan.batches[at]
                if slot == 0 and entry == (base, 0) and entry.offset < batch.last_offset:
                    # The zero fill of a preallocated index no entry was written to yet (an active segment after
                    # a crash): a real entry for the batch at 0 would carry that batch's last offset.
                    continue
                # A multi-batch append indexes the last offset of its last batch at the position of its first.
                if entry.offset < batch.last_offset or entry.offset > scan.batches[-1].last_offset:
                    self.problem(
                        CorruptIndexError(
                            f"entry offset {entry.offset} does not match the batch at position {entry.position} "
                            f"(offsets {batch.base_offset}-{batch.last_offset})",
                            path=path,
                            position=slot * 8,
                        ),
                        path,
                    )

    def verify_time_index(self, path: Path, log_scans: dict[int, _LogScan]) -> None:
        base = offset_from_file_name(path.name)
        scan = log_scans.get(base)
        with TimeIndex(path, base, writable=False) as index:
            for err in index.check():
                self.index_finding(err, path, base, log_scans)
            if scan is None or not scan.batches:
                return
            last_offsets = [b.last_offset for b in scan.batches]
            running_max = list(_running_max(b.max_timestamp for b in scan.batches))
            for slot, entry in enumerate(index.entries_for_dump()):
                at = bisect.bisect_left(last_offsets, entry.offset)
                if at == len(last_offsets) or entry.offset < scan.batches[at].base_offset:
                    self.problem(
                        CorruptIndexError(
                            f"entry offset {entry.offset} is not in any batch of the segment", path=path, position=slot * 12
                        ),
                        path,
                    )
                elif entry.timestamp > running_max[at]:
                    self.problem(
                        CorruptIndexError(
                            f"entry timestamp {entry.timestamp} is above the max timestamp {running_max[at]} of the "
                            f"log up to offset {entry.offset}",
                            path=path,
                            position=slot * 12,
                        ),
                        path,
                    )

    def verify_txn_index(self, path: Path) -> None:
        base = offset_from_file_name(path.name)
        index = TransactionIndex(path, base, writable=False)
        try:
            for err in index.check():
                self.problem(err, path)
        finally:
            index.close()


_METADATA_FILES = frozenset(
    {
        *OFFSET_CHECKPOINT_FILES,
        LEADER_EPOCH_CHECKPOINT_FILE,
        PARTITION_METADATA_FILE,
        META_PROPERTIES_FILE,
        CLEAN_SHUTDOWN_FILE,
        QUORUM_STATE_FILE,
        BOOTSTRAP_CHECKPOINT_FILE,
        LOCK_FILE,
    }
)


def _key_index_problems(reader: KeyIndexReader, base: int, scan: _LogScan | None) -> Iterator[tuple[str, int]]:
    """What is wrong with a ``.keyindex`` against its segment's batches, with byte positions. O(entries)."""
    header = reader.header
    if header.base_offset != base:
        yield f"header names base offset {header.base_offset}, the file name {base}", 8
    batches = [] if scan is None else scan.batches
    starts = [b.base_offset for b in batches]
    if batches and header.next_offset > batches[-1].last_offset + 1:
        yield (
            f"indexed up to offset {header.next_offset - 1}, past the segment's last offset "
            f"{batches[-1].last_offset} (rebuild it with reindex --key-index)"
        ), 72
    entries_at = HEADER_SIZE + header.slot_count * 4
    previous = -1
    for number, entry in enumerate(reader.entries()):
        position = entries_at + number * ENTRY_SIZE
        if not header.start_offset <= entry.offset < header.next_offset or entry.offset <= previous:
            yield (
                f"entry {number + 1} names offset {entry.offset}: outside [{header.start_offset}, "
                f"{header.next_offset}) or not after the previous entry's {previous}"
            ), position
        elif scan is not None:
            i = bisect.bisect_right(starts, entry.offset) - 1
            if i < 0 or entry.offset > batches[i].last_offset:
                yield f"entry {number + 1} names offset {entry.offset}, which no batch of the segment holds", position
        previous = entry.offset


def _is_segment_file(name: str) -> bool:
    return name.endswith(LOG_SUFFIX) or parse_kraft_snapshot_name(name) is not None


def _is_index_file(name: str) -> bool:
    """Kafka's ``LogFileUtils.isIndexFile``: the files ``LogLoader`` deletes when their ``.log`` is missing."""
    return name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))


def _is_known_file(name: str) -> bool:
    """Files ``verify`` understands; transient files (``.deleted``, ``.cleaned``, ``.swap``, ``.tmp``) and
    foreign files are skipped."""
    if name in _METADATA_FILES or parse_kraft_snapshot_name(name) is not None:
        return True
    return any(
        name.endswith(suffix) and _has_offset_prefix(name)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX, KEY_INDEX_SUFFIX)
    )


def _has_offset_prefix(name: str) -> bool:
    prefix = name.split(".", 1)[0]
    return len(prefix) == 20 and prefix.isdigit()


def _running_max(values: Iterable[int]) -> Iterator[int]:
    best = -1
    for value in values:
        best = max(best, value)
        yield best
