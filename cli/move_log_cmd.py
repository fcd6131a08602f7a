"""``logmgr move-log``: move a partition's log to another log dir (Kafka's ``alterReplicaLogDirs``), planned then
applied, or cancel a pending move (``--abort``)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import click

from cli.common import Failure, one_line_errors, topic_partition_argument
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from logmgr.clock import ManualClock, SystemClock
from logmgr.log_manager import LogManager, measure_disk_usage
from logmgr.offline.move import MovePlan, plan_abort, plan_move
from logmgr.scheduler import ManualScheduler
from segments.naming import TopicPartition


def _echo_plan(plan: MovePlan, *, as_json: bool, dry_run: bool) -> None:
    if as_json:
        click.echo(json.dumps({"dryRun": dry_run, **plan.to_json()}))
        return
    for line in plan.describe():
        click.echo(line)
    if dry_run:
        click.echo("dry run: nothing was changed")


@click.command("move-log")
@click.argument("logdirs", metavar="LOGDIR...", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("topic_partition", metavar="TOPIC-P", type=topic_partition_argument)
@click.option("--to", "target", type=click.Path(file_okay=False, path_type=Path), help="The log dir to move it to (one of LOGDIR...).")
@click.option("--abort", is_flag=True, help="Drop the pending -future copy of TOPIC-P instead (cancel its move).")
@click.option("--dry-run", is_flag=True, help="Print the plan (source, target, bytes, segments; a resume shown as such) and change nothing.")
@topic_config_options
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and what was done) as one JSON object.")
@one_line_errors
def move_log(
    logdirs: tuple[Path, ...],
    topic_partition: TopicPartition,
    target: Path | None,
    abort: bool,
    dry_run: bool,
    config_options: ConfigOptions,
    as_json: bool,
) -> None:
    """Move the log of TOPIC-P to the log dir --to, among the broker's log dirs LOGDIR... (Kafka's
    alterReplicaLogDirs): a <topic>-<p>.<id>-future copy is filled in the target while nothing else writes, then
    swapped in and the old log renamed -delete. A -future copy already in the target is resumed. --abort drops a
    pending -future copy instead (Kafka's cancellation of the reassignment); the current log stays.

    The plan is made by reading only and names the source and target dirs, bytes and segments. It is refused
    (exit 1) when --to is not one of LOGDIR..., the partition is already there, a -future copy is pending in
    another dir, or the target has no room (free space, or the copy would take it above
    logmgr.disk.usage.warn.ratio). The real run takes every dir's .lock (exit 3 when a broker holds one). Ctrl-C
    (exit 130) undoes an unfinished copy.

    \b
    Examples:
        logmgr move-log /data/d1 /data/d2 orders-0 --to /data/d2 --dry-run
        logmgr move-log /data/d1 /data/d2 orders-0 --abort
    """
    if abort == (target is not None):
        raise click.UsageError("give either --to DIR or --abort")
    tp = topic_partition
    resolver = build_resolver(list(logdirs), config_options)
    broker = dataclasses.replace(resolver.broker(), log_dirs=tuple(str(d) for d in logdirs))
    if target is not None:
        plan = plan_move(logdirs, tp, target, broker, measure_disk_usage)
    else:
        plan = plan_abort(logdirs, tp)
    if dry_run:
        _echo_plan(plan, as_json=as_json, dry_run=True)
        return
    if not as_json:
        _echo_plan(plan, as_json=False, dry_run=False)
    clock = SystemClock()
    # No job runs (a scheduler whose clock never moves): the move or the abort is all this run does, and no
    # resumed copy races an abort.
    frozen = ManualScheduler(ManualClock(clock.time_ms()))
    manager = LogManager(broker, topic_overrides=resolver.topic_overrides(), clock=clock, scheduler=frozen)
    with manager:
        if plan.abort:
            deleted = manager.abort_move(tp.topic, tp.partition)
            if deleted is None:
                raise Failure(f"the future copy of {tp} could not be deleted: its dir failed")
            # Offline, with every dir locked: nobody reads it, so its space comes back now.
            shutil.rmtree(deleted)
            assert plan.future is not None
            done = f"aborted the move of {tp}: deleted {plan.future.path}"
        else:
            moved = manager.move_log(tp.topic, tp.partition, plan.target)
            done = f"moved {tp} to {moved.dir.parent} (log end offset {moved.log_end_offset})"
    if as_json:
        click.echo(json.dumps({"dryRun": False, **plan.to_json(), "done": done}))
        return
    click.echo(done)
