"""Append throughput of a partition log: pre-built batches next to raw ``os.write`` of the same bytes, and
records next to the format layer's encode rate.

Batches: ``--append-mib`` MiB (default 512, 64 with ``--quick``) of pre-built 16,873-byte batches (140 records of
100-byte values, each with its own timestamps, as the segment benchmarks generate them) are appended one per call
with ``Log.append_as_leader`` to a new log (Kafka's defaults: 1 GiB ``segment.bytes``, so one segment at the
default size). The peer writes the very same ``bytes`` objects with one ``os.write`` each to a new file in the
same directory. Neither fsyncs per append; each pass then ends with one fsync (``Log.flush()`` / ``os.fsync``),
timed separately, so the table has a row with and without it.

Two floors show what an append that checks its input before writing it reaches in the same run with no
bookkeeping at all, writing as the raw peer does: ``os.write`` after the ``crc32c`` package's CRC-32C of the batch's
CRC range (reading each byte once more: the least a checked append does), and ``os.write`` after the compiled
validation the append runs (the CRC, the header rules and the framing of every record, as Kafka's LogValidator
iterates the records of an uncompressed batch). The log's appends also reserve the ``.log``'s disk blocks ahead of
its end (``logmgr.append.reserve.bytes``, default 4 MiB steps; the file's size stays the bytes written), which
spares each write the file system's allocation of the blocks it fills (ext4's delayed allocation), so the log can
pass these floors: the interleaved passes add the limit of that, ``os.write`` into blocks allocated beforehand.

Records: ``--record-batches`` calls (default 500, 50 with ``--quick``) of ``Log.append_records`` with 1000 records
each (10-byte keys, 100-byte log-like values, increasing timestamps, no headers), no fsync. The ceiling is the
format layer's encode of the same records, ``build_batch``, timed in the same run; a second reference row adds
``DefaultRecordBatch.records()`` over the result (a full decode: the append itself only frames the records, in the
native walk of ``segments._native.append``).

Interleaved: the best-of figures compare passes timed apart, and a pass that meets a quiet minute of this shared
machine sets its peer's best (they swing by 0.1 of the ratio from run to run). So each run also makes ``--repeats``
interleaved passes: the raw write, the log append, the validation floor and the raw write into allocated blocks
(its file ``posix_fallocate``-d to the pass's bytes before the clock, then written from its start) take the
batches in turn, 128 at a time each, into their own files, in an order that rotates through the 24 orders chunk by
chunk, every chunk timed; the report gives each pass's append / raw and the medians (for append, floor, the
allocated write, and append / allocated write). They meet the same minutes, so these ratios move by about 0.02 from
run to run.

Every pass starts from an empty directory; the log end offset is checked after each. Each pass writes its first
batch before the clock starts, and the table times the others: a steady state. The log's first append is a new
log's one-off (it opens the segment's files and, as Kafka's ``LeaderEpochFileCache.assign`` does for every new
leader epoch, writes the leader-epoch checkpoint with its two fsyncs: about a millisecond, which spread over the
3,977 appends of a ``--quick`` pass would add 0.2-0.3 us to each); it is printed on its own line, with the raw
file's first write. Best of ``--repeats``.

Run: ``.venv/bin/python bench/append_bench.py [--append-mib N | --quick] [--record-batches N] [--repeats R]
[--profile]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import record_codec
from _common import (
    MIB,
    SEGMENT_RECORDS_PER_BATCH,
    bench_main,
    best_of,
    fresh_dir,
    mb_per_s,
    profile,
    repeats,
    segment_templates,
    shown,
    stamped_batch,
    table,
)
from crc32c import crc32c

from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments._native.append import scan_append
from segments.records import DefaultRecordBatch, SimpleRecord, build_batch

DEFAULT_APPEND_MIB = 512
QUICK_APPEND_MIB = 64
DEFAULT_RECORD_BATCHES = 500
QUICK_RECORD_BATCHES = 50
PARTITION = "bench-0"
INTERLEAVE_BATCHES = 128
# The peers of an interleaved pass (raw write, log append, validation floor, raw write into allocated blocks) in
# every order, one per chunk in turn.
_INTERLEAVE_ORDERS = tuple(itertools.permutations(range(4)))
CRC_RANGE_START = 21  # a v2 batch's CRC covers its bytes from the attributes on


def add_args(parser: argparse.ArgumentParser) -> None:
    """The append benchmark's own options (run_all takes them too). O(1)."""
    parser.add_argument(
        "--append-mib",
        type=int,
        default=None,
        help=f"MiB of batches appended per pass (default {DEFAULT_APPEND_MIB}, {QUICK_APPEND_MIB} with --quick)",
    )
    parser.add_argument(
        "--record-batches",
        type=int,
        default=None,
        help=f"append_records calls of 1000 records (default {DEFAULT_RECORD_BATCHES}, "
        f"{QUICK_RECORD_BATCHES} with --quick)",
    )
    parser.add_argument(
        "--reserve-bytes",
        type=int,
        default=LogConfig().logmgr_append_reserve_bytes,
        help="the logs' logmgr.append.reserve.bytes (default: the config's default; 0: no disk reserved ahead)",
    )


