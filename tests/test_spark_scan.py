"""The kafka-log source without Spark: option parsing, planning and pruning (counted segment opens), the bulk
Arrow decoder against the scalar decoder (hypothesis, every codec, arbitrary bytes), Kafka's consumer rules
(control batches, read_committed) and corruption handling."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install -e '.[spark]')")
pytest.importorskip("numpy", reason="numpy not installed (pip install -e '.[spark]')")

import pyarrow as pa
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.errors import ConfigError
from logmgr.key_index import LogKeyIndex
from logmgr.log import Log
from logmgr.log_loader import load_log
from logmgr.spark.columnar import ColumnarDecoder
from logmgr.spark.options import EARLIEST, LATEST, OffsetSpec, parse_options
from logmgr.spark.scan import PushedBounds, ScanPlan, SliceStats, plan_scan, read_slice
from logmgr.spark.schema import OutputColumns, arrow_schema, spark_ddl
from segments.compression import CompressionType
from segments.errors import CorruptRecordError
from segments.naming import log_file
from segments.records import (
    RECORD_BATCH_OVERHEAD,
    ControlRecordType,
    DefaultRecordBatch,
    Header,
    SimpleRecord,
    build_batch,
)
from tests.conftest import CLIENTS_GENERATED, require_fixtures

T0 = 1_700_000_000_000
ALL_COLUMNS = OutputColumns(True, True, True, True, True)


# -- options ------------------------------------------------------------------------------------------------


def test_options_defaults_are_spark_kafka_batch_defaults() -> None:
    options = parse_options({"path": "/data"})
    assert options.paths == ("/data",)
    assert options.starting.default == OffsetSpec(EARLIEST)
    assert options.ending.default == OffsetSpec(LATEST)
    assert not options.read_committed
    assert options.columns == OutputColumns()
    assert options.fail_on_corruption


def test_options_json_offsets_synonyms_and_case() -> None:
    options = parse_options(
        {
            "PATH": "/a,/b",
            "subscribe": "t1,t2",
            "startingOffsets": '{"t1":{"0":23,"1":-2}}',
            "endingOffsetsByTimestamp": '{"t2":{"0":1700000000000}}',
            "kafka.isolation.level": "read_committed",
            "includeHeaders": "TRUE",
            "extraColumns": "segment, producerId",
        }
    )
    assert options.paths == ("/a", "/b")
    assert options.topics == {"t1", "t2"}
    assert options.starting.for_partition("t1", 0) == OffsetSpec(23)
    assert options.starting.for_partition("t1", 1) == OffsetSpec(EARLIEST)
    assert options.starting.for_partition("t1", 7) == OffsetSpec(EARLIEST)
    assert options.ending.for_partition("t2", 0).timestamp == 1_700_000_000_000
    assert options.read_committed
    assert options.columns.names[-3:] == ["headers", "producerId", "segment"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "path"),
        ({"path": "/x", "startingOffsets": "{not json"}, "startingOffsets"),
        ({"path": "/x", "startingOffsets": '{"t":{"0":-3}}'}, "startingOffsets"),
        ({"path": "/x", "startingOffsets": "earliest", "startingTimestamp": "1"}, "startingTimestamp"),
        ({"path": "/x", "topicPattern": "("}, "topicPattern"),
        ({"path": "/x", "isolationLevel": "serializable"}, "isolationLevel"),
        ({"path": "/x", "extraColumns": "nope"}, "extraColumns"),
        ({"path": "/x", "maxBytesPerPartition": "0"}, "maxBytesPerPartition"),
        ({"path": "/x", "failOnCorruption": "maybe"}, "failOnCorruption"),
        ({"path": "/x", "topics": "a", "subscribe": "b"}, "subscribe"),
        ({"path": "/x", "assign": '{"t": "0"}'}, "assign"),
    ],
)
def test_bad_options_raise_config_error_naming_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_options(options)


def test_schema_ddl_is_spark_kafka_source_schema() -> None:
    assert spark_ddl(OutputColumns()) == (
        "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
        "timestampType int"
    )
    assert spark_ddl(OutputColumns(headers=True)).endswith("headers array<struct<key:string,value:binary>>")
    assert arrow_schema(ALL_COLUMNS).names == ALL_COLUMNS.names


def test_cluster_metadata_log_is_read_only_when_named() -> None:
    assert not parse_options({"path": "/x"}).selects_topic("__cluster_metadata")
    assert parse_options({"path": "/x", "topics": "__cluster_metadata"}).selects_topic("__cluster_metadata")
    assert parse_options({"path": "/x"}).selects_topic("__consumer_offsets")


# -- a multi-segment log --------------------------------------------------------------------------------------


def build_log(
    directory: Path, *, batches: int = 40, per_batch: int = 5, segment_bytes: int = 1000, index_interval: int = 4096
) -> Log:
    """``batches`` batches of ``per_batch`` records, record timestamps T0 + offset * 1000, many segments."""
    config = LogConfig.from_properties(
        {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(index_interval)}
    )
    log = load_log(directory, config, clock=ManualClock(T0))
    offset = 0
    for _ in range(batches):
        log.append_records(
            [
                SimpleRecord(f"value-{offset + i}".encode() * 3, f"k{offset + i}".encode(), T0 + (offset + i) * 1000)
                for i in range(per_batch)
            ]
        )
        offset += per_batch
    return log


@pytest.fixture(scope="module")
def multi_segment_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log_dir = tmp_path_factory.mktemp("logs")
    log = build_log(log_dir / "events-0")
    assert len(log.segments) >= 10
    log.close()
    return log_dir


def offsets_read(options: dict[str, str], bounds: PushedBounds | None = None) -> list[int]:
    parsed = parse_options(options)
    found: list[int] = []
    for piece in plan_scan(parsed, bounds).slices:
        for table in read_slice(piece, parsed.columns):
            found.extend(table.column("offset").to_pylist())
    return found


def test_full_read_returns_every_offset_once(multi_segment_dir: Path) -> None:
    assert offsets_read({"path": str(multi_segment_dir)}) == list(range(200))


def test_offset_bounds_open_only_the_segments_in_range(multi_segment_dir: Path) -> None:
    options = parse_options(
        {"path": str(multi_segment_dir), "startingOffsets": '{"events":{"0":57}}',
         "endingOffsets": '{"events":{"0":61}}'}
    )
    plan = plan_scan(options)
    assert plan.segments_total >= 10
    # Only the segments holding offsets 57..60 are opened (by base-offset file names, no scan).
    assert plan.segments_opened == len(plan.slices) <= 2
    assert offsets_read({"path": str(multi_segment_dir), "startingOffsets": '{"events":{"0":57}}',
                         "endingOffsets": '{"events":{"0":61}}'}) == [57, 58, 59, 60]


def test_pushed_offset_bounds_prune_like_options(multi_segment_dir: Path) -> None:
    bounds = PushedBounds(min_offset=150, max_offset=153)
    plan = plan_scan(parse_options({"path": str(multi_segment_dir)}), bounds)
    assert len(plan.slices) == 1
    assert offsets_read({"path": str(multi_segment_dir)}, bounds) == [150, 151, 152]


def test_timestamp_bounds_resolve_like_kafka_offsets_for_times(multi_segment_dir: Path) -> None:
    # Record n has timestamp T0 + n s: [T0+42.5 s, T0+45 s) starts at offset 43 and ends before offset 45.
    found = offsets_read(
        {"path": str(multi_segment_dir), "startingTimestamp": str(T0 + 42_500), "endingTimestamp": str(T0 + 45_000)}
    )
    assert found == [43, 44]
    # A timestamp after every record resolves to the log end: nothing to read.
    assert offsets_read({"path": str(multi_segment_dir), "startingTimestamp": str(T0 + 10**9)}) == []


def test_pushed_timestamp_bound_skips_older_segments_without_reading_them(multi_segment_dir: Path) -> None:
    bounds = PushedBounds(min_timestamp=T0 + 190_000)
    plan = plan_scan(parse_options({"path": str(multi_segment_dir)}), bounds)
    assert len(plan.slices) == 1
    found = offsets_read({"path": str(multi_segment_dir)}, bounds)
    # Batches wholly older than the bound are skipped; Spark re-applies the filter to the rest.
    assert set(range(190, 200)) <= set(found)
    assert min(found) >= 185


def test_max_bytes_per_partition_cuts_segments_at_batch_boundaries(tmp_path: Path) -> None:
    log = build_log(tmp_path / "big-0", batches=60, segment_bytes=1 << 20, index_interval=200)
    log.flush()
    log.close()
    options = {"path": str(tmp_path), "maxBytesPerPartition": "1000"}
    plan = plan_scan(parse_options(options))
    assert len(plan.slices) > 5
    for before, after in zip(plan.slices, plan.slices[1:], strict=False):
        assert before.end_position == after.start_position
    assert offsets_read(options) == list(range(300))


# -- key pruning ---------------------------------------------------------------------------------------------

KEYS = [b"user-%d" % i for i in range(12)]


def build_keyed_log(directory: Path, *, indexed: bool, seed: int = 5, batches: int = 120) -> Log:
    """Random keys from :data:`KEYS` (some null), 1-3 records a batch, small segments; batches ``n % 10`` in
    (3, 4) are transactions of producer 9, aborted when ``n % 20 == 4`` else committed, their markers in the same
    segments, so a read_committed read must see the abort markers of the batches it keeps. The key index is built
    (caught up) when ``indexed``; the log is returned open."""
    rng = random.Random(seed)
    config = LogConfig.from_properties(
        {"segment.bytes": "1500", "index.interval.bytes": "200", "logmgr.key.index.enable": str(indexed).lower()}
    )
    log = load_log(directory, config, clock=ManualClock(T0))
    sequence = 0
    for n in range(batches):
        records = [
            SimpleRecord(b"v%d" % n, rng.choice(KEYS) if rng.random() < 0.9 else None, T0 + n)
            for _ in range(rng.randint(1, 3))
        ]
        if n % 10 in (3, 4):
            log.append_records(records, producer_id=9, producer_epoch=0, base_sequence=sequence, is_transactional=True)
            sequence += len(records)
            if n % 10 == 4:
                marker = ControlRecordType.ABORT if n % 20 == 4 else ControlRecordType.COMMIT
                log.append_end_txn_marker(9, 0, marker, 0)
        else:
            log.append_records(records)
    if indexed:
        index = LogKeyIndex(log, lambda: None)
        index.catch_up()
        index.close()
    log.flush()
    return log


@pytest.fixture(scope="module")
def keyed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic ``keyed``: partition 0 with a caught-up key index, partition 1 (same records) without one."""
    log_dir = tmp_path_factory.mktemp("keyed")
    build_keyed_log(log_dir / "keyed-0", indexed=True).close()
    build_keyed_log(log_dir / "keyed-1", indexed=False).close()
    return log_dir


