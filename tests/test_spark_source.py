"""``spark.read.format("kafka-log")`` in a real SparkSession (``local[2]``): schema equality with Spark's Kafka
source, every reference fixture read exactly as logmgr reads it, read_committed, offset/time bounds, filter
pushdown pruning (counted input partitions), splitting, corruption handling and discovery."""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")

from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, In
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from logmgr.log_dirs import readonly_segments
from logmgr.spark.options import parse_options
from logmgr.spark.scan import find_partition_dirs, plan_scan
from logmgr.spark.source import bounds_from_filters
from tests.conftest import CLIENTS_GENERATED, KAFKA_REAL, require_fixtures
from tests.test_spark_scan import KEYS, T0, build_keyed_log, build_log, corrupt_dir

# Spark's KafkaRecordToRowConverter schema, field for field (all nullable).
SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
SPARK_KAFKA_HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)

_TIMESTAMP_TYPES = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}


def read(spark: Any, path: Path | str, **options: str) -> Any:
    return spark.read.format("kafka-log").options(**options).load(str(path))


def test_schema_equals_spark_kafka_source_schema(spark: Any, tmp_path: Path) -> None:
    build_log(tmp_path / "t-0", batches=1).close()
    assert read(spark, tmp_path).schema == SPARK_KAFKA_SCHEMA
    with_headers = read(spark, tmp_path, includeHeaders="true").schema
    assert with_headers == StructType([*SPARK_KAFKA_SCHEMA.fields, SPARK_KAFKA_HEADERS])
    extras = read(spark, tmp_path, extraColumns="producerId,isTransactional,segment,batchBaseOffset").schema
    assert [f.name for f in extras.fields][7:] == ["producerId", "isTransactional", "segment", "batchBaseOffset"]


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


@pytest.mark.parametrize(
    "folder",
    ["none-0", "gzip-0", "snappy-0", "lz4-0", "zstd-aiokafka-0", "magic0-0", "magic0-lz4-0", "magic1-0",
     "log-append-time-0", "idempotent-0", "transactions-0"],
)
def test_clients_generated_fixture_reads_as_kafka_decodes_it(spark: Any, folder: str) -> None:
    path = require_fixtures(CLIENTS_GENERATED / folder)
    expected = [json.loads(line) for line in (path / "expected.jsonl").read_text().splitlines()]
    rows = read(spark, path, includeHeaders="true").orderBy("offset").collect()
    data = [row for row in expected if not row["isControl"]]
    assert [r.offset for r in rows] == [row["offset"] for row in data]
    for row, want in zip(rows, data, strict=True):
        assert (_b64(row.key), _b64(row.value)) == (want["key"], want["value"])
        assert row.timestampType == _TIMESTAMP_TYPES[want["timestampType"]]
        # Spark's conversion: epoch milliseconds -> microseconds, also for -1 (no timestamp).
        epoch_us = (row.timestamp - row.timestamp.__class__(1970, 1, 1)).total_seconds()
        assert round(epoch_us * 1000) == want["timestamp"]
        headers = [{"key": h.key, "value": _b64(h.value)} for h in row.headers] if row.headers else []
        assert headers == [{"key": key, "value": value} for key, value in want["headers"]]
        assert row.topic == folder.rsplit("-", 1)[0] and row.partition == 0


def _fixture_log_dirs() -> list[Path]:
    if not KAFKA_REAL.exists():
        return []
    return sorted(child for origin in KAFKA_REAL.iterdir() if origin.is_dir()
                  for child in origin.iterdir() if child.is_dir())


def _logmgr_rows(log_dir: Path) -> list[tuple[Any, ...]]:
    """What logmgr's own segment reader returns for every data record of ``log_dir``."""
    rows = []
    for tp, partition_dir in find_partition_dirs((str(log_dir),)):
        if tp.topic == "__cluster_metadata":
            continue
        with readonly_segments(partition_dir) as segments:
            for segment in segments:
                for found in segment.batches():
                    if found.batch.magic == 2 and found.batch.is_control:
                        continue
                    rows.extend((tp.topic, tp.partition, r.offset, r.key, r.value) for r in found.batch.records())
    return sorted(rows)


@pytest.mark.parametrize("log_dir", _fixture_log_dirs(), ids=lambda p: p.parent.name)
def test_real_broker_dirs_read_exactly_what_logmgr_reads(spark: Any, log_dir: Path) -> None:
    require_fixtures(KAFKA_REAL)
    expected = _logmgr_rows(log_dir)
    rows = read(spark, log_dir).select("topic", "partition", "offset", "key", "value").collect()
    assert sorted((r.topic, r.partition, r.offset, bytes(r.key) if r.key is not None else None,
                   bytes(r.value) if r.value is not None else None) for r in rows) == expected


def test_read_committed_drops_exactly_the_aborted_records(spark: Any) -> None:
    path = require_fixtures(CLIENTS_GENERATED / "transactions-0")
    truth = json.loads((path / "aborted_transactions.json").read_text())
    expected = [json.loads(line) for line in (path / "expected.jsonl").read_text().splitlines()]
    data = [row["offset"] for row in expected if not row["isControl"]]
    rows = read(spark, path, isolationLevel="read_committed").orderBy("offset").collect()
    assert [r.offset for r in rows] == [o for o in data if o not in set(truth["abortedDataOffsets"])]


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log_dir = tmp_path_factory.mktemp("spark-logs")
    for partition in (0, 1):
        build_log(log_dir / f"events-{partition}").close()
    build_log(log_dir / "other-0", batches=4).close()
    return log_dir


