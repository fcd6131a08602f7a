"""``logmgr flush``: fsync a log dir's partitions and write their recovery points."""

from __future__ import annotations

import json
from pathlib import Path

import click

from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from cli.cleanup_cmd import NO_SCHEDULED_JOBS_MS, broker_config
from cli.common import Failure, one_line_errors, refuse_links, topic_partition_argument
from logmgr.log_manager import LogManager
from segments.naming import TopicPartition


def _parse_partition(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[TopicPartition]:
    try:
        return [topic_partition_argument(value) for value in values]
    except Failure as err:
        raise click.BadParameter(err.message) from None


@click.command()
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    metavar="TOPIC-P",
    callback=_parse_partition,
    help="Flush only this partition (repeatable); default: every partition of LOGDIR.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per partition.")
@one_line_errors
def flush(logdir: Path, partitions: list[TopicPartition], as_json: bool) -> None:
    """Force-flush (fsync) the partitions of LOGDIR, advance their recovery points to the log end and write the
    recovery-point checkpoint, reporting each partition's checkpointed recovery point before and after; the dir is then closed cleanly (checkpoints and clean-shutdown marker written, as
    a broker's shutdown leaves it). Takes the dir's .lock (exit 3 when a broker holds it); an unknown
    --partition exits 1.

    \b
    Example:
        logmgr flush /var/lib/kafka/data --partition orders-0 --partition orders-1
    """
    refuse_links(logdir)
    manager = LogManager(broker_config([logdir], None, log_initial_task_delay_ms=NO_SCHEDULED_JOBS_MS))
    manager.startup()
    # Read under the lock: the checkpoint as the dir held it, before this run's own checkpoint write (loading
    # moves a log's in-memory recovery point, so the file is what tells what a crash would have recovered).
    checkpoint = logdir / RECOVERY_POINT_CHECKPOINT_FILE
    before = OffsetCheckpointFile(checkpoint).read() if checkpoint.exists() else {}
    try:
        logs = {log.topic_partition: log for log in manager.all_logs()}
        missing = [str(tp) for tp in partitions if tp not in logs]
        if missing:
            raise Failure(f"{logdir}: no such partition: {', '.join(missing)}")
        selected = (
            [logs[tp] for tp in partitions]
            if partitions
            else sorted(logs.values(), key=lambda log: str(log.topic_partition))
        )
        for log in selected:
            log.flush()
        manager.checkpoint_recovery_points()
        after = {log.topic_partition: log.recovery_point for log in selected}
        ends = {log.topic_partition: log.log_end_offset for log in selected}
    finally:
        manager.shutdown()
    for log in selected:
        tp = log.topic_partition
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "partition": str(tp),
                        "recoveryPointBefore": before.get(tp),
                        "recoveryPointAfter": after[tp],
                        "logEndOffset": ends[tp],
                    }
                )
            )
        else:
            was = before.get(tp, "none")
            click.echo(f"{tp}: recovery point {was} -> {after[tp]} (log end offset {ends[tp]})")
