"""A small service embedding the LogManager, run by ``make run``.

It writes under ``$LOGMGR_DATA_DIR`` (default: a new temporary directory, printed), creates two topics with short
retention and small segments, appends from a producer thread while a consumer thread reads, lets the scheduled jobs
(retention, flush, checkpoints, delayed deletion) run on short intervals, then shuts down cleanly, reopens the dir to
show that a clean shutdown needs no recovery, and exits 0 (well within 60 s).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from logmgr.config import BrokerConfig
from logmgr.log import Isolation
from logmgr.log_manager import (
    JOB_DELETE_LOGS,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_RETENTION,
    LogManager,
)
from segments.records import SimpleRecord

RUN_SECONDS = 6.0


def broker_config(data_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "log.dirs": str(data_dir),
            "log.segment.bytes": 64 * 1024,
            "log.retention.bytes": 256 * 1024,
            "log.retention.ms": 3_000,
            "log.retention.check.interval.ms": 500,
            "log.flush.offset.checkpoint.interval.ms": 500,
            "log.flush.start.offset.checkpoint.interval.ms": 500,
            "log.flush.scheduler.interval.ms": 500,
            "log.flush.interval.ms": 1_000,
            "log.segment.delete.delay.ms": 1_000,
            "log.initial.task.delay.ms": 200,
        }
    )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # APScheduler logs every run at INFO; the jobs log what they did themselves.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    data_dir = Path(os.environ.get("LOGMGR_DATA_DIR") or tempfile.mkdtemp(prefix="logmgr-service-"))
    print(f"data dir: {data_dir}")
    manager = LogManager(broker_config(data_dir))
    manager.startup()
    orders = manager.get_or_create_log("orders", 0)
    audit = manager.get_or_create_log("audit", 0, {"retention.ms": "-1", "retention.bytes": "-1"})
    stop = threading.Event()
    consumed = {"records": 0}

    def produce() -> None:
        n = 0
        while not stop.is_set():
            orders.append_records([SimpleRecord(f"order {n + i}".encode() * 8, f"k{n % 13}".encode()) for i in range(50)])
            audit.append_records([SimpleRecord(f"audit {n}".encode())])
            n += 50
            time.sleep(0.005)

    def consume() -> None:
        position = orders.log_start_offset
        while not stop.is_set():
            position = max(position, orders.log_start_offset)
            fetch = orders.read(position, 64 * 1024, isolation=Isolation.READ_UNCOMMITTED)
            for batch in fetch.batches():
                consumed["records"] += batch.records_count
                position = batch.last_offset + 1
            if not fetch.records:
                time.sleep(0.01)

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        time.sleep(1.0)
        print(
            f"orders: segments={len(orders.segments)} start={orders.log_start_offset} end={orders.log_end_offset} "
            f"recovery_point={orders.recovery_point} bytes={orders.size_in_bytes}; consumed={consumed['records']}; "
            f"retention runs={manager.scheduler.job_stats(JOB_RETENTION).runs} "
            f"checkpoints={manager.scheduler.job_stats(JOB_RECOVERY_POINT_CHECKPOINT).runs} "
            f"deletion runs={manager.scheduler.job_stats(JOB_DELETE_LOGS).runs}"
        )
    stop.set()
    for thread in threads:
        thread.join()
    end_offsets = {str(log.topic_partition): log.log_end_offset for log in manager.all_logs()}
    manager.shutdown()
    print(f"clean shutdown; end offsets {end_offsets}")

    reopened = LogManager(broker_config(data_dir))
    reopened.startup()
    recovered = sum(log.recovery.recovered_segments for log in reopened.all_logs())
    reopened_offsets = {str(log.topic_partition): log.log_end_offset for log in reopened.all_logs()}
    reopened.shutdown()
    print(f"reopened: {recovered} segments recovered (expected 0), end offsets {reopened_offsets}")
    if recovered or reopened_offsets != end_offsets:
        raise SystemExit("reopen after a clean shutdown did not match")
    print("embedded service finished")


if __name__ == "__main__":
    main()