def test_offset_and_time_bounds_return_exactly_the_right_rows(spark: Any, events_dir: Path) -> None:
    rows = read(
        spark, events_dir, topics="events",
        startingOffsets='{"events":{"0":10,"1":-2}}', endingOffsets='{"events":{"0":13,"1":2}}',
    ).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 10), (0, 11), (0, 12), (1, 0), (1, 1)]
    # Record n has timestamp T0 + n s; [T0+20 s, T0+23 s) is offsets 20..22 in each partition.
    rows = read(spark, events_dir, topics="events", startingTimestamp=str(T0 + 20_000),
                endingTimestamp=str(T0 + 23_000)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in (0, 1) for o in (20, 21, 22)]


def test_filter_pushdown_prunes_partitions_and_segments(spark: Any, events_dir: Path) -> None:
    everything = read(spark, events_dir)
    all_slices = everything.rdd.getNumPartitions()
    query = everything.where((F.col("topic") == "events") & (F.col("partition") == 1)
                             & (F.col("offset") >= 150) & (F.col("offset") < 153))
    assert query.rdd.getNumPartitions() == 1 < all_slices
    assert sorted(r.offset for r in query.collect()) == [150, 151, 152]
    recent = everything.where(F.col("timestamp") >= F.lit("2023-11-14 22:16:30").cast("timestamp"))
    assert recent.rdd.getNumPartitions() < all_slices
    # T0 = 2023-11-14 22:13:20 UTC: the bound is T0 + 190 s, offsets 190..199 of both events partitions.
    assert sorted((r.topic, r.partition, r.offset) for r in recent.collect()) == [
        ("events", p, o) for p in (0, 1) for o in range(190, 200)
    ]


def test_key_filters_prune_by_the_key_index_and_keep_the_rows(spark: Any, tmp_path: Path) -> None:
    # Partition 0 has a caught-up key index, partition 1 (same records) none: it is read in full.
    build_keyed_log(tmp_path / "keyed-0", indexed=True).close()
    build_keyed_log(tmp_path / "keyed-1", indexed=False).close()
    options = {"maxBytesPerPartition": "300"}
    everything = read(spark, tmp_path, **options)
    all_rows = everything.collect()
    all_slices = everything.rdd.getNumPartitions()
    for condition, keys in [
        (F.col("key") == F.lit(KEYS[0]), {KEYS[0]}),
        (F.col("key").isin(KEYS[3], KEYS[7]), {KEYS[3], KEYS[7]}),
        ((F.col("key") == F.lit(KEYS[5])) & (F.col("offset") >= 100), {KEYS[5]}),
    ]:
        query = everything.where(condition)
        rows = sorted((r.partition, r.offset, r.value) for r in query.collect())
        expected = sorted((r.partition, r.offset, r.value) for r in all_rows if r.key in keys)
        if len(keys) == 1 and KEYS[5] in keys:
            expected = [row for row in expected if row[1] >= 100]
        # Spark re-applies the handed-back filter: no row of another key comes through the kept batches.
        assert rows == expected and rows
        assert query.rdd.getNumPartitions() < all_slices
    # A key no record has: partition 0 plans no slice at all, partition 1 still every slice.
    absent = everything.where(F.col("key") == F.lit(b"absent"))
    assert absent.collect() == []
    full_plan = plan_scan(parse_options({"path": str(tmp_path), **options}))
    assert absent.rdd.getNumPartitions() == sum(p.partition == 1 for p in full_plan.slices)
    # The plan Spark's filters give: fewer bytes read than the unpruned plan, partition 1's slices unchanged.
    pruned_plan = plan_scan(
        parse_options({"path": str(tmp_path), **options}),
        bounds_from_filters([In(("key",), (KEYS[3], KEYS[7])), EqualTo(("partition",), 0)]),
    )
    assert sum(p.size for p in pruned_plan.slices) < sum(p.size for p in full_plan.slices if p.partition == 0) / 2
    assert bounds_from_filters([EqualTo(("key",), b"a"), EqualTo(("key",), b"b")]).empty
    assert bounds_from_filters([EqualTo(("key",), "text")]).keys is None


def test_max_bytes_per_partition_splits_without_changing_rows(spark: Any, events_dir: Path) -> None:
    whole = read(spark, events_dir, topics="other")
    split = read(spark, events_dir, topics="other", maxBytesPerPartition="300")
    assert split.rdd.getNumPartitions() >= whole.rdd.getNumPartitions()
    assert sorted(r.offset for r in split.collect()) == list(range(20))


def test_corrupt_batch_fails_the_job_naming_file_and_position(spark: Any, tmp_path: Path) -> None:
    log_dir, position = corrupt_dir(tmp_path)
    with pytest.raises(Exception, match=rf"00000000000000000000\.log.*position {position + 17}"):
        read(spark, log_dir).collect()
    assert sorted(r.offset for r in read(spark, log_dir, failOnCorruption="false").collect()) == [
        0, 1, 2, 4, 5, 6, 7, 8, 9
    ]


def test_bad_option_fails_at_analysis_naming_the_option(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, tmp_path, startingOffsets="{oops").schema  # noqa: B018 - analysis is the test


def test_pyspark_logmgr_is_discoverable_by_spark() -> None:
    # Spark 4 imports every top-level pyspark_* module and registers its DefaultSource by name.
    assert "pyspark_logmgr" in {module.name for module in pkgutil.iter_modules()}
    module = importlib.import_module("pyspark_logmgr")
    assert module.DefaultSource.name() == "kafka-log"