def keyed_rows(options: dict[str, str], keys: frozenset[bytes], bounds: PushedBounds | None = None) -> list[tuple[int, int]]:
    """``(partition, offset)`` of the rows with one of ``keys``, filtered after the read as Spark re-applies the
    handed-back filter."""
    parsed = parse_options(options)
    found: list[tuple[int, int]] = []
    for piece in plan_scan(parsed, bounds).slices:
        for table in read_slice(piece, parsed.columns):
            rows = zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "key")), strict=True)
            found.extend((p, o) for p, o, k in rows if k in keys)
    return sorted(found)


def plan_bytes(plan: ScanPlan, partition: int) -> int:
    return sum(piece.size for piece in plan.slices if piece.partition == partition)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("keys", [(KEYS[0],), (KEYS[3], KEYS[7]), (b"absent",)])
def test_pushed_keys_read_only_the_batches_the_key_index_names(
    keyed_dir: Path, keys: tuple[bytes, ...], isolation: str
) -> None:
    options = {"path": str(keyed_dir), "isolationLevel": isolation}
    wanted = frozenset(keys)
    bounds = PushedBounds(keys=wanted)
    full, pruned = plan_scan(parse_options(options)), plan_scan(parse_options(options), bounds)
    rows = keyed_rows(options, wanted, bounds)
    assert rows == keyed_rows(options, wanted)
    assert rows or keys == (b"absent",)
    # Partition 0's segments are all cut down to the batches holding the keys (and, read_committed, the abort
    # markers); partition 1 has no key index and is read in full.
    segments_0 = len(list((keyed_dir / "keyed-0").glob("*.log")))
    assert segments_0 > 3 and pruned.segments_key_pruned == segments_0
    assert plan_bytes(pruned, 0) < plan_bytes(full, 0) / 2
    assert [p for p in pruned.slices if p.partition == 1] == [p for p in full.slices if p.partition == 1]
    if keys == (b"absent",):
        assert [p for p in pruned.slices if p.partition == 0] == []


