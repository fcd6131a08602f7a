"""``logmgr append``: append records to a partition offline, durable once the command returns."""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click

from checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    CleanShutdownMarker,
    OffsetCheckpointFile,
)
from cli.common import Failure, one_line_errors, refuse_links, topic_partition_argument
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from logmgr.config import LogConfig
from logmgr.dir_lock import LogDirLock
from logmgr.log_loader import load_log
from logmgr.offline.scan import scan_log_dir
from segments.compression import CompressionType
from segments.naming import TopicPartition
from segments.records import NO_TIMESTAMP, Header, SimpleRecord

_FIELDS = {"key", "key_b64", "value", "value_b64", "headers", "headers_b64", "timestamp"}


def _bytes_field(obj: dict[str, object], name: str, where: str) -> bytes | None:
    """``name`` (UTF-8 text) or ``name_b64`` (base64) of an input object; both absent or null: None."""
    text, encoded = obj.get(name), obj.get(f"{name}_b64")
    if text is not None and encoded is not None:
        raise ValueError(f"{where}: {name} and {name}_b64 exclude each other")
    if encoded is not None:
        if not isinstance(encoded, str):
            raise ValueError(f"{where}: {name}_b64 must be a base64 string")
        try:
            return base64.b64decode(encoded, validate=True)
        except binascii.Error as err:
            raise ValueError(f"{where}: {name}_b64: {err}") from None
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"{where}: {name} must be a string or null")
    return text.encode("utf-8")


def _headers(obj: dict[str, object], where: str) -> tuple[Header, ...]:
    if "headers" in obj and "headers_b64" in obj:
        raise ValueError(f"{where}: headers and headers_b64 exclude each other")
    encoded = "headers_b64" in obj
    raw = obj.get("headers_b64" if encoded else "headers") or []
    if not isinstance(raw, list):
        raise ValueError(f"{where}: headers must be a list of [key, value] pairs")
    headers = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(f"{where}: header {pair!r} is not a [key, value] pair with a string key")
        value = _bytes_field({"v_b64" if encoded else "v": pair[1]}, "v", where)
        headers.append(Header(pair[0], value))
    return tuple(headers)


