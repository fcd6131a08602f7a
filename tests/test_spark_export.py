"""The Spark export pipeline (logmgr.spark.export, ``logmgr export``): exported rows equal a direct
``kafka-log`` read, the manifest records the planned ranges and per-partition row counts, ``date``
partitioning uses UTC dates, resume exports exactly the offsets added since (never those appended after
planning), and every refusal (non-empty out, missing/corrupt/mismatched manifest, bad arguments) is a typed
error naming the path. Spark jobs are kept few: each costs about a second.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from cli.main import main
from logmgr.config import BrokerConfig
from logmgr.errors import ConfigError
from logmgr.log_manager import LogManager
from segments.errors import CorruptCheckpointError
from segments.records import SimpleRecord
from tests.conftest import CLIENTS_GENERATED, KAFKA_REAL, require_fixtures

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")

from pyspark.sql import functions as F

from logmgr.spark.export import (
    FORMATS,
    MANIFEST_NAME,
    PARTITION_COLUMNS,
    ExportOptions,
    ExportRun,
    Manifest,
    PartitionExport,
    export_log_dirs,
    plan_export,
    read_manifest,
    run_export,
)
from logmgr.spark.options import parse_options
from logmgr.spark.scan import plan_scan

# 2023-11-14T22:13:20Z: a record a minute from here crosses midnight UTC after 107 records.
T0 = 1_700_000_000_000
MINUTE = 60_000

Key = tuple[str, int, int]


def append(log_dir: Path, counts: dict[tuple[str, int], int]) -> None:
    """Append ``counts[(topic, partition)]`` records to each partition through a LogManager (small segments,
    clean shutdown). Record ``o`` of a partition has value ``topic-partition@o`` and timestamp ``T0 + o``
    minutes."""
    broker = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "log.segment.bytes": 2048, "log.retention.ms": -1}
    )
    with LogManager(broker) as manager:
        for (topic, partition), count in counts.items():
            log = manager.get_or_create_log(topic, partition)
            for start in range(0, count, 20):
                end = log.log_end_offset
                log.append_records(
                    [
                        SimpleRecord(
                            f"{topic}-{partition}@{end + i}".encode(),
                            f"k{i}".encode(),
                            T0 + (end + i) * MINUTE,
                        )
                        for i in range(min(20, count - start))
                    ]
                )


def rows_of(frame: Any) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    """``(topic, partition, offset, key, value)`` of every row, sorted."""
    return sorted(
        (
            r["topic"],
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
        )
        for r in frame.select("topic", "partition", "offset", "key", "value").collect()
    )


def offsets_of(frame: Any) -> list[Key]:
    return sorted(
        (r["topic"], r["partition"], r["offset"])
        for r in frame.select("topic", "partition", "offset").collect()
    )


def data_files(out: Path) -> set[Path]:
    return {p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST_NAME}


# -- export against a direct read ----------------------------------------------------------------------------


def test_export_to_parquet_equals_direct_read_and_manifest_records_the_plan(
    spark: Any, tmp_path: Path
) -> None:
    log_dir = require_fixtures(KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data")
    partition_dir = require_fixtures(CLIENTS_GENERATED / "none-0")
    out = tmp_path / "out"
    result = export_log_dirs(spark, [log_dir, partition_dir], fmt="parquet", out=out)

    direct = rows_of(spark.read.format("kafka-log").load([str(log_dir), str(partition_dir)]))
    exported = rows_of(spark.read.parquet(str(out)))
    assert exported == direct and len(direct) == 146 + 513
    assert (out / "topic=_schemas" / "partition=0").is_dir() and (out / "topic=none" / "partition=0").is_dir()

    manifest = read_manifest(out / MANIFEST_NAME)
    manifest._check()
    assert manifest == result.manifest
    assert manifest.source_dirs == tuple(sorted((str(log_dir.resolve()), str(partition_dir.resolve()))))
    assert (manifest.output_format, manifest.partition_by, manifest.options) == (
        "parquet",
        ("topic", "partition"),
        ExportOptions(),
    )
    (run,) = manifest.runs
    assert run.started <= run.finished and run.finished.endswith("Z")
    assert run.rows == result.rows == len(direct)
    plan = plan_scan(parse_options({"paths": json.dumps(list(manifest.source_dirs))}))
    assert [(p.topic, p.partition, p.start_offset, p.end_offset) for p in run.partitions] == sorted(
        (r.topic, r.partition, r.start_offset, r.end_offset) for r in plan.ranges
    )
    per_partition = Counter((topic, partition) for topic, partition, *_ in direct)
    assert {p.key: p.rows for p in run.partitions if p.rows} == dict(per_partition)
    # A control record takes an offset but is no row.
    ksql = next(p for p in run.partitions if p.topic == "_confluent-ksql-default__command_topic")
    assert (ksql.start_offset, ksql.end_offset, ksql.rows) == (0, 2, 1)
    assert result.to_dict()["rows"] == len(direct) and result.to_dict()["runNumber"] == 1


def test_json_partitioned_by_topic_and_utc_date_read_committed_with_headers(
    spark: Any, tmp_path: Path
) -> None:
    none_dir = require_fixtures(CLIENTS_GENERATED / "none-0")
    txn_dir = require_fixtures(CLIENTS_GENERATED / "transactions-0")
    out = tmp_path / "out"
    result = export_log_dirs(
        spark,
        [none_dir, txn_dir],
        fmt="json",
        out=out,
        partition_by=("topic", "date"),
        read_committed=True,
        include_headers=True,
    )
    direct = {
        (r["topic"], r["partition"], r["offset"]): r["ms"]
        for r in spark.read.format("kafka-log")
        .option("isolationLevel", "read_committed")
        .load([str(none_dir), str(txn_dir)])
        .select("topic", "partition", "offset", F.unix_millis("timestamp").alias("ms"))
        .collect()
    }
    back = spark.read.json(str(out))
    assert "headers" in back.columns
    exported = {
        (r["topic"], r["partition"], r["offset"]): str(r["date"])
        for r in back.select("topic", "partition", "offset", "date").collect()
    }
    # 513 records, and 22 offsets of transactions-0 less 4 markers and 7 aborted records.
    assert len(direct) == 513 + 11 == result.rows
    assert exported == {
        key: datetime.fromtimestamp(ms / 1000, UTC).date().isoformat() for key, ms in direct.items()
    }
    # Records at 1970-01-01, the day before T0, T0's day and 2027: one dir per UTC date.
    assert {p.parent.name + "/" + p.name for p in out.glob("topic=none/date=*")} >= {
        "topic=none/date=1970-01-01",
        "topic=none/date=2023-11-14",
        "topic=none/date=2023-11-13",
    }
    options = read_manifest(out / MANIFEST_NAME).options
    assert (options.read_committed, options.include_headers, options.isolation_level) == (
        True,
        True,
        "read_committed",
    )


# -- resume --------------------------------------------------------------------------------------------------


def test_resume_exports_exactly_the_new_offsets_and_never_those_appended_after_planning(
    spark: Any, tmp_path: Path
) -> None:
    log_dir, out = tmp_path / "logs", tmp_path / "out"
    append(log_dir, {("t", 0): 300, ("t", 1): 200, ("u", 0): 100})
    assert len(list((log_dir / "t-0").glob("*.log"))) > 3
    first = export_log_dirs(spark, [log_dir], fmt="orc", out=out, partition_by=("partition", "date"))
    assert [(p.label, p.start_offset, p.end_offset, p.rows) for p in first.run.partitions] == [
        ("t-0", 0, 300, 300),
        ("t-1", 0, 200, 200),
        ("u-0", 0, 100, 100),
    ]
    # Planned, then more records arrive before the job runs: they wait for the next run.
    append(log_dir, {("t", 0): 50, ("u", 1): 30})
    plan = plan_export([log_dir], fmt="orc", out=out, partition_by=("partition", "date"), resume=True)
    append(log_dir, {("t", 0): 20, ("t", 1): 10})
    second = run_export(spark, plan)
    assert [(p.label, p.start_offset, p.end_offset, p.rows) for p in second.run.partitions] == [
        ("t-0", 300, 350, 50),
        ("t-1", 200, 200, 0),
        ("u-0", 100, 100, 0),
        ("u-1", 0, 30, 30),
    ]
    third = export_log_dirs(
        spark, [log_dir], fmt="orc", out=out, partition_by=("partition", "date"), resume=True
    )
    assert [(p.label, p.start_offset, p.end_offset, p.rows) for p in third.run.partitions] == [
        ("t-0", 350, 370, 20),
        ("t-1", 200, 210, 10),
        ("u-0", 100, 100, 0),
        ("u-1", 30, 30, 0),
    ]
    back = spark.read.orc(str(out))
    expected = sorted(
        [("t", 0, o) for o in range(370)]
        + [("t", 1, o) for o in range(210)]
        + [("u", 0, o) for o in range(100)]
        + [("u", 1, o) for o in range(30)]
    )
    assert offsets_of(back) == expected

    # Nothing new: a run with 0 rows, the data files untouched, and no Spark needed at all.
    files = {p: p.stat().st_mtime_ns for p in data_files(out)}
    fourth = run_export(
        None, plan_export([log_dir], fmt="orc", out=out, partition_by=("partition", "date"), resume=True)
    )
    assert fourth.rows == 0 and all(p.start_offset == p.end_offset for p in fourth.run.partitions)
    assert {p: p.stat().st_mtime_ns for p in data_files(out)} == files
    manifest = read_manifest(out / MANIFEST_NAME)
    manifest._check()
    assert [run.rows for run in manifest.runs] == [600, 80, 30, 0]
    assert manifest.next_offsets() == {("t", 0): 370, ("t", 1): 210, ("u", 0): 100, ("u", 1): 30}


def test_a_run_with_new_records_needs_a_spark_session(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    append(log_dir, {("t", 0): 5})
    plan = plan_export([log_dir], fmt="parquet", out=tmp_path / "out")
    with pytest.raises(ConfigError, match="SparkSession"):
        run_export(None, plan)
    assert not (tmp_path / "out").exists()


# -- refusals (no Spark job runs) ----------------------------------------------------------------------------


def test_non_empty_out_is_refused_without_resume(spark: Any, tmp_path: Path) -> None:
    log_dir, out = tmp_path / "logs", tmp_path / "out"
    append(log_dir, {("t", 0): 5})
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty") as refused:
        export_log_dirs(spark, [log_dir], fmt="parquet", out=out)
    assert str(out) in str(refused.value) and refused.value.key == "out"
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        plan_export([log_dir], fmt="parquet", out=tmp_path / "file")


def _manifest(log_dir: Path, **changes: Any) -> Manifest:
    base = Manifest((str(log_dir.resolve()),), "parquet", ("topic", "partition"), ExportOptions())
    return Manifest(**{**base.__dict__, **changes})


def test_resume_refuses_missing_corrupt_and_mismatched_manifests(tmp_path: Path) -> None:
    log_dir, out = tmp_path / "logs", tmp_path / "out"
    append(log_dir, {("t", 0): 5})
    path = out / MANIFEST_NAME
    with pytest.raises(ConfigError, match="no export manifest") as missing:
        plan_export([log_dir], fmt="parquet", out=out, resume=True)
    assert str(path) in str(missing.value)

    out.mkdir()
    path.write_bytes(b'{"format": "logmgr-spark-export",\n "version": 1,\n oops}')
    with pytest.raises(CorruptCheckpointError) as corrupt:
        plan_export([log_dir], fmt="parquet", out=out, resume=True)
    assert (corrupt.value.path, corrupt.value.line) == (str(path), 3)
    path.write_bytes(json.dumps({"format": "something-else", "version": 1}).encode())
    with pytest.raises(CorruptCheckpointError, match="not a logmgr export manifest"):
        plan_export([log_dir], fmt="parquet", out=out, resume=True)
    path.write_bytes(json.dumps({"format": "logmgr-spark-export", "version": 2}).encode())
    with pytest.raises(CorruptCheckpointError, match="unsupported manifest version 2"):
        plan_export([log_dir], fmt="parquet", out=out, resume=True)

    path.write_bytes(_manifest(log_dir).to_bytes())
    with pytest.raises(ConfigError, match='outputFormat was "parquet", now "orc"') as other_format:
        plan_export([log_dir], fmt="orc", out=out, resume=True)
    assert str(path) in str(other_format.value)
    with pytest.raises(ConfigError, match="isolationLevel was"):
        plan_export([log_dir], fmt="parquet", out=out, read_committed=True, resume=True)
    path.write_bytes(_manifest(log_dir, source_dirs=(str(tmp_path / "elsewhere"),)).to_bytes())
    with pytest.raises(ConfigError, match="sourceDirs was"):
        plan_export([log_dir], fmt="parquet", out=out, resume=True)
    path.write_bytes(_manifest(log_dir, partition_by=("date",)).to_bytes())
    with pytest.raises(ConfigError, match="partitionBy was"):
        plan_export([log_dir], fmt="parquet", out=out, resume=True)


def test_bad_arguments_and_a_partition_in_two_dirs_are_config_errors(tmp_path: Path) -> None:
    first, second, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    append(first, {("t", 0): 3})
    append(second, {("t", 0): 3, ("t", 1): 3})
    cases: list[tuple[dict[str, Any], str]] = [
        ({"fmt": "csv"}, "fmt"),
        ({"partition_by": ("topic", "offset")}, "partition_by"),
        ({"partition_by": ("date", "date")}, "partition_by"),
        ({"topics": []}, "topics"),
        ({"partitions": [-1]}, "partitions"),
        ({"topic_pattern": "("}, "topic_pattern"),
        ({"from_time_ms": 5, "to_time_ms": 4}, "from_time_ms"),
    ]
    for kwargs, key in cases:
        with pytest.raises(ConfigError) as refused:
            plan_export([first], **{"fmt": "json", "out": out, **kwargs})
        assert refused.value.key == key
    with pytest.raises(ConfigError, match="not a directory") as missing:
        plan_export([tmp_path / "missing"], fmt="json", out=out)
    assert str(tmp_path / "missing") in str(missing.value)
    with pytest.raises(ConfigError, match="t-0 is both") as twice:
        plan_export([first, second], fmt="json", out=out)
    assert str(first / "t-0") in str(twice.value) and str(second / "t-0") in str(twice.value)
    assert not out.exists()


def test_time_bounds_select_offsets_by_timestamp(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    append(log_dir, {("t", 0): 100})
    plan = plan_export(
        [log_dir],
        fmt="json",
        out=tmp_path / "out",
        from_time_ms=T0 + 10 * MINUTE,
        to_time_ms=T0 + 25 * MINUTE - 1,
    )
    assert [(p.label, p.start_offset, p.end_offset) for p in plan.partitions] == [("t-0", 10, 25)]


# -- the manifest: round trip and arbitrary input ------------------------------------------------------------

_names = st.text(alphabet="abcxyz._-", min_size=1, max_size=6)
_partitions = st.builds(
    lambda topic, partition, start, length, rows: PartitionExport(
        topic, partition, start, start + length, min(rows, length)
    ),
    _names,
    st.integers(0, 99),
    st.integers(0, 2**62),
    st.integers(0, 10**9),
    st.integers(0, 10**9),
)
_runs = st.builds(
    lambda parts, started, finished: ExportRun(started, finished, tuple({p.key: p for p in parts}.values())),
    st.lists(_partitions, max_size=4),
    st.text(max_size=24),
    st.text(max_size=24),
)
_options = st.builds(
    ExportOptions,
    topics=st.none() | st.lists(_names, min_size=1, unique=True).map(tuple),
    topic_pattern=st.none() | st.text(max_size=8),
    partitions=st.none() | st.lists(st.integers(0, 99), min_size=1, unique=True).map(tuple),
    from_time_ms=st.none() | st.integers(-(2**63), 2**63 - 1),
    to_time_ms=st.none() | st.integers(-(2**63), 2**63 - 1),
    read_committed=st.booleans(),
    include_headers=st.booleans(),
)
_manifests = st.builds(
    Manifest,
    source_dirs=st.lists(st.text(min_size=1, max_size=10).map(lambda s: "/" + s), min_size=1, max_size=3).map(
        tuple
    ),
    output_format=st.sampled_from(FORMATS),
    partition_by=st.permutations(PARTITION_COLUMNS).flatmap(
        lambda cols: st.integers(0, 3).map(lambda n: tuple(cols[:n]))
    ),
    options=_options,
    runs=st.lists(_runs, max_size=3).map(tuple),
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(_manifests)
def test_manifest_round_trips(manifest: Manifest) -> None:
    manifest._check()
    assert Manifest.parse(manifest.to_bytes(), "m.json") == manifest


@given(st.binary(max_size=200))
def test_manifest_parser_raises_only_corrupt_checkpoint_on_arbitrary_bytes(data: bytes) -> None:
    try:
        Manifest.parse(data, "/x/_logmgr_manifest.json")
    except CorruptCheckpointError as err:
        assert err.path == "/x/_logmgr_manifest.json"


@given(_manifests, st.data())
def test_manifest_parser_rejects_any_damaged_field_with_a_typed_error(
    manifest: Manifest, data: st.DataObject
) -> None:
    document = json.loads(manifest.to_bytes())
    node: Any = document
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, dict | list) or data.draw(st.booleans()):
            node[key] = data.draw(_json)
            break
        node = child
    try:
        parsed = Manifest.parse(json.dumps(document).encode(), "m.json")
    except CorruptCheckpointError as err:
        assert err.path == "m.json"
    else:
        parsed._check()


# -- the command line ----------------------------------------------------------------------------------------


def test_cli_export_json_resume_and_exit_codes(spark: Any, tmp_path: Path) -> None:
    log_dir = require_fixtures(KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data")
    out = tmp_path / "out"
    runner = CliRunner()
    base = [
        "export",
        str(log_dir),
        "--to",
        "parquet",
        "--out",
        str(out),
        "--topics",
        "_schemas,docker-connect-configs",
    ]
    done = runner.invoke(main, [*base, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["rows"], report["runNumber"], report["format"]) == (52, 1, "parquet")
    assert [
        (p["topic"], p["startOffset"], p["endOffset"], p["rows"]) for p in report["run"]["partitions"]
    ] == [("_schemas", 0, 42, 42), ("docker-connect-configs", 0, 10, 10)]
    # The command used the process's session and left it running.
    assert not spark.sparkContext._jsc.sc().isStopped()

    refused = runner.invoke(main, base)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: out: ") and "not empty" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    again = runner.invoke(main, [*base, "--resume", "--json"])
    assert again.exit_code == 0, again.output
    assert (json.loads(again.stdout)["rows"], json.loads(again.stdout)["runNumber"]) == (0, 2)
    text = runner.invoke(main, [*base, "--resume"])
    assert (
        text.exit_code == 0 and "2 partition(s) with nothing new" in text.stdout and "0 rows" in text.stdout
    )

    mismatched = runner.invoke(main, [*base, "--resume", "--isolation", "read_committed"])
    assert mismatched.exit_code == 1 and "isolationLevel was" in mismatched.stderr
    (out / MANIFEST_NAME).write_bytes(b"\xff")
    corrupt = runner.invoke(main, [*base, "--resume"])
    assert (
        corrupt.exit_code == 1
        and str(out / MANIFEST_NAME) in corrupt.stderr
        and "Traceback" not in corrupt.output
    )

    for bad in (
        ["--partition-by", "offset"],
        ["--from-time", "yesterday"],
        ["--partitions", "x"],
        ["--to", "csv"],
    ):
        assert runner.invoke(main, [*base, *bad]).exit_code == 2, bad
    assert (
        runner.invoke(
            main, ["export", str(tmp_path / "missing"), "--to", "json", "--out", str(out)]
        ).exit_code
        == 2
    )


def test_cli_reports_a_corrupt_batch_in_one_line_and_records_no_run(spark: Any, tmp_path: Path) -> None:
    source = require_fixtures(CLIENTS_GENERATED / "none-0") / "00000000000000000000.log"
    partition_dir = tmp_path / "none-0"
    partition_dir.mkdir()
    data = bytearray(source.read_bytes())
    data[3000] ^= 0xFF  # inside the second batch, which starts at byte 747
    (partition_dir / source.name).write_bytes(bytes(data))
    out = tmp_path / "out"
    failed = CliRunner().invoke(main, ["export", str(partition_dir), "--to", "json", "--out", str(out)])
    assert failed.exit_code == 1
    assert failed.stderr.strip() == failed.stderr.strip().splitlines()[0]
    assert f"{partition_dir / source.name}: position 747: " in failed.stderr and "crc" in failed.stderr
    assert not (out / MANIFEST_NAME).exists()