def test_pushed_keys_with_offset_bounds_and_small_slices_keep_the_rows(keyed_dir: Path) -> None:
    options = {"path": str(keyed_dir), "startingOffsets": '{"keyed":{"0":37,"1":37}}',
               "endingOffsets": '{"keyed":{"0":190,"1":190}}', "maxBytesPerPartition": "500"}
    wanted = frozenset(KEYS[:2])
    bounds = PushedBounds(keys=wanted, min_offset=41)
    pruned = plan_scan(parse_options(options), bounds)
    assert any(len(p.ranges) > 1 for p in pruned.slices)
    assert all(p.size <= 500 for p in pruned.slices if p.partition == 0)
    rows = keyed_rows(options, wanted, bounds)
    assert rows == [r for r in keyed_rows(options, wanted) if r[1] >= 41]
    assert {p for p, _ in rows} == {0, 1} and min(o for _, o in rows) >= 41 and max(o for _, o in rows) < 190


def test_segments_whose_key_index_lags_the_log_are_read_in_full(tmp_path: Path) -> None:
    log = build_keyed_log(tmp_path / "keyed-0", indexed=True)
    log.close()
    # Appended with the index off: the active segment's file no longer reaches the log end.
    log = load_log(tmp_path / "keyed-0", LogConfig.from_properties({"segment.bytes": "1500"}), clock=ManualClock(T0))
    log.append_records([SimpleRecord(b"late", KEYS[0], T0)])
    late = log.log_end_offset - 1
    log.flush()
    log.close()
    options = {"path": str(tmp_path)}
    wanted = frozenset([KEYS[0]])
    bounds = PushedBounds(keys=wanted)
    full, pruned = plan_scan(parse_options(options)), plan_scan(parse_options(options), bounds)
    assert pruned.segments_key_pruned == len(full.slices) - 1
    assert pruned.slices[-1] == full.slices[-1]
    rows = keyed_rows(options, wanted, bounds)
    assert rows == keyed_rows(options, wanted) and rows[-1] == (0, late)


