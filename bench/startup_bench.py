"""LogManager startup over one log dir of many small partitions: clean (marker present) against unclean (marker
removed and every recovery point 0, so every segment is recovered), next to raw crc32c over the same bytes.

The log dir holds ``--partitions`` partitions (topic ``bench``) of ``--segments`` segments each; every segment
holds ``--batches-per-segment`` batches of 16,873 bytes (140 records of 100-byte values, leader epoch 0), so the
default 1,000 x 10 x 6 is about 1 GB of ``.log`` data in 10,000 segments. It is written once with
``LogSegment.append`` per batch (indexes as appends make them) and kept under ``--data-dir`` for later runs.
``segment.bytes`` is set to the segment size so later appends would roll the same way. When the open-file limit
cannot hold every segment open (a loaded log keeps one descriptor per segment plus the active segment's two index
mappings, measured at the start), the largest
partition count that fits is measured instead and the report says so.

Timed, best of ``--repeats``:

* raw crc32c: open every ``.log`` file, read it with 256 KiB ``pread`` calls (``_common.READ_CHUNK``), crc32c
  each chunk, close (the physical limit of reading and checksumming the same bytes, with the same number of
  files; the ``crc32c`` package, the issue's peer), and the same with the compiled core's own CRC-32C kernel (AVX-512 folding where the
  processor has it): the limit with the checksum recovery itself runs;
* clean startup: ``LogManager(broker).startup()`` with the clean-shutdown marker present (nothing recovered);
* unclean startup: the same after removing the marker and writing a recovery-point checkpoint of 0 for every
  partition, so every segment is recovered (Kafka's ``LogSegment.recover``: header walk + CRC, index rebuild,
  producer state, leader epochs; one producer snapshot written per recovered segment, all made durable by one
  file-system sync of the log dir at the end of the load).

The table is best of ``--repeats`` for each pass on its own; a last line pairs each round's startups with the raw
crc32c pass run just before them (the same minutes of this shared machine: Python-heavy startups slow more than the
kernel-bound raw pass when other work takes the cores) and gives their medians.

Each startup starts after a full ``gc.collect()`` (as in a fresh process) and is followed by an untimed
``shutdown()`` (its time is shown); ``log.initial.task.delay.ms`` is one hour so no scheduled job runs.
``num.recovery.threads.per.data.dir`` is Kafka's default 1 unless
``--recovery-threads`` says otherwise. The page cache is warm (every ``.log`` file is read before timing), so the
figures are CPU and metadata cost, not disk reads.

Run: ``.venv/bin/python bench/startup_bench.py [--partitions N | --quick] [--repeats R] [--profile]``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import resource
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import (
    READ_CHUNK,
    SEGMENT_RECORDS_PER_BATCH,
    bench_main,
    fresh_dir,
    mb_per_s,
    profile,
    repeats,
    segment_templates,
    shown,
    table,
    write_log,
)
from crc32c import crc32c

from checkpoints.clean_shutdown import CleanShutdownMarker
from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log_loader import load_log
from logmgr.log_manager import LogManager
from segments._native.crc import crc32c as core_crc32c
from segments._native.crc import kernel as core_crc_kernel
from segments.naming import LOG_SUFFIX, TopicPartition

TOPIC = "bench"
DEFAULT_PARTITIONS = 1000
QUICK_PARTITIONS = 100
DEFAULT_SEGMENTS = 10
DEFAULT_BATCHES_PER_SEGMENT = 6
JOB_DELAY_MS = 3_600_000
FD_MARGIN = 500
"""Descriptors kept free for everything but open segments (checkpoints, snapshots, the interpreter)."""
_DATA_FORMAT_VERSION = 1


def add_args(parser: argparse.ArgumentParser) -> None:
    """The startup benchmark's own options (run_all takes them too). O(1)."""
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help=f"partitions in the log dir (default {DEFAULT_PARTITIONS}, {QUICK_PARTITIONS} with --quick)",
    )
    parser.add_argument(
        "--segments", type=int, default=DEFAULT_SEGMENTS, help=f"segments per partition (default {DEFAULT_SEGMENTS})"
    )
    parser.add_argument(
        "--batches-per-segment",
        type=int,
        default=DEFAULT_BATCHES_PER_SEGMENT,
        help=f"16,873-byte batches per segment (default {DEFAULT_BATCHES_PER_SEGMENT})",
    )
    parser.add_argument(
        "--recovery-threads", type=int, default=1, help="num.recovery.threads.per.data.dir (default 1, Kafka's)"
    )


