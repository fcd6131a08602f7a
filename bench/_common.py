"""Shared pieces of the benchmarks: command-line options, timing, tables and the generated segment file.

Throughput is in MB/s with MB = 10**6 bytes. Every timing is the best (minimum) of ``--repeats`` runs, as
``timeit`` reports, because the minimum is the run least disturbed by the rest of the machine.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import random
import shutil
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from crc32c import crc32c

from segments.log_segment import LogSegment
from segments.naming import log_file
from segments.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    SimpleRecord,
    build_batch,
)

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
DEFAULT_SIZE_MIB = 1024
QUICK_SIZE_MIB = 64
MIB = 1024 * 1024
READ_CHUNK = 256 * 1024
"""The raw baselines' ``pread`` size: the fastest read + checksum measured here (a chunk that stays in a core's
second-level cache: raw crc32c over 256 KiB chunks ran at 10.5 GB/s, over 8 MiB chunks at 4.4 GB/s, whose reads
also fault fresh pages in); ``segments.file_records`` windows grow to 1 MiB."""

# Header fields the segment generator re-stamps (kafka-format.md §1.1): base offset and leader epoch lie before
# the CRC range, the two timestamps inside it.
_BASE_TIMESTAMP_OFFSET = 27
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_T = TypeVar("_T")

SEGMENT_RECORDS_PER_BATCH = 140
SEGMENT_VALUE_SIZE = 100
SEGMENT_DISTINCT_BATCHES = 8
SEGMENT_START_TIMESTAMP = 1_700_000_000_000
_SEGMENT_FORMAT_VERSION = 1

_WORDS = (
    b"user",
    b"order",
    b"click",
    b"view",
    b"cart",
    b"pay",
    b"ok",
    b"error",
    b"retry",
    b"session",
    b"checkout",
    b"search",
    b"login",
    b"logout",
    b"item",
    b"price",
    b"eur",
    b"usd",
    b"true",
    b"false",
)


def bench_main(
    doc: str | None,
    run: Callable[[argparse.Namespace], object],
    argv: list[str] | None,
    *,
    sized: bool = True,
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """The command-line entry point every benchmark script shares: common options, its own, then ``run``. O(1)
    plus the run."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, sized=sized)
    if add_args is not None:
        add_args(parser)
    run(parser.parse_args(argv))


def add_common_args(parser: argparse.ArgumentParser, *, sized: bool = True) -> None:
    """Options every benchmark takes: data size, ``--quick``, repeats and the data directory. O(1)."""
    if sized:
        parser.add_argument(
            "--size-mib", type=int, default=None, help=f"segment size in MiB (default {DEFAULT_SIZE_MIB})"
        )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK_SIZE_MIB} MiB segment, each benchmark's small size, 2 repeats",
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per measurement (best is kept)")
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help=f"generated data (default {DATA_DIR})"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of our code (top by own time)"
    )


def size_mib(args: argparse.Namespace) -> int:
    """``--size-mib`` when given, else the quick or full default. O(1)."""
    if args.size_mib is not None:
        if args.size_mib < 1:
            raise SystemExit("--size-mib must be at least 1")
        return int(args.size_mib)
    return QUICK_SIZE_MIB if args.quick else DEFAULT_SIZE_MIB


def repeats(args: argparse.Namespace, full: int) -> int:
    """``--repeats`` when given, else ``full`` (2 under ``--quick``). O(1)."""
    if args.repeats is not None:
        return max(1, int(args.repeats))
    return 2 if args.quick else full


