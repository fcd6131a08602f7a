"""``logmgr recover``: the recovery a broker runs on an unclean start, run now (or on a copy, ``--dry-run``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import click

from checkpoints.clean_shutdown import CleanShutdownMarker
from cli.cleanup_cmd import NO_SCHEDULED_JOBS_MS, broker_config
from cli.common import ProgressBar, one_line_errors, refuse_links
from logmgr.dir_lock import is_locked_by_another_process
from logmgr.errors import LogDirLockedError
from logmgr.log import RecoveryStats
from logmgr.log_manager import LogManager
from segments.naming import TopicPartition


def recover_dir(log_dir: Path, *, as_json: bool) -> dict[TopicPartition, RecoveryStats]:
    """Recover ``log_dir`` as after an unclean shutdown: lock it, drop its clean-shutdown marker, load every log
    (Kafka's LogLoader) and close it cleanly; returns what each log's load did. Raises
    :class:`LogDirLockedError` (changing nothing) when another process holds the dir. O(bytes recovered)."""
    if is_locked_by_another_process(log_dir):
        raise LogDirLockedError(f"{log_dir}: locked by another process (a running broker or logmgr)")
    CleanShutdownMarker.remove(log_dir)
    with ProgressBar("recovering", as_json=as_json) as bar:
        manager = LogManager(
            broker_config([log_dir], None, log_initial_task_delay_ms=NO_SCHEDULED_JOBS_MS), progress=bar.update
        )
        manager.startup()
        try:
            stats = {log.topic_partition: log.recovery for log in manager.all_logs()}
        finally:
            manager.shutdown()
    return stats


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--dry-run",
    is_flag=True,
    help="Recover a temporary copy of LOGDIR and report what would be done; LOGDIR is not touched.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per partition with its actions.")
@one_line_errors
def recover(logdir: Path, dry_run: bool, as_json: bool) -> None:
    """Do what a broker does on an unclean start: finish or roll back .swap/.cleaned work, remove leftover
    .deleted files, rebuild missing or corrupt indexes, and recover every segment from the recovery point on
    (truncating torn tails, dropping later segments). Every action is reported. Takes the dir's .lock (exit 3
    when a broker holds it).

    \b
    Examples:
        logmgr recover /var/lib/kafka/data --dry-run
        logmgr recover /var/lib/kafka/data --json
    """
    # Checked on LOGDIR for --dry-run too: the copy keeps the links, and they would lead the recovery of the copy
    # to the files they point to.
    refuse_links(logdir)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="logmgr-recover-") as scratch:
            copy = Path(scratch) / logdir.name
            shutil.copytree(logdir, copy, symlinks=True)
            stats = recover_dir(copy, as_json=as_json)
    else:
        stats = recover_dir(logdir, as_json=as_json)
    recovered = sum(s.recovered_segments for s in stats.values())
    truncated = sum(s.truncated_bytes for s in stats.values())
    for tp, stat in sorted(stats.items(), key=lambda kv: str(kv[0])):
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "partition": str(tp),
                        "recoveredSegments": stat.recovered_segments,
                        "truncatedBytes": stat.truncated_bytes,
                        "actions": stat.actions,
                    }
                )
            )
        elif stat.actions:
            click.echo(f"{tp}:")
            for action in stat.actions:
                click.echo(f"  {action}")
    if not as_json:
        verb = "would recover" if dry_run else "recovered"
        click.echo(f"{verb} {recovered} segment(s) in {len(stats)} partition(s), {truncated} bytes truncated")
