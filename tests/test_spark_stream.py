"""Streaming reads of live log dirs (logmgr.spark.stream).

The reader is driven in-process first, as Spark's driver drives it (initial offset, latest offset under a read
limit, planning, reading), against logs that a :class:`~logmgr.log.Log` keeps appending to: starting options,
exact ``[start, end)`` coverage for every pair of offsets, ``maxOffsetsPerTrigger`` splitting, the
``availableNow`` target, ``read_committed`` and data loss. Then three real streaming queries (``local[2]``,
few micro-batches each): ``availableNow`` runs resuming from their checkpoint into a parquet sink, a
``read_committed`` stream across a transaction's commit, and a continuously running query following appends.
"""

from __future__ import annotations

import itertools
import json
import logging
import pickle
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from checkpoints import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from logmgr.cleaner.log_cleaner import LogCleaner
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.errors import ConfigError, OffsetOutOfRangeError
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.spark.options import parse_options
from logmgr.spark.stream import (
    KafkaLogStreamReader,
    OffsetsJson,
    PartitionKey,
    StreamOptions,
    apportion,
    offsets_from_json,
    offsets_to_json,
    parse_stream_options,
)
from segments.naming import TopicPartition
from segments.records import ControlRecordType, SimpleRecord

T0 = 1_700_000_000_000
STREAM_SOURCE = "kafka-log"


# -- helpers ------------------------------------------------------------------------------------------------


def open_log(directory: Path, clock: ManualClock | None = None, **props: object) -> Log:
    """A live log in ``directory`` (a ``topic-partition`` dir); ``segment_bytes=300`` means
    ``segment.bytes=300``."""
    config = LogConfig.from_properties({key.replace("_", "."): str(value) for key, value in props.items()})
    return load_log(directory, config, clock=clock or ManualClock(T0))


def append(log: Log, *values: bytes) -> None:
    """One single-record batch per value, so every offset is a batch boundary."""
    for value in values:
        log.append_records([SimpleRecord(value)])


def stream_reader(logdir: Path, **options: str) -> KafkaLogStreamReader:
    """The reader Spark would build for ``readStream.options(**options).load(logdir)``."""
    given_options = {"path": str(logdir), **options}
    return KafkaLogStreamReader(parse_options(given_options), parse_stream_options(given_options))


Row = tuple[str, int, int]


def read_range(reader: KafkaLogStreamReader, start: OffsetsJson, end: OffsetsJson) -> list[Row]:
    """``(topic, partition, offset)`` of every row the micro-batch ``[start, end)`` yields, read as tasks
    read it."""
    rows: list[Row] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            data = batch.to_pydict()
            rows.extend(zip(data["topic"], data["partition"], data["offset"], strict=True))
    return sorted(rows)


def expected_rows(start: dict[PartitionKey, int], end: dict[PartitionKey, int]) -> list[Row]:
    return sorted((t, p, o) for (t, p), stop in end.items() for o in range(start.get((t, p), 0), stop))


@pytest.fixture
def two_partitions(tmp_path: Path) -> Iterator[tuple[Path, list[Log]]]:
    """``t-0`` with offsets 0..4 and ``t-1`` with 0..2, records 1 s apart, small segments."""
    clock = ManualClock(T0)
    logs = [open_log(tmp_path / f"t-{p}", clock, segment_bytes=200) for p in range(2)]
    for index, log in enumerate([logs[0]] * 5 + [logs[1]] * 3):
        clock.advance(1_000)
        append(log, b"v%d" % index)
    yield tmp_path, logs
    for log in logs:
        log.close()


# -- options and offsets ------------------------------------------------------------------------------------


