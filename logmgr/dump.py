"""What Kafka's ``kafka-dump-log`` (``kafka.tools.DumpLogSegments``) prints, as text lines or JSON-ready dicts.

:func:`dump_files` dumps ``.log`` segments and KRaft ``.checkpoint`` snapshots (``bootstrap.checkpoint``
included), ``.index``, ``.timeindex``, ``.txnindex`` and producer-state ``.snapshot`` files with Kafka's field
names and order (``kafka-format.md`` §8), plus the checkpoint and metadata files Kafka's tool ignores
(offset checkpoints, ``leader-epoch-checkpoint``, ``partition.metadata``, ``meta.properties``,
``.kafka_cleanshutdown``) in the same ``name: value`` style.

Like Kafka, the reports gathered while dumping (offset-index entries that do not point at the batch ending at
their offset, time-index disagreements, non-consecutive record offsets under deep iteration) come after the last
file, on stderr. Unlike Kafka, corrupt input never stops the run: the error is reported with its file and byte
position, the dump goes on with the next batch or file, and the line carries ``problem=True`` so a caller can
fail at the end. Deliberate differences from Kafka: reports list pairs in file order (Kafka's come out reversed
and in hash order across files); an index whose ``.log`` is missing still has its entries printed; a position
in an offset index that holds no complete batch is reported as a mismatch with log offset -1 instead of a crash
(one holding a batch above ``max_message_size`` is an error); a record a decoder cannot parse where Kafka's parser
throws is an error naming the batch and record offset; ``index_sanity_only`` also fails an index shorter than
one entry, which Kafka's tool calls empty.

:class:`DumpOptions` carries kafka-dump-log's options: the decoders (``segments.record_decoders``, Kafka's
``MessageParser`` strings), ``skip_record_metadata``, ``max_bytes``, ``index_sanity_only``,
``verify_index_only``, ``max_message_size``. KRaft control records are read by the schema engine
(``segments.kafka_messages``) and printed as Kafka's JSON converters write them.

With ``as_json`` every stdout line is one dict with a ``type``: ``file`` (``path``, ``kind`` and what the name
carries), ``batch`` (:func:`segments.describe.batch_summary` + ``isValid``), ``record``
(:func:`segments.describe.record_summary` + ``keySize``, ``valueSize``, ``headerKeys``; ``key``, ``value`` and
``headers`` (base64) only with ``print_data_log`` or a decoder; ``decodedKey`` and ``decodedPayload`` with a
decoder, Kafka's JSON as JSON values and text formats as strings; ``isValid`` for magic 0/1; ``controlData`` for
KRaft control records; only ``type``, ``offset`` and those data fields under ``skip_record_metadata``),
``indexEntry``, ``timeIndexEntry``, ``sanityCheckPassed``, ``abortedTxn``, ``producerSnapshotEntry``,
``offsetCheckpointEntry``, ``leaderEpochEntry``, ``partitionMetadata``, ``metaProperties``, ``cleanShutdown``,
``invalidBytes``, ``error`` (also written as text on stderr) and the final reports ``indexMismatch``,
``timeIndexMismatch``, ``timeIndexOutOfOrder``, ``timeIndexOffsetNotFound``, ``nonConsecutiveOffsets``.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import struct
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE, parse_clean_shutdown
from checkpoints.kafka_uuid import uuid_to_kafka
from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, parse_leader_epoch_checkpoint
from checkpoints.meta_properties import META_PROPERTIES_FILE, parse_meta_properties
from checkpoints.offset_checkpoint import OFFSET_CHECKPOINT_FILES, parse_offset_checkpoint
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, parse_partition_metadata
from checkpoints.producer_snapshot import ProducerSnapshotEntry, parse_producer_snapshot
from segments import kafka_schemas
from segments.compression import CompressionType
from segments.describe import b64, batch_summary, control_info, record_summary
from segments.errors import CorruptRecordError, InvalidOffsetError, RecordTooLargeError, StorageFormatError
from segments.file_records import FileBatch, FileRecords
from segments.kafka_messages import MessageFormatError, json_text, message_json, read_message
from segments.legacy import RECORD_OVERHEAD_V0
from segments.naming import (
    CHECKPOINT_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
    parse_kraft_snapshot_name,
)
from segments.offset_index import OffsetIndex
from segments.record_decoders import (
    parse_cluster_metadata_record,
    parse_offsets_record,
    parse_transaction_log_record,
)
from segments.records import (
    DEFAULT_DECODE_LIMITS,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    ControlRecordType,
    DecodeLimits,
    Record,
)
from segments.time_index import TimeIndex
from segments.transaction_index import TransactionIndex

BOOTSTRAP_CHECKPOINT_FILE = "bootstrap.checkpoint"
"""KRaft's binary bootstrap snapshot (``BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME``)."""

RECORD_INDENT = "|"
_INT32_MAX = 2**31 - 1
MAX_BYTES_UNLIMITED = _INT32_MAX
"""Kafka's ``--max-bytes`` default (``Integer.MAX_VALUE``): the whole file, trailing invalid bytes reported."""
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Kafka's ``--max-message-size`` default."""