def parse_record(line: str, where: str) -> SimpleRecord:
    """One input line as a record: ``{"key","value","headers","timestamp"}`` (all optional; ``key_b64``,
    ``value_b64`` and ``headers_b64`` carry base64 instead of text). Raises ``ValueError`` naming ``where``. O(n)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object")
    unknown = set(obj) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    timestamp = obj.get("timestamp")
    if timestamp is None:
        timestamp = NO_TIMESTAMP
    elif not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
        raise ValueError(f"{where}: timestamp must be a non-negative integer (epoch ms)")
    return SimpleRecord(_bytes_field(obj, "value", where), _bytes_field(obj, "key", where), timestamp, _headers(obj, where))


def read_records(source: IO[str], name: str) -> Iterator[SimpleRecord]:
    """Records of a JSON-lines stream; blank lines are skipped. O(input)."""
    for number, line in enumerate(source, 1):
        if line.strip():
            yield parse_record(line, f"{name}: line {number}")


def _chunks(records: Iterator[SimpleRecord], size: int) -> Iterator[list[SimpleRecord]]:
    chunk: list[SimpleRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@click.command()
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("topic_partition", metavar="TOPIC-P")
@click.option(
    "--from",
    "source",
    type=click.File("r", encoding="utf-8"),
    default="-",
    show_default=True,
    help="JSON-lines input file, '-' for stdin.",
)
@click.option(
    "--compression",
    type=click.Choice([c.name for c in CompressionType]),
    default="none",
    show_default=True,
)
@click.option("--batch-records", type=click.IntRange(min=1), default=1000, show_default=True, help="Records per batch.")
@click.option("--create", is_flag=True, help="Create the partition dir (with partition.metadata) if missing.")
@topic_config_options
@click.option("--json", "as_json", is_flag=True, help="Print the offsets as one JSON object.")
@one_line_errors
def append(
    log_dir: Path,
    topic_partition: str,
    source: IO[str],
    compression: str,
    batch_records: int,
    create: bool,
    config_options: ConfigOptions,
    as_json: bool,
) -> None:
    """Append records to a partition of a log dir that no broker is using. Input is one JSON object per line:
    {"key": str|null, "value": str|null, "headers": [[str, str|null], ...], "timestamp": ms}, all optional
    (key_b64 / value_b64 / headers_b64 carry binary as base64; a missing timestamp is the current time).
    The topic's config (segment.bytes, segment.ms, message.timestamp.type, max.message.bytes, cleanup.policy...)
    comes from the dir's KRaft metadata, --config and --topic-config/--topic-configs, as for `logmgr cleanup`.
    Takes the dir's .lock (exit 3 when held) and fsyncs the data and the recovery point before exiting 0. A
    partition holding invalid bytes a broker's recovery would truncate, or a corrupt index or checkpoint, is
    refused with nothing written (run `logmgr recover` first). Nothing is changed but what the append writes:
    the older producer snapshots a broker's loader deletes stay for the broker's next load. Prints the first and
    last offsets, the files of the partition dir the append created (segments rolled, producer snapshots) and
    any leftover the load removed as a broker's would (a .deleted or .tmp file, an index without its .log).

    \b
    Example:
        printf '{"key":"k1","value":"hello"}\\n' | logmgr append /var/lib/kafka/data orders-0 --compression zstd
    """
    tp = topic_partition_argument(topic_partition)
    partition_dir = log_dir / str(tp)
    missing = Failure(f"{partition_dir}: no such partition dir (use --create to create it)")
    if not create and not partition_dir.is_dir():
        # Before the lock: refusing must leave the dir as it was, without a new .lock file.
        raise missing
    records = list(read_records(source, "stdin" if source is sys.stdin else source.name))
    refuse_links(log_dir, [partition_dir])
    config = build_resolver([log_dir], config_options).resolve(tp.topic).config
    if partition_dir.is_dir():
        # Loading would run a broker's recovery, which cuts invalid bytes: never as a silent side effect.
        (partition,) = scan_log_dir(log_dir, only={tp}).partitions
        if partition.needs_recovery:
            raise Failure(f"{partition.needs_recovery[0]}: run `logmgr recover` first; nothing was written")
    with LogDirLock(log_dir):
        created = not partition_dir.is_dir()
        if created and not create:
            # Removed since the check above, by whoever held the lock.
            raise missing
        files_before = set() if created else {p.name for p in partition_dir.iterdir()}
        codec = CompressionType.from_name(compression)
        first, last = _append_locked(
            log_dir, tp, partition_dir, records, codec, batch_records, config=config, created=created
        )
        files_after = {p.name for p in partition_dir.iterdir()}
    new_files = sorted(files_after - files_before)
    # What loading still removes as a broker's loader would (leftover .deleted/.cleaned/.tmp files, an index without
    # its .log, a snapshot past the log end): never silently.
    removed_files = sorted(files_before - files_after)
    if as_json:
        click.echo(json.dumps({"topic": tp.topic, "partition": tp.partition, "records": len(records),
                               "firstOffset": first, "lastOffset": last, "created": new_files,
                               "removed": removed_files}))
        return
    if records:
        click.echo(f"{tp}: appended {len(records)} record(s) at offsets {first}..{last}")
    else:
        click.echo(f"{tp}: nothing to append")
    if new_files:
        click.echo(f"{partition_dir}: created {', '.join(new_files)}")
    if removed_files:
        click.echo(f"{partition_dir}: removed {', '.join(removed_files)}")


def _append_locked(
    log_dir: Path,
    tp: TopicPartition,
    partition_dir: Path,
    records: list[SimpleRecord],
    compression: CompressionType,
    batch_records: int,
    *,
    config: LogConfig,
    created: bool,
) -> tuple[int | None, int | None]:
    """Load, append, flush, close and checkpoint, with the dir locked by the caller. Only a partition dir created
    here gets a (new, random) topic id: inventing one for an existing dir would contradict the cluster's."""
    recovery_file = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
    recovery_points = recovery_file.read()
    starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read()
    marker = CleanShutdownMarker.read(log_dir)
    # As a broker does at startup: a crash while this command writes must count as an unclean shutdown.
    if marker is not None:
        CleanShutdownMarker.remove(log_dir)
    log = load_log(
        partition_dir,
        config,
        recovery_point=recovery_points.get(tp, 0),
        log_start_offset=starts.get(tp, 0),
        had_clean_shutdown=marker is not None,
        # An offline append changes nothing but what it writes (the broker's next load prunes them).
        remove_stray_snapshots=False,
    )
    first: int | None = None
    last: int | None = None
    try:
        if created:
            log.ensure_partition_metadata()
        for chunk in _chunks(iter(records), batch_records):
            appended = log.append_records(chunk, compression=compression)
            first = appended.first_offset if first is None else first
            last = appended.last_offset
        log.flush()
        recovery_points[tp] = log.recovery_point
    except BaseException:
        log.close()
        if first is None and marker is not None:
            # Nothing was appended (a record the topic's config refuses): the dir stays as clean as it was found.
            marker.write(log_dir)
        raise
    log.close()
    recovery_file.write(recovery_points)
    if marker is not None:
        marker.write(log_dir)
    return first, last
