"""Header walk + CRC of a segment (what recovery and ``verify`` do) against the raw limits of the same bytes.

Measured over one generated segment, page cache warm (the file is read once before timing):

* plain read: ``os.pread`` in 256 KiB calls (``_common.READ_CHUNK``), bytes discarded;
* raw crc32c, whole chunks: the same reads plus ``crc32c`` over each whole 256 KiB chunk (the physical limit of
  read + checksum, no batch structure at all; the issue's peer, the ``crc32c`` package). A chunk that size stays
  in a core's second-level cache: the checksum reads what the read just copied there, and the allocator reuses the
  freed buffer;
* raw crc32c, 8 MiB chunks: the peer of earlier measurements, less than half as fast here (each read goes out to
  memory and faults fresh pages in), kept for comparison;
* the same with the compiled core's own CRC-32C kernel (``segments._native.crc``; AVX-512 folding where the
  processor has it, faster than the package): the limit our walk's CRC could reach;
* minimal batch loop: the same reads, each batch's length parsed with ``struct`` and ``crc32c`` computed over its
  CRC-covered range ``[21, size)`` and compared with the stored CRC, no objects built (the floor for any
  per-batch Python loop);
* ours: ``for fb in FileRecords(path).batches(): fb.batch.ensure_valid()``.

Run: ``.venv/bin/python bench/header_walk.py [--size-mib N | --quick] [--repeats R] [--profile]``.
"""

from __future__ import annotations

import argparse
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import (
    READ_CHUNK,
    Segment,
    bench_main,
    best_of,
    mb_per_s,
    profile,
    read_all,
    repeats,
    segment,
    shown,
    size_mib,
    table,
)
from crc32c import crc32c

from segments._native.crc import crc32c as core_crc32c
from segments._native.crc import kernel as core_crc_kernel
from segments.file_records import FileRecords
from segments.records import ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_OVERHEAD

_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


def walk_ours(path: Path) -> int:
    """Our header walk with CRC check; returns the number of batches. O(size)."""
    count = 0
    with FileRecords(path) as log:
        for found in log.batches():
            found.batch.ensure_valid()
            count += 1
    return count


LARGE_CHUNK = 8 * 1024 * 1024  # the raw peer's read size in earlier measurements