# KRaft control records Kafka's tool prints as "<label> <JSON>", and their schemas.
_KRAFT_CONTROL = {
    ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeader", kafka_schemas.SNAPSHOT_HEADER_RECORD),
    ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooter", kafka_schemas.SNAPSHOT_FOOTER_RECORD),
    ControlRecordType.KRAFT_VERSION: ("KRaftVersion", kafka_schemas.KRAFT_VERSION_RECORD),
    ControlRecordType.KRAFT_VOTERS: ("KRaftVoters", kafka_schemas.VOTERS_RECORD),
}

# Kinds whose file name starts with the segment base offset.
_SEGMENT_KINDS = ("log", "index", "timeindex", "txnindex")


class RecordDecoder(enum.Enum):
    """Kafka's decoders of internal-topic payloads (``--offsets-decoder``, ``--transaction-log-decoder``,
    ``--cluster-metadata-decoder``): each maps a record's key and value to the key and payload strings Kafka's
    ``MessageParser`` prints."""

    OFFSETS = "offsets"
    TRANSACTION_LOG = "transactionLog"
    CLUSTER_METADATA = "clusterMetadata"


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """kafka-dump-log's options, with Kafka's defaults, plus ``as_json``.

    ``print_data_log`` and any ``decoder`` print record keys and payloads; either implies deep iteration, as in
    Kafka. ``skip_record_metadata`` prints only that key/payload part of each record. ``index_sanity_only`` runs
    only the broker's startup sanity check on ``.index``/``.timeindex`` files; ``verify_index_only`` checks them
    against the ``.log`` without printing their entries. ``max_bytes`` limits the bytes of each ``.log`` (and
    KRaft snapshot) whose batches are read: only batches wholly inside the first ``max_bytes`` are dumped, and
    trailing invalid bytes are reported only when it is left at Kafka's default (``Int.MaxValue``).
    ``max_message_size`` is the largest batch (log overhead included) an offset-index entry may point at.
    Records are streamed out of each batch within ``limits``, or within ``segment_limits(path)`` when given (the
    limits of the topic of the ``.log`` at ``path``): a record or batch above them is reported as corrupt.
    ``max_value_bytes`` cuts each printed key and payload to that many bytes, with a marker giving the whole size.
    """

    deep_iteration: bool = False
    print_data_log: bool = False
    as_json: bool = False
    decoder: RecordDecoder | None = None
    skip_record_metadata: bool = False
    index_sanity_only: bool = False
    verify_index_only: bool = False
    max_bytes: int = MAX_BYTES_UNLIMITED
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    limits: DecodeLimits = DEFAULT_DECODE_LIMITS
    max_value_bytes: int | None = None
    segment_limits: Callable[[Path], DecodeLimits] | None = None

    @property
    def print_data(self) -> bool:
        """Whether record keys and payloads are printed. O(1)."""
        return self.print_data_log or self.decoder is not None

    @property
    def deep(self) -> bool:
        """Whether records are iterated. O(1)."""
        return self.deep_iteration or self.print_data


@dataclass(frozen=True, slots=True)
class DumpLine:
    """One output line: text, or a dict to print as one JSON line; ``problem`` marks corrupt or unreadable
    input (the command exits 1 when any line has it)."""

    content: str | dict[str, Any]
    stderr: bool = False
    problem: bool = False


_NAMED_KINDS = {
    CLEAN_SHUTDOWN_FILE: "cleanShutdown",
    LEADER_EPOCH_CHECKPOINT_FILE: "leaderEpochCheckpoint",
    PARTITION_METADATA_FILE: "partitionMetadata",
    META_PROPERTIES_FILE: "metaProperties",
    BOOTSTRAP_CHECKPOINT_FILE: "bootstrapSnapshot",
    **dict.fromkeys(OFFSET_CHECKPOINT_FILES, "offsetCheckpoint"),
}
_SUFFIX_KINDS = {
    LOG_SUFFIX: "log",
    CHECKPOINT_SUFFIX: "kraftSnapshot",
    INDEX_SUFFIX: "index",
    TIME_INDEX_SUFFIX: "timeindex",
    TXN_INDEX_SUFFIX: "txnindex",
    SNAPSHOT_SUFFIX: "producerSnapshot",
}


def file_kind(name: str) -> str:
    """What a file name is for :func:`dump_files`, Kafka's dispatch on the last suffix first extended with the
    checkpoint and metadata files: ``log``, ``kraftSnapshot``, ``bootstrapSnapshot``, ``index``, ``timeindex``,
    ``txnindex``, ``producerSnapshot``, ``offsetCheckpoint``, ``leaderEpochCheckpoint``, ``partitionMetadata``,
    ``metaProperties``, ``cleanShutdown`` or ``unknown``. O(len(name))."""
    if name in _NAMED_KINDS:
        return _NAMED_KINDS[name]
    dot = name.rfind(".")
    return _SUFFIX_KINDS.get(name[dot:], "unknown") if dot >= 0 else "unknown"