def test_stream_options_parse_and_refuse_ending_options() -> None:
    assert parse_stream_options({"path": "/d"}) == StreamOptions()
    parsed = parse_stream_options(
        {"MaxOffsetsPerTrigger": " 7 ", "failondataloss": "False", "STARTINGOFFSETS": "x"}
    )
    assert parsed == StreamOptions(max_offsets_per_trigger=7, fail_on_data_loss=False, starting_given=True)
    assert parse_stream_options({"startingTimestamp": "1"}).starting_given
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(ConfigError) as err:
            parse_stream_options({name.upper(): "latest"})
        assert err.value.key == name
    for bad in ("0", "-3", "many"):
        with pytest.raises(ConfigError) as err:
            parse_stream_options({"maxOffsetsPerTrigger": bad})
        assert err.value.key == "maxOffsetsPerTrigger"
    with pytest.raises(ConfigError):
        parse_stream_options({"failOnDataLoss": "maybe"})


def test_offsets_json_is_sorted_with_string_partitions() -> None:
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 9): 0}
    as_json = offsets_to_json(offsets)
    assert json.dumps(as_json) == '{"a": {"2": 1}, "b": {"9": 0, "10": 5}}'
    assert offsets_from_json(json.loads(json.dumps(as_json))) == offsets


@given(st.dictionaries(st.tuples(st.text(min_size=1), st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1)))
def test_offsets_json_round_trips(offsets: dict[PartitionKey, int]) -> None:
    text = json.dumps(offsets_to_json(offsets))
    assert offsets_from_json(json.loads(text)) == offsets
    assert json.dumps(offsets_to_json(offsets_from_json(json.loads(text)))) == text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=3), _JSON, max_size=3))
def test_malformed_offsets_raise_only_config_error(value: dict[str, Any]) -> None:
    try:
        parsed = offsets_from_json(value)
    except ConfigError:
        return
    assert all(offset >= 0 for offset in parsed.values())


@given(
    st.integers(1, 10_000),
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 20)), st.integers(-5, 10_000), max_size=12
    ),
)
def test_apportion_spends_exactly_the_limit_within_one_of_each_fair_share(
    limit: int, backlog: dict[PartitionKey, int]
) -> None:
    shares = apportion(limit, backlog)
    positive = {key: size for key, size in backlog.items() if size > 0}
    total = sum(positive.values())
    assert set(shares) == set(positive)
    assert sum(shares.values()) == min(limit, total)
    assert all(0 <= shares[key] <= size for key, size in positive.items())
    if total > limit:
        for key, size in positive.items():
            floor = limit * size // total
            assert floor <= shares[key] <= floor + 1
        # Leftovers go to partitions that would get nothing before any partition gets more than its floor.
        starved = any(shares[key] == 0 for key in positive)
        topped_up = any(shares[key] > limit * size // total > 0 for key, size in positive.items())
        assert not (starved and topped_up)
    assert apportion(limit, dict(reversed(list(backlog.items())))) == shares


# -- the reader as Spark's driver drives it ----------------------------------------------------------------


def test_initial_offset_defaults_to_latest_and_follows_the_starting_options(
    two_partitions: tuple[Path, list[Log]],
) -> None:
    logdir, _ = two_partitions
    assert stream_reader(logdir).initialOffset() == {"t": {"0": 5, "1": 3}}
    assert stream_reader(logdir, startingOffsets="earliest").initialOffset() == {"t": {"0": 0, "1": 0}}
    assert stream_reader(logdir, startingOffsets='{"t": {"1": 2}}').initialOffset() == {"t": {"0": 0, "1": 2}}
    # Records of t-0 are at T0+1s..T0+5s, of t-1 at T0+6s..T0+8s.
    by_time = stream_reader(logdir, startingTimestamp=str(T0 + 3_000)).initialOffset()
    assert by_time == {"t": {"0": 2, "1": 0}}
    assert stream_reader(logdir, startingOffsets="latest", partitions="1").initialOffset() == {"t": {"1": 3}}


def test_initial_offset_is_resolved_once_per_run(two_partitions: tuple[Path, list[Log]]) -> None:
    logdir, logs = two_partitions
    reader = stream_reader(logdir)
    first = reader.initialOffset()
    append(logs[0], b"late")
    # Spark asks again to run the first micro-batch; a fresh "latest" would skip the record just appended.
    assert reader.initialOffset() == first
    end = reader.latestOffset(first, ReadAllAvailable())
    assert end == {"t": {"0": 6, "1": 3}}
    assert read_range(reader, first, end) == [("t", 0, 5)]


def test_latest_offset_is_the_log_end_and_identical_json_when_idle(
    two_partitions: tuple[Path, list[Log]],
) -> None:
    logdir, logs = two_partitions
    reader = stream_reader(logdir, startingOffsets="earliest")
    start = reader.initialOffset()
    assert reader.reportLatestOffset() is None
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5, "1": 3}} and reader.reportLatestOffset() == end
    assert read_range(reader, start, end) == expected_rows({}, {("t", 0): 5, ("t", 1): 3})
    again = json.loads(json.dumps(end))
    assert json.dumps(reader.latestOffset(again, ReadAllAvailable())) == json.dumps(again)
    assert reader.partitions(again, again) == []
    append(logs[1], b"x", b"y")
    assert reader.latestOffset(again, ReadAllAvailable()) == {"t": {"0": 5, "1": 5}}