def crc_whole_chunks(path: Path, checksum: Callable[[bytes], int] = crc32c, chunk: int = READ_CHUNK) -> int:
    """Read in ``chunk``-byte ``pread`` calls (``READ_CHUNK`` by default) and ``checksum`` every whole chunk;
    returns bytes read. O(size)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        while True:
            data = os.pread(fd, chunk, total)
            if not data:
                return total
            checksum(data)
            total += len(data)
    finally:
        os.close(fd)


def crc_minimal_loop(path: Path) -> int:
    """The least Python work that checks every batch CRC: windowed reads, length parse, crc32c of the covered
    range, compare. Returns the number of batches. O(size)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        limit = os.fstat(fd).st_size
        position = 0
        count = 0
        window = b""
        window_start = 0
        while limit - position > LOG_OVERHEAD:
            local = position - window_start
            if local + LOG_OVERHEAD > len(window):
                window, window_start, local = os.pread(fd, READ_CHUNK, position), position, 0
            total = LOG_OVERHEAD + _LENGTH.unpack_from(window, local + 8)[0]
            if local + total > len(window):
                window, window_start, local = os.pread(fd, max(READ_CHUNK, total), position), position, 0
            view = memoryview(window)
            if (
                crc32c(view[local + ATTRIBUTES_OFFSET : local + total])
                != _CRC.unpack_from(window, local + CRC_OFFSET)[0]
            ):
                raise AssertionError(f"bad CRC at {position}")
            position += total
            count += 1
        return count
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class HeaderWalkResult:
    """Best-of timings (seconds) of the six passes over one segment."""

    segment: Segment
    runs: int
    plain_read_s: float
    crc_whole_s: float
    crc_large_chunks_s: float
    core_crc_whole_s: float
    crc_minimal_s: float
    ours_s: float

    @property
    def ratio_ours_to_large_chunks(self) -> float:
        """Our throughput divided by raw crc32c over 8 MiB chunks (the earlier peer)."""
        return self.crc_large_chunks_s / self.ours_s

    @property
    def ratio_ours_to_raw_crc(self) -> float:
        """Our throughput divided by the raw crc32c (whole chunks) throughput: 1.0 is the physical limit."""
        return self.crc_whole_s / self.ours_s

    def report(self) -> str:
        """The result table and ratios, as printed. O(1)."""
        seg = self.segment
        rows = []
        for name, seconds in (
            ("plain read (pread 256 KiB)", self.plain_read_s),
            ("raw crc32c, whole 256 KiB chunks (read + crc)", self.crc_whole_s),
            ("raw crc32c, whole 8 MiB chunks (the earlier peer)", self.crc_large_chunks_s),
            (f"same, the core's CRC-32C ({core_crc_kernel()} kernel)", self.core_crc_whole_s),
            ("minimal batch loop (read + length + crc per batch)", self.crc_minimal_s),
            ("ours: FileRecords.batches() + ensure_valid()", self.ours_s),
        ):
            rows.append(
                [
                    name,
                    f"{seconds:.3f}",
                    f"{mb_per_s(seg.size_bytes, seconds):,.0f}",
                    f"{seg.batches / seconds:,.0f}",
                    f"{self.crc_whole_s / seconds:.2f}",
                ]
            )
        per_batch_us = (self.ours_s - self.crc_minimal_s) / seg.batches * 1e6
        return "\n".join(
            [
                f"segment: {shown(seg.path)} ({seg.size_bytes / 2**20:,.0f} MiB, {seg.batches:,} batches of "
                f"{seg.batch_size:,} bytes, {seg.records:,} records, uncompressed)",
                f"page cache warmed by one full read before timing; best of {self.runs} runs; MB = 10^6 bytes",
                "",
                table(["pass", "seconds", "MB/s", "batches/s", "x raw crc"], rows),
                "",
                f"ratio ours / raw crc32c (whole chunks) = {self.ratio_ours_to_raw_crc:.3f}",
                f"ratio ours / raw crc32c over 8 MiB chunks (the earlier peer) = {self.ratio_ours_to_large_chunks:.3f}",
                f"ratio ours / raw CRC-32C of the core's kernel = {self.core_crc_whole_s / self.ours_s:.3f}",
                f"ratio ours / minimal batch loop = {self.crc_minimal_s / self.ours_s:.3f}",
                f"our overhead over the minimal loop: {per_batch_us:.2f} us per batch",
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        return (
            f"header walk + CRC: {mb_per_s(self.segment.size_bytes, self.ours_s):,.0f} MB/s "
            f"({self.ours_s:.3f} s), raw crc32c {mb_per_s(self.segment.size_bytes, self.crc_whole_s):,.0f} MB/s, "
            f"ours/raw-crc = {self.ratio_ours_to_raw_crc:.3f} (8 MiB chunks: {self.ratio_ours_to_large_chunks:.3f})"
        )


def measure(seg: Segment, runs: int) -> HeaderWalkResult:
    """Warm the page cache, check every pass sees the whole file, then time the six passes. O(runs * size)."""
    if read_all(seg.path) != seg.size_bytes:
        raise AssertionError(f"{seg.path} is not {seg.size_bytes} bytes")
    if walk_ours(seg.path) != seg.batches or crc_minimal_loop(seg.path) != seg.batches:
        raise AssertionError("a walk did not see every batch")
    plain, _ = best_of(lambda: read_all(seg.path), runs)
    whole, _ = best_of(lambda: crc_whole_chunks(seg.path), runs)
    large_chunks, _ = best_of(lambda: crc_whole_chunks(seg.path, chunk=LARGE_CHUNK), runs)
    core_whole, _ = best_of(lambda: crc_whole_chunks(seg.path, core_crc32c), runs)
    minimal, _ = best_of(lambda: crc_minimal_loop(seg.path), runs)
    ours, _ = best_of(lambda: walk_ours(seg.path), runs)
    return HeaderWalkResult(seg, runs, plain, whole, large_chunks, core_whole, minimal, ours)


def run(args: argparse.Namespace) -> HeaderWalkResult:
    """Generate (or reuse) the segment and measure; prints the report. O(runs * size)."""
    seg = segment(size_mib(args), args.data_dir)
    result = measure(seg, repeats(args, 3))
    print(result.report())
    if args.profile:
        print(profile(lambda: walk_ours(seg.path)))
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * size)."""
    bench_main(__doc__, run, argv)


if __name__ == "__main__":
    main()
