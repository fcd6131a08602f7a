"""Lookup latency on a large partition log: ``Log.read(offset, 1)`` for random offsets and
``Log.offset_for_timestamp`` for random timestamps, p50/p99 in microseconds, next to a bare ``pread`` of the batch
each answer comes from.

The log (``--lookup-mib`` MiB, default 10240 = 10 GiB, 256 with ``--quick``) holds 16,873-byte batches of 140
records (the segment benchmarks' batches: max timestamps grow by 1 ms per batch) with Kafka's default
``segment.bytes`` of 1 GiB, so 63,636 batches per segment; above one segment the log is cut to whole segments
(10 full segments at the default size). It is written once with ``LogSegment.append`` per batch (one offset and
one time index entry per batch, as a broker's appends give with ``index.interval.bytes`` 4096), kept under
``--data-dir`` and opened with ``load_log`` as after a clean shutdown. Every ``.log`` file is read once before
timing (page cache warm: CPU cost, not disk seeks).

Timed per call with ``perf_counter_ns`` over ``--lookups`` random offsets (default 2,000; 500 with ``--quick``)
and a quarter as many random timestamps (same seed every run); each statistic is the best of ``--repeats``
rounds:

* ``pread`` of the batch: one ``os.pread`` of the batch holding the offset at its known position (the bytes
  ``Log.read`` returns: the physical limit, no lookup at all);
* ``LogSegments.floor_segment``: the sorted-dict lookup of the segment;
* ``LogSegment.translate_offset``: offset index binary search + batch header scan from the entry;
* ``Log.read(offset, 1)``: all of the above plus the fetch bookkeeping and reading the whole first batch
  (``min_one_message``), as a consumer's fetch does;
* for timestamps: ``pread`` + ``DefaultRecordBatch.records()`` of the batch holding the answer (the least work an
  answer needs: the target record lies inside a batch) and ``Log.offset_for_timestamp``.

Answers are checked against the arithmetic of the generated data before timing.

Run: ``.venv/bin/python bench/lookup_bench.py [--lookup-mib N | --quick] [--lookups N] [--repeats R]
[--profile]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import (
    MIB,
    SEGMENT_RECORDS_PER_BATCH,
    SEGMENT_START_TIMESTAMP,
    bench_main,
    fresh_dir,
    percentile,
    profile,
    read_all,
    repeats,
    segment_templates,
    shown,
    table,
    write_log,
)

from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments.naming import log_file
from segments.records import DefaultRecordBatch

DEFAULT_LOOKUP_MIB = 10 * 1024
QUICK_LOOKUP_MIB = 256
DEFAULT_LOOKUPS = 2_000
QUICK_LOOKUPS = 500
SEGMENT_BYTES = 1 << 30
PARTITION = "bench-0"
SEED = 20240612
_DATA_FORMAT_VERSION = 2


def add_args(parser: argparse.ArgumentParser) -> None:
    """The lookup benchmark's own options (run_all takes them too). O(1)."""
    parser.add_argument(
        "--lookup-mib",
        type=int,
        default=None,
        help=f"log size in MiB (default {DEFAULT_LOOKUP_MIB}, {QUICK_LOOKUP_MIB} with --quick)",
    )
    parser.add_argument(
        "--lookups",
        type=int,
        default=None,
        help=f"random offsets per round (default {DEFAULT_LOOKUPS:,}, {QUICK_LOOKUPS:,} with --quick); "
        "timestamps: a quarter of it",
    )