def test_new_partition_is_read_from_its_log_start(two_partitions: tuple[Path, list[Log]]) -> None:
    logdir, _ = two_partitions
    reader = stream_reader(logdir)
    start = reader.initialOffset()
    fresh = open_log(logdir / "u-0")
    append(fresh, *(b"u%d" % i for i in range(4)))
    OffsetCheckpointFile(logdir / LOG_START_OFFSET_CHECKPOINT_FILE).write({TopicPartition("u", 0): 1})
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5, "1": 3}, "u": {"0": 4}}
    assert read_range(reader, start, end) == [("u", 0, 1), ("u", 0, 2), ("u", 0, 3)]
    fresh.close()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_every_offset_range_is_covered_exactly(tmp_path: Path, isolation: str) -> None:
    """All ``[start, end)`` pairs on a multi-segment log, segments also cut into byte ranges, with an aborted
    and a committed transaction whose batches any bound may split."""
    log = open_log(tmp_path / "t-0", segment_bytes=250)
    append(log, b"a", b"b")
    for pid in (7, 8):
        for seq in range(2):
            log.append_records([SimpleRecord(b"x")], producer_id=pid, producer_epoch=0, base_sequence=seq,
                               is_transactional=True)
        append(log, b"between")
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
    log.append_end_txn_marker(8, 0, ControlRecordType.COMMIT, 0)
    append(log, b"c", b"d")
    assert len(log.segments.base_offsets()) > 3
    # Offsets 2, 3: producer 7 (aborted); 5, 6: producer 8 (committed); 8, 9: the markers.
    hidden = {2, 3, 8, 9} if isolation == "read_committed" else {8, 9}
    reader = stream_reader(tmp_path, isolationLevel=isolation, maxBytesPerPartition="100")
    leo = log.log_end_offset
    for start, end in itertools.combinations_with_replacement(range(leo + 1), 2):
        got = read_range(reader, {"t": {"0": start}}, {"t": {"0": end}})
        assert got == [("t", 0, o) for o in range(start, end) if o not in hidden], (start, end)
    log.close()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_compacted_log_streams_its_retained_offsets_across_gaps(
    tmp_path: Path, isolation: str
) -> None:
    """After the log cleaner removed superseded records and aborted data (the markers stay: each is its producer's
    last batch, which Kafka's cleaner keeps), every ``[start, end)`` range and capped micro-batches deliver exactly
    the retained offsets, once each."""
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=300, cleanup_policy="compact", delete_retention_ms=0)
    for i in range(12):
        log.append_records([SimpleRecord(b"v%d" % i, b"k%d" % (i % 3))])
    for pid, marker in ((7, ControlRecordType.ABORT), (8, ControlRecordType.COMMIT)):
        log.append_records([SimpleRecord(b"t%d" % pid, b"txn%d" % pid)], producer_id=pid, producer_epoch=0,
                           base_sequence=0, is_transactional=True)
        log.append_end_txn_marker(pid, 0, marker, 0)
    log.append_records([SimpleRecord(b"last", b"k0")])
    log.roll()
    cleaner = LogCleaner(BrokerConfig(), lambda: {tmp_path: [log]}, clock)
    for _ in range(2):  # the second pass removes what the first one's delete horizon made due
        clock.advance(1)
        cleaner.clean_log(tmp_path, log)
    retained = sorted(
        r.offset
        for b in read_log_batches(log)
        if not b.is_control
        for r in b.records()
    )
    assert retained and len(retained) < log.log_end_offset - 4, "the cleaner left gaps"
    assert 12 not in retained, "the aborted transaction's record was removed"
    reader = stream_reader(tmp_path, isolationLevel=isolation, startingOffsets="earliest", maxOffsetsPerTrigger="2")
    leo = log.log_end_offset
    for start, end in itertools.combinations_with_replacement(range(leo + 1), 2):
        got = read_range(reader, {"t": {"0": start}}, {"t": {"0": end}})
        assert got == [("t", 0, o) for o in retained if start <= o < end], (start, end)
    start, delivered = reader.initialOffset(), []
    while (end := reader.latestOffset(start, reader.getDefaultReadLimit())) != start:
        delivered.extend(read_range(reader, start, end))
        start = end
    assert delivered == [("t", 0, o) for o in retained]
    log.close()


