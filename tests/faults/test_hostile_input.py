"""Hostile input: every parser of the format layer and of the configuration, fed arbitrary and mutated bytes.

Each parser is a :class:`Target`: a function that parses one input as deeply as the parser allows (every lazy
stage forced, each stage tried even when an earlier one refused), the typed errors it documents, and a builder of
valid inputs for mutation (build a valid file, then flip, insert, delete or overwrite bytes). Only the documented
errors may escape. Hypothesis deadlines are off: the input size, not the code, decides an example's time, and the
bounds that matter (work and memory) are pinned below.

Declared lengths are pinned separately: inputs whose 4-byte (or varint) length field claims 2 GiB (or more) must be
refused after at most 10,000 executed Python lines (no loop runs to the declared count) with a tracemalloc peak
below 10 MiB, i.e. the parser compares the length with the bytes it holds before allocating anything of that size.

:func:`dispatch` (the first byte picks the target) is the entry point of the atheris harness
``tests/faults/fuzz_atheris.py``. ``LOGMGR_SOAK=1`` multiplies the example counts by 20; when
``LOGMGR_FAULT_REPORT`` names a file, each fault test module appends one JSON line of case counts to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import struct
import sys
import tracemalloc
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkpoints.clean_shutdown import CleanShutdownMarker, format_clean_shutdown, parse_clean_shutdown
from checkpoints.leader_epoch_checkpoint import (
    EpochEntry,
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)
from checkpoints.meta_properties import (
    MetaProperties,
    format_meta_properties,
    logical_lines,
    parse_meta_properties,
    split_entry,
)
from checkpoints.offset_checkpoint import format_offset_checkpoint, parse_offset_checkpoint
from checkpoints.partition_metadata import (
    PartitionMetadata,
    format_partition_metadata,
    parse_partition_metadata,
)
from checkpoints.producer_snapshot import (
    ProducerSnapshotEntry,
    parse_producer_snapshot,
    read_producer_snapshot,
    serialize_producer_snapshot,
)
from logmgr.config import BrokerConfig, LogConfig, load_server_properties
from logmgr.errors import ConfigError
from segments._native.append import SCAN_CORRUPT, SCAN_OK, scan_append
from segments._native.batches import find_record_by_timestamp
from segments._native.records import RecordColumns, decode_columns, frame_region
from segments.compression import CompressionType, compress, decompress
from segments.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidOffsetError,
    InvalidPartitionDirError,
    InvalidTopicError,
    LogSegmentOffsetOverflowError,
    RecordTooLargeError,
    StorageFormatError,
)
from segments.file_records import FileRecords, iter_batches, walk_batches
from segments.java_numbers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from segments.legacy import LegacyRecordBatch
from segments.log_segment import LogSegment
from segments.naming import (
    DirKind,
    PartitionDirName,
    TopicPartition,
    log_file,
    offset_from_file_name,
    parse_kraft_snapshot_name,
    validate_topic,
)
from segments.offset_index import OffsetIndex
from segments.records import (
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    Header,
    Record,
    RecordBatch,
    SimpleRecord,
    build_batch,
    decode_records,
    iter_decode_records,
    iter_record_slices,
)
from segments.time_index import TimeIndex
from segments.transaction_index import AbortedTxn, TransactionIndex
from segments.varint import encode_varint
from tests.conftest import FAILURE_DEADLINE_S, REPO, child_env

SOAK = os.environ.get("LOGMGR_SOAK") == "1"
SCALE = 20 if SOAK else 1
MAX_DECOMPRESSED = 4 * 1024 * 1024
"""Output cap for the codec targets: bombs are refused at this size, which keeps each example fast."""
TWO_GIB = 2**31 - 1
MEMORY_LIMIT = 10 * 1024 * 1024
WORK_LIMIT = 10_000
"""Python lines a refusal of a declared length may execute: each case takes under 200, a loop running to the
declared count (2**31) far more."""


# --- case counts ------------------------------------------------------------------------------------------------


class FaultReport:
    """Case counts of one fault test module, appended as one JSON line to ``$LOGMGR_FAULT_REPORT`` (if set)."""

    def __init__(self, module_file: str) -> None:
        self.file = os.path.basename(module_file)
        self.counts: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        """Count ``n`` more cases under ``key``. O(1)."""
        self.counts[key] += n

    def write(self) -> None:
        """Append ``{"file", "cases", "counts", "soak"}`` to the report file when the variable names one. O(keys)."""
        target = os.environ.get("LOGMGR_FAULT_REPORT")
        if not target:
            return
        line = {"file": self.file, "cases": sum(self.counts.values()), "counts": dict(self.counts), "soak": SOAK}
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")


REPORT = FaultReport(__file__)


@pytest.fixture(scope="module", autouse=True)
def _fault_report() -> Iterator[None]:
    yield
    REPORT.write()


# --- valid inputs -----------------------------------------------------------------------------------------------


def _random_bytes(rng: random.Random, max_size: int) -> bytes:
    size = rng.randint(0, max_size)
    # Mostly repetitive bytes, so compression has something to chew on and produces real back-references.
    alphabet = bytes(rng.sample(range(256), rng.randint(1, 8)))
    return bytes(rng.choice(alphabet) for _ in range(size))


def _simple_records(rng: random.Random) -> list[SimpleRecord]:
    records = []
    for _ in range(rng.randint(1, 5)):
        headers = tuple(
            Header(rng.choice(["h", "trace", "é"]), None if rng.random() < 0.3 else _random_bytes(rng, 8))
            for _ in range(rng.randint(0, 2))
        )
        records.append(
            SimpleRecord(
                None if rng.random() < 0.2 else _random_bytes(rng, 300),
                None if rng.random() < 0.5 else _random_bytes(rng, 16),
                rng.randint(0, 2**41),
                headers,
            )
        )
    return records


def valid_v2_batch(rng: random.Random) -> bytes:
    """A magic-2 batch with 1-5 records, any codec, sometimes transactional or idempotent."""
    producer_id = rng.choice([-1, rng.randint(0, 2**40)])
    return build_batch(
        _simple_records(rng),
        base_offset=rng.randint(0, 2**40),
        compression=rng.choice(list(CompressionType)),
        producer_id=producer_id,
        producer_epoch=-1 if producer_id < 0 else rng.randint(0, 100),
        base_sequence=-1 if producer_id < 0 else rng.randint(0, 2**31 - 1),
        is_transactional=producer_id >= 0 and rng.random() < 0.5,
        partition_leader_epoch=rng.randint(-1, 50),
    )


def _legacy_message(magic: int, key: bytes | None, value: bytes | None, *, attributes: int, timestamp: int) -> bytes:
    def sized(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += sized(key) + sized(value)
    return struct.pack(">I", zlib.crc32(body)) + body


def _legacy_entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def valid_legacy_entry(rng: random.Random) -> bytes:
    """A magic 0/1 message: plain, or a gzip/snappy/lz4 wrapper of 1-4 inner messages."""
    magic = rng.randint(0, 1)
    timestamp = rng.randint(0, 2**41)
    codec = rng.choice([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4])
    if codec is CompressionType.NONE:
        message = _legacy_message(magic, _random_bytes(rng, 8), _random_bytes(rng, 64), attributes=0, timestamp=timestamp)
        return _legacy_entry(rng.randint(0, 2**40), message)
    count = rng.randint(1, 4)
    inner = b"".join(
        _legacy_entry(
            i if magic == 1 else 1000 + i,
            _legacy_message(magic, None, _random_bytes(rng, 64), attributes=0, timestamp=timestamp),
        )
        for i in range(count)
    )
    wrapper = _legacy_message(magic, None, compress(codec, inner), attributes=int(codec), timestamp=timestamp)
    return _legacy_entry(1000 + count - 1, wrapper)


def valid_log(rng: random.Random) -> bytes:
    """A small ``.log``: a few batches of either format, in offset order."""
    return b"".join(rng.choice([valid_v2_batch, valid_legacy_entry])(rng) for _ in range(rng.randint(1, 3)))


def valid_compressed(codec: CompressionType) -> Callable[[random.Random], bytes]:
    def build(rng: random.Random) -> bytes:
        return compress(codec, _random_bytes(rng, 70_000 if rng.random() < 0.1 else 2000))

    return build


def valid_offset_index(rng: random.Random) -> bytes:
    relative = position = 0
    out = bytearray()
    for _ in range(rng.randint(0, 40)):
        relative += rng.randint(1, 100)
        position += rng.randint(1, 5000)
        out += struct.pack(">ii", relative, position)
    return bytes(out)


def valid_time_index(rng: random.Random) -> bytes:
    timestamp = rng.randint(0, 2**41)
    relative = 0
    out = bytearray()
    for _ in range(rng.randint(0, 40)):
        timestamp += rng.randint(1, 10_000)
        relative += rng.randint(0, 100)
        out += struct.pack(">qi", timestamp, relative)
    return bytes(out)


def valid_txn_index(rng: random.Random) -> bytes:
    last = INDEX_BASE
    out = bytearray()
    for _ in range(rng.randint(0, 10)):
        first = last + rng.randint(1, 100)
        last = first + rng.randint(0, 100)
        out += AbortedTxn(rng.randint(0, 2**40), first, last, rng.randint(first, last + 1)).to_bytes()
    return bytes(out)


def _topic(rng: random.Random) -> str:
    return "".join(rng.choice("abcXYZ019._-") for _ in range(rng.randint(1, 20))).replace("..", "a.")


def valid_offset_checkpoint(rng: random.Random) -> bytes:
    entries = {TopicPartition(_topic(rng), rng.randint(0, 100)): rng.randint(0, 2**50) for _ in range(rng.randint(0, 8))}
    return format_offset_checkpoint(entries, line_separator=rng.choice(["\n", "\r\n"]))


def valid_leader_epoch_checkpoint(rng: random.Random) -> bytes:
    entries = [EpochEntry(epoch, rng.randint(0, 2**40)) for epoch in range(rng.randint(0, 8))]
    return format_leader_epoch_checkpoint(entries)


def valid_partition_metadata(rng: random.Random) -> bytes:
    return format_partition_metadata(PartitionMetadata(0, uuid.UUID(int=rng.randint(1, 2**128 - 1))))


def valid_meta_properties(rng: random.Random) -> bytes:
    version = rng.randint(0, 1)
    meta = MetaProperties.create(
        version=version,
        node_id=rng.randint(0, 1000),
        cluster_id="".join(rng.choice("abcdefABCDEF0123456789-_") for _ in range(22)),
        directory_id=uuid.UUID(int=rng.randint(1, 2**128 - 1)) if rng.random() < 0.5 else None,
        now=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    )
    return format_meta_properties(meta)


def valid_clean_shutdown(rng: random.Random) -> bytes:
    return format_clean_shutdown(CleanShutdownMarker(rng.choice([None, -1, rng.randint(0, 2**62)])))


def valid_producer_snapshot(rng: random.Random) -> bytes:
    entries = [
        ProducerSnapshotEntry(
            rng.randint(0, 2**40), rng.randint(0, 100), rng.randint(0, 2**20), rng.randint(-1, 2**40),
            rng.randint(0, 100), rng.randint(0, 2**41), rng.randint(-1, 50), rng.choice([-1, rng.randint(0, 2**40)]),
        )
        for _ in range(rng.randint(0, 5))
    ]
    return serialize_producer_snapshot(entries)


def valid_dir_name(rng: random.Random) -> bytes:
    tp = TopicPartition(_topic(rng), rng.randint(0, 2**31 - 1))
    kind: DirKind = rng.choice(["live", "delete", "future", "stray"])
    name = str(tp) if kind == "live" else PartitionDirName(tp.topic, tp.partition, kind, uuid.uuid4().hex).name
    return name.encode()


_SERVER_PROPERTIES = [
    ("log.dirs", "/data/a,/data/b"), ("log.retention.ms", "86400000"), ("log.retention.hours", "168"),
    ("log.segment.bytes", "1073741824"), ("log.roll.hours", "24"), ("log.cleanup.policy", "delete,compact"),
    ("log.message.timestamp.type", "CreateTime"), ("num.recovery.threads.per.data.dir", "2"),
    ("logmgr.disk.usage.clean.ratio", "0.8"), ("logmgr.delete.when", "02-05"), ("broker.id", "1"),
    ("listeners", "PLAINTEXT://:9092"),
]
_TOPIC_PROPERTIES = [
    ("retention.ms", "86400000"), ("retention.bytes", "-1"), ("segment.bytes", "1048576"),
    ("segment.ms", "3600000"), ("cleanup.policy", "compact"), ("message.timestamp.type", "LogAppendTime"),
    ("max.message.bytes", "1048588"), ("preallocate", "true"), ("min.compaction.lag.ms", "0"),
    ("max.compaction.lag.ms", "9223372036854775807"), ("segment.index.bytes", "10485760"),
]


def _properties_text(rng: random.Random, pairs: list[tuple[str, str]]) -> bytes:
    lines = ["# written by a fuzzer", "#Wed May 01 12:00:00 UTC 2024"]
    for key, value in rng.sample(pairs, rng.randint(0, len(pairs))):
        lines.append(f"{key}{rng.choice(['=', ':', ' ', ' = '])}{value}")
    return ("\n".join(lines) + "\n").encode("latin-1")


def valid_server_properties(rng: random.Random) -> bytes:
    return _properties_text(rng, _SERVER_PROPERTIES)


def valid_topic_config(rng: random.Random) -> bytes:
    return _properties_text(rng, _TOPIC_PROPERTIES)


def valid_record_region(rng: random.Random) -> bytes:
    """What :func:`parse_record_region` reads: a 2-byte record count, then the uncompressed records region."""
    records = _simple_records(rng)
    batch = build_batch(records, base_sequence=3)
    return struct.pack(">h", len(records)) + batch[RECORD_BATCH_OVERHEAD:]


# --- targets ----------------------------------------------------------------------------------------------------

INDEX_BASE = 1000


def _stages(allowed: tuple[type[BaseException], ...], *stages: Callable[[], object]) -> None:
    """Run every stage; a stage may refuse with an allowed error without stopping the later ones."""
    for stage in stages:
        with contextlib.suppress(*allowed):
            stage()


def _repaired_v2(data: bytes) -> bytes:
    """``data`` with its length field and CRC made consistent, so a mutation reaches the record decoder."""
    if len(data) < RECORD_BATCH_OVERHEAD:
        return data
    out = bytearray(data)
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[21:]))
    return bytes(out)


def _repaired_legacy(data: bytes) -> bytes:
    if len(data) < LOG_OVERHEAD + 14:
        return data
    out = bytearray(data)
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">I", out, LOG_OVERHEAD, zlib.crc32(memoryview(out)[LOG_OVERHEAD + 4 :]))
    return bytes(out)


def _java_ranged_records(batch: RecordBatch) -> None:
    """Decode the records; timestamps, which Kafka computes as Java long sums, stay in the int64 range (they
    wrap). Offsets are left as plain sums (see the regression test below)."""
    for record in batch.records():
        for value in (record.timestamp, record.stored_timestamp):
            assert INT64_MIN <= value <= INT64_MAX, record
        assert INT32_MIN <= record.sequence <= INT32_MAX, record


def _touch_batch(batch: RecordBatch) -> None:
    """Every accessor of a batch view; records decoded even when the CRC is wrong."""
    _stages(
        (CorruptRecordError,),
        batch.ensure_valid,
        lambda: _java_ranged_records(batch),
        batch.count_records,
        lambda: batch.compression,
        lambda: (batch.base_offset, batch.last_offset, batch.last_sequence, batch.max_timestamp, repr(batch)),
    )
    if isinstance(batch, DefaultRecordBatch):
        _stages((CorruptRecordError,), batch.validate_record_framing)


def parse_v2_batch(data: bytes, scratch: Path) -> None:
    for candidate in (data, _repaired_v2(data)):
        try:
            batch = DefaultRecordBatch(candidate)
        except CorruptRecordError:
            continue
        _touch_batch(batch)


def parse_append(data: bytes, scratch: Path) -> None:
    """The native append kernel: a verdict for any bytes (never an exception), and stamped headers whose every
    batch, written with its records, is valid when it accepts."""
    for candidate in (data, _repaired_v2(data)):
        for max_message_bytes in (RECORD_BATCH_OVERHEAD, 1 << 20):
            scan = scan_append(candidate, max_message_bytes, False, False)
            assert (scan.failure == SCAN_CORRUPT) == (scan.error is not None)
            if scan.failure != SCAN_OK:
                continue
            scan.check_follower(0)
            for client in (False, True):
                scan = scan_append(candidate, max_message_bytes, True, client)
                if scan.failure != SCAN_OK:
                    continue
                scan.assign_offsets(0, 1, 1_700_000_000_000)
                if scan.failure == SCAN_OK:
                    for found in iter_batches(b"".join(scan.buffers())):
                        found.batch.ensure_valid()


def parse_legacy_entry(data: bytes, scratch: Path) -> None:
    for candidate in (data, _repaired_legacy(data)):
        try:
            batch = LegacyRecordBatch(candidate)
        except CorruptRecordError:
            continue
        _touch_batch(batch)


def parse_record_region(data: bytes, scratch: Path) -> None:
    count = int.from_bytes(data[:2], "big", signed=True)
    decode_records(data[2:], count, base_offset=7, base_timestamp=0, base_sequence=3, log_append_time=None)


def parse_record_kernels(data: bytes, scratch: Path) -> None:
    """The native record kernels on one records region (2-byte count, 1-byte cut, region): the streamed reader
    whole and cut in two, the Arrow column decoder, the slicer and the in-place framer must agree."""
    count = int.from_bytes(data[:2], "big", signed=True)
    cut = data[2] if len(data) > 2 else 0
    region = data[3:]
    limit = len(region) + 1

    def read(pieces: list[bytes]) -> list[Record]:
        return list(
            iter_decode_records(
                pieces, count, base_offset=7, base_timestamp=0, base_sequence=3, log_append_time=None,
                max_record_bytes=limit,
            )
        )

    try:
        records = read([region])
    except CorruptRecordError as err:
        failed: CorruptRecordError | None = err
    else:
        failed = None
    try:
        assert read([region[:cut], region[cut:]]) == records and failed is None
    except CorruptRecordError as err:
        assert failed is not None and type(err) is type(failed)
    columns = decode_columns([region], [count], [7], [0], [None], True)
    assert (columns == 0) if failed is not None else (isinstance(columns, RecordColumns) and columns.rows == len(records))
    if failed is not None:
        _stages((CorruptRecordError,), lambda: frame_region(region, count, limit))
        _stages((CorruptRecordError,), lambda: list(iter_record_slices(
            [region[:cut], region[cut:]], count, max_record_bytes=limit, max_slice_records=3, max_slice_bytes=64
        )))
        raise failed
    frame_region(region, count, limit)
    slices = list(
        iter_record_slices([region[:cut], region[cut:]], count, max_record_bytes=limit, max_slice_records=3,
                           max_slice_bytes=64)
    )
    assert b"".join(piece for piece, _ in slices) == region and sum(n for _, n in slices) == max(count, 0)


def valid_record_kernels(rng: random.Random) -> bytes:
    """What :func:`parse_record_kernels` reads: a 2-byte record count, a cut, then the records region."""
    region = valid_record_region(rng)
    return region[:2] + bytes([rng.randrange(256)]) + region[2:]


def parse_log(data: bytes, scratch: Path) -> None:
    for found in iter_batches(data, path="fuzz.log"):
        _touch_batch(found.batch)
    for found in walk_batches(lambda p, s: data[p : p + s], 0, len(data), max_batch_size=1 << 20):
        _touch_batch(found.batch)


def _codec_target(codec: CompressionType) -> Callable[[bytes, Path], None]:
    def parse(data: bytes, scratch: Path) -> None:
        magics = (0, 1, 2) if codec is not CompressionType.ZSTD else (2,)
        _stages(
            (CorruptRecordError,),
            *(lambda m=m: decompress(codec, data, magic=m, max_size=MAX_DECOMPRESSED) for m in magics),
        )

    return parse


def _index_file(scratch: Path, name: str, data: bytes) -> Path:
    path = scratch / name
    path.write_bytes(data)
    return path


def parse_offset_index(data: bytes, scratch: Path) -> None:
    with OffsetIndex(_index_file(scratch, "fuzz.index", data), INDEX_BASE, writable=False) as index:
        _stages(
            (CorruptIndexError,),
            index.sanity_check,
            lambda: index.check(log_size=4096),
            lambda: [index.lookup(t) for t in (-1, 0, INDEX_BASE, INDEX_BASE + 50, 2**63 - 1)],
            lambda: [index.fetch_upper_bound_offset(p, 100) for p in (0, 1000, 2**31)],
            lambda: list(index.entries_for_dump()),
            lambda: index.last_offset,
        )


def parse_time_index(data: bytes, scratch: Path) -> None:
    with TimeIndex(_index_file(scratch, "fuzz.timeindex", data), INDEX_BASE, writable=False) as index:
        _stages(
            (CorruptIndexError,),
            index.sanity_check,
            index.check,
            lambda: [index.lookup(t) for t in (-1, 0, 2**40, 2**63 - 1)],
            lambda: list(index.entries_for_dump()),
            lambda: index.last_entry,
        )


def parse_txn_index(data: bytes, scratch: Path) -> None:
    with TransactionIndex(_index_file(scratch, "fuzz.txnindex", data), INDEX_BASE, writable=False) as index:
        _stages(
            (CorruptIndexError,),
            index.sanity_check,
            index.check,
            index.all_aborted_txns,
            lambda: index.collect_aborted_txns(INDEX_BASE, INDEX_BASE + 500),
        )


# Whatever a checkpoint parser accepts, its writer must write back to bytes that read back the same.


def parse_offset_checkpoint_bytes(data: bytes, scratch: Path) -> None:
    entries = parse_offset_checkpoint(data, "fuzz-checkpoint")
    assert parse_offset_checkpoint(format_offset_checkpoint(entries)) == entries


def parse_leader_epoch_bytes(data: bytes, scratch: Path) -> None:
    entries = parse_leader_epoch_checkpoint(data, "leader-epoch-checkpoint")
    assert parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint(entries)) == entries


def parse_partition_metadata_bytes(data: bytes, scratch: Path) -> None:
    metadata = parse_partition_metadata(data, "partition.metadata")
    assert parse_partition_metadata(format_partition_metadata(metadata)) == metadata


def parse_meta_properties_bytes(data: bytes, scratch: Path) -> None:
    meta = parse_meta_properties(data, "meta.properties")
    assert parse_meta_properties(format_meta_properties(meta)) == meta


def parse_clean_shutdown_bytes(data: bytes, scratch: Path) -> None:
    marker = parse_clean_shutdown(data)
    assert parse_clean_shutdown(format_clean_shutdown(marker)) == marker


def parse_producer_snapshot_bytes(data: bytes, scratch: Path) -> None:
    _stages((CorruptSnapshotError,), lambda: parse_producer_snapshot(data, "fuzz.snapshot"))
    snapshot = read_producer_snapshot(_index_file(scratch, "00000000000000000042.snapshot", data))
    assert serialize_producer_snapshot(snapshot.entries) == data


def parse_names(data: bytes, scratch: Path) -> None:
    name = data.decode("utf-8", "surrogateescape")
    _stages(
        (InvalidPartitionDirError, InvalidTopicError, InvalidOffsetError),
        lambda: PartitionDirName.parse(name),
        lambda: TopicPartition.parse(name),
        lambda: validate_topic(name),
        lambda: offset_from_file_name(name),
        lambda: parse_kraft_snapshot_name(name),
    )
    try:
        parsed = PartitionDirName.parse(name)
    except InvalidPartitionDirError:
        return
    # Whatever parses as a partition dir is one directory entry: it can never walk out of its log dir.
    assert "/" not in parsed.name and "\x00" not in parsed.name


def parse_server_properties(data: bytes, scratch: Path) -> None:
    load_server_properties(_index_file(scratch, "server.properties", data))


def parse_topic_config(data: bytes, scratch: Path) -> None:
    # A topic's overrides written as a properties file (what kafka-configs --add-config-file reads), parsed with
    # the same Properties reader, then applied as topic configs and as broker settings.
    props: dict[str, str] = {}
    for _, line, is_comment in logical_lines(data.decode("latin-1")):
        if not is_comment:
            try:
                key, value = split_entry(line)
            except ValueError:
                continue
            props[key] = value
    _stages((ConfigError,), lambda: LogConfig.from_properties(props), lambda: BrokerConfig.from_properties(props))


def parse_log_lookups(data: bytes, scratch: Path) -> None:
    """The header-only searches (compiled ``locate_batch``) over a ``.log`` file, by offset and by timestamp."""
    path = _index_file(scratch, "fuzz-lookup.log", data)
    with FileRecords(path) as log:
        _stages(
            (CorruptRecordError,),
            *(lambda t=t: log.locate_batch(0, t) for t in (-1, 0, 5, 2**40, 2**63 - 1)),
            *(lambda t=t: log.locate_batch(0, t, by_timestamp=True) for t in (-1, 0, 2**41, 2**63 - 1)),
            lambda: log.locate_batch(len(data) // 2, 0),
        )


def parse_segment_fetch(data: bytes, scratch: Path) -> None:
    """A fetch's and a timestamp lookup's compiled calls (``fetch_slice``, ``find_timestamp``: index searches,
    the header hop, the read and the record scan) over a read-only segment: a 2-byte length, that many bytes of ``.index`` then of
    ``.timeindex``, the rest the ``.log``."""
    split = int.from_bytes(data[:2], "big") % (len(data) + 1)
    index, rest = data[2 : 2 + split], data[2 + split :]
    directory = scratch / "fuzz-fetch"
    directory.mkdir(exist_ok=True)
    log_file(directory, INDEX_BASE).write_bytes(rest)
    (directory / f"{INDEX_BASE:020d}.index").write_bytes(index)
    (directory / f"{INDEX_BASE:020d}.timeindex").write_bytes(index)
    segment = LogSegment.open(directory, INDEX_BASE, writable=False)
    try:
        _stages(
            (CorruptRecordError, CorruptIndexError),
            *(
                lambda t=t: segment.read(t, 100, min_one_message=True)
                for t in (-1, 0, INDEX_BASE, INDEX_BASE + 50, 2**63 - 1, 2**70)
            ),
            lambda: segment.read(INDEX_BASE, 0, max_position=len(rest) // 2),
            *(lambda t=t: segment.find_offset_by_timestamp(t, INDEX_BASE) for t in (-1, 0, 2**41, 2**63 - 1)),
        )
    finally:
        segment.close()


def parse_log_recovery(data: bytes, scratch: Path) -> None:
    """Kafka's segment recovery (compiled ``RecoveryScan``) over a ``.log``; what it refuses ends the scan as
    ``RecoveryResult.error``; the one thing raised is a legacy batch overflowing the segment it continues
    (:class:`LogSegmentOffsetOverflowError`, the loader's split), with nothing truncated."""
    directory = scratch / "fuzz-recovery"
    directory.mkdir(exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink()
    log_file(directory, 0).write_bytes(data)
    segment = LogSegment.open(directory, 0, index_interval_bytes=64)
    try:
        try:
            result = segment.recover(next_segment_base=2**40)
        except LogSegmentOffsetOverflowError:
            assert segment.size == len(data)
            return
        assert result.valid_bytes + result.truncated_bytes == len(data) and segment.size == result.valid_bytes
    finally:
        segment.close()


def parse_timestamp_search(data: bytes, scratch: Path) -> None:
    """The compiled record-timestamp search over a records region (2-byte record count, then the region)."""
    count = int.from_bytes(data[:2], "big", signed=True)
    for appended in (None, 5):
        for target, starting in ((0, 0), (2**40, 0), (0, 2**40), (-(2**63), 7)):
            _stages(
                (CorruptRecordError,),
                lambda a=appended, t=target, s=starting: find_record_by_timestamp(
                    data[2:], count, 7, 0, a, t, s, 1 << 20
                ),
            )


@dataclass(frozen=True)
class Target:
    """One parser under fuzz: ``parse(data, scratch)``, the errors it may raise, and a valid-input builder."""

    name: str
    parse: Callable[[bytes, Path], None]
    errors: tuple[type[BaseException], ...]
    valid: Callable[[random.Random], bytes]


TARGETS: tuple[Target, ...] = (
    Target("v2-batch", parse_v2_batch, (CorruptRecordError,), valid_v2_batch),
    Target("legacy-entry", parse_legacy_entry, (CorruptRecordError,), valid_legacy_entry),
    Target("record-region", parse_record_region, (CorruptRecordError,), valid_record_region),
    Target("log-file", parse_log, (CorruptRecordError,), valid_log),
    Target("append", parse_append, (), valid_v2_batch),  # the native append kernel (segments._native.append)
    *(
        Target(f"codec-{codec.name}", _codec_target(codec), (CorruptRecordError,), valid_compressed(codec))
        for codec in CompressionType
        if codec is not CompressionType.NONE
    ),
    Target("offset-index", parse_offset_index, (CorruptIndexError,), valid_offset_index),
    Target("time-index", parse_time_index, (CorruptIndexError,), valid_time_index),
    Target("txn-index", parse_txn_index, (CorruptIndexError,), valid_txn_index),
    Target("offset-checkpoint", parse_offset_checkpoint_bytes, (CorruptCheckpointError,), valid_offset_checkpoint),
    Target("leader-epoch-checkpoint", parse_leader_epoch_bytes, (CorruptCheckpointError,), valid_leader_epoch_checkpoint),
    Target("partition-metadata", parse_partition_metadata_bytes, (CorruptCheckpointError,), valid_partition_metadata),
    Target("meta-properties", parse_meta_properties_bytes, (CorruptCheckpointError,), valid_meta_properties),
    Target("clean-shutdown", parse_clean_shutdown_bytes, (), valid_clean_shutdown),
    Target("producer-snapshot", parse_producer_snapshot_bytes, (CorruptSnapshotError,), valid_producer_snapshot),
    Target("names", parse_names, (), valid_dir_name),
    Target("server-properties", parse_server_properties, (ConfigError,), valid_server_properties),
    Target("topic-config", parse_topic_config, (), valid_topic_config),
    Target("record-kernels", parse_record_kernels, (CorruptRecordError,), valid_record_kernels),
    Target("log-lookups", parse_log_lookups, (CorruptRecordError,), valid_log),
    Target("log-recovery", parse_log_recovery, (), valid_log),
    Target("segment-fetch", parse_segment_fetch, (CorruptRecordError, CorruptIndexError), valid_log),
    Target("timestamp-search", parse_timestamp_search, (CorruptRecordError,), valid_record_region),
)
TARGETS_BY_NAME = {target.name: target for target in TARGETS}


def run_target(target: Target, data: bytes, scratch: Path) -> None:
    """Parse ``data`` with ``target``; its documented errors are swallowed, anything else propagates. O(len)."""
    try:
        target.parse(data, scratch)
    except target.errors as err:
        if isinstance(err, StorageFormatError):
            # Typed format errors render to one line and locate the problem: a file, a position or a line.
            assert "\n" not in str(err)
    REPORT.add(target.name)


def dispatch(data: bytes, scratch: Path) -> None:
    """The first byte picks the target (modulo their number), the rest is its input. O(len)."""
    if not data:
        return
    run_target(TARGETS[data[0] % len(TARGETS)], data[1:], scratch)


# --- mutation ---------------------------------------------------------------------------------------------------

_INTERESTING_INT32 = [0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x7FFFFFF0, 61, 14, 12]
_INTERESTING_INT64 = [0, -1, 2**63 - 1, -(2**63), 2**63 - 2, 2**62]


@st.composite
def mutations(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    ops = st.tuples(
        st.sampled_from(["flip", "insert", "delete", "int32", "int64", "truncate", "byte"]),
        st.integers(0, 1 << 20),
        st.integers(0, 255),
    )
    return draw(st.lists(ops, min_size=1, max_size=6))


def mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    """Apply ``(kind, position, argument)`` edits; positions wrap around the current length. O(len * ops)."""
    out = bytearray(data)
    for kind, raw_position, argument in ops:
        position = raw_position % (len(out) + 1)
        if kind == "flip" and position < len(out):
            out[position] ^= 1 << (argument % 8)
        elif kind == "byte" and position < len(out):
            out[position] = argument
        elif kind == "insert":
            out[position:position] = bytes([argument]) * (1 + argument % 7)
        elif kind == "delete":
            del out[position : position + 1 + argument % 16]
        elif kind == "int32":
            value = _INTERESTING_INT32[argument % len(_INTERESTING_INT32)]
            out[position : position + 4] = struct.pack(">i", value)
        elif kind == "int64":
            value = _INTERESTING_INT64[argument % len(_INTERESTING_INT64)]
            out[position : position + 8] = struct.pack(">q", value)
        elif kind == "truncate":
            del out[position:]
    return bytes(out)


# --- the fuzz tests ---------------------------------------------------------------------------------------------

_FUZZ = settings(
    max_examples=60 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
@_FUZZ
@given(data=st.binary(max_size=600))
def test_arbitrary_bytes_raise_only_documented_errors(target: Target, data: bytes, scratch: Path) -> None:
    run_target(target, data, scratch)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
@_FUZZ
@given(seed=st.integers(0, 2**32 - 1), ops=mutations())
def test_mutated_valid_input_raises_only_documented_errors(
    target: Target, seed: int, ops: list[tuple[str, int, int]], scratch: Path
) -> None:
    run_target(target, mutate(target.valid(random.Random(seed)), ops), scratch)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
@settings(max_examples=15 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_valid_inputs_parse_without_error(target: Target, seed: int, scratch: Path) -> None:
    """The builders make inputs the parsers accept: mutation starts from files that really are valid."""
    target.parse(target.valid(random.Random(seed)), scratch)
    REPORT.add(f"{target.name}/valid")


@_FUZZ
@given(data=st.binary(max_size=800))
def test_dispatcher_of_the_atheris_harness(data: bytes, scratch: Path) -> None:
    dispatch(data, scratch)


@_FUZZ
@given(
    name=st.one_of(
        st.text(max_size=300),
        st.text(alphabet="ab-./\x00\\0123456789 é\u200b\u2024\uff0e\u0660", max_size=40),
        st.from_regex(r"[a-z./\x00-]{0,12}-[0-9٠-٩+-]{1,12}(\.[a-z0-9]{0,8}-(delete|future|stray))?", fullmatch=True),
    )
)
def test_partition_dir_names_and_topics(name: str, scratch: Path) -> None:
    run_target(TARGETS_BY_NAME["names"], name.encode("utf-8", "surrogatepass"), scratch)


_properties_lines = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([key for key, _ in _SERVER_PROPERTIES + _TOPIC_PROPERTIES]), st.text(max_size=12)),
        st.sampled_from(["=", ":", " ", "\\\n"]),
        st.one_of(st.sampled_from([value for _, value in _SERVER_PROPERTIES + _TOPIC_PROPERTIES]), st.text(max_size=20)),
    ),
    max_size=8,
)


@_FUZZ
@given(lines=_properties_lines)
def test_properties_files_with_hostile_text(lines: list[tuple[str, str, str]], scratch: Path) -> None:
    text = "".join(f"{key}{separator}{value}\n" for key, separator, value in lines)
    data = text.encode("utf-8", "surrogatepass")
    run_target(TARGETS_BY_NAME["server-properties"], data, scratch)
    run_target(TARGETS_BY_NAME["topic-config"], data, scratch)


# --- declared lengths: checked before allocating ----------------------------------------------------------------


class _WorkLimitExceeded(BaseException):
    """Raised inside the traced call past :data:`WORK_LIMIT` lines; a BaseException so no parser swallows it."""


def _count_lines(limit: int) -> tuple[Callable[[FrameType, str, object], object], list[int]]:
    """A ``sys.settrace`` function counting executed lines into the returned one-item list, raising
    :class:`_WorkLimitExceeded` past ``limit`` (a runaway loop stops there instead of running to its count)."""
    executed = [0]

    def trace(frame: FrameType, event: str, arg: object) -> object:
        if event == "line":
            executed[0] += 1
            if executed[0] > limit:
                raise _WorkLimitExceeded(f"more than {limit} lines executed")
        return trace

    return trace, executed


def _bounded(call: Callable[[], object], allowed: tuple[type[BaseException], ...]) -> BaseException | None:
    """Run ``call`` under tracemalloc and a line counter; assert it does little work (executed Python lines, not
    seconds) and allocates little; return its allowed error."""
    trace, executed = _count_lines(WORK_LIMIT)
    previous_trace = sys.gettrace()
    tracemalloc.start()
    tracemalloc.reset_peak()
    error: BaseException | None = None
    sys.settrace(trace)
    try:
        call()
    except allowed as err:
        error = err
    finally:
        sys.settrace(previous_trace)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT, f"peak {peak} bytes"
    assert executed[0] <= WORK_LIMIT, f"{executed[0]} lines executed"
    REPORT.add("declared-length")
    return error


def _v2_header(*, length: int, records_count: int = 1, attributes: int = 0, region: bytes = b"") -> bytes:
    header = struct.pack(">qiibIhiqqqhii", 0, length, -1, 2, 0, attributes, 0, 0, 0, -1, -1, -1, records_count)
    return header + region


def _xerial(*chunks: bytes) -> bytes:
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(chunks)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zstd_frame(content_size: int, block: bytes) -> bytes:
    # Single segment, 8-byte frame content size, then one block.
    return struct.pack("<IB", 0xFD2FB528, 0xE0) + struct.pack("<Q", content_size) + block


def _raw_zstd_block(payload: bytes, *, last: bool = True) -> bytes:
    return (int(last) | len(payload) << 3).to_bytes(3, "little") + payload


def _region_of(records: list[bytes]) -> bytes:
    return b"".join(encode_varint(len(body)) + body for body in records)


HUGE_LENGTH_CASES: dict[str, tuple[Callable[[], object], tuple[type[BaseException], ...]]] = {
    "v2 batch length field": (lambda: DefaultRecordBatch(_v2_header(length=TWO_GIB)), (CorruptRecordError,)),
    "v2 records count": (
        lambda: DefaultRecordBatch(_v2_header(length=49, records_count=TWO_GIB)).records(),
        (CorruptRecordError,),
    ),
    "v2 record length varint": (
        lambda: decode_records(encode_varint(TWO_GIB) + bytes(10), 1, base_offset=0, base_timestamp=0,
                               base_sequence=-1, log_append_time=None),
        (CorruptRecordError,),
    ),
    "v2 key length varint": (
        lambda: decode_records(_region_of([b"\x00\x00\x00" + encode_varint(TWO_GIB) + bytes(4)]), 1, base_offset=0,
                               base_timestamp=0, base_sequence=-1, log_append_time=None),
        (CorruptRecordError,),
    ),
    "v2 header count varint": (
        lambda: decode_records(_region_of([b"\x00\x00\x00\x01\x01" + encode_varint(TWO_GIB)]), 1, base_offset=0,
                               base_timestamp=0, base_sequence=-1, log_append_time=None),
        (CorruptRecordError,),
    ),
    "v2 header key length varint": (
        lambda: decode_records(_region_of([b"\x00\x00\x00\x01\x01\x02" + encode_varint(TWO_GIB) + b"ab"]), 1,
                               base_offset=0, base_timestamp=0, base_sequence=-1, log_append_time=None),
        (CorruptRecordError,),
    ),
    "log walk batch size": (
        lambda: list(iter_batches(struct.pack(">qi", 0, TWO_GIB) + bytes(60))),
        (CorruptRecordError,),
    ),
    "log walk with a batch size cap": (
        lambda: list(walk_batches(lambda p, s: struct.pack(">qi", 0, TWO_GIB) + bytes(60), 0, 2**40,
                                  max_batch_size=1 << 20)),
        (RecordTooLargeError,),
    ),
    "legacy message size": (
        lambda: LegacyRecordBatch(struct.pack(">qiIbB", 0, TWO_GIB, 0, 0, 0) + bytes(8)),
        (CorruptRecordError,),
    ),
    "legacy key length": (
        lambda: LegacyRecordBatch(_repaired_legacy(struct.pack(">qiIbBi", 0, 0, 0, 0, 0, TWO_GIB) + bytes(4))).records(),
        (CorruptRecordError,),
    ),
    "legacy inner message size": (
        lambda: LegacyRecordBatch(_repaired_legacy(
            _legacy_entry(0, _legacy_message(1, None, compress(CompressionType.GZIP, struct.pack(">qi", 0, TWO_GIB)),
                                             attributes=1, timestamp=0)))).records(),
        (CorruptRecordError,),
    ),
    "snappy chunk length": (
        lambda: decompress(CompressionType.SNAPPY, _xerial(struct.pack(">i", TWO_GIB), b"abc")),
        (CorruptRecordError,),
    ),
    "snappy raw block length preamble": (
        lambda: decompress(CompressionType.SNAPPY, _uvarint(TWO_GIB) + b"\x00a"),
        (CorruptRecordError,),
    ),
    "snappy raw block length preamble within the cap": (
        lambda: decompress(CompressionType.SNAPPY, _uvarint(200 * 1024 * 1024) + b"\x00a"),
        (CorruptRecordError,),
    ),
    "lz4 block size": (
        lambda: decompress(CompressionType.LZ4, compress(CompressionType.LZ4, b"")[:7] + struct.pack("<I", 0x7FFFFFFF)),
        (CorruptRecordError,),
    ),
    "zstd frame content size": (
        lambda: decompress(CompressionType.ZSTD, _zstd_frame(2**40, _raw_zstd_block(b"a"))),
        (CorruptRecordError,),
    ),
    "zstd frame content size within the cap": (
        lambda: decompress(CompressionType.ZSTD, _zstd_frame(100 * 1024 * 1024, _raw_zstd_block(b"a"))),
        (CorruptRecordError,),
    ),
    "zstd window descriptor": (
        lambda: decompress(CompressionType.ZSTD, struct.pack("<IBB", 0xFD2FB528, 0, 17 << 3) + _raw_zstd_block(b"a")),
        (),
    ),
    "zstd skippable frame size": (
        lambda: decompress(CompressionType.ZSTD, struct.pack("<II", 0x184D2A50, TWO_GIB) + b"abc"),
        (CorruptRecordError,),
    ),
    "gzip size trailer": (
        lambda: decompress(CompressionType.GZIP, compress(CompressionType.GZIP, b"abc")[:-4] + struct.pack("<I", 2**32 - 1)),
        (CorruptRecordError,),
    ),
    "gzip extra field length": (
        lambda: decompress(CompressionType.GZIP, bytes.fromhex("1f8b0804000000000000") + b"\xff\xff" + b"x"),
        (CorruptRecordError,),
    ),
    "producer snapshot entry count": (
        lambda: parse_producer_snapshot(struct.pack(">hIi", 1, 0, TWO_GIB)),
        (CorruptSnapshotError,),
    ),
    "checkpoint entry count": (
        lambda: parse_offset_checkpoint(b"0\n2147483647\nt 0 1\n"),
        (CorruptCheckpointError,),
    ),
    "leader epoch entry count": (
        lambda: parse_leader_epoch_checkpoint(b"0\n2147483647\n"),
        (CorruptCheckpointError,),
    ),
}


@pytest.mark.parametrize("case", list(HUGE_LENGTH_CASES))
def test_declared_length_is_checked_before_allocating(case: str) -> None:
    call, allowed = HUGE_LENGTH_CASES[case]
    error = _bounded(call, allowed)
    if allowed and case != "log walk batch size":
        # The walk's rule is to stop at a batch that runs past the end (a partial tail), not to fail.
        assert error is not None, f"{case}: accepted"


_NATIVE_CHILD = """
import os, resource, sys
from tests.faults.test_hostile_input import HUGE_LENGTH_CASES
page = os.sysconf("SC_PAGE_SIZE")
with open("/proc/self/statm") as statm:
    mapped = int(statm.read().split()[0]) * page
resource.setrlimit(resource.RLIMIT_AS, (mapped + int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_AS)[1]))
for case in sys.argv[2:]:
    call, allowed = HUGE_LENGTH_CASES[case]
    try:
        call()
    except allowed as err:
        # A codec library reports a failed allocation as bad data; under the limit that means it tried one.
        assert "memory" not in str(err).lower(), (case, str(err))
    print(case, flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc to size the address-space limit")
def test_declared_lengths_cost_no_native_allocation() -> None:
    """tracemalloc sees only Python's allocations; the codecs allocate in Rust and C. Under an address-space
    limit of 48 MiB above what the child has mapped, an up-front allocation of a declared size aborts it."""
    _run_natively(list(HUGE_LENGTH_CASES))


def _run_natively(cases: list[str]) -> None:
    """Run the ``HUGE_LENGTH_CASES`` named ``cases`` in a child under the address-space limit; assert each ran."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _NATIVE_CHILD, str(MEMORY_LIMIT * 48 // 10), *cases],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=FAILURE_DEADLINE_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:-1] == cases
    REPORT.add("declared-length/native", len(cases))


# --- regressions (one per bug found by these tests) -------------------------------------------------------------


def test_snappy_block_declaring_more_than_it_can_encode_is_refused_before_allocating() -> None:
    # Six bytes declared 200 MiB; the decoder allocated all of it before finding the block short.
    with pytest.raises(CorruptRecordError, match="more than it can encode"):
        decompress(CompressionType.SNAPPY, _uvarint(200 * 1024 * 1024) + b"\x00a")
    # The bound is the format's own best case: real data compressed as tightly as snappy can still decodes.
    zeros = bytes(1 << 20)
    assert decompress(CompressionType.SNAPPY, compress(CompressionType.SNAPPY, zeros)) == zeros


def test_zstd_content_size_beyond_what_its_blocks_hold_is_refused_before_allocating() -> None:
    # A frame declaring 200 MiB of content over one 1-byte raw block: the decoder allocated the declared size.
    with pytest.raises(CorruptRecordError, match="declares 209715200 bytes of content but its blocks hold at most 1"):
        decompress(CompressionType.ZSTD, _zstd_frame(200 * 1024 * 1024, _raw_zstd_block(b"a")))
    assert decompress(CompressionType.ZSTD, _zstd_frame(1, _raw_zstd_block(b"a"))) == b"a"


def test_zstd_window_of_a_tiny_frame_costs_no_window_allocation() -> None:
    # 10 bytes declaring a 128 MiB window (no content size): the decoder allocated the window up front. The window
    # is lowered to the frame's output bound, which decodes the same bytes.
    frame = struct.pack("<IBB", 0xFD2FB528, 0x00, 17 << 3) + _raw_zstd_block(b"a")
    # The window is allocated by the C library, which tracemalloc does not see: only the child's address-space
    # limit tells a lowered window from the declared one.
    _run_natively(["zstd window descriptor"])
    assert decompress(CompressionType.ZSTD, frame) == b"a"
    too_large = struct.pack("<IBB", 0xFD2FB528, 0x00, 18 << 3) + _raw_zstd_block(b"a")
    with pytest.raises(CorruptRecordError, match="exceeds the decoder limit"):
        decompress(CompressionType.ZSTD, too_large)
    # Real frames with large windows (level 22) still decode byte for byte.
    data = random.Random(5).randbytes(1000) * 300
    assert decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, data, level=22)) == data


