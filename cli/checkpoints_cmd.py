"""``logmgr checkpoints show|set``: the checkpoint and metadata files of a log dir, and offset-checkpoint edits."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

import click

from checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    read_meta_properties,
    read_partition_metadata,
    read_producer_snapshot,
)
from checkpoints.clean_shutdown import parse_clean_shutdown
from checkpoints.kafka_uuid import uuid_to_kafka
from checkpoints.offset_checkpoint import OFFSET_CHECKPOINT_FILES
from cli.common import Failure, one_line_errors, topic_partition_argument
from cli.plan_output import echo_plan, run_plan
from logmgr.offline.checkpoint_edit import plan_checkpoint_set
from segments.errors import StorageFormatError
from segments.naming import SNAPSHOT_SUFFIX


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _offsets(path: Path) -> dict[str, object]:
    entries = OffsetCheckpointFile(path).read()
    return {"entries": [{"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in entries.items()]}


def _leader_epochs(path: Path) -> dict[str, object]:
    entries = LeaderEpochCheckpointFile(path).read()
    return {"entries": [{"epoch": e.epoch, "startOffset": e.start_offset} for e in entries]}


def _partition_metadata(path: Path) -> dict[str, object]:
    metadata = read_partition_metadata(path)
    return {"version": metadata.version, "topicId": uuid_to_kafka(metadata.topic_id)}


def _meta_properties(path: Path) -> dict[str, object]:
    return {"properties": dict(read_meta_properties(path).properties)}


def _producer_snapshot(path: Path) -> dict[str, object]:
    snapshot = read_producer_snapshot(path)
    producers = [{_camel(k): v for k, v in dataclasses.asdict(e).items()} for e in snapshot.entries]
    return {"offset": snapshot.offset, "producers": producers}


def _clean_shutdown(path: Path) -> dict[str, object]:
    return {"brokerEpoch": parse_clean_shutdown(path.read_bytes()).broker_epoch}


Reader = Callable[[Path], dict[str, object]]


def file_kind(path: Path) -> tuple[str, Reader] | None:
    """The kind of checkpoint or metadata file ``path`` names, with its reader; None for other files. O(1)."""
    name = path.name
    if name in OFFSET_CHECKPOINT_FILES:
        return name, _offsets
    by_name: dict[str, tuple[str, Reader]] = {
        LEADER_EPOCH_CHECKPOINT_FILE: ("leader-epoch-checkpoint", _leader_epochs),
        PARTITION_METADATA_FILE: ("partition.metadata", _partition_metadata),
        META_PROPERTIES_FILE: ("meta.properties", _meta_properties),
        CLEAN_SHUTDOWN_FILE: ("clean-shutdown", _clean_shutdown),
    }
    if name in by_name:
        return by_name[name]
    if name.endswith(SNAPSHOT_SUFFIX):
        return "producer-snapshot", _producer_snapshot
    return None


def checkpoint_files(target: Path) -> list[Path]:
    """``target`` itself when it is a file, else the checkpoint and metadata files of the dir and of its
    subdirs (a log dir's partitions), the dir's own first. O(entries)."""
    if not target.is_dir():
        return [target]
    own = sorted(p for p in target.iterdir() if p.is_file() and file_kind(p) is not None)
    nested = sorted(
        p for d in target.iterdir() if d.is_dir() for p in d.iterdir() if p.is_file() and file_kind(p) is not None
    )
    return own + nested


def _show_text(path: Path, kind: str, content: dict[str, object]) -> None:
    click.echo(f"{path} ({kind})")
    for key, value in content.items():
        if isinstance(value, list):
            click.echo(f"  {key}: {len(value)}")
            for item in value:
                click.echo("    " + " ".join(f"{k}={v}" for k, v in item.items()))
        elif isinstance(value, dict):
            for k, v in value.items():
                click.echo(f"  {k}={v}")
        else:
            click.echo(f"  {key}: {value}")


@click.group()
def checkpoints() -> None:
    """Show checkpoint and metadata files, or change an offset in an offset checkpoint.

    \b
    Examples:
        logmgr checkpoints show /var/lib/kafka/data
        logmgr checkpoints set /var/lib/kafka/data/recovery-point-offset-checkpoint orders-0 0
    """


@checkpoints.command()
@click.argument("target", metavar="LOGDIR_OR_FILE", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file, with 'file' and 'type'.")
@one_line_errors
def show(target: Path, as_json: bool) -> None:
    """Print the offset checkpoints (recovery-point, log-start-offset, replication, cleaner), meta.properties
    and the clean-shutdown marker of a log dir and the leader-epoch-checkpoint, partition.metadata and producer
    .snapshot files of its partitions; or one such file. Exits 1 if a file is malformed (the others are still
    shown).

    \b
    Examples:
        logmgr checkpoints show /var/lib/kafka/data --json
        logmgr checkpoints show /var/lib/kafka/data/orders-0/leader-epoch-checkpoint
    """
    failed = False
    for path in checkpoint_files(target):
        found = file_kind(path)
        if found is None:
            raise Failure(f"{path}: not a checkpoint or metadata file this command knows")
        kind, reader = found
        try:
            content = reader(path)
        except (StorageFormatError, ValueError, OSError) as err:
            failed = True
            message = str(err) if str(path) in str(err) else f"{path}: {err}"
            if as_json:
                click.echo(json.dumps({"file": str(path), "type": kind, "error": message}))
            click.echo(message, err=True)
            continue
        if as_json:
            click.echo(json.dumps({"file": str(path), "type": kind, **content}))
        else:
            _show_text(path, kind, content)
    if failed:
        sys.exit(1)


@checkpoints.command(name="set")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("topic_partition", metavar="TOPIC-P")
@click.argument("offset", type=click.IntRange(min=0))
@click.option("--force", is_flag=True, help="Also add a partition that is neither in the file nor in the dir.")
@click.option("--dry-run", is_flag=True, help="Print the change and write nothing.")
@one_line_errors
def set_offset(file: Path, topic_partition: str, offset: int, force: bool, dry_run: bool) -> None:
    """Set one partition's offset in an offset checkpoint file (recovery-point-offset-checkpoint,
    log-start-offset-checkpoint, replication-offset-checkpoint, cleaner-offset-checkpoint), rewriting it
    atomically; the other entries keep their values and order. Refuses a partition that is not in the file and has
    no partition dir beside it unless --force. Takes the log dir's .lock: exits 3 while a broker (or another
    logmgr) holds it.

    \b
    Example:
        logmgr checkpoints set /var/lib/kafka/data/replication-offset-checkpoint orders-0 1200 --dry-run
    """
    tp = topic_partition_argument(topic_partition)
    plan = plan_checkpoint_set(file, tp, offset, force=force)
    if dry_run:
        echo_plan(plan, as_json=False, dry_run=True, summary=f"dry run: {plan.summary()}; nothing was changed")
        return
    run_plan(plan, as_json=False, label="writing")
    if plan.empty:
        click.echo(f"{file}: {tp} is already {offset}; nothing changed")
