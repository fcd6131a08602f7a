"""``logmgr dump``: Kafka's ``kafka-dump-log`` output for segment, index, snapshot and checkpoint files, with
Kafka's options (``--files a,b``, the internal-topic decoders, ``--max-bytes``, ``--index-sanity-check`` ...)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import click
from click.decorators import FC

from cli.common import one_line_errors
from cli.config_options import ConfigOptions, topic_decode_limits
from cli.read_cmd import decode_limit_options
from logmgr.dump import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MAX_BYTES_UNLIMITED,
    DumpLine,
    DumpOptions,
    RecordDecoder,
    dump_files,
)

_CHUNK_LINES = 512
_JSON = json.JSONEncoder(separators=(",", ":"))
_EXIT_USAGE = 2

STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"
"""Kafka's default ``--key-decoder-class``/``--value-decoder-class``: UTF-8 text, malformed bytes replaced."""
_STRING_DECODERS = (STRING_DECODER, "kafka.serializer.StringDecoder")
"""The string decoder's name since Kafka 3.8 and the one before (still accepted until 4.0): one decoder."""

_DECODER_FLAGS = {
    "offsets_decoder": ("--offsets-decoder", RecordDecoder.OFFSETS),
    "transaction_log_decoder": ("--transaction-log-decoder", RecordDecoder.TRANSACTION_LOG),
    "cluster_metadata_decoder": ("--cluster-metadata-decoder", RecordDecoder.CLUSTER_METADATA),
}
_UNSUPPORTED_DECODERS = {
    "remote_log_metadata_decoder": (
        "--remote-log-metadata-decoder is not supported: Kafka prints the Java toString() of its "
        "RemoteLogMetadata classes, which logmgr does not reproduce; use --print-data-log or --json for the raw "
        "records"
    ),
    "share_group_state_decoder": (
        "--share-group-state-decoder is not supported: logmgr has no decoder for __share_group_state records; use "
        "--print-data-log or --json for the raw records"
    ),
}


class UsageRefused(click.ClickException):
    """A usage error as one line on stderr (``Error: ...``) and exit status 2, without click's usage banner."""

    exit_code = _EXIT_USAGE


def _decoder_class(value: str | None, option: str) -> bool:
    """Whether a ``--key-decoder-class``/``--value-decoder-class`` was given (Kafka then prints the data); only
    the string decoder exists here, since Java classes cannot be loaded. O(1)."""
    if value is None:
        return False
    if value not in _STRING_DECODERS:
        raise UsageRefused(
            f"{option} {value}: logmgr cannot load Java decoder classes; only {STRING_DECODER} (UTF-8 text, the "
            "default) is available"
        )
    return True


def _decoder_class_option(side: str) -> Callable[[FC], FC]:
    """Kafka's ``--key-decoder-class`` or ``--value-decoder-class`` option (``side``: key or value), checked by
    :func:`_decoder_class`. O(1)."""
    return click.option(
        f"--{side}-decoder-class",
        is_flag=False,
        flag_value=STRING_DECODER,
        default=None,
        metavar="CLASS",
        help=f"Kafka's {side} decoder; only {STRING_DECODER} (the default) exists here. Implies --print-data-log.",
    )


def _files(file_lists: tuple[str, ...], files: tuple[Path, ...]) -> list[str | Path]:
    """``--files`` values in the order given, each split at commas as Kafka does (empty names dropped; names
    kept as typed, so "Dumping ./x.log" reads as Kafka's), then the positional FILES. O(total length)."""
    paths: list[str | Path] = [name for value in file_lists for name in value.split(",") if name]
    paths.extend(files)
    if not paths:
        raise UsageRefused("no file to dump: give FILES or --files FILE1,FILE2,...")
    return paths


