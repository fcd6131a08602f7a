"""``logmgr read``: records of one partition as JSON lines, read-only (no lock, no file created or changed).

Every batch is decoded as a consumer with ``check.crcs=true`` decodes it: its CRC is checked first, and records
are streamed out of it one at a time within :class:`~segments.records.DecodeLimits`, so a corrupt batch is never
printed and a hostile one cannot exhaust memory.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from checkpoints import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from cli.common import Failure, one_line_errors, topic_partition_argument
from cli.config_options import ConfigOptions, topic_config_options, topic_decode_limits
from logmgr.errors import OffsetOutOfRangeError
from logmgr.key_index import query_segments
from logmgr.log_dirs import readonly_segments
from segments.errors import StorageFormatError
from segments.file_records import FileBatch
from segments.log_segment import LogSegment
from segments.naming import TopicPartition
from segments.records import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    ControlRecordType,
    DecodeLimits,
    Record,
    RecordBatch,
)

F = TypeVar("F", bound=Callable[..., Any])

_ALL = 1 << 62


def parse_time(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 time (UTC when it has no offset) or of a plain integer. O(len)."""
    try:
        return int(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def decode_limit_options(func: F) -> F:
    """The ``--max-record-bytes`` / ``--max-batch-bytes`` options (read into ``max_record_bytes`` and
    ``max_batch_bytes``, None when not given) and the topic config options (``config_options``, see
    :mod:`cli.config_options`) of every command that decodes records: by default a topic's records are decoded
    within the larger of its ``max.message.bytes`` and the defaults (:meth:`DecodeLimits.for_max_message_bytes`)."""
    func = click.option(
        "--max-batch-bytes",
        type=click.IntRange(min=1),
        help="Refuse (as corrupt) a batch whose records take more bytes than this once decompressed [default: the "
        f"larger of the topic's max.message.bytes and {DEFAULT_MAX_BATCH_BYTES}].",
    )(func)
    func = click.option(
        "--max-record-bytes",
        type=click.IntRange(min=1),
        help="Refuse (as corrupt) a record larger than this [default: the larger of the topic's max.message.bytes "
        f"(from the KRaft metadata, --config, --topic-config or --topic-configs) and {DEFAULT_MAX_RECORD_BYTES}].",
    )(func)
    return topic_config_options(func)


class CorruptBatches:
    """What a reader does with a batch that fails its CRC or cannot be decoded: stop with the error (exit 1),
    or with ``skip`` say so on stderr, count it and go on."""

    def __init__(self, limits: DecodeLimits, *, skip: bool) -> None:
        self.limits = limits
        self.skip = skip
        self.skipped = 0

    def records(self, found: FileBatch) -> Iterator[Record]:
        """The batch's records, CRC checked and streamed; nothing (or the records before the damage) when it is
        skipped. O(size) time, O(largest record) memory."""
        try:
            yield from found.iter_records(self.limits)
        except StorageFormatError as err:
            if not self.skip:
                raise
            self.skipped += 1
            click.echo(f"skipped a corrupt batch: {err}", err=True)

    def report(self) -> None:
        """Say on stderr how many batches were skipped, if any. O(1)."""
        if self.skipped:
            click.echo(f"skipped {self.skipped} corrupt batch(es)", err=True)


class _Lines:
    """Output lines written in chunks: one write (and flush) per 512 lines instead of one per record, which was
    most of the cost of printing a batch of millions of small records."""

    _CHUNK = 512

    def __init__(self) -> None:
        self._pending: list[str] = []

    def add(self, line: str) -> None:
        self._pending.append(line)
        if len(self._pending) >= self._CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            click.echo("\n".join(self._pending))
            self._pending.clear()


def _walk(segments: list[LogSegment], from_offset: int) -> Iterator[FileBatch]:
    """Batches holding offsets ``>= from_offset``, in log order, starting at the offset index's entry."""
    bases = [s.base_offset for s in segments]
    first = max(0, bisect.bisect_right(bases, from_offset) - 1)
    for i, segment in enumerate(segments[first:]):
        start = segment.offset_index.lookup(from_offset).position if i == 0 else 0
        for found in segment.batches(start):
            if found.batch.last_offset >= from_offset:
                yield found


def transaction_outcomes(
    batches: Iterator[FileBatch], corrupt: CorruptBatches
) -> tuple[dict[int, list[tuple[int, bool]]], int | None]:
    """Per producer, its end-transaction markers as ``(offset, aborted)`` in offset order, and the first offset of
    the earliest transaction left open (no marker after it), None when all are decided. A control batch is
    decoded through ``corrupt`` (CRC checked). O(batches)."""
    markers: dict[int, list[tuple[int, bool]]] = {}
    open_first: dict[int, int] = {}
    for found in batches:
        batch = found.batch
        if not batch.is_transactional:
            continue
        pid = batch.producer_id
        if batch.is_control:
            first = next(corrupt.records(found), None)
            if first is None:
                continue
            kind = ControlRecordType.parse(first.key)
            if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                markers.setdefault(pid, []).append((batch.base_offset, kind is ControlRecordType.ABORT))
                open_first.pop(pid, None)
        else:
            open_first.setdefault(pid, batch.base_offset)
    return markers, min(open_first.values(), default=None)


def _aborted(batch: RecordBatch, markers: dict[int, list[tuple[int, bool]]]) -> bool:
    """Whether the next marker of the batch's producer after it is an ABORT."""
    ends = markers.get(batch.producer_id, [])
    i = bisect.bisect_right(ends, (batch.base_offset, True))
    return i < len(ends) and ends[i][1]


def _bytes_fields(name: str, data: bytes | None, decode: str, max_bytes: int | None) -> dict[str, object]:
    if data is None:
        return {name: None}
    out: dict[str, object] = {}
    if max_bytes is not None and len(data) > max_bytes:
        # The marker gives the whole size, so a truncated line is never taken for the record.
        out[f"{name}_truncated_from"] = len(data)
        data = data[:max_bytes]
    if decode == "utf8":
        try:
            return {name: data.decode("utf-8"), **out}
        except UnicodeDecodeError:
            pass
    return {f"{name}_b64": base64.b64encode(data).decode("ascii"), **out}


def record_json(
    tp: TopicPartition, batch: RecordBatch, record: Record, decode: str, max_value_bytes: int | None = None
) -> dict[str, object]:
    """One output line: the ``append`` input shape plus topic, partition, offset and timestampType. O(size).

    Header values that are not UTF-8 (or all of them with ``base64``) go to ``headers_b64`` instead of
    ``headers``. A key or value longer than ``max_value_bytes`` is cut to that many bytes and marked with
    ``key_truncated_from`` / ``value_truncated_from`` (its whole size).
    """
    out: dict[str, object] = {
        "topic": tp.topic,
        "partition": tp.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": batch.timestamp_type.label,
    }
    out.update(_bytes_fields("key", record.key, decode, max_value_bytes))
    out.update(_bytes_fields("value", record.value, decode, max_value_bytes))
    headers = _utf8_headers(record) if decode == "utf8" else None
    if headers is not None:
        out["headers"] = headers
    else:
        out["headers_b64"] = [
            [h.key, None if h.value is None else base64.b64encode(h.value).decode("ascii")] for h in record.headers
        ]
    return out


def _utf8_headers(record: Record) -> list[list[str | None]] | None:
    try:
        return [[h.key, None if h.value is None else h.value.decode("utf-8")] for h in record.headers]
    except UnicodeDecodeError:
        return None


def _offset_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """kafka-console-consumer's ``--offset``: a non-negative number, ``earliest`` or ``latest``."""
    if value is None or value in ("earliest", "latest"):
        return value
    try:
        offset = int(value)
    except ValueError:
        offset = -1
    if offset < 0:
        raise click.BadParameter(f"{value!r} is not a non-negative offset, 'earliest' or 'latest'")
    return offset


def log_end_offset(segments: list[LogSegment], log_start: int) -> int:
    """The next offset after the last batch, at least ``log_start`` (a log whose start offset passed its last
    segment is empty there, as Kafka's LogLoader makes it). O(bytes after the last segment's last index entry)."""
    return max(segments[-1].read_next_offset(), log_start) if segments else log_start


@click.command()
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("topic_partition", metavar="TOPIC-P")
@click.option(
    "--offset",
    "--from-offset",
    "offset",
    callback=_offset_option,
    metavar="N|earliest|latest",
    help="First offset to print: a number, earliest (the default: the log start offset of "
    "log-start-offset-checkpoint, also the minimum) or latest (the log end offset).",
)
@click.option("--from-time", help="Start at the first record with this timestamp or later (ISO 8601 or epoch ms).")
@click.option(
    "--key",
    help="Only the records with this key (UTF-8), through the partition's key index (.keyindex files) where it "
    "covers the log; --from-time and --to-time then bound their timestamps.",
)
@click.option("--to-time", help="With --key: only records with this timestamp or earlier (ISO 8601 or epoch ms).")
@click.option(
    "--max-messages", "--max", "max_records", type=click.IntRange(min=0), help="Print at most this many records."
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    help="read_committed skips aborted records and stops at the first open transaction (the last stable "
    "offset); read_uncommitted (the default) prints every record.",
)
@click.option("--committed", is_flag=True, help="The same as --isolation-level read_committed.")
@click.option(
    "--decode",
    type=click.Choice(["utf8", "base64"]),
    default="utf8",
    show_default=True,
    help="utf8 prints key/value as text, falling back to key_b64/value_b64 for bytes that are not UTF-8.",
)
@click.option(
    "--max-value-bytes",
    type=click.IntRange(min=0),
    help="Print at most this many bytes of each key and value; a longer one is cut and marked with "
    "key_truncated_from/value_truncated_from (its whole size).",
)
@click.option(
    "--skip-corrupt",
    is_flag=True,
    help="Skip a batch that fails its CRC or cannot be decoded (each one named on stderr, then counted) "
    "instead of stopping there with exit 1.",
)
@decode_limit_options
@one_line_errors
def read(
    log_dir: Path,
    topic_partition: str,
    offset: int | str | None,
    from_time: str | None,
    max_records: int | None,
    isolation_level: str | None,
    committed: bool,
    decode: str,
    max_value_bytes: int | None,
    skip_corrupt: bool,
    max_record_bytes: int | None,
    max_batch_bytes: int | None,
    config_options: ConfigOptions,
    key: str | None,
    to_time: str | None,
) -> None:
    """Print the records of a partition as JSON lines (topic, partition, offset, timestamp, timestampType, key,
    value, headers), the shape `logmgr append` reads. Control records are skipped. Read-only: segments are
    opened without the lock and nothing is written, so the tail of a live log may be partial. Options are
    kafka-console-consumer's (--offset, --max-messages, --isolation-level); --from-offset, --max and
    --committed are the same options' older names.

    A read that prints no record says why on stderr (exit 0); a start beyond the log end offset is Kafka's
    OffsetOutOfRange (exit 1). Every batch's CRC is checked before its records are printed, as a consumer with
    check.crcs=true does: a batch that fails it, or a record or batch above --max-record-bytes/--max-batch-bytes,
    stops the read with exit 1 naming the file and position (--skip-corrupt skips and counts them instead). Those
    limits default to the topic's max.message.bytes when larger than 64 MiB/256 MiB, read as cleanup reads topic
    configs: the log dir's KRaft metadata, then --config, --topic-configs and --topic-config.

    \b
    Examples:
        logmgr read /var/lib/kafka/data orders-0 --offset 100 --max-messages 10
        logmgr read /var/lib/kafka/data orders-0 --from-time 2024-05-01T12:00:00Z --isolation-level read_committed
    """
    if offset is not None and from_time is not None:
        raise click.UsageError("--offset and --from-time exclude each other")
    if committed and isolation_level == "read_uncommitted":
        raise click.UsageError("--committed and --isolation-level read_uncommitted exclude each other")
    read_committed = committed or isolation_level == "read_committed"
    tp = topic_partition_argument(topic_partition)
    partition_dir = log_dir / str(tp)
    if partition_dir.is_symlink():
        # Like info, the LogManager and the Spark source: a linked dir is not a partition of this log dir.
        raise Failure(f"{partition_dir}: is a symbolic link, not a partition dir of {log_dir}")
    if not partition_dir.is_dir():
        raise Failure(f"{partition_dir}: no such partition dir")
    try:
        min_time = None if from_time is None else parse_time(from_time)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--from-time") from None
    try:
        max_time = None if to_time is None else parse_time(to_time)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--to-time") from None
    if key is None and to_time is not None:
        raise click.UsageError("--to-time needs --key")
    if key is not None and read_committed:
        raise click.UsageError("--key reads read_uncommitted; it cannot be combined with read_committed")
    # Offsets below the checkpointed log start are logically deleted even while their segment remains.
    checkpointed_start = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read().get(tp, 0)
    printed = 0
    limits = topic_decode_limits(config_options, max_record_bytes=max_record_bytes, max_batch_bytes=max_batch_bytes)
    corrupt = CorruptBatches(limits.for_topic(log_dir, tp.topic), skip=skip_corrupt)
    lines = _Lines()
    with readonly_segments(partition_dir) as segments, contextlib.ExitStack() as stack:
        # Lines already decoded are printed before an error (a corrupt batch) is reported.
        stack.callback(lines.flush)
        # As a log load does: the log starts no lower than its first segment.
        log_start = max(checkpointed_start, segments[0].base_offset) if segments else checkpointed_start
        end = log_end_offset(segments, log_start)
        start = end if offset == "latest" else max(offset if isinstance(offset, int) else 0, log_start)
        if start > end:
            raise OffsetOutOfRangeError(
                f"{tp}: offset {start} is out of range (OffsetOutOfRange: the requested offset is not within the "
                f"range of offsets of the log, log start offset {log_start}, log end offset {end})"
            )
        if key is not None:
            printed = _print_by_key(tp, partition_dir, segments, key.encode(), start, end, min_time, max_time,
                                    max_records, decode, max_value_bytes, corrupt)
            corrupt.report()
            if printed == 0 and max_records != 0:
                click.echo(f"no records with key {key!r} at or after offset {start}; log end offset is {end}", err=True)
            return
        markers: dict[int, list[tuple[int, bool]]] = {}
        stable_end: int | None = None
        if read_committed:
            # From the log's first batch on disk, not from ``start``: a transaction opened before ``start`` and
            # still open holds the last stable offset below it (Kafka's firstUnstableOffset, raised to the log
            # start), so read_committed has nothing to give there.
            markers, open_first = transaction_outcomes(_walk(segments, 0), corrupt)
            stable_end = None if open_first is None else max(open_first, log_start)
        for found in _walk(segments, start):
            batch = found.batch
            if max_records is not None and printed >= max_records:
                break
            if stable_end is not None and batch.base_offset >= stable_end:
                break
            if batch.is_control or (min_time is not None and batch.max_timestamp < min_time):
                continue
            if read_committed and batch.is_transactional and _aborted(batch, markers):
                continue
            for record in corrupt.records(found):
                if record.offset < start or (min_time is not None and record.timestamp < min_time):
                    continue
                # Kafka's offsetsForTimes: everything after the first matching record is read in order.
                min_time = None
                lines.add(json.dumps(record_json(tp, batch, record, decode, max_value_bytes)))
                printed += 1
                if max_records is not None and printed >= max_records:
                    break
    corrupt.report()
    if printed == 0 and max_records != 0:
        # An empty stdout alone cannot tell "nothing there" from "wrong partition or offset".
        click.echo(_nothing_read(start, end, from_time, stable_end), err=True)


def _print_by_key(
    tp: TopicPartition,
    partition_dir: Path,
    segments: list[LogSegment],
    key: bytes,
    start: int,
    end: int,
    min_time: int | None,
    max_time: int | None,
    max_records: int | None,
    decode: str,
    max_value_bytes: int | None,
    corrupt: CorruptBatches,
) -> int:
    """Print the records with ``key`` from ``start`` on, through the key index. Returns how many. O(segments +
    chains + records read)."""
    bases = [s.base_offset for s in segments]
    bounds = list(zip(bases, [*bases[1:], end], strict=True))

    def read(first: int, stop: int, _max_bytes: int) -> Iterator[tuple[RecordBatch, Iterator[Record]]]:
        # As in the offset path, every batch the query decodes goes through ``corrupt``: CRC-checked and within
        # the limits, or skipped and counted with --skip-corrupt; none is served corrupt.
        for found in _walk(segments, first):
            if found.batch.base_offset >= stop:
                return
            yield found.batch, corrupt.records(found)

    records = query_segments(
        partition_dir, bounds, read, key, log_start=start, begin_timestamp=min_time, end_timestamp=max_time,
        max_records=_ALL if max_records is None else max_records,
    )
    for record in records:
        found = next(_walk(segments, record.offset))
        click.echo(json.dumps(record_json(tp, found.batch, record, decode, max_value_bytes)))
    return len(records)


def _nothing_read(start: int, end: int, from_time: str | None, stable_end: int | None) -> str:
    """The stderr line of a read that printed no record. O(1)."""
    what = f"no records at or after offset {start}"
    if from_time is not None:
        what += f" with a timestamp at or after {from_time}"
    if stable_end is not None:
        what += f" before the first open transaction (last stable offset {stable_end})"
    return f"{what}; log end offset is {end}"