def dump_files(
    paths: Iterable[str | os.PathLike[str]], options: DumpOptions
) -> Generator[DumpLine, None, None]:
    """Dump every file in order, then the reports gathered on the way. O(total bytes of the files).

    Lazy: files are read as lines are consumed, and closing the generator closes the open file. Never raises
    for bad content or unreadable files: such problems become lines with ``problem=True``.
    """
    return _Dumper(options).run(paths)


def kraft_control_json(kind: ControlRecordType, value: bytes | None) -> dict[str, Any]:
    """The value of a KRaft control record (SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS) as
    Kafka's generated JSON converter writes it. O(len(value)).

    Kafka reads the value at the schema's current version (0) and writes the JSON at the version the record
    carries in its ``version`` field. Raises :class:`CorruptRecordError` for a value that does not decode (its
    byte position inside the value in the message), and ``ValueError`` for another control type.
    """
    if kind not in _KRAFT_CONTROL:
        raise ValueError(f"{kind.name} is not a KRaft control record with a JSON form")
    schema = _KRAFT_CONTROL[kind][1]
    try:
        message, _ = read_message(schema, 0, b"" if value is None else value)
    except MessageFormatError as err:
        # Positions inside a record value are no file positions: the caller locates the batch.
        raise CorruptRecordError(f"control record value: {err.message} (byte {err.position})") from None
    return message_json(schema, message["version"], message)


class _Parser(Protocol):
    def __call__(
        self, key: bytes | None, value: bytes | None, *, offset: int = -1
    ) -> tuple[str | None, str | None]: ...


_DECODERS: dict[RecordDecoder, _Parser] = {
    RecordDecoder.OFFSETS: parse_offsets_record,
    RecordDecoder.TRANSACTION_LOG: parse_transaction_log_record,
    RecordDecoder.CLUSTER_METADATA: parse_cluster_metadata_record,
}

_RECORD_DATA_FIELDS = frozenset({"type", "offset", "key", "value", "headers", "decodedKey", "decodedPayload"})
"""What a JSON record keeps under ``skip_record_metadata``: the offset to tell records apart, and the data."""


def _json_value(text: str | None) -> Any:
    """A decoder's string as a JSON value: the JSON object Kafka's converters wrote, else the string itself
    (text formats, ``<DELETE>``, error notes). O(len(text))."""
    if text is None or not text.startswith("{"):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _string(data: bytes) -> str:
    """Kafka's ``StringDecoder``: UTF-8 with malformed input replaced."""
    return bytes(data).decode("utf-8", errors="replace")


def _header_key(key: str) -> str:
    """A header key as Kafka shows it: the record layer keeps undecodable bytes as surrogate escapes, Kafka's
    reader replaces them."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")


def _to_int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence`` (wraps below 0 to ``Int.MAX``), in Java int arithmetic."""
    if sequence < decrement:
        return _to_int32(_INT32_MAX - (decrement - sequence) + 1)
    return _to_int32(sequence - decrement)


def _locate(err: StorageFormatError, path: str, batch_position: int) -> StorageFormatError:
    """``err`` raised inside the batch at ``batch_position`` of ``path``, with an absolute position."""
    if err.position is None:
        return type(err)(err.message, path=path, position=batch_position)
    return err.at(path, position_base=batch_position)


def _batch_at(records: FileRecords, position: int, max_message_size: int | None = None) -> FileBatch | None:
    """The batch starting at ``position`` under Kafka's file rule (None past the last complete batch), reading
    only that batch. A complete batch larger than ``max_message_size`` bytes (log overhead included) raises
    RecordTooLargeError: Kafka's ``dumpIndex`` reads a slice of that size there and finds no batch. O(batch
    size). A negative position (a damaged index entry) holds no batch."""
    if position < 0:
        return None
    prefix = records.read(position, LOG_OVERHEAD)
    if len(prefix) < LOG_OVERHEAD:
        return None
    (size,) = struct.unpack_from(">i", prefix, 8)
    total = LOG_OVERHEAD + size
    if max_message_size is not None and max_message_size < total <= records.size_in_bytes - position:
        raise RecordTooLargeError(
            f"batch of {total} bytes is larger than the maximum message size {max_message_size}",
            path=str(records.path),
            position=position,
        )
    # A size below the minimum still gets enough room for the walker to see it and raise.
    return next(records.batches(position, position + LOG_OVERHEAD + max(size, RECORD_OVERHEAD_V0)), None)


def _sibling(path: str, suffix: str) -> str:
    """``<dir>/<text before the first '.'><suffix>``: the segment file Kafka pairs with an index."""
    directory, name = os.path.split(path)
    return os.path.join(directory, name.split(".", 1)[0] + suffix)


