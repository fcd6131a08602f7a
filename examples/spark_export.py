"""Spark demo, run by ``make run``: read a Kafka log dir with ``format("kafka-log")``, export it to Parquet.

1. Writes a log dir with logmgr's LogManager: topics ``orders`` (3 partitions) and ``payments`` (2), 6,000
   records with timestamps over the last three days, small segments (several per partition).
2. Reads it with ``spark.read.format("kafka-log")``: records, first and last timestamp per topic.
3. Exports it to Parquet partitioned by topic and UTC date, reads the Parquet back and compares the counts.
4. Appends more records (one of them to a new partition ``orders-3``), resumes the export and shows that only
   the new offsets were written, with no row written twice.

Everything lives in a new temporary dir (inside ``$LOGMGR_DATA_DIR`` when set, and then kept); exits 1 if a
count does not match.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
from logmgr.spark.export import ExportResult, export_log_dirs
from logmgr.spark.session import local_session
from segments.records import SimpleRecord

TOPICS = {"orders": 3, "payments": 2}
RECORDS = 6_000
BATCH = 50
DAY_MS = 86_400_000


def append(log_dir: Path, counts: dict[tuple[str, int], int], first_ms: int, last_ms: int) -> int:
    """Append ``counts[(topic, partition)]`` records to each partition, timestamps spread evenly over
    ``[first_ms, last_ms]``, through a LogManager that shuts down cleanly. Returns the records appended."""
    broker = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "log.segment.bytes": 16 * 1024, "log.retention.ms": -1}
    )
    with LogManager(broker) as manager:
        for (topic, partition), count in counts.items():
            log = manager.get_or_create_log(topic, partition)
            step = (last_ms - first_ms) // max(count - 1, 1)
            for start in range(0, count, BATCH):
                numbers = range(start, min(start + BATCH, count))
                log.append_records(
                    [
                        SimpleRecord(
                            f'{{"n": {n}, "amount": {n * 7 % 1000}}}'.encode(),
                            f"customer-{n % 40}".encode(),
                            first_ms + n * step,
                        )
                        for n in numbers
                    ]
                )
    return sum(counts.values())


def report(result: ExportResult) -> None:
    for p in result.run.partitions:
        if p.end_offset > p.start_offset:
            print(f"  {p.label:<12} offsets [{p.start_offset}, {p.end_offset}) -> {p.rows} rows")
    runs = len(result.manifest.runs)
    print(f"  {result.rows} rows in {result.seconds:.1f} s; run {runs} of {result.manifest_path}")


def check(what: str, got: int, expected: int) -> None:
    print(f"{what}: {got} (expected {expected})")
    if got != expected:
        print(f"MISMATCH: {what}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    began = time.monotonic()
    keep = os.environ.get("LOGMGR_DATA_DIR")
    base = Path(tempfile.mkdtemp(prefix="logmgr-spark-export-", dir=keep or None))
    log_dir, out = base / "kafka-logs", base / "parquet"
    now = int(time.time() * 1000)
    partitions = [(topic, p) for topic, count in TOPICS.items() for p in range(count)]
    written = append(
        log_dir, {tp: RECORDS // len(partitions) for tp in partitions}, now - 3 * DAY_MS, now - DAY_MS
    )
    segments = sum(1 for _ in log_dir.glob("*/*.log"))
    print(f"wrote {written} records to {len(partitions)} partitions ({segments} segments) in {log_dir}")

    # UI off, loopback only, workers on this interpreter, kafka-log registered.
    spark = local_session("local[2]", "logmgr-spark-export-demo")
    try:
        frame = spark.read.format("kafka-log").load(str(log_dir))
        per_topic = (
            frame.groupBy("topic")
            .agg(
                F.count("*").alias("records"),
                F.min("timestamp").alias("first"),
                F.max("timestamp").alias("last"),
            )
            .orderBy("topic")
            .collect()
        )
        for row in per_topic:
            first, last = (row[name].isoformat(sep=" ", timespec="seconds") for name in ("first", "last"))
            print(f"  {row['topic']:<10} {row['records']:>6} records  {first} .. {last} UTC")
        check("records read by kafka-log", sum(row["records"] for row in per_topic), written)

        print(f"export to {out} (parquet, partitioned by topic and date)")
        first = export_log_dirs(spark, [log_dir], fmt="parquet", out=out, partition_by=("topic", "date"))
        report(first)
        check("rows in the Parquet files", spark.read.parquet(str(out)).count(), written)

        more = {("orders", 0): 400, ("payments", 1): 250, ("orders", 3): 150}
        added = append(log_dir, more, now - DAY_MS // 2, now)
        print(f"appended {added} more records (orders-3 is a new partition); resume the export")
        second = export_log_dirs(
            spark, [log_dir], fmt="parquet", out=out, partition_by=("topic", "date"), resume=True
        )
        report(second)
        check("rows written by the resumed run", second.rows, added)
        back = (
            spark.read.parquet(str(out))
            .agg(
                F.count("*").alias("rows"), F.count_distinct("topic", "partition", "offset").alias("distinct")
            )
            .first()
        )
        assert back is not None
        check("rows in the Parquet files", back["rows"], written + added)
        check("distinct (topic, partition, offset)", back["distinct"], written + added)
    finally:
        spark.stop()
    if keep:
        print(f"kept {base}")
    else:
        shutil.rmtree(base)
    print(f"done in {time.monotonic() - began:.1f} s")


if __name__ == "__main__":
    main()
