"""``logmgr cleanup``: run the retention job (Kafka's cleanupLogs) once over a log dir, or print its plan.

Also home of :func:`broker_config`, the one place the commands that start a LogManager build its configuration
(``--config`` file, the log dirs from the command line, per-run overrides).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from checkpoints.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from cli.common import ProgressBar, one_line_errors, refuse_links
from logmgr.config import BrokerConfig, load_server_properties
from logmgr.log_dirs import readonly_segments
from logmgr.log_manager import CleanupReport, LogManager
from logmgr.retention import (
    LogSnapshot,
    PlannedDeletion,
    RetentionPlan,
    RetentionSettings,
    SegmentInfo,
    apply_plan,
    plan_disk_pressure,
    plan_retention,
    plans_by_log,
)
from segments.errors import StorageFormatError
from segments.naming import PartitionDirName, TopicPartition

# Kafka creates its internal topics with cleanup.policy=compact; the topic configs themselves live in ZooKeeper
# or the KRaft metadata log, out of reach offline, so these are the overrides an offline run can know.
INTERNAL_TOPIC_OVERRIDES: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
}

# Jobs of a one-shot command must never fire on their own while it runs.
NO_SCHEDULED_JOBS_MS = 10**15

_METADATA_TOPIC = "__cluster_metadata"


def broker_config(log_dirs: Sequence[Path], config_file: Path | None, **overrides: Any) -> BrokerConfig:
    """The ``--config`` file's settings (Kafka's defaults without one) with ``log.dirs`` set to ``log_dirs`` and
    ``overrides`` (BrokerConfig attribute names) applied; invalid values raise ``ConfigError``. O(file size)."""
    base = load_server_properties(config_file) if config_file is not None else BrokerConfig()
    return dataclasses.replace(base, log_dirs=tuple(str(d) for d in log_dirs), **overrides)


def _snapshot(
    partition_dir: Path,
    tp: TopicPartition,
    starts: Mapping[TopicPartition, int],
    watermarks: Mapping[TopicPartition, int],
) -> LogSnapshot | None:
    """The retention view of one partition dir from its files, opened read-only; None without a ``.log``."""
    with readonly_segments(partition_dir) as segments:
        if not segments:
            return None
        infos = tuple(SegmentInfo.of(segment) for segment in segments)
        first_base = segments[0].base_offset
        log_end = segments[-1].read_next_offset()
    start = min(max(starts.get(tp, 0), first_base), log_end)
    high_watermark = max(start, min(watermarks.get(tp, log_end), log_end))
    return LogSnapshot(infos, log_end, start, high_watermark)


def plan_dir(broker: BrokerConfig, log_dir: Path, now_ms: int) -> dict[TopicPartition, RetentionPlan]:
    """What one cleanup run of a LogManager on ``log_dir`` would delete (disk pressure first, then each log's
    retention on what is left), from the files alone: nothing is opened for writing. O(segments)."""
    # A missing checkpoint reads as empty.
    starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read()
    watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).read()
    snapshots: dict[TopicPartition, LogSnapshot] = {}
    settings: dict[TopicPartition, RetentionSettings] = {}
    for child in sorted(log_dir.iterdir()):
        if not child.is_dir() or child.is_symlink():
            continue
        try:
            parsed = PartitionDirName.parse(child.name)
        except StorageFormatError:
            # The real run refuses such a dir at startup; a plan just leaves it out.
            continue
        if parsed.kind != "live" or parsed.topic == _METADATA_TOPIC:
            continue
        tp = parsed.topic_partition
        config = broker.effective_log_config(tp.topic, INTERNAL_TOPIC_OVERRIDES)
        snapshot = _snapshot(child, tp, starts, watermarks)
        if config.compact or snapshot is None:
            continue
        snapshots[tp] = snapshot
        settings[tp] = RetentionSettings(config.retention_ms, config.retention_bytes, config.delete)
    plans: dict[TopicPartition, RetentionPlan] = {}
    ratio = broker.disk_usage_clean_ratio
    if ratio is not None:
        usage = shutil.disk_usage(log_dir)
        deletable = {tp: s for tp, s in snapshots.items() if settings[tp].delete_enabled}
        plans.update(plans_by_log(deletable, plan_disk_pressure(deletable, usage.used, usage.total, ratio)))
    allowed = broker.delete_window_open(now_ms)
    for tp, snapshot in snapshots.items():
        pressure = plans.get(tp)
        current = snapshot if pressure is None else apply_plan(snapshot, pressure, now_ms)
        plan = plan_retention(current, settings[tp], now_ms, time_rule_allowed=allowed)
        if pressure is not None:
            plan = RetentionPlan(
                pressure.deletions + plan.deletions,
                roll_first=pressure.roll_first or plan.roll_first,
                new_log_start_offset=plan.new_log_start_offset
                if plan.deletions
                else pressure.new_log_start_offset,
                bytes_freed=pressure.bytes_freed + plan.bytes_freed,
            )
        if plan.deletions:
            plans[tp] = plan
    return plans


def _deletion_json(deletion: PlannedDeletion) -> dict[str, Any]:
    return {
        "baseOffset": deletion.base_offset,
        "size": deletion.size,
        "reason": deletion.reason,
        "detail": deletion.detail,
    }


def _report_plans(plans: Mapping[TopicPartition, RetentionPlan], as_json: bool) -> None:
    freed = sum(p.bytes_freed for p in plans.values())
    segments = sum(len(p.deletions) for p in plans.values())
    if as_json:
        partitions = {
            str(tp): {
                "rollFirst": plan.roll_first,
                "newLogStartOffset": plan.new_log_start_offset,
                "deletions": [_deletion_json(d) for d in plan.deletions],
            }
            for tp, plan in sorted(plans.items(), key=lambda kv: str(kv[0]))
        }
        click.echo(
            json.dumps({"dryRun": True, "partitions": partitions, "segments": segments, "bytesFreed": freed})
        )
        return
    for tp, plan in sorted(plans.items(), key=lambda kv: str(kv[0])):
        click.echo(f"{tp}:")
        for line in plan.describe():
            click.echo(f"  {line}")
    click.echo(f"dry run: would delete {segments} segment(s) in {len(plans)} partition(s), {freed} B freed")


def _report_run(report: CleanupReport, deleted_bytes: int, as_json: bool) -> None:
    items = sorted(report.deletions.items(), key=lambda kv: str(kv[0]))
    segments = sum(len(ds) for _, ds in items)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "dryRun": False,
                    "partitions": {
                        str(tp): {"rolled": tp in report.rolled, "deletions": [_deletion_json(d) for d in ds]}
                        for tp, ds in items
                    },
                    "segments": segments,
                    "bytesFreed": report.bytes_freed,
                    "bytesDeleted": deleted_bytes,
                }
            )
        )
        return
    for tp, deletions in items:
        click.echo(f"{tp}:{' rolled a new active segment;' if tp in report.rolled else ''}")
        for deletion in deletions:
            click.echo(f"  {deletion.describe()}")
    click.echo(
        f"deleted {segments} segment(s) in {len(items)} partition(s), {deleted_bytes} B of files removed"
    )


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print what would be deleted and why; change nothing.")
@click.option(
    "--retention-ms", type=click.IntRange(min=-1), help="Override log.retention.ms (-1: unlimited)."
)
@click.option(
    "--retention-bytes", type=click.IntRange(min=-1), help="Override log.retention.bytes (-1: unlimited)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A broker server.properties whose log.* settings apply (log.dirs is ignored).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every deletion.")
@one_line_errors
def cleanup(
    logdir: Path,
    dry_run: bool,
    retention_ms: int | None,
    retention_bytes: int | None,
    config_file: Path | None,
    as_json: bool,
) -> None:
    """Run the retention job (Kafka's cleanupLogs: log start offset, retention.bytes, retention.ms, and the
    logmgr.disk.usage.* / logmgr.delete.when settings) once over LOGDIR, then remove the deleted segment files.
    Internal topics (__consumer_offsets, __transaction_state) count as compacted and are kept. Takes the dir's
    .lock (exit 3 when a broker holds it). --dry-run only reads: it prints each segment that would go, why,
    and the bytes freed.

    \b
    Examples:
        logmgr cleanup /var/lib/kafka/data --dry-run --retention-ms 86400000
        logmgr cleanup /var/lib/kafka/data --config /etc/kafka/server.properties --json
    """
    overrides: dict[str, Any] = {
        "log_initial_task_delay_ms": NO_SCHEDULED_JOBS_MS,
        "log_segment_delete_delay_ms": 0,
    }
    if retention_ms is not None:
        overrides["log_retention_ms"] = retention_ms
    if retention_bytes is not None:
        overrides["log_retention_bytes"] = retention_bytes
    broker = broker_config([logdir], config_file, **overrides)
    if dry_run:
        _report_plans(plan_dir(broker, logdir, int(time.time() * 1000)), as_json)
        return
    refuse_links(logdir)
    with ProgressBar("loading", as_json=as_json) as bar:
        manager = LogManager(broker, topic_overrides=INTERNAL_TOPIC_OVERRIDES, progress=bar.update)
        manager.startup()
        try:
            report = manager.cleanup_logs()
            deleted = manager.delete_logs()
        finally:
            manager.shutdown()
    _report_run(report, deleted.deleted_bytes, as_json)
