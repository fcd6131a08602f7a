"""``logmgr info``: a read-only summary of a log dir (offsets, sizes, timestamps, checkpoints, producers).

Nothing here writes: segments are opened read-only and the dir's ``.lock`` is not taken, so it works next to a
running broker (the answer is then a snapshot that may already be stale). Times are ISO 8601 in UTC in the text
output and epoch milliseconds in ``--json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    read_producer_snapshot,
)
from cli.common import EXIT_PROBLEMS, format_time, one_line_errors
from logmgr.log_dirs import partition_dirs, readonly_segments
from segments.naming import (
    SNAPSHOT_SUFFIX,
    TopicPartition,
    offset_from_file_name,
)
from segments.records import DefaultRecordBatch


@dataclass
class PartitionInfo:
    """What ``info`` reports for one partition; field names are the ``--json`` names."""

    topic: str
    partition: int
    segments: int
    size: int
    records: int
    logStartOffset: int
    logEndOffset: int
    recoveryPoint: int | None
    highWatermark: int | None
    oldestTimestamp: int | None
    newestTimestamp: int | None
    producers: int | None

    def problems(self) -> list[str]:
        """What is wrong with the partition's offsets, one sentence each. O(1).

        A recovery point above the log end offset says the broker flushed records that are no longer on disk
        (a truncated or partly copied dir): Kafka's ``LogLoader`` silently lowers it to the log end offset.
        """
        if self.recoveryPoint is not None and self.recoveryPoint > self.logEndOffset:
            return [
                f"recovery point {self.recoveryPoint} (from {RECOVERY_POINT_CHECKPOINT_FILE}) is above the log end "
                f"offset {self.logEndOffset}: records the broker had flushed are missing (Kafka would lower the "
                f"recovery point to {self.logEndOffset} on load)"
            ]
        return []


def partition_info(
    tp: TopicPartition,
    partition_dir: Path,
    *,
    log_start: int | None,
    recovery_point: int | None,
    high_watermark: int | None,
) -> PartitionInfo:
    """Scan the batch headers of every segment of ``partition_dir`` read-only. O(bytes of the partition).

    The log start offset is the checkpointed one raised to the first segment's base offset, as a log load
    does; the log end offset is the next offset after the last batch (the log start offset when empty).
    """
    size = records = 0
    oldest: int | None = None
    newest: int | None = None
    with readonly_segments(partition_dir) as segments:
        first_base = segments[0].base_offset if segments else None
        end = None
        for segment in segments:
            size += segment.size
            end = segment.base_offset
            for found in segment.batches():
                batch = found.batch
                end = batch.next_offset
                records += batch.count_records()
                first = batch.first_timestamp if isinstance(batch, DefaultRecordBatch) else batch.max_timestamp
                if first >= 0:
                    oldest = first if oldest is None else min(oldest, first)
                if batch.max_timestamp >= 0:
                    newest = batch.max_timestamp if newest is None else max(newest, batch.max_timestamp)
        count = len(segments)
    start = max(log_start or 0, first_base if first_base is not None else 0)
    return PartitionInfo(
        tp.topic,
        tp.partition,
        count,
        size,
        records,
        start,
        start if end is None else max(end, start),
        recovery_point,
        high_watermark,
        oldest,
        newest,
        _producer_count(partition_dir),
    )


def _producer_count(partition_dir: Path) -> int | None:
    """Producers in the newest producer snapshot; None when there is none."""
    snapshots = [p for p in partition_dir.iterdir() if p.name.endswith(SNAPSHOT_SUFFIX) and p.is_file()]
    if not snapshots:
        return None
    newest = max(snapshots, key=lambda p: offset_from_file_name(p.name))
    return len(read_producer_snapshot(newest).entries)


def disk_usage(path: Path) -> int:
    """Bytes allocated on disk for ``path`` and everything under it (what ``du`` counts). O(files)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in [".", *files]:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


@dataclass
class FutureLogInfo:
    """A ``-future`` dir of the log dir (an intra-broker move under way): its offsets and how far it is behind the
    current log (Kafka's ``offsetLag`` of a future replica), when the current log's dir was given."""

    topic: str
    partition: int
    dir: str
    segments: int
    size: int
    logStartOffset: int
    logEndOffset: int
    currentLogDir: str | None
    currentLogEndOffset: int | None
    lag: int | None