@dataclass
class _Reports:
    """What Kafka prints after the last file, keyed by absolute path, pairs in file order."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


_MAX_LISTED_GAPS = 10_000
"""Non-consecutive offset pairs listed per file; a hostile batch can hold tens of millions of them, so the rest
are only counted (Kafka's tool keeps them all)."""


@dataclass
class _OffsetGaps:
    """Kafka's deep-iteration check: each record offset should follow the previous one by exactly 1."""

    previous: int | None = None
    gaps: list[tuple[int, int]] = field(default_factory=list)
    unlisted: int = 0

    def see(self, offset: int) -> None:
        if self.previous is not None and offset != self.previous + 1:
            if len(self.gaps) < _MAX_LISTED_GAPS:
                self.gaps.append((self.previous, offset))
            else:
                self.unlisted += 1
        self.previous = offset


def _add(report: dict[str, list[tuple[int, int]]], path: str, pairs: list[tuple[int, int]]) -> None:
    if pairs:
        report.setdefault(os.path.abspath(path), []).extend(pairs)


class _Dumper:
    def __init__(self, options: DumpOptions) -> None:
        self._opts = options
        self._json = options.as_json
        self._reports = _Reports()

    def run(self, paths: Iterable[str | os.PathLike[str]]) -> Generator[DumpLine, None, None]:
        for path in paths:
            yield from self._file(os.fspath(path))
        yield from self._final_reports()

    # -- output helpers -------------------------------------------------------------------------------------

    def _line(self, text: str, obj: dict[str, Any], *, problem: bool = False) -> DumpLine:
        return DumpLine(obj if self._json else text, problem=problem)

    def _error(self, err: StorageFormatError) -> Iterator[DumpLine]:
        if self._json:
            yield DumpLine({"type": "error", **err.to_dict()}, problem=True)
        yield DumpLine(str(err), stderr=True, problem=True)

    def _os_error(self, path: str, err: OSError) -> Iterator[DumpLine]:
        where = os.fspath(err.filename) if err.filename is not None else path
        message = err.strerror or str(err)
        if self._json:
            yield DumpLine(
                {"type": "error", "file": where, "position": None, "line": None, "error": message},
                problem=True,
            )
        yield DumpLine(f"{where}: {message}", stderr=True, problem=True)

    # -- dispatch -------------------------------------------------------------------------------------------

    def _file(self, path: str) -> Iterator[DumpLine]:
        name = os.path.basename(path)
        kind = file_kind(name)
        name_error: StorageFormatError | None = None
        try:
            fields = _name_fields(kind, name, path)
        except StorageFormatError as err:
            fields, name_error = {}, err
        yield self._line(f"Dumping {path}", {"type": "file", "path": path, "kind": kind, **fields})
        try:
            os.stat(path)
            if kind == "unknown":
                yield DumpLine(f"Ignoring unknown file {path}", stderr=True)
                return
            if not os.path.isfile(path):
                # A directory, or a FIFO whose open would block.
                raise OSError(0, "not a regular file", path)
            if name_error is not None:
                raise name_error
            yield from self._dump_kind(path, kind, fields)
        except StorageFormatError as err:
            yield from self._error(err if err.path is not None else err.at(path))
        except OSError as err:
            yield from self._os_error(path, err)

    def _dump_kind(self, path: str, kind: str, fields: dict[str, Any]) -> Iterator[DumpLine]:
        if kind == "log":
            if not self._json:
                yield DumpLine(f"Log starting offset: {fields['baseOffset']}")
            yield from self._dump_log(path)
        elif kind == "kraftSnapshot":
            if not self._json:
                yield DumpLine(f"Snapshot end offset: {fields['endOffset']}, epoch: {fields['epoch']}")
            yield from self._dump_log(path)
        elif kind == "bootstrapSnapshot":
            if not self._json:
                yield DumpLine("KRaft bootstrap snapshot")
            yield from self._dump_log(path)
        elif kind == "index":
            yield from self._dump_index(path, fields["baseOffset"])
        elif kind == "timeindex":
            yield from self._dump_time_index(path, fields["baseOffset"])
        elif kind == "txnindex":
            yield from self._dump_txn_index(path, fields["baseOffset"])
        elif kind == "producerSnapshot":
            yield from self._dump_producer_snapshot(path)
        else:
            yield from self._dump_text_file(path, kind)

    # -- .log and KRaft .checkpoint -------------------------------------------------------------------------

    def _dump_log(self, path: str) -> Iterator[DumpLine]:
        valid_bytes = 0
        # The topic's limits are looked up (its configs read) only when records are decoded.
        topic_limits = self._opts.segment_limits if self._opts.deep else None
        limits = self._opts.limits if topic_limits is None else topic_limits(Path(path))
        gaps = _OffsetGaps()
        with FileRecords(path) as records:
            # Kafka reads a slice of the first max_bytes: a batch crossing that limit is not read.
            size = min(records.size_in_bytes, self._opts.max_bytes)
            batches = records.batches(0, size)
            while True:
                try:
                    found = next(batches, None)
                except StorageFormatError as err:
                    yield from self._error(err)
                    break
                if found is None:
                    break
                yield from self._batch_lines(path, found, gaps, limits)
                valid_bytes = found.end_position
        _add(self._reports.non_consecutive, path, gaps.gaps)
        if gaps.unlisted:
            yield self._line(
                f"{gaps.unlisted} more non-consecutive offsets in {path} are not listed",
                {"type": "nonConsecutiveOffsetsNotListed", "path": path, "count": gaps.unlisted},
            )
        trailing = size - valid_bytes
        # Under a --max-bytes limit the cut-off batch is expected, so Kafka reports nothing.
        if trailing > 0 and self._opts.max_bytes == MAX_BYTES_UNLIMITED:
            yield self._line(
                f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}",
                {"type": "invalidBytes", "path": path, "position": valid_bytes, "size": trailing},
                problem=True,
            )

    def _batch_lines(
        self, path: str, found: FileBatch, gaps: _OffsetGaps, limits: DecodeLimits
    ) -> Iterator[DumpLine]:
        """The batch line, then (deep iteration) one line per record; a batch or record that cannot be decoded
        gives an error and the dump goes on with what follows."""
        batch = found.batch
        try:
            valid = batch.is_valid()
            if self._json:
                content: str | dict[str, Any] = {"type": "batch", **batch_summary(found), "isValid": valid}
            else:
                content = self._batch_text(found, valid)
        except StorageFormatError as err:
            yield from self._error(_locate(err, path, found.position))
            return
        yield DumpLine(content, problem=not valid)
        if not self._opts.deep:
            return
        # Kafka's tool prints the records of a batch failing its CRC too (marked isvalid: false), so the CRC is
        # not checked here; records come one at a time, and an error ends the batch's records.
        records = found.iter_records(limits, check_crc=False)
        while True:
            try:
                record = next(records, None)
            except StorageFormatError as err:
                yield from self._error(err)
                return
            if record is None:
                return
            gaps.see(record.offset)
            try:
                if self._json:
                    content = self._record_json(found, record, valid)
                else:
                    content = self._record_text(found, record, valid)
            except StorageFormatError as err:
                yield from self._error(_locate(err, path, found.position))
                continue
            yield DumpLine(content)

    @staticmethod
    def _batch_text(found: FileBatch, valid: bool) -> str:
        batch = found.batch
        if batch.magic >= MAGIC_V2:
            head = (
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count_records()} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {_java_bool(batch.is_transactional)} isControl: {_java_bool(batch.is_control)} "
                f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}"
            )
        else:
            head = f"offset: {batch.last_offset}"
        return (
            f"{head} position: {found.position} {batch.timestamp_type.label}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression.name} "
            f"crc: {batch.checksum} isvalid: {_java_bool(valid)}"
        )

    def _record_text(self, found: FileBatch, record: Record, batch_valid: bool) -> str:
        """Kafka's record line. Without metadata it keeps Kafka's quirks: the indent only comes with a key (a
        key-less payload starts with a space), and a control record is an empty line."""
        batch = found.batch
        parts = []
        separator = f"{RECORD_INDENT} "
        if not self._opts.skip_record_metadata:
            parts.append(
                f"{RECORD_INDENT} offset: {record.offset} {batch.timestamp_type.label}: {record.timestamp} "
                f"keySize: {_size(record.key)} valueSize: {_size(record.value)}"
            )
            separator = " "
            if batch.magic >= MAGIC_V2:
                parts.append(
                    f" sequence: {record.sequence} "
                    f"headerKeys: [{','.join(_header_key(h.key) for h in record.headers)}]"
                )
            else:
                # The closing brace after the crc is in Kafka's output too.
                parts.append(
                    f" isValid: {_java_bool(_legacy_record_valid(found, batch_valid))} crc: {record.checksum}}}"
                )
            if batch.is_control:
                parts.append(" " + _control_text(record))
        if self._opts.print_data and not batch.is_control:
            key, payload = self._parse(record)
            if key is not None:
                parts.append(f"{separator}key: {key}")
            if payload is not None:
                parts.append(f" payload: {payload}")
        return "".join(parts)

    def _parse(self, record: Record) -> tuple[str | None, str | None]:
        """The key and payload strings Kafka's message parser gives: UTF-8 text by default (its
        ``StringDecoder``), else the chosen decoder's. O(record size)."""
        decoder = self._opts.decoder
        if decoder is None:
            return self._shown(record.key), self._shown(record.value)
        try:
            return _DECODERS[decoder](record.key, record.value, offset=record.offset)
        except StorageFormatError as err:
            # Where Kafka's parser throws. The decoder's position is inside the key or value, no file position:
            # the caller locates the batch.
            inside = "" if err.position is None else f" (byte {err.position} of the key or value)"
            raise CorruptRecordError(
                f"{decoder.value} decoder, record at offset {record.offset}: {err.message}{inside}"
            ) from None

    def _shown(self, data: bytes | None) -> str | None:
        """A key or payload as printed: Kafka's string, cut past ``max_value_bytes`` with a marker. O(shown)."""
        if data is None:
            return None
        limit = self._opts.max_value_bytes
        if limit is not None and len(data) > limit:
            return f"{_string(data[:limit])}...[truncated from {len(data)} bytes]"
        return _string(data)

    def _record_json(self, found: FileBatch, record: Record, batch_valid: bool) -> dict[str, Any]:
        summary = record_summary(found, record)
        limit = self._opts.max_value_bytes if self._opts.print_data else None
        for name, data in (("key", record.key), ("value", record.value)):
            if limit is not None and data is not None and len(data) > limit:
                summary[name] = b64(data[:limit])
                summary[f"{name}TruncatedFrom"] = len(data)
        out: dict[str, Any] = {
            "type": "record",
            **summary,
            "keySize": _size(record.key),
            "valueSize": _size(record.value),
            "headerKeys": [_header_key(header.key) for header in record.headers],
        }
        if not self._opts.print_data:
            del out["key"], out["value"], out["headers"]
        if found.batch.magic < MAGIC_V2:
            out["isValid"] = _legacy_record_valid(found, batch_valid)
        if summary["controlType"] is not None:
            kind = ControlRecordType[summary["controlType"]]
            if kind in _KRAFT_CONTROL:
                out["controlData"] = kraft_control_json(kind, record.value)
        elif self._opts.decoder is not None:
            key, payload = self._parse(record)
            out["decodedKey"] = _json_value(key)
            out["decodedPayload"] = _json_value(payload)
        if self._opts.skip_record_metadata:
            return {name: value for name, value in out.items() if name in _RECORD_DATA_FIELDS}
        return out

    # -- .index ---------------------------------------------------------------------------------------------

    def _open_log_for(
        self, path: str, stack: contextlib.ExitStack
    ) -> tuple[FileRecords | None, list[DumpLine]]:
        """The segment ``.log`` an index belongs to, or None and the error lines when it cannot be opened (the
        entries are then printed unchecked)."""
        log_path = _sibling(path, LOG_SUFFIX)
        try:
            return stack.enter_context(FileRecords(log_path)), []
        except OSError as err:
            return None, list(self._os_error(log_path, err))

    def _passed_sanity_check(self, path: str) -> DumpLine:
        return self._line(f"{path} passed sanity check.", {"type": "sanityCheckPassed", "path": path})

    def _dump_index(self, path: str, base_offset: int) -> Iterator[DumpLine]:
        with contextlib.ExitStack() as stack:
            index = stack.enter_context(OffsetIndex(path, base_offset, writable=False))
            if self._opts.index_sanity_only:
                # The check a broker runs at startup to decide whether to rebuild the index; a failure raises
                # CorruptIndexError. Unlike Kafka it runs before the empty test: a file shorter than one entry
                # has no entries, yet fails the broker's check (its length is not a multiple of 8).
                index.sanity_check()
            if index.entries == 0:
                if not self._json:
                    yield DumpLine(f"{path} is empty.")
                return
            if self._opts.index_sanity_only:
                yield self._passed_sanity_check(path)
                return
            records, errors = self._open_log_for(path, stack)
            yield from errors
            mismatches: list[tuple[int, int]] = []
            for entry in index.entries_for_dump():
                if records is not None:
                    try:
                        found = _batch_at(records, entry.position, self._opts.max_message_size)
                    except StorageFormatError as err:
                        yield from self._error(err)
                    else:
                        log_offset = -1 if found is None else found.batch.last_offset
                        if log_offset != entry.offset:
                            mismatches.append((entry.offset, log_offset))
                if not self._opts.verify_index_only:
                    yield self._line(
                        f"offset: {entry.offset} position: {entry.position}",
                        {"type": "indexEntry", "offset": entry.offset, "position": entry.position},
                    )
            _add(self._reports.index_mismatches, path, mismatches)

    # -- .timeindex -----------------------------------------------------------------------------------------

    def _dump_time_index(self, path: str, base_offset: int) -> Iterator[DumpLine]:
        with contextlib.ExitStack() as stack:
            time_index = stack.enter_context(TimeIndex(path, base_offset, writable=False))
            if self._opts.index_sanity_only:
                time_index.sanity_check()
                yield self._passed_sanity_check(path)
                return
            if time_index.entries == 0:
                return
            records, errors = self._open_log_for(path, stack)
            yield from errors
            index_path = _sibling(path, INDEX_SUFFIX)
            offset_index = (
                stack.enter_context(OffsetIndex(index_path, base_offset, writable=False))
                if os.path.isfile(index_path)
                else None
            )
            mismatches: list[tuple[int, int]] = []
            out_of_order: list[tuple[int, int]] = []
            not_found: list[tuple[int, int]] = []
            previous = NO_TIMESTAMP
            for entry in time_index.entries_for_dump():
                if records is not None:
                    start = 0 if offset_index is None else offset_index.lookup(entry.offset).position
                    try:
                        found = _first_batch_reaching(records, start, entry.offset)
                        if found is None:
                            not_found.append((entry.offset, -1))
                        elif found.batch.last_offset != entry.offset:
                            not_found.append((entry.offset, found.batch.last_offset))
                        else:
                            max_timestamp = _max_record_timestamp(records, found)
                            if max_timestamp != entry.timestamp:
                                mismatches.append((entry.timestamp, max_timestamp))
                            if previous >= entry.timestamp:
                                out_of_order.append((entry.timestamp, previous))
                    except StorageFormatError as err:
                        yield from self._error(err)
                if not self._opts.verify_index_only:
                    yield self._line(
                        f"timestamp: {entry.timestamp} offset: {entry.offset}",
                        {"type": "timeIndexEntry", "timestamp": entry.timestamp, "offset": entry.offset},
                    )
                previous = entry.timestamp
            _add(self._reports.time_mismatches, path, mismatches)
            _add(self._reports.time_out_of_order, path, out_of_order)
            _add(self._reports.time_not_found, path, not_found)

    # -- .txnindex and .snapshot ----------------------------------------------------------------------------

    def _dump_txn_index(self, path: str, base_offset: int) -> Iterator[DumpLine]:
        index = TransactionIndex(path, base_offset, writable=False)
        try:
            aborted = index.all_aborted_txns()
        finally:
            index.close()
        for txn in aborted:
            yield self._line(
                f"version: {txn.reader_version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}",
                {
                    "type": "abortedTxn",
                    "version": txn.reader_version,
                    "producerId": txn.producer_id,
                    "firstOffset": txn.first_offset,
                    "lastOffset": txn.last_offset,
                    "lastStableOffset": txn.last_stable_offset,
                },
            )

    def _dump_producer_snapshot(self, path: str) -> Iterator[DumpLine]:
        with open(path, "rb") as source:
            entries = parse_producer_snapshot(source.read(), path)
        for entry in entries:
            yield self._line(_snapshot_entry_text(entry), _snapshot_entry_json(entry))

    # -- checkpoint and metadata files ----------------------------------------------------------------------

    def _dump_text_file(self, path: str, kind: str) -> Iterator[DumpLine]:
        with open(path, "rb") as source:
            data = source.read()
        if kind == "offsetCheckpoint":
            for tp, offset in parse_offset_checkpoint(data, path).items():
                yield self._line(
                    f"topic: {tp.topic} partition: {tp.partition} offset: {offset}",
                    {
                        "type": "offsetCheckpointEntry",
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "offset": offset,
                    },
                )
        elif kind == "leaderEpochCheckpoint":
            for entry in parse_leader_epoch_checkpoint(data, path):
                yield self._line(
                    f"epoch: {entry.epoch} startOffset: {entry.start_offset}",
                    {"type": "leaderEpochEntry", "epoch": entry.epoch, "startOffset": entry.start_offset},
                )
        elif kind == "partitionMetadata":
            metadata = parse_partition_metadata(data, path)
            topic_id = uuid_to_kafka(metadata.topic_id)
            yield self._line(
                f"version: {metadata.version} topicId: {topic_id}",
                {"type": "partitionMetadata", "version": metadata.version, "topicId": topic_id},
            )
        elif kind == "metaProperties":
            meta = parse_meta_properties(data, path)
            if self._json:
                yield DumpLine(
                    {
                        "type": "metaProperties",
                        "version": meta.version,
                        "nodeId": meta.node_id,
                        "clusterId": meta.cluster_id,
                        "directoryId": None
                        if meta.directory_id is None
                        else uuid_to_kafka(meta.directory_id),
                        "properties": dict(meta.properties),
                    }
                )
            else:
                for key, value in meta.properties.items():
                    yield DumpLine(f"{key}: {value}")
        else:
            broker_epoch = parse_clean_shutdown(data).broker_epoch
            yield self._line(
                f"brokerEpoch: {'unknown' if broker_epoch is None else broker_epoch}",
                {"type": "cleanShutdown", "brokerEpoch": broker_epoch},
            )

    # -- reports after the last file ------------------------------------------------------------------------

    def _final_reports(self) -> Iterator[DumpLine]:
        reports = self._reports
        yield from self._report(
            reports.index_mismatches,
            "indexMismatch",
            ("indexOffset", "logOffset"),
            lambda path: f"Mismatches in :{path}",
            "  Index offset: {}, log offset: {}",
        )
        yield from self._report(
            reports.time_mismatches,
            "timeIndexMismatch",
            ("indexTimestamp", "logTimestamp"),
            lambda path: f"Found timestamp mismatch in :{path}",
            "  Index timestamp: {}, log timestamp: {}",
        )
        yield from self._report(
            reports.time_out_of_order,
            "timeIndexOutOfOrder",
            ("indexTimestamp", "previousTimestamp"),
            lambda path: f"Found out of order timestamp in :{path}",
            "  Index timestamp: {}, Previously indexed timestamp: {}",
        )
        yield from self._report(
            reports.time_not_found,
            "timeIndexOffsetNotFound",
            ("indexOffset", "logOffset"),
            lambda path: "The following indexed offsets are not found in the log.",
            "Indexed offset: {}, found log offset: {}",
        )
        yield from self._report(
            reports.non_consecutive,
            "nonConsecutiveOffsets",
            ("first", "second"),
            lambda path: f"Non-consecutive offsets in {path}",
            "  {} is followed by {}",
        )

    def _report(
        self,
        report: dict[str, list[tuple[int, int]]],
        kind: str,
        names: tuple[str, str],
        title: Callable[[str], str],
        item: str,
    ) -> Iterator[DumpLine]:
        for path, pairs in report.items():
            if not self._json:
                yield DumpLine(title(path), stderr=True)
            for first, second in pairs:
                if self._json:
                    yield DumpLine({"type": kind, "path": path, names[0]: first, names[1]: second})
                else:
                    yield DumpLine(item.format(first, second), stderr=True)


