"""``logmgr cleanup``: one pass of Kafka's retention job (cleanupLogs) over a log dir, planned then applied.

Also home of :func:`broker_config`, which the commands that start a LogManager use to build its configuration.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from cli.common import one_line_errors
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from cli.plan_output import echo_plan, run_plan
from logmgr.config import BrokerConfig, load_server_properties
from logmgr.log_manager import measure_disk_usage
from logmgr.offline.cleanup import DiskUsage, plan_cleanup
from logmgr.offline.plan import LogDirPlan
from logmgr.offline.recovery import plan_recovery
from logmgr.offline.scan import require_log_dir, scan_log_dir

# Jobs of a one-shot command must never fire on their own while it runs.
NO_SCHEDULED_JOBS_MS = 10**15


def broker_config(log_dirs: Sequence[Path], config_file: Path | None, **overrides: Any) -> BrokerConfig:
    """The ``--config`` file's settings (Kafka's defaults without one) with ``log.dirs`` set to ``log_dirs`` and
    ``overrides`` (BrokerConfig attribute names) applied; invalid values raise ``ConfigError``. O(file size)."""
    base = load_server_properties(config_file) if config_file is not None else BrokerConfig()
    return dataclasses.replace(base, log_dirs=tuple(str(d) for d in log_dirs), **overrides)


def _deleted_segments(plan: LogDirPlan) -> tuple[int, int]:
    """Segments deleted and partitions touched by a cleanup plan."""
    partitions = [p for p in plan.partitions if any(a.kind == "delete" for a in p.actions)]
    segments = sum(1 for p in partitions for a in p.actions if a.kind == "delete")
    return segments, len(partitions)


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print the plan (every roll, deletion, checkpoint entry; why; bytes) and change nothing.")
@click.option("--retention-ms", type=click.IntRange(min=-1), help="Override log.retention.ms (-1: unlimited).")
@click.option("--retention-bytes", type=click.IntRange(min=-1), help="Override log.retention.bytes (-1: unlimited).")
@topic_config_options
@click.option(
    "--recover-first",
    is_flag=True,
    help="Plan the recovery a broker would run on load (truncating invalid bytes) first, then retention on the "
    "recovered dir, as one plan. Without it a dir needing recovery is refused.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and what was done) as one JSON object.")
@one_line_errors
def cleanup(
    logdir: Path,
    dry_run: bool,
    retention_ms: int | None,
    retention_bytes: int | None,
    config_options: ConfigOptions,
    recover_first: bool,
    as_json: bool,
) -> None:
    """Run the retention job (Kafka's cleanupLogs: log start offset, retention.bytes, retention.ms, and the
    logmgr.disk.* tiers / logmgr.delete.when settings) once over LOGDIR.

    The disk tiers (RocketMQ's, on by default: 0.75, 0.85, 0.90; a ratio of 1.0 switches one off) read the
    real usage of LOGDIR's file system: above logmgr.disk.max.used.ratio expired segments go even outside
    logmgr.delete.when, above logmgr.disk.usage.clean.ratio the oldest go regardless of age. Each deletion's
    reason names the tier that caused it.

    Topic configs come from the dir's KRaft metadata (__cluster_metadata), --config (server.properties), and
    --topic-config/--topic-configs; the plan names where each value came from, and warns about topics whose
    config is unknown and whose segments would be deleted. Compacted topics get the log-start-offset
    rule only (compaction itself is `logmgr compact`).

    The plan is made by reading only; --dry-run prints it, the real run takes the dir's .lock (exit 3 when a
    broker holds it), executes exactly that plan and prints each action as it completes. A corrupt index,
    segment or checkpoint found while planning is an error (exit 1) and nothing is written.

    \b
    Examples:
        logmgr cleanup /var/lib/kafka/data --dry-run --retention-ms 86400000
        logmgr cleanup /var/lib/kafka/data --config /etc/kafka/server.properties --topic-config _schemas:cleanup.policy=compact
    """
    require_log_dir(logdir)
    overrides: dict[str, tuple[str, str]] = {}
    if retention_ms is not None:
        overrides["log.retention.ms"] = (str(retention_ms), f"--retention-ms {retention_ms}")
    if retention_bytes is not None:
        overrides["log.retention.bytes"] = (str(retention_bytes), f"--retention-bytes {retention_bytes}")
    resolver = build_resolver([logdir], config_options, broker_flags=overrides)
    broker = resolver.broker()
    now = int(time.time() * 1000)
    # With --recover-first the damage a recovery repairs is part of the plan, not a refusal.
    view = scan_log_dir(logdir, lenient=recover_first)
    recovery = plan_recovery(view) if recover_first else None
    if recovery is not None:
        view = recovery.view
    usage = DiskUsage(*measure_disk_usage(logdir)) if broker.disk_tiers_enabled else None
    plan = plan_cleanup(
        view, resolver.resolve, broker, now, disk_usage=usage, notes=resolver.metadata_warnings()
    )
    if recovery is not None:
        plan = dataclasses.replace(plan, previous=recovery.plan)
    segments, partitions = _deleted_segments(plan)
    if dry_run:
        echo_plan(
            plan,
            as_json=as_json,
            dry_run=True,
            summary=f"dry run: would delete {segments} segment(s) in {partitions} partition(s), "
            f"{plan.bytes_freed} B freed ({plan.summary()}); nothing was changed",
        )
        return
    done = run_plan(plan, as_json=as_json, label="cleaning")
    freed = sum(action.bytes_freed for action in done)
    if as_json:
        click.echo(json.dumps({"dryRun": False, **plan.to_json(), "applied": [a.to_json() for a in done], "bytesDeleted": freed}))
        return
    for warning in plan.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"deleted {segments} segment(s) in {partitions} partition(s), {freed} B of files removed ({plan.summary()})")