def best_of(fn: Callable[[], _T], runs: int) -> tuple[float, _T]:
    """Best wall time in seconds of ``runs`` (at least one) calls of ``fn`` and the last call's result.
    O(runs * fn)."""
    best = float("inf")
    for _ in range(max(1, runs)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def shown(path: Path) -> str:
    """``path`` relative to the repository root when it is inside it (reports stay machine-independent). O(1)."""
    try:
        return str(path.resolve().relative_to(BENCH_DIR.parent))
    except ValueError:
        return str(path)


def mb_per_s(nbytes: int, seconds: float) -> float:
    """Throughput in MB/s (10**6 bytes per second). O(1)."""
    return nbytes / seconds / 1e6


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-markdown table (also readable as plain text). O(cells)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def text_value(rng: random.Random, size: int) -> bytes:
    """A log-like value of exactly ``size`` bytes: words from a small vocabulary and digits, so codecs such as
    lz4 find repeats (about 2x) as in real event payloads. O(size)."""
    out = bytearray(b'{"ev":"')
    while len(out) < size:
        out += rng.choice(_WORDS)
        out += b"%d," % rng.randrange(1000)
    return bytes(out[:size])


def read_all(path: Path, chunk: int = READ_CHUNK) -> int:
    """Read a file with ``os.pread`` in ``chunk``-byte calls, discarding the bytes; return the bytes read. O(size).

    Used to warm the page cache and as the plain-read baseline.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        while True:
            data = os.pread(fd, chunk, total)
            if not data:
                return total
            total += len(data)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Segment:
    """A generated ``.log`` file of identical-shape uncompressed batches."""

    path: Path
    size_bytes: int
    batches: int
    records: int
    batch_size: int


def segment_templates() -> list[bytes]:
    """The ``SEGMENT_DISTINCT_BATCHES`` distinct uncompressed batches every generated log repeats: 140 records
    each (8-byte keys, 100-byte log-like values, timestamps ``SEGMENT_START_TIMESTAMP + i``), all the same size
    (16,873 bytes). Deterministic. O(batches * records)."""
    rng = random.Random(20240611)
    templates = []
    for t in range(SEGMENT_DISTINCT_BATCHES):
        records = [
            SimpleRecord(
                text_value(rng, SEGMENT_VALUE_SIZE), b"key-%06d" % (t * 1000 + i), SEGMENT_START_TIMESTAMP + i
            )
            for i in range(SEGMENT_RECORDS_PER_BATCH)
        ]
        templates.append(build_batch(records))
    if any(len(t) != len(templates[0]) for t in templates):
        raise AssertionError("template batches differ in size; the generators expect one batch size")
    return templates


def stamped_batch(templates: Sequence[bytes], n: int, *, leader_epoch: int | None = None) -> bytearray:
    """Batch number ``n`` of a generated log: template ``n % len(templates)`` with base offset
    ``n * SEGMENT_RECORDS_PER_BATCH``, both timestamps shifted by ``n`` ms (so max timestamps grow and the time
    index gets entries as in a real log), the leader epoch set when given, and its CRC recomputed. O(batch size).
    """
    stamped = bytearray(templates[n % len(templates)])
    _I64.pack_into(stamped, 0, n * SEGMENT_RECORDS_PER_BATCH)
    if leader_epoch is not None:
        _I32.pack_into(stamped, PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    for field in (_BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET):
        _I64.pack_into(stamped, field, _I64.unpack_from(stamped, field)[0] + n)
    _U32.pack_into(stamped, CRC_OFFSET, crc32c(memoryview(stamped)[ATTRIBUTES_OFFSET:]))
    return stamped


def segment(size_mib_: int, data_dir: Path = DATA_DIR) -> Segment:
    """The benchmark segment of about ``size_mib_`` MiB under ``data_dir``, generated unless a file with the
    same parameters is already there. O(size).

    The file holds the :func:`segment_templates` batches repeated, as :func:`stamped_batch` stamps them.
    """
    directory = data_dir / f"segment-{size_mib_}mib"
    path = log_file(directory, 0)
    meta_path = directory / "segment.json"
    params = {
        "version": _SEGMENT_FORMAT_VERSION,
        "size_mib": size_mib_,
        "records_per_batch": SEGMENT_RECORDS_PER_BATCH,
        "value_size": SEGMENT_VALUE_SIZE,
    }
    if meta_path.exists() and path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params and meta.get("size_bytes") == path.stat().st_size:
            return Segment(path, meta["size_bytes"], meta["batches"], meta["records"], meta["batch_size"])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        if stale.is_file():
            stale.unlink()
    templates = segment_templates()
    batch_size = len(templates[0])
    count = max(1, size_mib_ * MIB // batch_size)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        pending = bytearray()
        for n in range(count):
            pending += stamped_batch(templates, n)
            if len(pending) >= READ_CHUNK:
                out.write(pending)
                pending.clear()
        out.write(pending)
    os.replace(tmp, path)
    info = Segment(path, count * batch_size, count, count * SEGMENT_RECORDS_PER_BATCH, batch_size)
    meta_path.write_text(
        json.dumps(
            {
                "params": params,
                "size_bytes": info.size_bytes,
                "batches": info.batches,
                "records": info.records,
                "batch_size": info.batch_size,
            }
        )
    )
    return info


def write_log(
    partition_dir: Path,
    templates: Sequence[bytes],
    *,
    batches: int,
    batches_per_segment: int,
    leader_epoch: int | None = 0,
) -> int:
    """Write a closed log of ``batches`` :func:`stamped_batch` batches into ``partition_dir`` (created), a new
    segment every ``batches_per_segment`` batches, one ``LogSegment.append`` per batch so the offset and time
    indexes get the entries a broker's appends give them (Kafka's defaults: ``index.interval.bytes`` 4096,
    10 MiB indexes). Returns the ``.log`` bytes written. No fsync: the caller decides. O(size).
    """
    partition_dir.mkdir(parents=True, exist_ok=True)
    written = 0
    for first in range(0, batches, batches_per_segment):
        segment = LogSegment.open(partition_dir, first * SEGMENT_RECORDS_PER_BATCH, create=True)
        try:
            for n in range(first, min(batches, first + batches_per_segment)):
                segment.append(memoryview(stamped_batch(templates, n, leader_epoch=leader_epoch)))
            written += segment.size
        finally:
            segment.close()
    return written


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in (0, 1]) of ascending ``sorted_values``. O(1)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def fresh_dir(path: Path) -> Path:
    """``path`` emptied (removed with its contents, then created). O(files)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def profile(fn: Callable[[], object], top: int = 12) -> str:
    """cProfile one call of ``fn``: the ``top`` functions by own time, as text. O(fn)."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()