def _name_fields(kind: str, name: str, path: str) -> dict[str, Any]:
    """What a file name carries: the base offset of segment files, the end offset and epoch of KRaft snapshots.
    Raises InvalidOffsetError when the name does not carry it."""
    if kind in _SEGMENT_KINDS:
        return {"baseOffset": offset_from_file_name(name)}
    if kind == "kraftSnapshot":
        snapshot_id = parse_kraft_snapshot_name(name)
        if snapshot_id is None:
            raise InvalidOffsetError(
                "not a KRaft snapshot file name (<20-digit end offset>-<10-digit epoch>.checkpoint)",
                path=path,
            )
        return {"endOffset": snapshot_id[0], "epoch": snapshot_id[1]}
    return {}


def _first_batch_reaching(records: FileRecords, position: int, offset: int) -> FileBatch | None:
    """The first batch from ``position`` whose last offset is >= ``offset``, reading batch by batch. O(bytes
    skipped)."""
    while True:
        found = _batch_at(records, position)
        if found is None or found.batch.last_offset >= offset:
            return found
        position = found.end_position


def _max_record_timestamp(records: FileRecords, found: FileBatch) -> int:
    """Kafka's time-index check value: the largest record timestamp of the batch, at least -1. O(batch size)."""
    try:
        timestamps = (record.timestamp for record in found.batch.iter_records(check_crc=False))
        return max(NO_TIMESTAMP, max(timestamps, default=NO_TIMESTAMP))
    except StorageFormatError as err:
        raise _locate(err, str(records.path), found.position) from None


