"""Log cleaner throughput (issue 12): one pass over a dirty compacted log, next to the header walk of the same
bytes, and the pass's peak Python memory next to the dedupe buffer it was given.

The log: ``--size-mib`` of one-record batches (100-byte values) over ``--keys`` keys, rolled into 16 MiB
segments, every segment dirty. Each timed run cleans a fresh copy (``cp``, not timed) with one
:class:`~logmgr.cleaner.cleaner.Cleaner` (the ``kafka-log-cleaner`` job's worker); the header walk is
``for fb in segment.batches(): fb.batch.ensure_valid()`` over the same segments. Peak memory is
``tracemalloc``'s peak during a pass: the offset map's bytearray (the dedupe buffer) plus the pass's working set.

Run: ``.venv/bin/python bench/cleaner_bench.py [--size-mib N | --quick] [--keys K] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import tracemalloc
from pathlib import Path

from _common import bench_main, best_of, mb_per_s, repeats, size_mib, table

from logmgr.cleaner.cleaner import Cleaner
from logmgr.cleaner.log_cleaner import LiveLogSource
from logmgr.cleaner.offset_map import SkimpyOffsetMap
from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments.records import SimpleRecord

CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=16 * 1024 * 1024, file_delete_delay_ms=0)
DEDUPE_BUFFER = 16 * 1024 * 1024
T0 = 1_700_000_000_000


def build(directory: Path, total_bytes: int, keys: int) -> None:
    """A compacted log of about ``total_bytes`` of dirty one-record batches, every segment inactive."""
    log = load_log(directory, CONFIG, clock=ManualClock(T0))
    value = b"x" * 100
    while log.size_in_bytes < total_bytes:
        for _ in range(500):
            log.append_records([SimpleRecord(value, b"key-%08d" % (log.log_end_offset % keys), T0)])
    log.roll()
    log.close()


def clean_copy(source: Path, scratch: Path, memory: int) -> int:
    """Clean a fresh copy of ``source``; the dirty bytes read."""
    target = scratch / source.name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    log = load_log(target, CONFIG, clock=ManualClock(T0), had_clean_shutdown=True)
    try:
        _, stats = Cleaner(SkimpyOffsetMap(memory)).clean(
            LiveLogSource(log), 0, log.active_segment.base_offset, T0
        )
        return stats.bytes_read
    finally:
        log.close()


def header_walk(log: Log) -> int:
    total = 0
    for segment in log.segments.values():
        for found in segment.batches():
            found.batch.ensure_valid()
            total += found.batch.size_in_bytes
    return total


def run(args: argparse.Namespace) -> None:
    total = size_mib(args) * 1024 * 1024
    runs = repeats(args, 3)
    with tempfile.TemporaryDirectory(dir=args.data_dir if args.data_dir.exists() else None) as tmp:
        root = Path(tmp)
        source = root / "source" / "compacted-0"
        build(source, total, args.keys)
        log = load_log(source, CONFIG, clock=ManualClock(T0), had_clean_shutdown=True)
        walk_s, walked = best_of(lambda: header_walk(log), runs)
        log.close()
        scratch = root / "scratch"
        scratch.mkdir()
        clean_s, read = best_of(lambda: clean_copy(source, scratch, DEDUPE_BUFFER), runs)
        tracemalloc.start()
        clean_copy(source, scratch, DEDUPE_BUFFER)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"dirty log: {walked / 1e6:.1f} MB, {args.keys} keys, best of {runs}")
    print(
        table(
            ["measure", "MB/s", "seconds"],
            [
                ["header walk + CRC of the same bytes", f"{mb_per_s(walked, walk_s):.1f}", f"{walk_s:.3f}"],
                ["cleaner pass (map + filter + swap)", f"{mb_per_s(read, clean_s):.1f}", f"{clean_s:.3f}"],
            ],
        )
    )
    print(
        table(
            ["memory", "MiB"],
            [
                ["log.cleaner.dedupe.buffer.size", f"{DEDUPE_BUFFER / 2**20:.1f}"],
                ["peak Python memory of one pass (tracemalloc)", f"{peak / 2**20:.1f}"],
            ],
        )
    )


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10,000)")


if __name__ == "__main__":
    bench_main(__doc__, run, None, add_args=add_args)