def read_log_batches(log: Log) -> list[Any]:
    """Every batch of ``log`` from its start, control batches included."""
    batches: list[Any] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 1 << 20, isolation=Isolation.LOG_END).batches()
        if not fetched:
            break
        batches.extend(fetched)
        offset = fetched[-1].last_offset + 1
    return batches


def test_max_offsets_per_trigger_splits_fairly_into_micro_batches(
    two_partitions: tuple[Path, list[Log]],
) -> None:
    logdir, _ = two_partitions
    reader = stream_reader(logdir, startingOffsets="earliest", maxOffsetsPerTrigger="3")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(3)
    assert stream_reader(logdir).getDefaultReadLimit() == ReadAllAvailable()
    start = reader.initialOffset()
    batches = []
    while True:
        end = reader.latestOffset(start, limit)
        if end == start:
            break
        batches.append(read_range(reader, start, end))
        start = end
    assert [len(rows) for rows in batches] == [3, 3, 2]
    # Backlogs 5 and 3: t-0 gets 2 (1.875 rounded up), t-1 gets 1.
    assert [(p, o) for _, p, o in batches[0]] == [(0, 0), (0, 1), (1, 0)]
    assert sorted(itertools.chain(*batches)) == expected_rows({}, {("t", 0): 5, ("t", 1): 3})
    assert reader.reportLatestOffset() == {"t": {"0": 5, "1": 3}}
    # Spark passes ReadAllAvailable for Trigger.Once: the option no longer applies.
    assert reader.latestOffset(reader.initialOffset(), ReadAllAvailable()) == {"t": {"0": 5, "1": 3}}


def test_available_now_stops_at_the_ends_seen_when_prepared(two_partitions: tuple[Path, list[Log]]) -> None:
    logdir, logs = two_partitions
    reader = stream_reader(logdir, startingOffsets="earliest", maxOffsetsPerTrigger="4")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    append(logs[0], b"late")
    open_log(logdir / "t-2").close()
    ends = []
    while (end := reader.latestOffset(start, ReadMaxRows(4))) != start:
        ends.append(end)
        start = end
    # Backlogs 5 and 3 share 4: 2.5 and 1.5, the tie broken in partition order; the late record stays unread.
    assert ends == [{"t": {"0": 3, "1": 1}}, {"t": {"0": 5, "1": 3}}]