def _legacy_record_valid(found: FileBatch, batch_valid: bool) -> bool:
    """A magic 0/1 record's own CRC check: the batch's for a plain message; inner messages of a compressed
    wrapper only decode when their CRCs match."""
    return batch_valid if found.batch.compression is CompressionType.NONE else True


def _control_text(record: Record) -> str:
    """What Kafka prints for a control record: the end-transaction marker, a KRaft record as JSON, or the type
    name and id."""
    kind, coordinator_epoch = control_info(record)
    if coordinator_epoch is not None:
        return f"endTxnMarker: {kind.name} coordinatorEpoch: {coordinator_epoch}"
    if kind in _KRAFT_CONTROL:
        return f"{_KRAFT_CONTROL[kind][0]} {json_text(kraft_control_json(kind, record.value))}"
    assert record.key is not None  # control_info rejected a missing key
    (type_id,) = struct.unpack_from(">h", record.key, 2)
    return f"controlType: {kind.name}({type_id})"


def _snapshot_entry_text(entry: ProducerSnapshotEntry) -> str:
    # Kafka leaves the trailing space when the entry has no batch metadata.
    text = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {_optional_long(_txn_first_offset(entry))} lastTimestamp: {entry.timestamp} "
    )
    if entry.last_offset >= 0:
        text += (
            f"firstSequence: {_decrement_sequence(entry.last_sequence, entry.offset_delta)} "
            f"lastSequence: {entry.last_sequence} lastOffset: {entry.last_offset} "
            f"offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}"
        )
    return text


def _snapshot_entry_json(entry: ProducerSnapshotEntry) -> dict[str, Any]:
    has_batch = entry.last_offset >= 0
    return {
        "type": "producerSnapshotEntry",
        "producerId": entry.producer_id,
        "producerEpoch": entry.producer_epoch,
        "coordinatorEpoch": entry.coordinator_epoch,
        "currentTxnFirstOffset": _txn_first_offset(entry),
        "lastTimestamp": entry.timestamp,
        "firstSequence": _decrement_sequence(entry.last_sequence, entry.offset_delta) if has_batch else None,
        "lastSequence": entry.last_sequence if has_batch else None,
        "lastOffset": entry.last_offset if has_batch else None,
        "offsetDelta": entry.offset_delta if has_batch else None,
        "timestamp": entry.timestamp if has_batch else None,
    }


def _txn_first_offset(entry: ProducerSnapshotEntry) -> int | None:
    return entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
