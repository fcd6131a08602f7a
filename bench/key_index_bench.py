"""Key index benchmark: ``Log.query_by_key`` latency next to a full scan of the same log, and append throughput
with the key index on and off.

The log holds ``--records`` records (default 400,000; 40,000 with ``--quick``) in batches of 10, 100-byte
values, keys drawn from ``--keys`` distinct keys (default 10,000: about 40 records a key), ``segment.bytes`` 16 MiB,
written through ``Log.append_records`` (one append per batch) under a :class:`KeyIndexDispatcher` thread when the
index is on (appends never wait for it: the throughput is the append path's). The time the dispatcher then needs
to catch up is reported separately.

Queries: ``--queries`` random keys (default 200, same seed every run), each answered by ``Log.query_by_key``
(every record of the key) and by a full scan (``Log.read`` of the whole log, comparing keys); p50 and p99 in ms.
Answers of the two are checked equal before timing. Appends are the best of ``--repeats`` runs.

Run: ``.venv/bin/python bench/key_index_bench.py [--quick] [--records N] [--keys K] [--queries Q] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from logmgr.config import LogConfig
from logmgr.key_index import KeyIndexDispatcher
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from segments.file_records import iter_batches
from segments.records import SimpleRecord

BATCH = 10
VALUE = b"v" * 100


def _open(directory: Path, enabled: bool) -> Log:
    config = LogConfig.from_properties(
        {"segment.bytes": str(16 * 1024 * 1024), "logmgr.key.index.enable": str(enabled).lower()}
    )
    return load_log(directory, config, had_clean_shutdown=True)


def _fill(directory: Path, records: int, keys: int, enabled: bool) -> tuple[float, float]:
    """Append ``records`` records; returns (append seconds, catch-up seconds after the last append)."""
    shutil.rmtree(directory, ignore_errors=True)
    log = _open(directory, enabled)
    dispatcher = KeyIndexDispatcher()
    dispatcher.register(log)
    dispatcher.start()
    rng = random.Random(7)
    batches = [
        [SimpleRecord(VALUE, b"key-%d" % rng.randrange(keys), 1_700_000_000_000 + i) for i in range(BATCH)]
        for _ in range(256)
    ]
    start = time.perf_counter()
    for n in range(records // BATCH):
        log.append_records(batches[n % len(batches)])
    appended = time.perf_counter()
    dispatcher.drain()  # alongside the thread: steps that lose the race are discarded, never applied twice
    caught_up = time.perf_counter()
    dispatcher.stop()
    log.close()
    return appended - start, caught_up - appended


def _scan(log: Log, key: bytes) -> list[int]:
    found: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
        for item in iter_batches(fetch.records):
            found.extend(r.offset for r in item.batch.records() if r.key == key)
            offset = item.batch.next_offset
    return found


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--records", type=int)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    records = args.records or (40_000 if args.quick else 400_000)
    keys = max(1, args.keys // 10 if args.quick and args.records is None else args.keys)
    root = Path(tempfile.mkdtemp(prefix="key-index-bench-"))
    try:
        directory = root / "bench-0"
        off = min(_fill(directory, records, keys, False)[0] for _ in range(args.repeats))
        runs = [_fill(directory, records, keys, True) for _ in range(args.repeats)]
        on = min(r[0] for r in runs)
        catch_up = min(r[1] for r in runs)
        log = _open(directory, True)
        rng = random.Random(11)
        wanted = [b"key-%d" % rng.randrange(keys) for _ in range(args.queries)]
        for key in wanted[:5]:
            assert [r.offset for r in log.query_by_key(key, max_records=records)] == _scan(log, key), key
        indexed, scanned = [], []
        for key in wanted:
            t = time.perf_counter()
            log.query_by_key(key, max_records=records)
            indexed.append((time.perf_counter() - t) * 1000)
        for key in wanted[: max(5, args.queries // 20)]:  # a scan is slow: fewer samples
            t = time.perf_counter()
            _scan(log, key)
            scanned.append((time.perf_counter() - t) * 1000)
        log.close()
        print(f"log: {records:,} records, {keys:,} keys, {records // BATCH:,} appends of {BATCH} records")
        print("| append path | records/s |")
        print("| --- | ---: |")
        print(f"| key index off | {records / off:,.0f} |")
        print(f"| key index on (dispatcher thread) | {records / on:,.0f} |")
        print(f"dispatcher catch-up after the last append: {catch_up * 1000:.0f} ms")
        print("| query | p50 ms | p99 ms | samples |")
        print("| --- | ---: | ---: | ---: |")
        for name, samples in (("Log.query_by_key", indexed), ("full scan", scanned)):
            p50, p99 = _percentiles(samples)
            print(f"| {name} | {p50:.3f} | {p99:.3f} | {len(samples)} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