@dataclass(frozen=True, slots=True)
class StartupData:
    """The generated log dir and its shape."""

    log_dir: Path
    partitions: int
    segments: int
    batch_size: int
    batches_per_segment: int

    @property
    def total_segments(self) -> int:
        return self.partitions * self.segments

    def log_files(self) -> list[Path]:
        """Every ``.log`` file of the log dir. O(files)."""
        return sorted(self.log_dir.glob(f"{TOPIC}-*/*{LOG_SUFFIX}"))

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in range(self.partitions)]


def dataset(partitions: int, segments: int, batches_per_segment: int, data_dir: Path) -> StartupData:
    """The log dir under ``data_dir``, written unless one with the same parameters is there. O(size)."""
    directory = data_dir / f"startup-{partitions}x{segments}x{batches_per_segment}"
    meta_path = directory / "startup.json"
    log_dir = directory / "logdir"
    params = {
        "version": _DATA_FORMAT_VERSION,
        "partitions": partitions,
        "segments": segments,
        "batches_per_segment": batches_per_segment,
    }
    templates = segment_templates()
    batch_size = len(templates[0])
    data = StartupData(log_dir, partitions, segments, batch_size, batches_per_segment)
    if meta_path.exists() and json.loads(meta_path.read_text()).get("params") == params:
        return data
    print(f"writing {partitions:,} partitions x {segments} segments under {shown(log_dir)} ...", flush=True)
    started = time.perf_counter()
    fresh_dir(log_dir)
    for p in range(partitions):
        write_log(
            log_dir / f"{TOPIC}-{p}",
            templates,
            batches=segments * batches_per_segment,
            batches_per_segment=batches_per_segment,
        )
    meta_path.write_text(json.dumps({"params": params}))
    print(f"written in {time.perf_counter() - started:.1f} s", flush=True)
    return data


def broker_config(data: StartupData, recovery_threads: int) -> BrokerConfig:
    """Broker settings for the benchmark: jobs delayed by an hour, segments sized as generated. O(1)."""
    return BrokerConfig(
        log_dirs=(str(data.log_dir),),
        log_initial_task_delay_ms=JOB_DELAY_MS,
        log_segment_bytes=data.batch_size * data.batches_per_segment,
        num_recovery_threads_per_data_dir=recovery_threads,
    )


def crc_files(paths: list[Path], checksum: Callable[[bytes], int] = crc32c) -> int:
    """Open, read (``READ_CHUNK`` ``pread`` calls), ``checksum`` and close every file; returns the bytes read.
    O(size)."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while True:
                data = os.pread(fd, READ_CHUNK, position)
                if not data:
                    break
                checksum(data)
                position += len(data)
            total += position
        finally:
            os.close(fd)
    return total


def open_fds() -> int:
    """Descriptors this process has open now (Linux ``/proc/self/fd``). O(fds)."""
    return len(os.listdir("/proc/self/fd"))


def fds_per_segment(scratch: Path, segments: int, batches_per_segment: int) -> float:
    """Descriptors an opened log keeps per segment, measured: write a small log of ``segments`` segments, load
    it and count. O(segments)."""
    partition_dir = fresh_dir(scratch) / f"{TOPIC}-0"
    write_log(
        partition_dir,
        segment_templates(),
        batches=segments * batches_per_segment,
        batches_per_segment=batches_per_segment,
    )
    before = open_fds()
    log = load_log(partition_dir, LogConfig(), recovery_point=0, had_clean_shutdown=True)
    try:
        return (open_fds() - before) / segments
    finally:
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)


def fd_limit() -> int:
    """The open-file limit, after raising the soft limit to the hard one (all an unprivileged process may). O(1)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


