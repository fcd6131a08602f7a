"""``logmgr recover``: the recovery a broker's log loader runs, planned first (``--dry-run`` prints the plan and
stops), then applied action by action. Planning reads only: it works on a read-only dir and copies nothing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.common import one_line_errors, refuse_links
from logmgr.dir_lock import LogDirLock
from logmgr.offline.plan import Action, apply_plan
from logmgr.offline.recovery import RecoveryPlan, plan_recovery
from logmgr.offline.scan import scan_log_dir


def _plan(logdir: Path, full: bool, index_interval_bytes: int) -> RecoveryPlan:
    return plan_recovery(
        scan_log_dir(logdir, lenient=True), full=full, index_interval_bytes=index_interval_bytes
    )


def _echo_plan(recovery: RecoveryPlan, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(recovery.plan.to_json()))
        return
    for line in recovery.plan.describe():
        click.echo(line)
    if recovery.plan.empty:
        click.echo("nothing to change")


def _echo_summary(recovery: RecoveryPlan, as_json: bool, *, dry_run: bool) -> None:
    if as_json:
        summary = {
            "dryRun": dry_run,
            "recoveredSegments": recovery.recovered_segments,
            "truncatedBytes": recovery.truncated_bytes,
            "deletedFiles": recovery.deleted_files,
        }
        click.echo(json.dumps({"summary": summary}))
    else:
        click.echo(("would have: " if dry_run else "done: ") + recovery.summary())


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
    help="The plan as one JSON object, then one JSON line per action applied, then a summary line.",
)
@one_line_errors
def recover(logdir: Path, dry_run: bool, full: bool, index_interval_bytes: int, as_json: bool) -> None:
    """Do what a broker's log loader does: remove leftover .deleted/.cleaned files, finish or drop .swap work,
    delete index files without their .log, rebuild missing or corrupt indexes and, after an unclean shutdown
    (no clean-shutdown marker), recover every segment from the recovery point on (cutting torn tails, dropping
    the segments after a cut); then fix leader-epoch-checkpoint, producer snapshots above the log end and the
    recovery points. The plan is printed first, then each action as it completes. Takes the dir's .lock (exit 3
    when a broker holds it); the clean-shutdown marker is never written.

    \b
    Examples:
        logmgr recover /var/lib/kafka/data --dry-run
        logmgr recover /var/lib/kafka/data --full --json
    """
    if dry_run:
        recovery = _plan(logdir, full, index_interval_bytes)
        _echo_plan(recovery, as_json)
        _echo_summary(recovery, as_json, dry_run=True)
        return
    refuse_links(logdir)

    def done(action: Action) -> None:
        if as_json:
            click.echo(json.dumps({"done": action.to_json()}))
        else:
            click.echo(f"done: {action.describe()}")

    with LogDirLock(logdir):
        recovery = _plan(logdir, full, index_interval_bytes)
        _echo_plan(recovery, as_json)
        apply_plan(recovery.plan, on_action=done)
    _echo_summary(recovery, as_json, dry_run=False)