def test_contradictory_bounds_plan_nothing(multi_segment_dir: Path) -> None:
    plan = plan_scan(parse_options({"path": str(multi_segment_dir)}), PushedBounds(empty=True))
    assert plan.slices == [] and plan.segments_opened == 0


def test_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        plan_scan(parse_options({"path": str(tmp_path / "absent")}))


def test_deleted_future_and_stray_dirs_are_skipped(tmp_path: Path) -> None:
    for name in ("events-0", "events-1.abc-delete", "events-2.abc-future", "events-3.abc-stray"):
        build_log(tmp_path / name, batches=2).close()
    plan = plan_scan(parse_options({"path": str(tmp_path)}))
    assert {(r.topic, r.partition) for r in plan.ranges} == {("events", 0)}


# -- transactions ---------------------------------------------------------------------------------------------


def test_read_committed_drops_aborted_and_open_transactions(tmp_path: Path) -> None:
    log = load_log(tmp_path / "tx-0", LogConfig.from_properties({"segment.bytes": "400"}), clock=ManualClock(T0))

    def txn(pid: int, values: list[bytes], seq: int) -> None:
        log.append_records([SimpleRecord(v, None, T0) for v in values], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, is_transactional=True)

    txn(1, [b"a0", b"a1"], 0)            # offsets 0-1, aborted below (marker in a later segment)
    log.append_records([SimpleRecord(b"plain", None, T0)])   # offset 2
    txn(2, [b"b0"], 0)                   # offset 3, committed
    for i in range(6):
        log.append_records([SimpleRecord(b"filler-%d" % i * 10, None, T0)])  # offsets 4-9, rolls segments
    log.append_end_txn_marker(1, 0, ControlRecordType.ABORT, 0)   # offset 10
    log.append_end_txn_marker(2, 0, ControlRecordType.COMMIT, 0)  # offset 11
    txn(1, [b"a2"], 2)                   # offset 12, committed
    log.append_end_txn_marker(1, 0, ControlRecordType.COMMIT, 0)  # offset 13
    log.append_records([SimpleRecord(b"tail", None, T0)])     # offset 14
    txn(3, [b"c0"], 0)                   # offset 15, still open at the end
    log.append_records([SimpleRecord(b"after-open", None, T0)])   # offset 16
    log.flush()
    log.close()
    assert len(list((tmp_path / "tx-0").glob("*.log"))) > 2
    everything = offsets_read({"path": str(tmp_path)})
    assert everything == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 16]  # control records never returned
    # read_committed: aborted 0-1 gone; "latest" is the last stable offset 15 (txn of producer 3 is open).
    committed = offsets_read({"path": str(tmp_path), "isolationLevel": "read_committed"})
    assert committed == [2, 3, 4, 5, 6, 7, 8, 9, 12, 14]
    # A slice starting inside the aborted transaction still drops its records.
    assert offsets_read(
        {"path": str(tmp_path), "isolationLevel": "read_committed", "startingOffsets": '{"tx":{"0":1}}'}
    ) == [2, 3, 4, 5, 6, 7, 8, 9, 12, 14]


