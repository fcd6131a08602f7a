"""``logmgr flush``: fsync a log dir's partitions to their log end and checkpoint their recovery points."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.common import one_line_errors, partitions_option
from cli.plan_output import echo_plan, run_plan
from logmgr.offline.flush import plan_flush
from logmgr.offline.scan import require_log_dir, scan_log_dir
from segments.naming import TopicPartition


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@partitions_option("Flush")
@click.option("--dry-run", is_flag=True, help="Print the plan (files to fsync, checkpoint entries) and change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and what was done) as one JSON object.")
@one_line_errors
def flush(logdir: Path, partitions: list[TopicPartition], dry_run: bool, as_json: bool) -> None:
    """Force-flush (fsync) the partitions of LOGDIR from their recovery points to their log ends and set their
    recovery-point checkpoint entries to the log end offsets, reporting each partition's recovery point before
    and after. Nothing else changes (the clean-shutdown marker stays as found). The plan is made by reading only;
    the real run takes the dir's .lock (exit 3 when a broker holds it). An unknown --partition, or a partition
    holding invalid bytes (run recover first), exits 1 with nothing written.

    \b
    Example:
        logmgr flush /var/lib/kafka/data --partition orders-0 --partition orders-1
    """
    require_log_dir(logdir)
    plan = plan_flush(scan_log_dir(logdir, only=set(partitions) or None))
    summary = f"{len(plan.partitions)} partition(s): {plan.summary()}"
    if dry_run:
        echo_plan(plan, as_json=as_json, dry_run=True, summary=f"dry run: would flush {summary}; nothing was changed")
        return
    done = run_plan(plan, as_json=as_json, label="flushing")
    if as_json:
        click.echo(json.dumps({"dryRun": False, **plan.to_json(), "applied": [a.to_json() for a in done]}))
        return
    for partition in plan.partitions:
        click.echo(f"{partition.partition}: {partition.notes[0]}")
    click.echo(f"flushed {summary}")
