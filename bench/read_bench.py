"""Read throughput of a partition log by offset: ``Log.read`` from the log start to the log end in 1 MiB fetches,
next to a plain read of the same file and to the format layer's decode rate on the same batches.

The log holds ``--read-batches`` batches (default 500, 50 with ``--quick``) of 1000 records each (10-byte keys,
100-byte log-like values: the record codec benchmark's data, about 121 KB per batch), built with ``build_batch``
and appended with ``Log.append_as_leader`` to a new log (Kafka's default topic config) before anything is timed.
Page cache warm; best of ``--repeats``:

* plain read: the segment file with ``os.pread`` in 1 MiB calls (the physical limit of the byte rate);
* ``Log.read`` bytes: fetch 1 MiB from an offset, walk the whole batches of the result (headers only) and fetch
  again from the offset after the last one, as a consumer does; MB/s counts log bytes delivered (a partial batch at
  the end of a fetch is read again by the next one, as in Kafka);
* ``Log.read`` + decode: the same, plus ``DefaultRecordBatch.records()`` of every batch, reading offset,
  timestamp, key and value of every record;
* ceiling: ``DefaultRecordBatch.records()`` over the same batch bytes held in memory, same fields read.

Both decoding passes must see the same records (offsets contiguous from 0, same checksum) before timing counts.

Run: ``.venv/bin/python bench/read_bench.py [--read-batches N | --quick] [--repeats R] [--profile]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import record_codec
from _common import MIB, bench_main, best_of, fresh_dir, mb_per_s, profile, repeats, shown, table

from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments.records import DefaultRecordBatch, SimpleRecord, build_batch

DEFAULT_READ_BATCHES = 500
QUICK_READ_BATCHES = 50
FETCH_BYTES = MIB
PARTITION = "bench-0"


def add_args(parser: argparse.ArgumentParser) -> None:
    """The read benchmark's own options (run_all takes them too). O(1)."""
    parser.add_argument(
        "--read-batches",
        type=int,
        default=None,
        help=f"batches of 1000 records in the log (default {DEFAULT_READ_BATCHES}, {QUICK_READ_BATCHES} with --quick)",
    )


def build_log(directory: Path, batches: int) -> tuple[Log, list[bytes]]:
    """A new log in ``directory`` holding ``batches`` batches of 1000 records; returns it and the batches as
    stored (offsets assigned by the log). O(records)."""
    log = load_log(fresh_dir(directory) / PARTITION, LogConfig())
    stored = []
    for items in record_codec.make_items(batches):
        info = log.append_as_leader(build_batch([SimpleRecord(value, key, ts) for key, value, ts, _ in items]))
        segment = log.segments.get(info.segment_base_offset)
        assert segment is not None
        stored.append(segment.log.read(info.position, info.valid_bytes))
    return log, stored


def plain_read(paths: Sequence[Path]) -> int:
    """``os.pread`` every file in ``FETCH_BYTES`` calls, discarding the bytes; returns the bytes read. O(size)."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, FETCH_BYTES, position):
                position += len(chunk)
            total += position
        finally:
            os.close(fd)
    return total


@dataclass(frozen=True, slots=True)
class ReadTotals:
    """What a pass saw: log bytes of whole batches, records, and a checksum of the decoded fields (0 when the
    pass does not decode)."""

    nbytes: int
    records: int
    checksum: int


def read_log(log: Log, *, decode: bool) -> ReadTotals:
    """Fetch from the log start to the log end in ``FETCH_BYTES`` reads; with ``decode`` also decode every record.
    O(size)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    nbytes = records = checksum = 0
    while offset < end:
        fetch = log.read(offset, FETCH_BYTES)
        batches = fetch.batches()
        if not batches:
            raise AssertionError(f"empty fetch at offset {offset} below the log end {end}")
        for batch in batches:
            if batch.base_offset != offset:
                raise AssertionError(f"batch at {batch.base_offset}, expected {offset}")
            nbytes += batch.size_in_bytes
            records += batch.records_count
            if decode:
                for r in batch.records():
                    checksum += r.offset + r.timestamp + len(r.key or b"") + len(r.value or b"")
            offset = batch.last_offset + 1
    return ReadTotals(nbytes, records, checksum)


