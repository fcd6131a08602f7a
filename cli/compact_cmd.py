"""``logmgr compact``: one pass of Kafka's log cleaner over the compacted logs of a log dir, planned then applied."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from cli.common import one_line_errors, partitions_option
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from cli.plan_output import echo_plan, run_plan
from logmgr.cleaner.offline import iter_compacted, plan_compact
from logmgr.offline.scan import require_log_dir, scan_log_dir
from segments.naming import TopicPartition


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@partitions_option("Compact")
@topic_config_options
@click.option(
    "--only-dirty",
    is_flag=True,
    help="Clean only the logs a broker's cleaner would pick (dirty ratio above min.cleanable.dirty.ratio, or "
    "max.compaction.lag.ms due); default: every compacted log with cleanable bytes.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan (segments, groups, bytes reclaimed, dirty ratio) and change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and what was done) as one JSON object.")
@one_line_errors
def compact(
    logdir: Path,
    partitions: list[TopicPartition],
    config_options: ConfigOptions,
    only_dirty: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Compact the logs of LOGDIR whose cleanup.policy contains compact, as Kafka's LogCleaner does: keep the
    latest record of each key, drop tombstones and transaction markers past delete.retention.ms and aborted
    transactional data; never the active segment nor anything at or above the last stable offset.

    Topic configs come from the dir's KRaft metadata (__cluster_metadata), --config (server.properties, for the
    log.cleaner.* settings too), and --topic-config/--topic-configs. The plan is made by reading only (the pass
    runs with its output counted, not written, not even to a temporary dir): per log, the segments cleaned and
    how they are grouped, the bytes of each group, the bytes reclaimed, the batches and records kept and removed
    and the dirty ratio; the real run checks it does exactly that. --dry-run prints it; the real run takes the dir's .lock (exit 3 when a
    broker holds it) and writes each group as .cleaned, renamed .swap, then replaces the originals (crash-safe:
    the loader completes or undoes an interrupted swap), and updates cleaner-offset-checkpoint. Both the
    simulation and the real run are throttled to log.cleaner.io.max.bytes.per.second of --config (bytes read
    plus written; unthrottled by default, as in Kafka).

    \b
    Examples:
        logmgr compact /var/lib/kafka/data --dry-run
        logmgr compact /var/lib/kafka/data --partition __consumer_offsets-0
        logmgr compact /var/lib/kafka/data --topic-config _schemas:cleanup.policy=compact --json
    """
    require_log_dir(logdir)
    resolver = build_resolver([logdir], config_options)
    view = scan_log_dir(logdir, only=set(partitions) or None)
    now = int(time.time() * 1000)
    plan = plan_compact(
        view, resolver.resolve, resolver.broker(), now, force=not only_dirty, notes=resolver.metadata_warnings()
    )
    actions = list(iter_compacted(plan))
    reclaimed = sum(a.bytes_freed for a in actions)
    removed = sum(a.records_removed for a in actions)
    if dry_run:
        echo_plan(
            plan,
            as_json=as_json,
            dry_run=True,
            summary=f"dry run: would compact {len(actions)} log(s), {reclaimed} B reclaimed, {removed} record(s) "
            "removed; nothing was changed",
        )
        return
    done = run_plan(plan, as_json=as_json, label="compacting")
    if as_json:
        click.echo(json.dumps({"dryRun": False, **plan.to_json(), "applied": [a.to_json() for a in done]}))
        return
    click.echo(f"compacted {len(actions)} log(s), {reclaimed} B reclaimed, {removed} record(s) removed")