@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--files",
    "file_lists",
    multiple=True,
    metavar="FILE1,FILE2,...",
    help="Kafka's way to name the files: a comma-separated list, repeatable; dumped in the order given, before "
    "any positional FILES.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per line, each with a 'type' (file, batch, record, indexEntry, timeIndexEntry, "
    "sanityCheckPassed, abortedTxn, producerSnapshotEntry, offsetCheckpointEntry, leaderEpochEntry, "
    "partitionMetadata, metaProperties, cleanShutdown, invalidBytes, error, and the final reports "
    "indexMismatch, timeIndexMismatch, timeIndexOutOfOrder, timeIndexOffsetNotFound, nonConsecutiveOffsets). "
    "Records carry keySize, valueSize and headerKeys; key, value and headers (base64) only with "
    "--print-data-log; decodedKey and decodedPayload (JSON values) with a decoder.",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Print every record of every batch and report non-consecutive offsets.",
)
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Also print record keys and values (UTF-8, malformed bytes replaced); implies --deep-iteration. "
    "Automatically set if any decoder option is specified.",
)
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Parse the records as __consumer_offsets keys and values (implies --print-data-log).",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Parse the records as __transaction_state metadata (implies --print-data-log).",
)
@click.option(
    "--cluster-metadata-decoder",
    is_flag=True,
    help="Parse the records as KRaft cluster metadata records (implies --print-data-log).",
)
@click.option(
    "--skip-record-metadata",
    is_flag=True,
    help="Print only the key and payload of each record, not its offset, timestamp, sizes and headers.",
)
@click.option(
    "--index-sanity-check",
    is_flag=True,
    help="For .index and .timeindex files, only run the check a broker runs at startup to decide whether to "
    "rebuild the index, and print '<file> passed sanity check.'.",
)
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="Check .index and .timeindex entries against the .log without printing the entries.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(0, MAX_BYTES_UNLIMITED),
    default=MAX_BYTES_UNLIMITED,
    show_default=True,
    metavar="SIZE",
    help="Read only the batches wholly inside the first SIZE bytes of each .log (and snapshot); below the "
    "default, invalid bytes at the end are not reported (Kafka's rule).",
)
@click.option(
    "--max-message-size",
    type=click.IntRange(0, MAX_BYTES_UNLIMITED),
    default=DEFAULT_MAX_MESSAGE_SIZE,
    show_default=True,
    metavar="SIZE",
    help="Largest batch (log overhead included) an .index entry may point at; a bigger one is reported as an "
    "error.",
)
@click.option(
    "--max-value-bytes",
    type=click.IntRange(min=0),
    help="Print at most this many bytes of each key and payload; a longer one is cut and marked with its whole "
    "size ('...[truncated from N bytes]', or keyTruncatedFrom/valueTruncatedFrom in --json).",
)
@decode_limit_options
@_decoder_class_option("key")
@_decoder_class_option("value")
@click.option(
    "--remote-log-metadata-decoder",
    is_flag=True,
    help="Kafka's tiered-storage metadata decoder: refused (exit 2), not supported.",
)
@click.option(
    "--share-group-state-decoder",
    is_flag=True,
    help="Kafka's __share_group_state decoder: refused (exit 2), not supported.",
)
@one_line_errors
def dump(
    files: tuple[Path, ...],
    file_lists: tuple[str, ...],
    as_json: bool,
    deep_iteration: bool,
    print_data_log: bool,
    skip_record_metadata: bool,
    index_sanity_check: bool,
    verify_index_only: bool,
    max_bytes: int,
    max_message_size: int,
    max_value_bytes: int | None,
    max_record_bytes: int | None,
    max_batch_bytes: int | None,
    config_options: ConfigOptions,
    key_decoder_class: str | None,
    value_decoder_class: str | None,
    **decoder_flags: bool,
) -> None:
    """Print what kafka-dump-log prints for .log segments, KRaft .checkpoint snapshots (bootstrap.checkpoint
    included), .index, .timeindex, .txnindex and producer .snapshot files, with Kafka's field names and order;
    also the offset checkpoints, leader-epoch-checkpoint, partition.metadata, meta.properties and
    .kafka_cleanshutdown. Kafka's options work as in kafka-dump-log (`--files a,b`, the decoders,
    --skip-record-metadata, --max-bytes, --index-sanity-check, --verify-index-only). Index entries are checked
    against the segment's .log; mismatches, time-index problems and non-consecutive offsets are reported on
    stderr after the last file, as Kafka does.

    Corrupt or unreadable input is reported on stderr with its file and byte position (or line) and the dump
    goes on; the exit status is then 1 (also for a batch failing its CRC, invalid bytes at the end of a .log or
    an index failing --index-sanity-check). Usage errors exit 2. Records are decoded within the larger of their
    topic's max.message.bytes (from the KRaft metadata of the log dir holding the file, --config, --topic-config
    or --topic-configs) and 64 MiB per record, 256 MiB per batch, unless --max-record-bytes/--max-batch-bytes
    say otherwise.

    \b
    Examples:
        logmgr dump /var/lib/kafka/data/orders-0/00000000000000000000.log --deep-iteration --print-data-log
        logmgr dump --files 00000000000000000000.index,00000000000000000000.timeindex --verify-index-only
        logmgr dump --offsets-decoder --files /var/lib/kafka/data/__consumer_offsets-7/00000000000000000000.log
    """
    for name, message in _UNSUPPORTED_DECODERS.items():
        if decoder_flags.pop(name):
            raise UsageRefused(message)
    chosen = [flag for name, flag in _DECODER_FLAGS.items() if decoder_flags[name]]
    if len(chosen) > 1:
        raise UsageRefused(
            f"{' and '.join(flag for flag, _ in chosen)} exclude each other: choose one decoder"
        )
    decoder_class = _decoder_class(key_decoder_class, "--key-decoder-class")
    decoder_class = _decoder_class(value_decoder_class, "--value-decoder-class") or decoder_class
    options = DumpOptions(
        deep_iteration=deep_iteration,
        print_data_log=print_data_log or decoder_class,
        as_json=as_json,
        decoder=chosen[0][1] if chosen else None,
        skip_record_metadata=skip_record_metadata,
        index_sanity_only=index_sanity_check,
        verify_index_only=verify_index_only,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        max_value_bytes=max_value_bytes,
        segment_limits=topic_decode_limits(
            config_options, max_record_bytes=max_record_bytes, max_batch_bytes=max_batch_bytes
        ).for_segment,
    )
    _print(dump_files(_files(file_lists, files), options))


def _print(lines: Iterable[DumpLine]) -> None:
    """Write the dump's lines (stdout in chunks, stderr at once, in order); exit 1 when any marks a problem."""
    failed = False
    # Consecutive stdout lines go out in chunks: one click.echo per line dominates the run time of deep dumps.
    pending: list[str] = []

    def flush() -> None:
        if pending:
            _echo("\n".join(pending), err=False)
            pending.clear()

    # A reader going away (`| head`) raises BrokenPipeError: the group's handler ends the process quietly (141).
    for line in lines:
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