def decode_in_memory(stored: Sequence[bytes]) -> ReadTotals:
    """The ceiling: ``DefaultRecordBatch.records()`` over batches already in memory, same fields read. O(size)."""
    nbytes = records = checksum = 0
    for buf in stored:
        batch = DefaultRecordBatch(buf)
        nbytes += batch.size_in_bytes
        records += batch.records_count
        for r in batch.records():
            checksum += r.offset + r.timestamp + len(r.key or b"") + len(r.value or b"")
    return ReadTotals(nbytes, records, checksum)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Best-of timings of the four passes over one log."""

    runs: int
    log_dir: Path
    batches: int
    log_bytes: int
    records: int
    plain_s: float
    read_s: float
    read_decode_s: float
    decode_s: float

    @property
    def ratio_read_to_plain(self) -> float:
        """Log.read byte rate over plain pread: 1.0 is the physical limit."""
        return self.plain_s / self.read_s

    @property
    def ratio_decode(self) -> float:
        """Log.read + decode record rate over in-memory decode: 1.0 would make reading free."""
        return self.decode_s / self.read_decode_s

    def report(self) -> str:
        """The result table, as printed. O(1)."""
        rows = []
        for name, seconds in (
            ("plain read (pread 1 MiB)", self.plain_s),
            ("Log.read 1 MiB fetches, batch headers only", self.read_s),
            ("ceiling: DefaultRecordBatch.records() in memory", self.decode_s),
            ("Log.read 1 MiB fetches + records()", self.read_decode_s),
        ):
            rows.append(
                [
                    name,
                    f"{seconds:.3f}",
                    f"{mb_per_s(self.log_bytes, seconds):,.0f}",
                    f"{self.records / seconds:,.0f}",
                    f"{self.plain_s / seconds:.3f}",
                    f"{self.decode_s / seconds:.3f}",
                ]
            )
        return "\n".join(
            [
                f"log: {shown(self.log_dir)} ({self.batches:,} batches of 1000 records, 10-byte keys, 100-byte "
                f"values = {self.records:,} records, {self.log_bytes / 1e6:,.1f} MB, one segment)",
                f"page cache warm; best of {self.runs} runs; MB = 10^6 bytes; records/s of passes that do not "
                "decode counts the records they step over",
                "",
                table(["pass", "seconds", "MB/s", "records/s", "x plain read", "x in-memory decode"], rows),
                "",
                f"ratio Log.read / plain read (bytes) = {self.ratio_read_to_plain:.3f}",
                f"ratio Log.read + decode / in-memory decode (records) = {self.ratio_decode:.3f}",
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        return (
            f"read by offset: {mb_per_s(self.log_bytes, self.read_s):,.0f} MB/s (plain read "
            f"{mb_per_s(self.log_bytes, self.plain_s):,.0f} MB/s, ratio {self.ratio_read_to_plain:.3f}); with decode "
            f"{self.records / self.read_decode_s:,.0f} rec/s vs in-memory decode "
            f"{self.records / self.decode_s:,.0f} rec/s, ratio {self.ratio_decode:.3f}"
        )


def measure(log: Log, stored: Sequence[bytes], runs: int) -> ReadResult:
    """Check that the passes agree, then time them (page cache warmed by the checks). O(runs * size)."""
    paths = [segment.log.path for segment in log.segments.values()]
    log_bytes = sum(len(buf) for buf in stored)
    if plain_read(paths) != log_bytes:
        raise AssertionError("the segment files do not hold exactly the appended batches")
    expected = decode_in_memory(stored)
    if read_log(log, decode=True) != expected or read_log(log, decode=False) != ReadTotals(
        expected.nbytes, expected.records, 0
    ):
        raise AssertionError("Log.read did not return exactly the appended records")
    # Rounds interleave the passes so drift in machine speed hits them alike.
    plain_s = read_s = decode_s = read_decode_s = float("inf")
    for _ in range(runs):
        plain_s = min(plain_s, best_of(lambda: plain_read(paths), 1)[0])
        read_s = min(read_s, best_of(lambda: read_log(log, decode=False), 1)[0])
        decode_s = min(decode_s, best_of(lambda: decode_in_memory(stored), 1)[0])
        read_decode_s = min(read_decode_s, best_of(lambda: read_log(log, decode=True), 1)[0])
    return ReadResult(
        runs, log.dir, len(stored), log_bytes, expected.records, plain_s, read_s, read_decode_s, decode_s
    )


def run(args: argparse.Namespace) -> ReadResult:
    """Build the log, measure, print the report and remove the log. O(runs * size)."""
    batches = args.read_batches or (QUICK_READ_BATCHES if args.quick else DEFAULT_READ_BATCHES)
    if batches < 1:
        raise SystemExit("--read-batches must be at least 1")
    scratch = args.data_dir / "read-run"
    log, stored = build_log(scratch, batches)
    try:
        result = measure(log, stored, repeats(args, 3))
        print(result.report())
        if args.profile:
            print(profile(lambda: read_log(log, decode=False)))
    finally:
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * size)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