def test_partition_dir_name_holding_a_slash_or_nul_is_refused() -> None:
    # "../../etc/x-0" parsed as topic "../../etc/x": a path where a directory entry was promised.
    for name in ("../../etc/x-0", "a/b-0", "t\x00-0", "x/y-0.abc-delete"):
        with pytest.raises(InvalidPartitionDirError):
            PartitionDirName.parse(name)
    with pytest.raises(ValueError, match="'/' or NUL"):
        PartitionDirName("a/b", 0)
    assert PartitionDirName.parse("..-0").topic == ".."  # one entry (Kafka parses it too); validate_topic refuses it


def test_record_timestamps_past_int64_wrap_like_java_longs() -> None:
    # A record's timestamp is a Java long sum (baseTimestamp + delta); Python's int grew past 2**63 instead, which
    # no time index, batch writer (struct "q") or int64 column (the columnar decoder wraps) could take back.
    batch = bytearray(build_batch([SimpleRecord(b"a", None, 0), SimpleRecord(b"b", None, 5)], base_offset=7))
    struct.pack_into(">q", batch, 27, INT64_MAX - 2)  # baseTimestamp
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[21:]))
    view = DefaultRecordBatch(bytes(batch))
    view.ensure_valid()
    assert [(r.timestamp, r.stored_timestamp) for r in view.records()] == [
        (INT64_MAX - 2, INT64_MAX - 2),
        (INT64_MIN + 2, INT64_MIN + 2),
    ]
    # Offsets stay plain sums: tests/test_records.py pins base + delta for base offsets near 2**63.
    assert [r.offset for r in DefaultRecordBatch(build_batch([SimpleRecord(b"a")] * 2, base_offset=INT64_MAX)).records()] == [
        INT64_MAX,
        INT64_MAX + 1,
    ]