def test_read_committed_stream_ends_at_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, b"a")
    log.append_records([SimpleRecord(b"open")], producer_id=9, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    append(log, b"b")
    committed = stream_reader(tmp_path, startingOffsets="earliest", isolationLevel="read_committed")
    start = committed.initialOffset()
    end = committed.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 1}}
    assert stream_reader(tmp_path, isolationLevel="read_committed").initialOffset() == end
    assert stream_reader(tmp_path).initialOffset() == {"t": {"0": 3}}
    log.append_end_txn_marker(9, 0, ControlRecordType.COMMIT, 0)
    later = committed.latestOffset(end, ReadAllAvailable())
    assert later == {"t": {"0": 4}}
    assert read_range(committed, end, later) == [("t", 0, 1), ("t", 0, 2)]
    log.close()


def test_offsets_deleted_before_they_were_read_are_data_loss(
    two_partitions: tuple[Path, list[Log]], caplog: pytest.LogCaptureFixture
) -> None:
    logdir, _ = two_partitions
    OffsetCheckpointFile(logdir / LOG_START_OFFSET_CHECKPOINT_FILE).write({TopicPartition("t", 0): 3})
    start, end = {"t": {"0": 1, "1": 0}}, {"t": {"0": 5, "1": 3}}
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0: offsets 1 to 2 were deleted.*failOnDataLoss"):
        stream_reader(logdir).partitions(start, end)
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0: offsets 1 to 1 were deleted"):
        stream_reader(logdir).partitions(start, {"t": {"0": 2, "1": 3}})
    lenient = stream_reader(logdir, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="logmgr.spark.stream"):
        rows = read_range(lenient, start, end)
    assert rows == expected_rows({("t", 0): 3}, {("t", 0): 5, ("t", 1): 3})
    assert "offsets 1 to 2 were deleted" in caplog.text


def test_vanished_partition_and_end_moving_back_are_data_loss(two_partitions: tuple[Path, list[Log]]) -> None:
    logdir, logs = two_partitions
    reader = stream_reader(logdir)
    start = reader.initialOffset()
    logs[1].close()
    shutil.rmtree(logdir / "t-1")
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5}}
    with pytest.raises(OffsetOutOfRangeError, match="partition t-1 disappeared at offset 3"):
        reader.partitions(start, end)
    assert stream_reader(logdir, failOnDataLoss="false").partitions(start, end) == []
    logs[0].truncate_to(2)
    back = reader.latestOffset(end, ReadAllAvailable())
    assert back == {"t": {"0": 2}}
    with pytest.raises(OffsetOutOfRangeError, match="end moved back from 5 to 2"):
        reader.partitions(end, back)


def test_reader_pickles_for_the_executors(two_partitions: tuple[Path, list[Log]]) -> None:
    logdir, _ = two_partitions
    reader = stream_reader(logdir, startingOffsets="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    copy = pickle.loads(pickle.dumps(reader))
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions(start, end)]
    rows = sorted((b["partition"], o) for p in parts for batch in copy.read(p)
                  for b in [batch.to_pydict()] for o in b["offset"])
    assert len(rows) == 8


def test_seeded_appends_and_limits_deliver_every_offset_once(tmp_path: Path) -> None:
    """Random appends across three partitions between micro-batches under random limits: the concatenated
    micro-batches are exactly the log, each batch within its limit."""
    rng = random.Random(20240611)
    logs = [open_log(tmp_path / f"t-{p}", segment_bytes=180) for p in range(3)]
    reader = stream_reader(tmp_path, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    start = reader.initialOffset()
    seen: list[Row] = []
    for _ in range(40):
        for _ in range(rng.randrange(4)):
            append(rng.choice(logs), b"r")
        limit = ReadMaxRows(rng.randint(1, 6)) if rng.random() < 0.8 else ReadAllAvailable()
        end = reader.latestOffset(start, limit)
        rows = read_range(reader, start, end)
        if isinstance(limit, ReadMaxRows):
            assert len(rows) <= limit.max_rows
        seen.extend(rows)
        start = end
    end = reader.latestOffset(start, ReadAllAvailable())
    seen.extend(read_range(reader, start, end))
    assert sorted(seen) == expected_rows({}, {("t", p): log.log_end_offset for p, log in enumerate(logs)})
    assert len(seen) == len(set(seen))
    for log in logs:
        log.close()


# -- real streaming queries --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stream_spark(spark: Any) -> Any:
    """The session, with ``kafka-log`` registered by the ``spark`` fixture."""
    return spark


def run_available_now(spark: Any, logdir: Path, out: Path, **options: str) -> list[dict[str, Any]]:
    """One ``availableNow`` run into a parquet sink checkpointed beside it; the progress of each micro-batch
    that read rows."""
    query = (
        spark.readStream.format(STREAM_SOURCE).options(**options).load(str(logdir))
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet").option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def sink_rows(spark: Any, out: Path) -> list[tuple[int, int, str]]:
    return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(out / "data")).collect())


