"""``logmgr recover``: the recovery a broker's log loader runs, planned first (``--dry-run`` prints the plan and
stops), then applied action by action. Planning reads only: it works on a read-only dir and copies nothing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.common import one_line_errors
from cli.plan_output import echo_plan, run_plan
from logmgr.offline.recovery import RecoveryPlan, plan_recovery
from logmgr.offline.scan import scan_log_dir


def _plan(logdir: Path, full: bool, index_interval_bytes: int) -> RecoveryPlan:
    return plan_recovery(
        scan_log_dir(logdir, lenient=True), full=full, index_interval_bytes=index_interval_bytes
    )


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--dry-run", is_flag=True, help="Print the plan and change nothing (no lock taken, nothing written)."
)
@click.option(
    "--full",
    is_flag=True,
    help="Recover every segment of every partition, whatever the clean-shutdown marker and recovery points say.",
)
@click.option("--index-interval-bytes", type=click.IntRange(min=0), default=4096, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object: the plan, the actions applied (real run) and the counts.",
)
@one_line_errors
def recover(logdir: Path, dry_run: bool, full: bool, index_interval_bytes: int, as_json: bool) -> None:
    """Do what a broker's log loader does: remove leftover .deleted/.cleaned files, finish or drop .swap work,
    delete index files without their .log, rebuild missing or corrupt indexes and, after an unclean shutdown
    (no clean-shutdown marker), recover every segment from the recovery point on (cutting torn tails, dropping
    the segments after a cut); then fix leader-epoch-checkpoint, producer snapshots above the log end and the
    recovery points. Files rebuildable from the log are repaired whatever the marker says (malformed
    leader-epoch-checkpoint rebuilt from the batches, corrupt producer snapshots deleted, malformed offset
    checkpoints rewritten); partition.metadata and meta.properties that do not parse are quarantined as
    <name>.corrupt. The plan is printed first, then each action as it completes. Takes the dir's .lock (exit 3
    when a broker holds it). The clean-shutdown marker is never written (--full deletes it when it changes the
    data of a dir marked clean).

    \b
    Examples:
        logmgr recover /var/lib/kafka/data --dry-run
        logmgr recover /var/lib/kafka/data --full --json
    """
    recovery = _plan(logdir, full, index_interval_bytes)
    counts = {
        "recoveredSegments": recovery.recovered_segments,
        "truncatedBytes": recovery.truncated_bytes,
        "deletedFiles": recovery.deleted_files,
    }
    if as_json:
        if dry_run:
            click.echo(json.dumps({"dryRun": True, **recovery.plan.to_json(), **counts}))
            return
        done = run_plan(recovery.plan, as_json=True, label="recovering")
        applied = [action.to_json() for action in done]
        click.echo(json.dumps({"dryRun": False, **recovery.plan.to_json(), "applied": applied, **counts}))
        return
    if dry_run:
        echo_plan(
            recovery.plan,
            as_json=False,
            dry_run=True,
            summary=f"dry run: would have {recovery.summary()}; nothing was changed",
        )
        return
    echo_plan(recovery.plan, as_json=False, dry_run=False, summary=f"plan: {recovery.summary()}")
    run_plan(recovery.plan, as_json=False, label="recovering")
    click.echo(f"done: {recovery.summary()}")
