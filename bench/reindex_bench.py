"""Reindex of the generated segment (``logmgr.reindex.reindex(log, out=tmp)``) against the header walk of the
same file in the same run.

Reindex does the header walk + CRC and in addition appends offset/time index entries (one per batch here: the
batches are larger than ``index.interval.bytes`` and their max timestamps grow), writes the index files and
fsyncs them. The ratio ``reindex / header walk`` is therefore the cost of index building and writing on top of
the walk; 1.0 would mean indexing is free.

Run: ``.venv/bin/python bench/reindex_bench.py [--size-mib N | --quick] [--repeats R] [--profile]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _common import (
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
from header_walk import walk_ours

from logmgr.reindex import ReindexReport, reindex


@dataclass(frozen=True, slots=True)
class ReindexResult:
    """Best-of seconds of the header walk and of the reindex of one segment, with the index entry counts."""

    segment: Segment
    runs: int
    header_walk_s: float
    reindex_s: float
    offset_entries: int
    time_entries: int

    @property
    def ratio(self) -> float:
        """Reindex time divided by header-walk time."""
        return self.reindex_s / self.header_walk_s

    def report(self) -> str:
        """The result table, as printed. O(1)."""
        seg = self.segment
        rows = [
            [
                name,
                f"{seconds:.3f}",
                f"{mb_per_s(seg.size_bytes, seconds):,.0f}",
                f"{seconds / self.header_walk_s:.2f}",
            ]
            for name, seconds in (
                ("header walk + CRC (FileRecords.batches + ensure_valid)", self.header_walk_s),
                ("reindex(log, out=tmpdir)", self.reindex_s),
            )
        ]
        return "\n".join(
            [
                f"segment: {shown(seg.path)} ({seg.size_bytes / 2**20:,.0f} MiB, {seg.batches:,} batches); "
                f"index entries written: {self.offset_entries:,} offset, {self.time_entries:,} time",
                f"page cache warm; best of {self.runs} runs; MB = 10^6 bytes; indexes go to a fresh temp dir per run",
                "",
                table(["pass", "seconds", "MB/s", "x header walk"], rows),
                "",
                f"ratio reindex / header walk = {self.ratio:.2f}",
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        return (
            f"reindex: {self.reindex_s:.3f} s ({mb_per_s(self.segment.size_bytes, self.reindex_s):,.0f} MB/s), "
            f"header walk {self.header_walk_s:.3f} s, reindex/header-walk = {self.ratio:.2f}"
        )


def reindex_once(log: Path, scratch: Path) -> ReindexReport:
    """Reindex ``log`` into a new directory under ``scratch`` and remove it; fails unless the log is valid. O(size)."""
    out = Path(tempfile.mkdtemp(prefix="reindex-", dir=scratch))
    try:
        report = reindex(log, out=out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if not report.ok:
        raise AssertionError(f"reindex found errors in {log}: {report.segments}")
    return report


def measure(seg: Segment, runs: int, scratch: Path) -> ReindexResult:
    """Warm the page cache, then time the header walk and the reindex. O(runs * size)."""
    read_all(seg.path)
    walk_s, batches = best_of(lambda: walk_ours(seg.path), runs)
    if batches != seg.batches:
        raise AssertionError(f"header walk saw {batches} batches, expected {seg.batches}")
    reindex_s, report = best_of(lambda: reindex_once(seg.path, scratch), runs)
    (done,) = report.segments
    if done.batches != seg.batches:
        raise AssertionError(f"reindex saw {done.batches} batches, expected {seg.batches}")
    return ReindexResult(seg, runs, walk_s, reindex_s, done.offset_entries, done.time_entries)


def run(args: argparse.Namespace) -> ReindexResult:
    """Generate (or reuse) the segment and measure; prints the report. O(runs * size)."""
    seg = segment(size_mib(args), args.data_dir)
    scratch = args.data_dir
    result = measure(seg, repeats(args, 3), scratch)
    print(result.report())
    if args.profile:
        print(profile(lambda: reindex_once(seg.path, scratch)))
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * size)."""
    bench_main(__doc__, run, argv)


if __name__ == "__main__":
    main()