def test_transactions_fixture_read_committed_drops_exactly_the_aborted_records() -> None:
    folder = require_fixtures(CLIENTS_GENERATED / "transactions-0")
    truth = json.loads((folder / "aborted_transactions.json").read_text())
    expected = [json.loads(line) for line in (folder / "expected.jsonl").read_text().splitlines()]
    data = [row["offset"] for row in expected if not row["isControl"]]
    committed = offsets_read({"path": str(folder), "isolationLevel": "read_committed"})
    assert committed == [o for o in data if o not in set(truth["abortedDataOffsets"])]
    assert offsets_read({"path": str(folder)}) == data


# -- the bulk decoder against the scalar decoder --------------------------------------------------------------

_bytes_or_none = st.none() | st.binary(max_size=300)
_records = st.lists(
    st.builds(
        SimpleRecord,
        _bytes_or_none,
        _bytes_or_none,
        st.integers(min_value=-1, max_value=2**41),
        st.lists(st.builds(Header, st.text(max_size=8), _bytes_or_none), max_size=3).map(tuple),
    ),
    min_size=1,
    max_size=40,
)


def decode_with(decoder: ColumnarDecoder, batches: list[bytes]) -> list[dict[str, object]]:
    for raw in batches:
        view = DefaultRecordBatch(raw)
        decoder.add(view, view.decompressed_records_region(), position=0)
    table = decoder.flush()
    if table is None:
        return []
    rows = table.to_pylist()
    # Microseconds as stored (a datetime round trip through float seconds could be off by one millisecond).
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    for row, value in zip(rows, micros, strict=True):
        row["timestamp"] = value // 1000
    return rows


def scalar_rows(batches: list[bytes]) -> list[tuple[object, ...]]:
    rows = []
    for raw in batches:
        view = DefaultRecordBatch(raw)
        for record in view.records():
            headers = [{"key": h.key, "value": h.value} for h in record.headers] or None
            rows.append((record.key, record.value, record.offset, record.timestamp, int(view.timestamp_type),
                         headers, view.producer_id, view.is_transactional, view.base_offset))
    return rows


@settings(max_examples=60)
@given(
    st.lists(_records, min_size=1, max_size=4),
    st.sampled_from(list(CompressionType)),
    st.booleans(),
)
def test_columnar_decoder_equals_scalar_decoder(
    record_lists: list[list[SimpleRecord]], codec: CompressionType, log_append_time: bool
) -> None:
    batches = []
    offset = 0
    for records in record_lists:
        raw = build_batch(records, base_offset=offset, compression=codec, producer_id=7 if offset else -1,
                          producer_epoch=0 if offset else -1, base_sequence=0 if offset else -1)
        if log_append_time:
            raw = DefaultRecordBatch(raw).with_log_append_time(T0)
        batches.append(raw)
        offset += len(records)
    decoder = ColumnarDecoder("x.log", "t", 3, ALL_COLUMNS, min_offset=0, max_offset=2**62)
    got = [
        (r["key"], r["value"], r["offset"], r["timestamp"], r["timestampType"], r["headers"], r["producerId"],
         r["isTransactional"], r["batchBaseOffset"])
        for r in decode_with(decoder, batches)
    ]
    assert got == scalar_rows(batches)