@dataclass(frozen=True, slots=True)
class FdBudget:
    """How many partitions of the requested shape this process can hold open at once."""

    requested_partitions: int
    partitions: int
    per_segment: float
    limit: int

    def note(self, segments: int) -> str:
        """Why fewer partitions than requested were measured ('' when all were). O(1)."""
        if self.partitions == self.requested_partitions:
            return ""
        needed = math.ceil(self.requested_partitions * segments * self.per_segment)
        return (
            f"NOTE: {self.requested_partitions:,} x {segments} segments were requested, but an open logmgr segment "
            f"holds {self.per_segment:.1f} file descriptors (measured after a load: each .log, plus the duplicate "
            f"descriptor CPython's mmap keeps for each mapped index), so they need about {needed:,} while RLIMIT_NOFILE is "
            f"{self.limit:,} (hard limit, cannot be raised here): measured {self.partitions:,} x {segments} instead."
        )


def fd_budget(requested: int, segments: int, batches_per_segment: int, scratch: Path) -> FdBudget:
    """The largest partition count up to ``requested`` (a multiple of 50 when cut) whose segments fit the
    open-file limit. O(segments)."""
    per_segment = fds_per_segment(scratch, segments, batches_per_segment)
    limit = fd_limit()
    fitting = int((limit - open_fds() - FD_MARGIN) // max(1.0, per_segment * segments))
    if fitting >= requested:
        return FdBudget(requested, requested, per_segment, limit)
    partitions = fitting - fitting % 50 if fitting >= 100 else fitting
    if partitions < 1:
        raise SystemExit(f"RLIMIT_NOFILE {limit} leaves room for no partition of {segments} segments")
    return FdBudget(requested, partitions, per_segment, limit)


@dataclass(frozen=True, slots=True)
class StartupRun:
    """One timed startup and the untimed shutdown after it."""

    startup_s: float
    shutdown_s: float
    recovered_segments: int


def start_and_stop(data: StartupData, broker: BrokerConfig, *, expect_recovered: int) -> StartupRun:
    """Time ``LogManager.startup()``, check every log loaded and the recovery count, then shut down. O(dir)."""
    # A broker starts in a fresh process: no startup pays for what earlier runs here left to the collector (a
    # clean startup right after an unclean run met a full collection of that run's leftovers: ~1.6x its CPU).
    gc.collect()
    manager = LogManager(broker)
    started = time.perf_counter()
    manager.startup()
    startup_s = time.perf_counter() - started
    try:
        logs = manager.all_logs()
        recovered = sum(log.recovery.recovered_segments for log in logs)
        if len(logs) != data.partitions:
            raise AssertionError(f"{len(logs)} logs loaded, expected {data.partitions}")
        if recovered != expect_recovered:
            raise AssertionError(f"{recovered} segments recovered, expected {expect_recovered}")
        expected_end = data.segments * data.batches_per_segment * SEGMENT_RECORDS_PER_BATCH
        short = [log.topic_partition for log in logs if log.log_end_offset != expected_end]
        if short:
            raise AssertionError(f"log end offset is not {expected_end} for {short[:5]}")
    finally:
        stopping = time.perf_counter()
        manager.shutdown()
        shutdown_s = time.perf_counter() - stopping
    return StartupRun(startup_s, shutdown_s, recovered)


def make_unclean(data: StartupData) -> None:
    """What a crash leaves for this benchmark: no clean-shutdown marker, every recovery point 0. O(partitions)."""
    CleanShutdownMarker.remove(data.log_dir)
    OffsetCheckpointFile(data.log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
        {tp: 0 for tp in data.topic_partitions()}
    )


@dataclass(frozen=True, slots=True)
class StartupResult:
    """Best-of timings of the raw crc32c pass and of clean and unclean startups."""

    data: StartupData
    budget: FdBudget
    log_bytes: int
    runs: int
    recovery_threads: int
    crc_s: float
    core_crc_s: float
    clean: StartupRun
    unclean: StartupRun
    rounds: tuple[tuple[float, float, float], ...]  # each round's raw crc32c pass, clean and unclean startup (s)

    @property
    def paired_clean(self) -> list[float]:
        """Each round's clean startup time over its raw crc32c pass's (the goal: at most 1)."""
        return [clean / crc for crc, clean, _ in self.rounds]

    @property
    def paired_unclean(self) -> list[float]:
        """Each round's raw crc32c pass time over its unclean startup's: the unclean MB/s x raw crc."""
        return [crc / unclean for crc, _, unclean in self.rounds]

    @property
    def recovery_only_s(self) -> float:
        """Unclean minus clean startup: the cost of recovering every segment."""
        return self.unclean.startup_s - self.clean.startup_s

    def report(self) -> str:
        """The result table, as printed. O(1)."""
        data = self.data
        crc_rate = mb_per_s(self.log_bytes, self.crc_s)
        rows = []
        for name, seconds, shutdown in (
            ("raw crc32c of every .log file (open + pread + crc32c)", self.crc_s, None),
            (f"same, the core's CRC-32C ({core_crc_kernel()} kernel)", self.core_crc_s, None),
            ("clean startup (marker present, nothing recovered)", self.clean.startup_s, self.clean.shutdown_s),
            ("unclean startup (no marker, recovery point 0)", self.unclean.startup_s, self.unclean.shutdown_s),
        ):
            rate = mb_per_s(self.log_bytes, seconds)
            rows.append(
                [
                    name,
                    f"{seconds:.3f}",
                    f"{seconds / data.partitions * 1e3:.2f}",
                    f"{rate:,.0f}",
                    f"{rate / crc_rate:.3f}",
                    "-" if shutdown is None else f"{shutdown:.3f}",
                ]
            )
        recovery_rate = mb_per_s(self.log_bytes, self.recovery_only_s)
        per_segment_us = self.recovery_only_s / data.total_segments * 1e6
        note = self.budget.note(data.segments)
        return "\n".join(
            [
                *([note, ""] if note else []),
                f"log dir: {shown(data.log_dir)}: {data.partitions:,} partitions x {data.segments} segments "
                f"x {data.batches_per_segment} batches of {data.batch_size:,} bytes = {data.total_segments:,} "
                f"segments, {self.log_bytes / 1e6:,.0f} MB of .log data",
                f"num.recovery.threads.per.data.dir = {self.recovery_threads}; jobs delayed by "
                f"{JOB_DELAY_MS // 60_000} min; page cache warm; best of {self.runs} runs; MB = 10^6 bytes; "
                "shutdown (untimed in the startup figure) is the one that followed the best startup",
                "",
                table(["pass", "seconds", "ms / partition", "MB/s of .log", "x raw crc", "shutdown s"], rows),
                "",
                f"segments recovered: clean {self.clean.recovered_segments}, unclean "
                f"{self.unclean.recovered_segments:,} (every segment)",
                f"recovery alone (unclean - clean): {self.recovery_only_s:.3f} s = {recovery_rate:,.0f} MB/s "
                f"= {recovery_rate / crc_rate:.3f} x raw crc32c, {per_segment_us:,.0f} us per segment",
                f"unclean startup / raw CRC-32C of the core's kernel = {self.core_crc_s / self.unclean.startup_s:.3f}",
                "paired by round (each startup against that round's raw crc32c pass, run just before it): clean "
                "time / raw "
                + ", ".join(f"{ratio:.3f}" for ratio in self.paired_clean)
                + f" (median {statistics.median(self.paired_clean):.3f}); unclean x raw crc "
                + ", ".join(f"{ratio:.3f}" for ratio in self.paired_unclean)
                + f" (median {statistics.median(self.paired_unclean):.3f})",
            ]
        )

    def summary(self) -> str:
        """One line for run_all. O(1)."""
        cut = " (cut by the fd limit, see the report)" if self.budget.note(self.data.segments) else ""
        return (
            f"startup {self.data.partitions:,}x{self.data.segments}{cut}: clean {self.clean.startup_s:.2f} s, unclean "
            f"{self.unclean.startup_s:.2f} s (recovery {mb_per_s(self.log_bytes, self.unclean.startup_s):,.0f} "
            f"MB/s), raw crc32c {mb_per_s(self.log_bytes, self.crc_s):,.0f} MB/s, "
            f"unclean/raw-crc = {self.crc_s / self.unclean.startup_s:.3f}"
        )


def measure(data: StartupData, budget: FdBudget, runs: int, recovery_threads: int) -> StartupResult:
    """Bring the dir to a clean state, warm the page cache, then time crc, clean and unclean startups,
    alternating. O(runs * dir)."""
    broker = broker_config(data, recovery_threads)
    if not CleanShutdownMarker.exists(data.log_dir):
        # Fresh data or an interrupted run: one untimed full recovery brings the dir to a clean state.
        make_unclean(data)
        start_and_stop(data, broker, expect_recovered=data.total_segments)
    files = data.log_files()
    if len(files) != data.total_segments:
        raise AssertionError(f"{len(files)} .log files, expected {data.total_segments}")
    log_bytes = crc_files(files)
    crc_s = core_crc_s = float("inf")
    clean: StartupRun | None = None
    unclean: StartupRun | None = None
    rounds: list[tuple[float, float, float]] = []
    for _ in range(runs):
        started = time.perf_counter()
        crc_files(files)
        round_crc_s = time.perf_counter() - started
        crc_s = min(crc_s, round_crc_s)
        started = time.perf_counter()
        crc_files(files, core_crc32c)
        core_crc_s = min(core_crc_s, time.perf_counter() - started)
        if not CleanShutdownMarker.exists(data.log_dir):
            raise AssertionError("the clean-shutdown marker is missing after a shutdown")
        clean_run = start_and_stop(data, broker, expect_recovered=0)
        clean = clean_run if clean is None or clean_run.startup_s < clean.startup_s else clean
        make_unclean(data)
        unclean_run = start_and_stop(data, broker, expect_recovered=data.total_segments)
        unclean = unclean_run if unclean is None or unclean_run.startup_s < unclean.startup_s else unclean
        rounds.append((round_crc_s, clean_run.startup_s, unclean_run.startup_s))
    assert clean is not None and unclean is not None
    return StartupResult(
        data, budget, log_bytes, runs, recovery_threads, crc_s, core_crc_s, clean, unclean, tuple(rounds)
    )


def run(args: argparse.Namespace) -> StartupResult:
    """Generate (or reuse) the log dir and measure; prints the report. O(runs * dir)."""
    requested = args.partitions or (QUICK_PARTITIONS if args.quick else DEFAULT_PARTITIONS)
    if min(requested, args.segments, args.batches_per_segment, args.recovery_threads) < 1:
        raise SystemExit("--partitions, --segments, --batches-per-segment and --recovery-threads must be >= 1")
    budget = fd_budget(requested, args.segments, args.batches_per_segment, args.data_dir / "startup-fd-probe")
    note = budget.note(args.segments)
    if note:
        print(note, flush=True)
    data = dataset(budget.partitions, args.segments, args.batches_per_segment, args.data_dir)
    result = measure(data, budget, repeats(args, 3), args.recovery_threads)
    print(result.report())
    if args.profile:
        broker = broker_config(data, args.recovery_threads)
        for clean in (True, False):
            print(f"profile of load_log over every partition in this thread, {'clean' if clean else 'unclean'}:")
            print(profile(functools.partial(load_in_this_thread, data, broker, clean=clean)))
        # The profiled loads wrote no checkpoints or marker: one full recovery leaves the dir clean again.
        make_unclean(data)
        start_and_stop(data, broker, expect_recovered=data.total_segments)
    return result


def load_in_this_thread(data: StartupData, broker: BrokerConfig, *, clean: bool) -> None:
    """What the manager's loader threads do, in the calling thread so cProfile sees it: ``load_log`` of every
    partition (recovery point 0 when unclean), then close. O(dir)."""
    config = broker.log_config()
    end = data.segments * data.batches_per_segment * SEGMENT_RECORDS_PER_BATCH
    # As the manager passes it: when the recovery-point checkpoint was written (the clean path's reference).
    written_ns = (data.log_dir / RECOVERY_POINT_CHECKPOINT_FILE).stat().st_mtime_ns if clean else None
    for tp in data.topic_partitions():
        log = load_log(
            data.log_dir / f"{tp.topic}-{tp.partition}",
            config,
            recovery_point=end if clean else 0,
            had_clean_shutdown=clean,
            recovery_point_written_ns=written_ns,
        )
        log.close()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * dir)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