def test_spark_available_now_resumes_from_its_checkpoint_in_capped_micro_batches(
    stream_spark: Any, tmp_path: Path
) -> None:
    logdir, out = tmp_path / "logs", tmp_path / "out"
    logs = [open_log(logdir / f"t-{p}", segment_bytes=200) for p in range(2)]
    for i in range(10):
        append(logs[i % 2], b"v%d" % i)
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "4"}
    progress = run_available_now(stream_spark, logdir, out, **options)
    assert [p["numInputRows"] for p in progress] == [4, 4, 2]
    assert [json.loads(p["sources"][0]["endOffset"]) for p in progress][-1] == {"t": {"0": 5, "1": 5}}
    assert sink_rows(stream_spark, out) == sorted((i % 2, i // 2, f"v{i}") for i in range(10))
    for i in range(10, 13):
        append(logs[i % 2], b"v%d" % i)
    progress = run_available_now(stream_spark, logdir, out, **options)
    assert [p["numInputRows"] for p in progress] == [3]
    assert json.loads(progress[0]["sources"][0]["startOffset"]) == {"t": {"0": 5, "1": 5}}
    assert sink_rows(stream_spark, out) == sorted((i % 2, i // 2, f"v{i}") for i in range(13))
    for log in logs:
        log.close()


def test_spark_read_committed_stream_waits_for_open_transactions_and_drops_aborted(
    stream_spark: Any, tmp_path: Path
) -> None:
    logdir, out = tmp_path / "logs", tmp_path / "out"
    log = open_log(logdir / "t-0")
    append(log, b"a", b"b")
    for value in (b"x1", b"x2"):
        log.append_records([SimpleRecord(value)], producer_id=7, producer_epoch=0,
                           base_sequence=0 if value == b"x1" else 1, is_transactional=True)
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
    append(log, b"c")
    log.append_records([SimpleRecord(b"y")], producer_id=8, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    append(log, b"d")
    options = {"startingOffsets": "earliest", "isolationLevel": "read_committed"}
    run_available_now(stream_spark, logdir, out, **options)
    assert sink_rows(stream_spark, out) == [(0, 0, "a"), (0, 1, "b"), (0, 5, "c")]
    log.append_end_txn_marker(8, 0, ControlRecordType.COMMIT, 0)
    append(log, b"e")
    run_available_now(stream_spark, logdir, out, **options)
    assert [row[2] for row in sink_rows(stream_spark, out)] == ["a", "b", "c", "y", "d", "e"]
    log.close()


def test_spark_running_query_starts_at_latest_and_follows_appends(stream_spark: Any, tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, b"old1", b"old2")
    query = (
        stream_spark.readStream.format(STREAM_SOURCE).load(str(tmp_path))
        .selectExpr("offset", "CAST(value AS STRING) AS value")
        .writeStream.format("memory").queryName("kafka_log_stream_follow").start()
    )
    try:
        query.processAllAvailable()
        append(log, b"new1", b"new2")
        query.processAllAvailable()
        append(log, b"new3")
        query.processAllAvailable()
        rows = stream_spark.table("kafka_log_stream_follow").collect()
    finally:
        query.stop()
        log.close()
    assert sorted((r.offset, r.value) for r in rows) == [(2, "new1"), (3, "new2"), (4, "new3")]