def raw_batch(region: bytes, count: int) -> bytes:
    """A magic-2 batch whose records region is ``region`` (arbitrary bytes) claiming ``count`` records."""
    header = bytearray(build_batch([SimpleRecord(b"x")])[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">i", header, 8, RECORD_BATCH_OVERHEAD - 12 + len(region))
    struct.pack_into(">i", header, 57, count)
    body = bytes(header) + region
    crc = crc32c(body[21:])
    return body[:17] + struct.pack(">I", crc) + body[21:]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=12))
def test_columnar_decoder_agrees_with_scalar_decoder_on_arbitrary_bytes(region: bytes, count: int) -> None:
    raw = raw_batch(region, count)
    try:
        expected = scalar_rows([raw])
    except CorruptRecordError:
        expected = None
    decoder = ColumnarDecoder("x.log", "t", 0, ALL_COLUMNS, min_offset=0, max_offset=2**62)
    try:
        got = decode_with(decoder, [raw])
    except CorruptRecordError as err:
        assert expected is None, f"bulk decoder rejected what the scalar decoder accepts: {err}"
        assert err.path == "x.log" and err.position is not None
        return
    assert expected is not None, "bulk decoder accepted what the scalar decoder rejects"
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [(k, v, o) for k, v, o, *_ in expected]


# -- corruption ----------------------------------------------------------------------------------------------


def corrupt_dir(tmp_path: Path) -> tuple[Path, int]:
    """A one-segment log of 10 single-record batches with a byte of the 4th batch flipped; returns the dir and
    the 4th batch's position."""
    log = load_log(tmp_path / "bad-0", LogConfig.from_properties({}), clock=ManualClock(T0))
    positions = []
    for i in range(10):
        positions.append(log.segments.active_segment.size)
        log.append_records([SimpleRecord(b"value-%d" % i, None, T0)])
    log.flush()
    log.close()
    path = log_file(tmp_path / "bad-0", 0)
    data = bytearray(path.read_bytes())
    data[positions[3] + RECORD_BATCH_OVERHEAD + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    return tmp_path, positions[3]


def test_corrupt_batch_fails_the_read_naming_file_and_position(tmp_path: Path) -> None:
    log_dir, position = corrupt_dir(tmp_path)
    with pytest.raises(CorruptRecordError) as caught:
        offsets_read({"path": str(log_dir)})
    assert caught.value.path is not None and str(caught.value.path).endswith("00000000000000000000.log")
    assert caught.value.position == position + 17  # the CRC field of the damaged batch


def test_fail_on_corruption_false_skips_and_counts_the_batch(tmp_path: Path) -> None:
    log_dir, _ = corrupt_dir(tmp_path)
    options = parse_options({"path": str(log_dir), "failOnCorruption": "false"})
    stats = SliceStats()
    found = []
    for piece in plan_scan(options).slices:
        for table in read_slice(piece, options.columns, fail_on_corruption=False, stats=stats):
            found.extend(table.column("offset").to_pylist())
    assert found == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert stats.corrupt_batches == 1 and stats.rows == 9


def test_decoder_skip_mode_drops_only_the_bad_batch() -> None:
    good = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=0)
    # Valid framing, but the value length runs past its record: only the field decode sees it.
    # One record of 6 body bytes: attributes, timestamp delta, offset delta, null key, value size 30, no headers.
    bad = raw_batch(bytes([12, 0, 0, 0, 1, 60, 0]), 1)
    bad = struct.pack(">q", 2) + bad[8:]
    decoder = ColumnarDecoder("x.log", "t", 0, OutputColumns(), min_offset=0, max_offset=100)
    for raw in (good, bad):
        view = DefaultRecordBatch(raw)
        decoder.add(view, view.decompressed_records_region(), position=0)
    table = decoder.flush(skip_corrupt=True)
    assert table is not None and table.column("offset").to_pylist() == [0, 1]
    assert decoder.dropped == 1
