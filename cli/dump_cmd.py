"""``logmgr dump``: Kafka's ``kafka-dump-log`` output for segment, index, snapshot and checkpoint files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from logmgr.dump import DumpOptions, dump_files

_CHUNK_LINES = 512
_JSON = json.JSONEncoder(separators=(",", ":"))


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per line, each with a 'type' (file, batch, record, indexEntry, timeIndexEntry, "
    "abortedTxn, producerSnapshotEntry, offsetCheckpointEntry, leaderEpochEntry, partitionMetadata, "
    "metaProperties, cleanShutdown, invalidBytes, error, and the final reports indexMismatch, "
    "timeIndexMismatch, timeIndexOutOfOrder, timeIndexOffsetNotFound, nonConsecutiveOffsets). Records carry "
    "keySize, valueSize and headerKeys; key, value and headers (base64) only with --print-data-log.",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Print every record of every batch and report non-consecutive offsets.",
)
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Also print record keys and values (UTF-8, malformed bytes replaced); implies --deep-iteration.",
)
def dump(files: tuple[Path, ...], as_json: bool, deep_iteration: bool, print_data_log: bool) -> None:
    """Print what kafka-dump-log prints for .log segments, KRaft .checkpoint snapshots (bootstrap.checkpoint
    included), .index, .timeindex, .txnindex and producer .snapshot files, with Kafka's field names and order;
    also the offset checkpoints, leader-epoch-checkpoint, partition.metadata, meta.properties and
    .kafka_cleanshutdown. Index entries are checked against the segment's .log; mismatches, time-index problems
    and non-consecutive offsets are reported on stderr after the last file, as Kafka does.

    Corrupt or unreadable input is reported on stderr with its file and byte position (or line) and the dump
    goes on; the exit status is then 1 (also for a batch failing its CRC or invalid bytes at the end of a .log).

    \b
    Examples:
        logmgr dump /var/lib/kafka/data/orders-0/00000000000000000000.log --deep-iteration --print-data-log
        logmgr dump /var/lib/kafka/data/orders-0/00000000000000000000.{index,timeindex} --json
    """
    options = DumpOptions(deep_iteration=deep_iteration, print_data_log=print_data_log, as_json=as_json)
    failed = False
    # Consecutive stdout lines go out in chunks: one click.echo per line dominates the run time of deep dumps.
    pending: list[str] = []

    def flush() -> None:
        if pending:
            _echo("\n".join(pending), err=False)
            pending.clear()

    try:
        for line in dump_files(files, options):
            failed = failed or line.problem
            content = line.content
            text = content if isinstance(content, str) else _JSON.encode(content)
            if line.stderr:
                flush()
                _echo(text, err=True)
            else:
                pending.append(text)
                if len(pending) >= _CHUNK_LINES:
                    flush()
        flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    if failed:
        sys.exit(1)


def _echo(text: str, *, err: bool) -> None:
    """Print ``text``; when the stream cannot encode it (a file name with bytes that are not UTF-8, text the
    locale's encoding lacks), print its UTF-8 bytes, undecodable file-name bytes written back as they were."""
    try:
        click.echo(text, err=err)
    except UnicodeEncodeError:
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode("utf-8", "backslashreplace")
        click.echo(data, err=err)
