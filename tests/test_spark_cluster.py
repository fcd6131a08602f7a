"""``kafka-log`` beyond one machine's JVM: a Spark standalone cluster (a master and two workers started from
PySpark's own distribution as separate processes on 127.0.0.1, stopped at the end) reads a multi-partition log
dir with ``spark.read.format("kafka-log")`` and exports it with ``logmgr export --master spark://...``; the row
count and a digest of (topic, partition, offset, key, value) equal the local run, executors ran in the workers'
JVMs and imported the compiled core.

Skipped with a reason where no Java runtime is installed. Costs about a minute (JVM starts).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
from segments.records import Header, SimpleRecord
from tests.conftest import REPO, child_env
from tests.spark_digest import row_digest

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")

from logmgr.spark.cluster import StandaloneCluster, java_available

pytestmark = pytest.mark.skipif(not java_available(), reason="no Java runtime: a Spark cluster cannot start")

T0 = 1_700_000_000_000
# Two topics, five partitions, several segments each (2 KiB segments), keys with nulls and headers.
LAYOUT = {("orders", 0): 700, ("orders", 1): 450, ("orders", 2): 90, ("audit", 0): 300, ("audit", 1): 1}


def build_log_dir(log_dir: Path) -> int:
    """Write :data:`LAYOUT` through a LogManager (clean shutdown); return the number of records."""
    broker = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "log.segment.bytes": 2048, "log.retention.ms": -1}
    )
    with LogManager(broker) as manager:
        for (topic, partition), count in LAYOUT.items():
            log = manager.get_or_create_log(topic, partition)
            for start in range(0, count, 25):
                log.append_records(
                    [
                        SimpleRecord(
                            f"{topic}-{partition}@{offset}".encode() * (1 + offset % 3),
                            None if offset % 7 == 0 else f"k{offset % 11}".encode(),
                            T0 + offset,
                            (Header("h", str(offset).encode()),) if offset % 5 == 0 else (),
                        )
                        for offset in range(start, min(start + 25, count))
                    ]
                )
    return sum(LAYOUT.values())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as running:
        yield running


def test_cluster_read_and_export_equal_the_local_run(
    spark: Any, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    log_dir = tmp_path / "logdir"
    expected_rows = build_log_dir(log_dir)
    local_rows, local_digest = row_digest(spark.read.format("kafka-log").load(str(log_dir)))
    assert local_rows == expected_rows

    child = subprocess.run(
        [sys.executable, "-m", "tests.spark_cluster_child", cluster.master_url, str(log_dir)],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert (report["rows"], report["digest"]) == (local_rows, local_digest)
    assert report["input_partitions"] > 2
    # Two executors, each in its own worker-launched JVM, none of them the driver's process tree.
    assert report["executors"] == 2
    assert len(report["executor_jvms"]) == 2 and report["driver_pid"] not in report["executor_jvms"]
    assert report["native_modules"] and all(path.endswith(".so") for path in report["native_modules"])

    out = tmp_path / "export"
    export = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "export",
            str(log_dir),
            "--to",
            "parquet",
            "--out",
            str(out),
            "--master",
            cluster.master_url,
            "--json",
        ],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert export.returncode == 0, export.stderr[-3000:]
    assert json.loads(export.stdout.strip().splitlines()[-1])["rows"] == local_rows
    assert row_digest(spark.read.parquet(str(out))) == (local_rows, local_digest)
