"""Child process of ``test_spark_cluster.py``: a SparkSession on a standalone master reads a log dir with
``kafka-log`` and prints one JSON object (rows, digest of the rows, which executors decoded and with what).

A separate process because a JVM holds one SparkContext: the test process already runs the suite's local one.

Run: ``python -m tests.spark_cluster_child MASTER_URL LOG_DIR``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from logmgr.spark.session import local_session
from tests.spark_digest import row_digest


def executor_probe(_: Any) -> Any:
    """Where this Python worker runs and which compiled core it imports (the .so file, not source)."""
    import segments._native.crc as native

    yield (os.getpid(), os.getppid(), native.__file__, native.kernel())


def main(master: str, log_dir: str) -> None:
    spark = local_session(
        master,
        "logmgr-cluster-test",
        **{"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.sql.shuffle.partitions": "2"},
    )
    try:
        frame = spark.read.format("kafka-log").load(log_dir)
        rows, digest = row_digest(frame)
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        probes = spark.sparkContext.parallelize(range(8), 8).mapPartitions(executor_probe).collect()
        print(
            json.dumps(
                {
                    "rows": rows,
                    "digest": digest,
                    "input_partitions": frame.rdd.getNumPartitions(),
                    "executors": executors,
                    "executor_jvms": sorted({parent for _, parent, _, _ in probes}),
                    "driver_pid": os.getpid(),
                    "native_modules": sorted({path for _, _, path, _ in probes}),
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