def future_log_info(tp: TopicPartition, future_dir: Path, log_start: int | None, other_dirs: list[Path]) -> FutureLogInfo:
    """Scan the future log and, when one of ``other_dirs`` holds it, the current log of ``tp``. O(bytes of both)."""
    future = partition_info(tp, future_dir, log_start=log_start, recovery_point=None, high_watermark=None)
    current_dir = next((d for d in other_dirs if (d / str(tp)).is_dir() and not (d / str(tp)).is_symlink()), None)
    current_end = None
    if current_dir is not None:
        starts = OffsetCheckpointFile(current_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read()
        current_end = partition_info(
            tp, current_dir / str(tp), log_start=starts.get(tp), recovery_point=None, high_watermark=None
        ).logEndOffset
    return FutureLogInfo(
        tp.topic,
        tp.partition,
        future_dir.name,
        future.segments,
        future.size,
        future.logStartOffset,
        future.logEndOffset,
        None if current_dir is None else str(current_dir),
        current_end,
        None if current_end is None else max(0, current_end - future.logEndOffset),
    )


@dataclass
class LogDirInfo:
    """What ``info`` reports for a log dir."""

    log_dir: Path
    partitions: list[PartitionInfo]
    totals: dict[str, int]
    future_logs: list[FutureLogInfo]

    def problems(self) -> list[dict[str, object]]:
        """Every partition's problems (:meth:`PartitionInfo.problems`) as ``{"topic", "partition", "error"}``.
        O(partitions)."""
        return [
            {"topic": p.topic, "partition": p.partition, "error": error} for p in self.partitions for error in p.problems()
        ]

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` form. O(partitions)."""
        return {
            "logDir": str(self.log_dir),
            "partitions": [asdict(p) for p in self.partitions],
            "futureLogs": [asdict(f) for f in self.future_logs],
            "totals": self.totals,
            "problems": self.problems(),
        }


def log_dir_info(log_dir: Path, other_dirs: list[Path] | None = None) -> LogDirInfo:
    """``info`` for a whole log dir: per-partition entries, future logs (with their lag when ``other_dirs``, the
    broker's other log dirs, hold their current logs), totals and disk usage. O(bytes of the dir + current logs
    of its future logs)."""
    starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read()
    recovery = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).read()
    watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).read()
    partitions = [
        partition_info(
            tp,
            path,
            log_start=starts.get(tp),
            recovery_point=recovery.get(tp),
            high_watermark=watermarks.get(tp),
        )
        for tp, path in partition_dirs(log_dir)
    ]
    totals = {
        "partitions": len(partitions),
        "segments": sum(p.segments for p in partitions),
        "size": sum(p.size for p in partitions),
        "records": sum(p.records for p in partitions),
        "diskUsage": disk_usage(log_dir),
    }
    futures = [
        future_log_info(tp, path, starts.get(tp), other_dirs or []) for tp, path in partition_dirs(log_dir, "future")
    ]
    return LogDirInfo(log_dir, partitions, totals, futures)


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _time_text(value: int | None) -> str:
    return "-" if value is None else format_time(value)


@click.command()
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--log-dir",
    "other_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Another log dir of the same broker (repeatable): where the current logs of LOG_DIR's future logs are "
    "looked up, to show their lag.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: partitions, future logs, totals, disk usage.")
@one_line_errors
def info(log_dir: Path, other_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Summarize a log dir without changing it: per partition the segments, size, records, log start and end
    offsets, recovery point, high watermark (replication-offset-checkpoint), oldest and newest timestamps and
    producers in the latest producer snapshot; the future logs of moves into the dir (``-future`` dirs) with their
    log end offset and lag behind the current log (found in a --log-dir; '-' otherwise); then totals and the dir's
    disk usage. Times are ISO 8601 UTC (epoch ms with --json). Takes no lock. Exits 1 when a partition's recovery
    point is above its log end offset (flushed records missing).

    \b
    Example:
        logmgr info /var/lib/kafka/data --json
        logmgr info /data2 --log-dir /data1
    """
    report = log_dir_info(log_dir, list(other_dirs))
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        _print_text(report)
    if report.problems():
        sys.exit(EXIT_PROBLEMS)


def _print_text(report: LogDirInfo) -> None:
    """The table, the totals line and one line per problem. O(partitions)."""
    header = ("PARTITION", "SEGS", "SIZE", "RECORDS", "START", "END", "RECOVERY", "HW", "OLDEST", "NEWEST", "PRODS")
    rows: list[tuple[str, ...]] = [header]
    for p in report.partitions:
        offsets = (p.segments, p.size, p.records, p.logStartOffset, p.logEndOffset, p.recoveryPoint, p.highWatermark)
        rows.append(
            (
                f"{p.topic}-{p.partition}",
                *(_text(v) for v in offsets),
                _time_text(p.oldestTimestamp),
                _time_text(p.newestTimestamp),
                _text(p.producers),
            )
        )
    _print_table(rows)
    if report.future_logs:
        _print_futures(report.future_logs)
    click.echo(
        "total: {partitions} partitions, {segments} segments, {size} bytes, {records} records; "
        "disk usage {diskUsage} bytes".format(**report.totals)
    )
    for problem in report.problems():
        click.echo(f"{problem['topic']}-{problem['partition']}: {problem['error']}")


def _print_futures(futures: list[FutureLogInfo]) -> None:
    """The future logs' table. O(future logs)."""
    header = ("FUTURE", "SEGS", "SIZE", "START", "END", "CURRENT-DIR", "CURRENT-END", "LAG")
    rows: list[tuple[str, ...]] = [header]
    for f in futures:
        offsets = (f.segments, f.size, f.logStartOffset, f.logEndOffset)
        rows.append(
            (f.dir, *(_text(v) for v in offsets), f.currentLogDir or "-", _text(f.currentLogEndOffset), _text(f.lag))
        )
    _print_table(rows)


def _print_table(rows: list[tuple[str, ...]]) -> None:
    """``rows`` (the header first) in left-aligned columns. O(cells)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