@dataclass(frozen=True, slots=True)
class Timed:
    """Best seconds of a pass without and with its final fsync."""

    write_s: float
    with_fsync_s: float


def new_log(directory: Path, config: LogConfig) -> Log:
    """An empty log ``bench-0`` in ``directory`` with ``config``. O(1)."""
    return load_log(directory / PARTITION, config)


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass: seconds of its first write (before the clock), of the others, and of the final fsync; what it
    left (the log end offset, or the bytes written)."""

    first_s: float
    write_s: float
    fsync_s: float
    result: int


def append_batches(scratch: Path, config: LogConfig, first: bytes, rest: Sequence[bytes]) -> Pass:
    """Append ``first``, then (timed) every batch of ``rest``, with one ``append_as_leader`` call each, to a new
    log with ``config``, then ``flush()``. O(size)."""
    log = new_log(fresh_dir(scratch), config)
    try:
        append = log.append_as_leader
        started = time.perf_counter()
        append(first)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        for batch in rest:
            append(batch)
        appended = time.perf_counter()
        log.flush()
        return Pass(first_s, appended - started, time.perf_counter() - appended, log.log_end_offset)
    finally:
        log.close()


def write_raw(scratch: Path, first: bytes, rest: Sequence[bytes]) -> Pass:
    """``os.write`` ``first``, then (timed) every batch of ``rest``, to a new file, then ``os.fsync``; the result
    is the bytes written. O(size)."""
    path = fresh_dir(scratch) / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write = os.write
        started = time.perf_counter()
        written = write(fd, first)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        for batch in rest:
            written += write(fd, batch)
        wrote = time.perf_counter()
        os.fsync(fd)
        return Pass(first_s, wrote - started, time.perf_counter() - wrote, written)
    finally:
        os.close(fd)


def write_checked(scratch: Path, first: bytes, rest: Sequence[bytes], validate: bool) -> float:
    """``os.write`` ``first``, then (timed) every batch of ``rest``, to a new file right after checking it: the
    compiled validation of the append (``validate``) or the ``crc32c`` package's CRC of its CRC range; returns
    the seconds (no fsync). O(size)."""
    path = fresh_dir(scratch) / "checked.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write = os.write
        max_message_bytes = LogConfig().max_message_bytes
        scan_append(first, max_message_bytes, True, True)
        write(fd, first)
        started = time.perf_counter()
        if validate:
            for batch in rest:
                scan_append(batch, max_message_bytes, True, True)
                write(fd, batch)
        else:
            for batch in rest:
                crc32c(memoryview(batch)[CRC_RANGE_START:])
                write(fd, batch)
        return time.perf_counter() - started
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Interleaved:
    """Seconds of one interleaved pass's raw writes, log appends, validation floor (compiled validation then
    ``os.write``) and raw writes into allocated blocks, each the sum over its chunks."""

    raw_s: float
    log_s: float
    floor_s: float
    allocated_s: float


def interleaved_pass(scratch: Path, config: LogConfig, first: bytes, rest: Sequence[bytes]) -> Interleaved:
    """Write ``first`` by each peer, then (timed) ``rest`` in chunks of ``INTERLEAVE_BATCHES``: every chunk by the
    raw ``os.write``, ``Log.append_as_leader``, the floor and the raw write into allocated blocks in turn, to their
    own files (the log with ``config``), in the next of the 24 orders. O(size)."""
    directory = fresh_dir(scratch)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    raw_fd = os.open(directory / "raw.bin", flags, 0o644)
    floor_fd = os.open(directory / "checked.bin", flags, 0o644)
    allocated_fd = os.open(directory / "allocated.bin", flags, 0o644)
    log = new_log(directory, config)
    try:
        append, write = log.append_as_leader, os.write
        max_message_bytes = config.max_message_bytes
        os.posix_fallocate(allocated_fd, 0, len(first) + sum(len(batch) for batch in rest))
        append(first)
        write(raw_fd, first)
        write(floor_fd, first)
        write(allocated_fd, first)
        seconds = [0.0, 0.0, 0.0, 0.0]
        for chunk_number, start in enumerate(range(0, len(rest), INTERLEAVE_BATCHES)):
            chunk = rest[start : start + INTERLEAVE_BATCHES]
            for peer in _INTERLEAVE_ORDERS[chunk_number % len(_INTERLEAVE_ORDERS)]:
                # The two raw writes differ only by their file (chosen before the clock).
                raw_write_fd = allocated_fd if peer == 3 else raw_fd
                started = time.perf_counter()
                if peer == 1:
                    for batch in chunk:
                        append(batch)
                elif peer == 2:
                    for batch in chunk:
                        scan_append(batch, max_message_bytes, True, True)
                        write(floor_fd, batch)
                else:
                    for batch in chunk:
                        write(raw_write_fd, batch)
                seconds[peer] += time.perf_counter() - started
        expected_end = (len(rest) + 1) * SEGMENT_RECORDS_PER_BATCH
        if log.log_end_offset != expected_end:
            raise AssertionError(f"log end offset {log.log_end_offset} after appending, expected {expected_end}")
        return Interleaved(*seconds)
    finally:
        log.close()
        os.close(raw_fd)
        os.close(floor_fd)
        os.close(allocated_fd)


def append_records(scratch: Path, config: LogConfig, calls: Sequence[Sequence[SimpleRecord]]) -> tuple[float, int]:
    """One ``append_records`` per list, no fsync; returns (seconds, log end offset). O(records)."""
    log = new_log(fresh_dir(scratch), config)
    try:
        append = log.append_records
        started = time.perf_counter()
        for records in calls:
            append(records)
        return time.perf_counter() - started, log.log_end_offset
    finally:
        log.close()


def encode_only(calls: Sequence[Sequence[SimpleRecord]]) -> int:
    """``build_batch`` of every list; returns the bytes built. O(records)."""
    return sum(len(build_batch(records)) for records in calls)


def encode_and_decode(calls: Sequence[Sequence[SimpleRecord]]) -> int:
    """``build_batch`` then ``DefaultRecordBatch.records()`` of every list; returns the records decoded.
    O(records)."""
    return sum(len(DefaultRecordBatch(build_batch(records)).records()) for records in calls)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Best-of timings of the batch and record append passes and their references."""

    runs: int
    batch_bytes: int
    batch_count: int
    batch_size: int
    raw: Timed
    log: Timed
    raw_first_s: tuple[float, ...]  # each pass's first write, before its clock
    log_first_s: tuple[float, ...]  # each pass's first append, before its clock
    crc_write_s: float
    validate_write_s: float
    interleaved: tuple[Interleaved, ...]
    record_calls: int
    records_per_call: int
    record_bytes: int
    append_records_s: float
    encode_s: float
    encode_decode_s: float
    scratch: Path
    reserve_bytes: int  # the logs' logmgr.append.reserve.bytes

    @property
    def records(self) -> int:
        return self.record_calls * self.records_per_call

    @property
    def ratio_log_to_raw(self) -> float:
        """Log append throughput over raw write throughput (no fsync): 1.0 would be free bookkeeping."""
        return self.raw.write_s / self.log.write_s

    @property
    def interleaved_ratio(self) -> float:
        """Median over the interleaved passes of raw write seconds over log append seconds."""
        return statistics.median(run.raw_s / run.log_s for run in self.interleaved)

    @property
    def interleaved_floor_ratio(self) -> float:
        """Median over the interleaved passes of raw write seconds over validation floor seconds."""
        return statistics.median(run.raw_s / run.floor_s for run in self.interleaved)

    @property
    def interleaved_allocated_ratio(self) -> float:
        """Median over the interleaved passes of raw write seconds over those of the raw write into allocated
        blocks."""
        return statistics.median(run.raw_s / run.allocated_s for run in self.interleaved)

    @property
    def interleaved_log_to_allocated_ratio(self) -> float:
        """Median over the interleaved passes of the allocated raw write's seconds over the log append's."""
        return statistics.median(run.allocated_s / run.log_s for run in self.interleaved)

    @property
    def ratio_records_to_encode(self) -> float:
        """append_records rate over build_batch rate: 1.0 would be appending for free on top of encoding."""
        return self.encode_s / self.append_records_s

    def report(self) -> str:
        """Both tables, as printed. O(1)."""
        size = self.batch_bytes
        batch_rows = []
        for name, seconds in (
            ("raw os.write per batch, no fsync", self.raw.write_s),
            ("raw os.write per batch + final fsync", self.raw.with_fsync_s),
            ("floor: crc32c package then os.write per batch", self.crc_write_s),
            ("floor: compiled validation then os.write per batch", self.validate_write_s),
            ("Log.append_as_leader per batch, no fsync", self.log.write_s),
            ("Log.append_as_leader per batch + final Log.flush()", self.log.with_fsync_s),
        ):
            batch_rows.append(
                [
                    name,
                    f"{seconds:.3f}",
                    f"{mb_per_s(size, seconds):,.0f}",
                    f"{self.batch_count / seconds:,.0f}",
                    f"{seconds / self.batch_count * 1e6:,.1f}",
                    f"{self.raw.write_s / seconds:.3f}",
                ]
            )
        overhead_us = (self.log.write_s - self.raw.write_s) / self.batch_count * 1e6
        record_rows = []
        for name, seconds in (
            ("ceiling: build_batch (encode only)", self.encode_s),
            ("reference: build_batch + DefaultRecordBatch.records()", self.encode_decode_s),
            ("Log.append_records, no fsync", self.append_records_s),
        ):
            record_rows.append(
                [
                    name,
                    f"{seconds:.3f}",
                    f"{self.records / seconds:,.0f}",
                    f"{mb_per_s(self.record_bytes, seconds):,.0f}",
                    f"{self.encode_s / seconds:.3f}",
                ]
            )
        return "\n".join(
            [
                f"batches: {self.batch_count + 1:,} pre-built batches of {self.batch_size:,} bytes = "
                f"{size / MIB:,.0f} MiB per pass, one append (or os.write) per batch, into a new directory under "
                f"{shown(self.scratch)}; the first written before the clock starts, the table times the other "
                f"{self.batch_count:,}; no fsync per append; best of {self.runs} runs; MB = 10^6 bytes; the log "
                f"reserves its .log's disk ahead in steps of at most {self.reserve_bytes:,} bytes "
                "(logmgr.append.reserve.bytes; 0: none)",
                "",
                table(["pass", "seconds", "MB/s", "batches/s", "us / batch", "x raw write"], batch_rows),
                "",
                "before the clock, each pass's first batch: Log.append_as_leader "
                + ", ".join(f"{seconds * 1e3:.2f}" for seconds in self.log_first_s)
                + " ms (a new log's first append: it opens the segment's files and checkpoints the new leader epoch "
                "with two fsyncs); raw os.write "
                + ", ".join(f"{seconds * 1e3:.3f}" for seconds in self.raw_first_s)
                + " ms",
                "",
                f"ratio Log.append_as_leader / raw os.write (no fsync) = {self.ratio_log_to_raw:.3f}; "
                f"log overhead {overhead_us:,.1f} us per batch; the floors reach "
                f"{self.raw.write_s / self.crc_write_s:.3f} (CRC) and {self.raw.write_s / self.validate_write_s:.3f} "
                "(validation)",
                "",
                f"interleaved ({len(self.interleaved)} passes, chunks of {INTERLEAVE_BATCHES} batches of each peer "
                "in turn, order rotating): Log.append_as_leader / raw os.write per pass "
                + ", ".join(f"{run.raw_s / run.log_s:.3f}" for run in self.interleaved)
                + f"; median {self.interleaved_ratio:.3f}; validation floor median {self.interleaved_floor_ratio:.3f}; "
                f"raw os.write into allocated blocks median {self.interleaved_allocated_ratio:.3f}; "
                f"Log.append_as_leader / raw os.write into allocated blocks median "
                f"{self.interleaved_log_to_allocated_ratio:.3f}",
                "",
                f"records: {self.record_calls:,} calls x {self.records_per_call:,} records (10-byte keys, "
                f"100-byte values) = {self.records:,} records, {self.record_bytes / 1e6:,.1f} MB as batches; "
                "no fsync",
                "",
                table(["pass", "seconds", "records/s", "MB/s", "x build_batch"], record_rows),
                "",
                f"ratio Log.append_records / build_batch = {self.ratio_records_to_encode:.3f}",
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        return (
            f"append batches: {mb_per_s(self.batch_bytes, self.log.write_s):,.0f} MB/s, raw os.write "
            f"{mb_per_s(self.batch_bytes, self.raw.write_s):,.0f} MB/s, log/raw = {self.ratio_log_to_raw:.3f} "
            f"(interleaved median {self.interleaved_ratio:.3f}); "
            f"append_records {self.records / self.append_records_s:,.0f} rec/s, build_batch "
            f"{self.records / self.encode_s:,.0f} rec/s, log/encode = {self.ratio_records_to_encode:.3f}"
        )


def record_calls(calls: int) -> list[list[SimpleRecord]]:
    """``calls`` lists of 1000 records, the record codec benchmark's data. O(records)."""
    return [
        [SimpleRecord(value, key, timestamp) for key, value, timestamp, _ in items]
        for items in record_codec.make_items(calls)
    ]


def measure(append_mib: int, calls: int, runs: int, scratch: Path, config: LogConfig) -> AppendResult:
    """Build the inputs, then time raw writes and log appends alternately, then the record passes.
    O(runs * size)."""
    templates = segment_templates()
    batch_size = len(templates[0])
    count = max(2, append_mib * MIB // batch_size)
    first, *rest = [bytes(stamped_batch(templates, n)) for n in range(count)]
    expected_end = count * SEGMENT_RECORDS_PER_BATCH
    raw_best = log_best = Timed(float("inf"), float("inf"))
    raw_first: list[float] = []
    log_first: list[float] = []
    crc_write_s = validate_write_s = float("inf")
    for _ in range(runs):
        raw = write_raw(scratch, first, rest)
        if raw.result != count * batch_size:
            raise AssertionError(f"raw write wrote {raw.result} bytes, expected {count * batch_size}")
        raw_best = Timed(min(raw_best.write_s, raw.write_s), min(raw_best.with_fsync_s, raw.write_s + raw.fsync_s))
        raw_first.append(raw.first_s)
        crc_write_s = min(crc_write_s, write_checked(scratch, first, rest, validate=False))
        validate_write_s = min(validate_write_s, write_checked(scratch, first, rest, validate=True))
        log = append_batches(scratch, config, first, rest)
        if log.result != expected_end:
            raise AssertionError(f"log end offset {log.result} after appending, expected {expected_end}")
        log_best = Timed(min(log_best.write_s, log.write_s), min(log_best.with_fsync_s, log.write_s + log.fsync_s))
        log_first.append(log.first_s)
    interleaved = tuple(interleaved_pass(scratch, config, first, rest) for _ in range(runs))
    del first, rest
    lists = record_calls(calls)
    per_call = len(lists[0])
    record_bytes = encode_only(lists)
    encode_s, _ = best_of(lambda: encode_only(lists), runs)
    encode_decode_s, decoded = best_of(lambda: encode_and_decode(lists), runs)
    if decoded != calls * per_call:
        raise AssertionError(f"decoded {decoded} records, expected {calls * per_call}")
    append_s = float("inf")
    for _ in range(runs):
        seconds, end = append_records(scratch, config, lists)
        if end != calls * per_call:
            raise AssertionError(f"log end offset {end} after append_records, expected {calls * per_call}")
        append_s = min(append_s, seconds)
    fresh_dir(scratch).rmdir()
    return AppendResult(
        runs,
        (count - 1) * batch_size,
        count - 1,
        batch_size,
        raw_best,
        log_best,
        tuple(raw_first),
        tuple(log_first),
        crc_write_s,
        validate_write_s,
        interleaved,
        calls,
        per_call,
        record_bytes,
        append_s,
        encode_s,
        encode_decode_s,
        scratch,
        config.logmgr_append_reserve_bytes,
    )


def run(args: argparse.Namespace) -> AppendResult:
    """Measure and print the report. O(runs * size)."""
    append_mib = args.append_mib or (QUICK_APPEND_MIB if args.quick else DEFAULT_APPEND_MIB)
    calls = args.record_batches or (QUICK_RECORD_BATCHES if args.quick else DEFAULT_RECORD_BATCHES)
    if append_mib < 1 or calls < 1:
        raise SystemExit("--append-mib and --record-batches must be at least 1")
    scratch = args.data_dir / "append-run"
    if args.reserve_bytes < 0:
        raise SystemExit("--reserve-bytes must be at least 0")
    config = LogConfig(logmgr_append_reserve_bytes=args.reserve_bytes)
    result = measure(append_mib, calls, repeats(args, 3), scratch, config)
    print(result.report())
    if args.profile:
        templates = segment_templates()
        first, *rest = [bytes(stamped_batch(templates, n)) for n in range(min(2000, result.batch_count + 1))]
        print(profile(lambda: append_batches(scratch, config, first, rest)))
        fresh_dir(scratch).rmdir()
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * size)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