@dataclass(frozen=True, slots=True)
class LookupData:
    """The generated partition log and its shape."""

    partition_dir: Path
    batches: int
    batch_size: int
    batches_per_segment: int
    generate_s: float | None
    """Seconds the generation took (``None`` if not recorded)."""
    reused: bool

    @property
    def size_bytes(self) -> int:
        return self.batches * self.batch_size

    @property
    def segments(self) -> int:
        return -(-self.batches // self.batches_per_segment)

    @property
    def log_end_offset(self) -> int:
        return self.batches * SEGMENT_RECORDS_PER_BATCH

    def batch_of_offset(self, offset: int) -> int:
        return offset // SEGMENT_RECORDS_PER_BATCH

    def location(self, batch: int) -> tuple[int, int]:
        """(segment base offset, byte position) of batch number ``batch``. O(1)."""
        segment, index = divmod(batch, self.batches_per_segment)
        return segment * self.batches_per_segment * SEGMENT_RECORDS_PER_BATCH, index * self.batch_size

    def first_at_or_after(self, timestamp: int) -> int:
        """Offset of the first record (in offset order) with a timestamp >= ``timestamp``: batch ``n`` holds
        records ``i = 0..139`` at timestamp ``start + n + i``. O(1)."""
        delta = timestamp - SEGMENT_START_TIMESTAMP
        batch = max(0, delta - (SEGMENT_RECORDS_PER_BATCH - 1))
        return batch * SEGMENT_RECORDS_PER_BATCH + max(0, delta - batch)


def dataset(size_mib: int, data_dir: Path) -> LookupData:
    """The log under ``data_dir``, written unless one with the same parameters is there. O(size)."""
    templates = segment_templates()
    batch_size = len(templates[0])
    # Kafka rolls when size > segment.bytes - incoming, so a segment takes this many whole batches.
    per_segment = SEGMENT_BYTES // batch_size
    batches = max(1, size_mib * MIB // batch_size)
    if batches > per_segment:
        # Whole segments only: 10 GiB gives 10 full segments, not 10 and a few batches.
        batches -= batches % per_segment
    directory = data_dir / f"log-{size_mib}mib"
    partition_dir = directory / PARTITION
    meta_path = directory / "log.json"
    params = {"version": _DATA_FORMAT_VERSION, "size_mib": size_mib, "segment_bytes": SEGMENT_BYTES}
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params:
            return LookupData(partition_dir, batches, batch_size, per_segment, meta.get("generate_s"), True)
    print(f"writing a {size_mib:,} MiB log under {shown(partition_dir)} ...", flush=True)
    started = time.perf_counter()
    fresh_dir(directory)
    write_log(partition_dir, templates, batches=batches, batches_per_segment=per_segment)
    seconds = time.perf_counter() - started
    meta_path.write_text(json.dumps({"params": params, "generate_s": round(seconds, 1)}))
    print(f"written in {seconds:.1f} s", flush=True)
    return LookupData(partition_dir, batches, batch_size, per_segment, seconds, False)


def open_log(data: LookupData) -> Log:
    """The log as after a clean shutdown (nothing recovered). O(segments)."""
    log = load_log(
        data.partition_dir, LogConfig(segment_bytes=SEGMENT_BYTES), recovery_point=0, had_clean_shutdown=True
    )
    if log.log_end_offset != data.log_end_offset or len(log.segments) != data.segments:
        raise AssertionError(f"{data.partition_dir} does not hold the generated log; delete it to regenerate")
    return log


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles in microseconds (each the best over the rounds)."""

    p50_us: float
    p99_us: float
    mean_us: float


def time_calls(fn: Callable[[int], object], args: Sequence[int], rounds: int) -> Latency:
    """Call ``fn`` once per argument, timing each call; best p50, p99 and mean over ``rounds``. O(rounds * n)."""
    clock = time.perf_counter_ns
    best = Latency(float("inf"), float("inf"), float("inf"))
    for _ in range(max(1, rounds)):
        samples = []
        for arg in args:
            started = clock()
            fn(arg)
            samples.append(clock() - started)
        samples.sort()
        best = Latency(
            min(best.p50_us, percentile(samples, 0.50) / 1e3),
            min(best.p99_us, percentile(samples, 0.99) / 1e3),
            min(best.mean_us, sum(samples) / len(samples) / 1e3),
        )
    return best


class BatchReader:
    """``pread`` of a generated batch at its known position (descriptors opened once)."""

    def __init__(self, data: LookupData) -> None:
        self.data = data
        self._fds = {
            base: os.open(log_file(data.partition_dir, base), os.O_RDONLY)
            for base in range(0, data.log_end_offset, data.batches_per_segment * SEGMENT_RECORDS_PER_BATCH)
        }

    def read_batch(self, batch: int) -> bytes:
        base, position = self.data.location(batch)
        return os.pread(self._fds[base], self.data.batch_size, position)

    def read_offset(self, offset: int) -> bytes:
        return self.read_batch(self.data.batch_of_offset(offset))

    def decode_answer(self, timestamp: int) -> int:
        """pread + decode of the batch holding the answer for ``timestamp``; returns the answer's offset."""
        wanted = self.data.first_at_or_after(timestamp)
        for record in DefaultRecordBatch(self.read_offset(wanted)).records():
            if record.timestamp >= timestamp:
                return record.offset
        raise AssertionError(f"no record at or after {timestamp} in the batch of offset {wanted}")

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)


def check_answers(log: Log, data: LookupData, offsets: Sequence[int], timestamps: Sequence[int]) -> None:
    """Raise unless every lookup returns the batch / record the data layout says. O(n)."""
    for offset in offsets:
        fetch = log.read(offset, 1)
        first = DefaultRecordBatch(fetch.records)
        if not first.base_offset <= offset <= first.last_offset or len(fetch.records) != data.batch_size:
            raise AssertionError(f"Log.read({offset}, 1) returned batch {first}")
        segment = log.segments.floor_segment(offset)
        found = None if segment is None else segment.translate_offset(offset)
        if found is None or found.offset != first.last_offset:
            raise AssertionError(f"translate_offset({offset}) = {found}")
    reader = BatchReader(data)
    try:
        for timestamp in timestamps:
            answer = log.offset_for_timestamp(timestamp)
            expected = data.first_at_or_after(timestamp)
            if answer is None or answer[0] != expected or answer[1] < timestamp:
                raise AssertionError(f"offset_for_timestamp({timestamp}) = {answer}, expected offset {expected}")
            if reader.decode_answer(timestamp) != expected:
                raise AssertionError(f"the reference decode disagrees for timestamp {timestamp}")
    finally:
        reader.close()


@dataclass(frozen=True, slots=True)
class LookupResult:
    """Latencies of every timed call kind."""

    data: LookupData
    runs: int
    offsets: int
    timestamps: int
    rows: list[tuple[str, Latency]]
    timestamp_rows: list[tuple[str, Latency]]

    def report(self) -> str:
        """Both tables, as printed. O(1)."""
        data = self.data
        took = "" if data.generate_s is None else f" in {data.generate_s:.0f} s"
        generated = f"generated{took} by an earlier run and reused" if data.reused else f"generated{took} by this run"

        def rows(named: list[tuple[str, Latency]]) -> list[list[str]]:
            base = named[0][1]
            return [
                [
                    name,
                    f"{lat.p50_us:,.1f}",
                    f"{lat.p99_us:,.1f}",
                    f"{lat.mean_us:,.1f}",
                    f"{lat.p50_us / base.p50_us:,.1f}",
                ]
                for name, lat in named
            ]

        headers = ["call", "p50 us", "p99 us", "mean us", "p50 x first row"]
        return "\n".join(
            [
                f"log: {shown(data.partition_dir)}: {data.size_bytes / 2**30:,.2f} GiB in {data.segments} segments "
                f"of up to 1 GiB ({data.batches:,} batches of {data.batch_size:,} bytes, "
                f"{data.log_end_offset:,} offsets), {generated}",
                f"page cache warm; latency per call (perf_counter_ns); {self.offsets:,} random offsets and "
                f"{self.timestamps:,} random timestamps per round; each figure the best of {self.runs} rounds",
                "",
                table(headers, rows(self.rows)),
                "",
                table(headers, rows(self.timestamp_rows)),
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        read = dict(self.rows)["Log.read(offset, 1)"]
        by_time = dict(self.timestamp_rows)["Log.offset_for_timestamp(ts)"]
        return (
            f"lookup on {self.data.size_bytes / 2**30:,.2f} GiB: Log.read(offset, 1) p50 {read.p50_us:,.1f} us "
            f"p99 {read.p99_us:,.1f} us; offset_for_timestamp p50 {by_time.p50_us:,.1f} us "
            f"p99 {by_time.p99_us:,.1f} us"
        )


def measure(data: LookupData, lookups: int, runs: int) -> LookupResult:
    """Warm the page cache, check answers, then time every call kind over the same random arguments.
    O(size + runs * lookups)."""
    rng = random.Random(SEED)
    offsets = [rng.randrange(data.log_end_offset) for _ in range(lookups)]
    last_timestamp = SEGMENT_START_TIMESTAMP + data.batches - 1 + SEGMENT_RECORDS_PER_BATCH - 1
    timestamps = [rng.randint(SEGMENT_START_TIMESTAMP, last_timestamp) for _ in range(max(1, lookups // 4))]
    for path in sorted(data.partition_dir.glob("*.log")):
        read_all(path)
    log = open_log(data)
    reader = BatchReader(data)
    try:
        check_answers(log, data, offsets[:1000], timestamps[:250])
        segments = log.segments

        def translate(offset: int) -> object:
            segment = segments.floor_segment(offset)
            assert segment is not None
            return segment.translate_offset(offset)

        rows = [
            ("pread of the batch (no lookup)", time_calls(reader.read_offset, offsets, runs)),
            ("LogSegments.floor_segment", time_calls(segments.floor_segment, offsets, runs)),
            ("floor_segment + LogSegment.translate_offset", time_calls(translate, offsets, runs)),
            ("Log.read(offset, 1)", time_calls(lambda o: log.read(o, 1), offsets, runs)),
        ]
        timestamp_rows = [
            ("pread + records() of the answer's batch", time_calls(reader.decode_answer, timestamps, runs)),
            ("Log.offset_for_timestamp(ts)", time_calls(log.offset_for_timestamp, timestamps, runs)),
        ]
    finally:
        reader.close()
        log.close()
    return LookupResult(data, runs, len(offsets), len(timestamps), rows, timestamp_rows)


def run(args: argparse.Namespace) -> LookupResult:
    """Generate (or reuse) the log and measure; prints the report. O(size + runs * lookups)."""
    size_mib = args.lookup_mib or (QUICK_LOOKUP_MIB if args.quick else DEFAULT_LOOKUP_MIB)
    lookups = args.lookups or (QUICK_LOOKUPS if args.quick else DEFAULT_LOOKUPS)
    if size_mib < 1 or lookups < 1:
        raise SystemExit("--lookup-mib and --lookups must be at least 1")
    data = dataset(size_mib, args.data_dir)
    result = measure(data, lookups, repeats(args, 3))
    print(result.report())
    if args.profile:
        log = open_log(data)
        try:
            rng = random.Random(SEED)
            sample = [rng.randrange(data.log_end_offset) for _ in range(lookups)]
            print(profile(lambda: [log.read(o, 1) for o in sample]))
            print(profile(lambda: [log.offset_for_timestamp(SEGMENT_START_TIMESTAMP + o // 140) for o in sample]))
        finally:
            log.close()
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(size + runs * lookups)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
