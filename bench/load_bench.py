"""Load test of the LogManager: concurrent writers and readers over many partitions while every scheduled job
runs on short intervals, deleting segments under the readers. Not a timed test: it reports throughput,
latencies and job run times, and fails (exit 1) only on a correctness problem.

Load phase: ``--writers`` threads (default 8) append ``--appends`` small batches in all (default 200,000,
20,000 with ``--quick``) to ``--partitions`` partitions (default 200), half of topic ``sized``
(``retention.bytes`` = 3 segments, no time limit), half of topic ``timed`` (``retention.ms`` 5 s, no size
limit), spread by the manager over two log dirs; each writer owns a run of ``partitions / writers``
consecutive partitions (both topics). Segments (``log.segment.bytes``) are sized for about 12 per partition in
a run (about 65 KiB at the default size, 16 KiB, the floor, with ``--quick``), so both retention rules delete
segments while the readers read. Writers cycle through four producer kinds: plain, plain with lz4, idempotent
(1 batch in 64 is sent again, as a client retry, and must be answered as a duplicate with the original
offsets) and transactional (1 to 3 partitions x 1 to 2 batches per transaction, then COMMIT or, 1 time in 4,
ABORT markers). A batch holds 1 to 10 records of 16 to 400 bytes, key ``"<partition>:<offset>"``, the current
time as timestamp, a header on one record in 8. Writers build their batches (the client's work) and time only
``Log.append_as_leader`` / ``Log.append_end_txn_marker``. Meanwhile ``--readers`` threads (default 4; odd ones
read_committed) ``Log.read`` 32 KiB from a random partition, half the time near the log end, half at a random
retained offset, and every job runs (``JOB_CONFIG``): retention checked every 250 ms, flush of logs idle 1 s
every 500 ms, both checkpoints every 500 ms, physical deletion 1 s after a segment goes, producers expiring
after 5 s idle (checked every second), plus the post-roll flushes. Job run times come from wrapping each job's
callable in the scheduler given to the manager (the post-roll ``flush-log-N`` one-shots are counted as one
group); runs APScheduler skipped because the previous one was still running are counted from its log.

Correctness: before each append the writer records an xxh64 digest of every record (and the kind of every
offset: plain, committed or aborted transactional, COMMIT or ABORT marker) at the offsets the append must get
(each partition has one writer, so its offsets are known in advance; the append's answer is checked against
them). Readers check every fetched batch's CRC, that batches are contiguous and start at the requested offset,
every record's digest and kind, and for read_committed fetches apply a consumer's aborted-transaction filter
to the returned ``aborted_transactions``: delivered transactional records must be committed ones, filtered
ones aborted ones. ``OffsetOutOfRangeError`` for an offset that retention removed between the reader's look at
the log start and its read is counted, not an error. Afterwards: clean shutdown,
``logmgr.verify.verify_paths`` over both dirs (must be clean), a reopen that must recover nothing and find the
same end offsets, and a scan of every retained record against its digest. Errors (exceptions in threads or
jobs, logmgr log records at ERROR) must be 0.

References, measured first in the same run on the same filesystem: the single-thread pass runs the same
writers (same kinds, partitions and batch generator, ``appends / 10`` appends) one after another in the main
thread, with no readers and no periodic jobs (the post-roll flushes still run), the engine's rate for this
workload without concurrency; raw writes the bytes of every batch the single-thread pass appended with one
``os.write`` each to one file per partition in the two dirs, then fsyncs every file (best of ``--repeats``),
the disk's limit for the same bytes.

Run: ``.venv/bin/python bench/load_bench.py [--quick | --appends N] [--writers N] [--readers N]
[--partitions N] [--repeats R] [--profile]``. Data in ``bench/data/load-run/`` (removed after a clean run,
kept on failure).
"""

from __future__ import annotations

import argparse
import enum
import logging
import os
import random
import shutil
import struct
import threading
import time
import traceback
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from _common import (
    bench_main,
    fresh_dir,
    mb_per_s,
    percentile,
    profile,
    repeats,
    shown,
    table,
    text_value,
)
from xxhash import xxh64

from logmgr.config import BrokerConfig
from logmgr.errors import OffsetOutOfRangeError
from logmgr.log import FetchDataInfo, Isolation, Log
from logmgr.log_manager import (
    JOB_DELETE_LOGS,
    JOB_FLUSHER,
    JOB_LOG_START_OFFSET_CHECKPOINT,
    JOB_PRODUCER_EXPIRATION,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_RETENTION,
    CleanupReport,
    LogManager,
)
from logmgr.scheduler import ApsScheduler
from logmgr.segment_deleter import DeletionRun
from logmgr.verify import VerifyReport, verify_paths
from segments.compression import CompressionType
from segments.records import (
    ControlRecordType,
    Header,
    SimpleRecord,
    build_batch,
)

DEFAULT_APPENDS = 200_000
QUICK_APPENDS = 20_000
DEFAULT_WRITERS = 8
DEFAULT_READERS = 4
DEFAULT_PARTITIONS = 200
LOG_DIRS = 2
SINGLE_THREAD_DIVISOR = 10
SEED = 20240917

# Two topics: one deleting by size, one by time (the size one never by time, the time one never by size).
SIZED_TOPIC = "sized"
TIMED_TOPIC = "timed"
SIZED_RETENTION_SEGMENTS = 3
TIMED_RETENTION_MS = 5_000
# Segments are sized so that each partition fills about this many during a run, whatever --appends is; the
# mean batch size of the generator (measured, about 810 bytes) only serves this estimate.
SEGMENTS_PER_PARTITION = 12
MEAN_BATCH_BYTES = 810
MIN_SEGMENT_BYTES = 16 * 1024

MAX_RECORDS_PER_BATCH = 10
VALUE_SIZES = (16, 32, 64, 100, 100, 200, 400)
HEADER_EVERY = 8
RETRY_EVERY = 64
ABORT_EVERY = 4
FETCH_BYTES = 32 * 1024
RECENT_WINDOW = 64
COORDINATOR_EPOCH = 0
PRODUCER_EPOCH = 0
PLAIN_PRODUCER_ID = -1
FIRST_PRODUCER_ID = 1000

JOB_POST_ROLL_FLUSH = "flush-log-N (post-roll, one-shot)"
_ONE_SHOT_FLUSH_PREFIX = "flush-log-"

# Kept in one place so the report can show each job's period next to its run times.
JOB_CONFIG: dict[str, int] = {
    "log.retention.check.interval.ms": 250,
    "log.flush.interval.ms": 1_000,
    "log.flush.scheduler.interval.ms": 500,
    "log.flush.offset.checkpoint.interval.ms": 500,
    "log.flush.start.offset.checkpoint.interval.ms": 500,
    "log.segment.delete.delay.ms": 1_000,
    "producer.id.expiration.ms": 5_000,
    "producer.id.expiration.check.interval.ms": 1_000,
    "log.initial.task.delay.ms": 100,
}
# The single-thread pass and the reopen run no periodic job: their first run is an hour away.
QUIET_CONFIG: dict[str, int] = {
    **JOB_CONFIG,
    "log.initial.task.delay.ms": 3_600_000,
    "producer.id.expiration.check.interval.ms": 3_600_000,
}
JOB_PERIOD_KEYS = {
    JOB_RETENTION: "log.retention.check.interval.ms",
    JOB_FLUSHER: "log.flush.scheduler.interval.ms",
    JOB_RECOVERY_POINT_CHECKPOINT: "log.flush.offset.checkpoint.interval.ms",
    JOB_LOG_START_OFFSET_CHECKPOINT: "log.flush.start.offset.checkpoint.interval.ms",
    JOB_DELETE_LOGS: "log.segment.delete.delay.ms",
    JOB_PRODUCER_EXPIRATION: "producer.id.expiration.check.interval.ms",
}

_T = TypeVar("_T")

_DIGEST_HEAD = struct.Struct(">qiii")
_HEADER_HEAD = struct.Struct(">ii")


class Kind(enum.IntEnum):
    """What the writer put at an offset; readers check what they see against it."""

    PLAIN = 0
    TXN_COMMITTED = 1
    TXN_ABORTED = 2
    MARKER_COMMIT = 3
    MARKER_ABORT = 4


class Producer(enum.Enum):
    """The writer's client: writers cycle through these in this order."""

    PLAIN = "plain"
    PLAIN_LZ4 = "plain, lz4"
    IDEMPOTENT = "idempotent"
    TRANSACTIONAL = "transactional"


PRODUCERS = tuple(Producer)


def _length(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def record_digest(key: bytes | None, value: bytes | None, timestamp: int, headers: Sequence[Header]) -> int:
    """xxh64 of a record's timestamp, key, value and headers, lengths included (so no two records with
    different fields share an input). O(record size)."""
    digest = xxh64(_DIGEST_HEAD.pack(timestamp, _length(key), _length(value), len(headers)))
    digest.update(key or b"")
    digest.update(value or b"")
    for header in headers:
        name = header.key.encode()
        digest.update(_HEADER_HEAD.pack(len(name), _length(header.value)))
        digest.update(name)
        digest.update(header.value or b"")
    return digest.intdigest()


class Registry:
    """Per partition, the digest and :class:`Kind` of every offset written (markers have digest 0).

    Each partition has one writer, which registers before it appends; readers only look up offsets the log has
    published, so they always find the entry (appends to and reads of an ``array`` are atomic under the GIL).
    """

    def __init__(self, partitions: int) -> None:
        self.digests = [array("Q") for _ in range(partitions)]
        self.kinds = [array("B") for _ in range(partitions)]

    def register(self, partition: int, base_offset: int, digests: Sequence[int], kind: Kind) -> None:
        """Record ``digests`` at ``base_offset``, which must be the next unregistered offset.
        O(len(digests))."""
        known = len(self.digests[partition])
        if known != base_offset:
            raise AssertionError(
                f"partition {partition}: log end offset {base_offset}, but {known} offsets registered"
            )
        self.digests[partition].extend(digests)
        self.kinds[partition].extend([kind] * len(digests))

    def rollback(self, partition: int, base_offset: int) -> None:
        """Forget what was registered from ``base_offset`` on (its append failed). O(entries removed)."""
        del self.digests[partition][base_offset:]
        del self.kinds[partition][base_offset:]

    def _check(self) -> None:
        """Assert both arrays of every partition have the same length. O(partitions)."""
        for digests, kinds in zip(self.digests, self.kinds, strict=True):
            assert len(digests) == len(kinds), (len(digests), len(kinds))


class Errors:
    """Errors from any thread: counted, the first few kept with their traceback."""

    KEEP = 5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        """Count one error and keep its message while fewer than ``KEEP`` are kept. O(1)."""
        with self._lock:
            self.count += 1
            if len(self.messages) < self.KEEP:
                self.messages.append(message)

    def add_exception(self, where: str) -> None:
        """Count the exception being handled, with its traceback. O(traceback)."""
        self.add(f"{where}: {traceback.format_exc().rstrip()}")


class ErrorLogHandler(logging.Handler):
    """Counts log records at ERROR and above as errors, APScheduler's "skipped: maximum number of running
    instances" warnings per job (a run due while the previous one still runs), and other WARNING records per
    logger."""

    def __init__(self, errors: Errors) -> None:
        super().__init__(logging.WARNING)
        self.errors = errors
        self.warnings: dict[str, int] = {}
        self.skipped: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.add(f"log {record.name}: {record.getMessage()}")
        elif record.name.startswith("apscheduler") and "maximum number of running instances" in record.msg:
            # APScheduler passes the Job as the first argument; its name is the logmgr job name.
            name = str(getattr(record.args[0], "name", "?")) if isinstance(record.args, tuple) else "?"
            self.skipped[name] = self.skipped.get(name, 0) + 1
        else:
            self.warnings[record.name] = self.warnings.get(record.name, 0) + 1


@dataclass(slots=True)
class JobTimes:
    """Run times of one job (or of the post-roll one-shot group) and what its runs did."""

    seconds: list[float] = field(default_factory=list)
    failures: int = 0
    outcome: dict[str, int] = field(default_factory=dict)

    def add_outcome(self, result: object) -> None:
        """Add up what a retention or deletion run reports. O(deletions)."""
        counts = self.outcome
        if isinstance(result, CleanupReport):
            for deletions in result.deletions.values():
                for deletion in deletions:
                    counts[f"segments by {deletion.reason}"] = (
                        counts.get(f"segments by {deletion.reason}", 0) + 1
                    )
            counts["rolled first"] = counts.get("rolled first", 0) + len(result.rolled)
        elif isinstance(result, DeletionRun):
            for name, value in (
                ("segments deleted", result.deleted_segments),
                ("while still read", result.forced),
                ("waits for readers", result.waiting_for_readers),
            ):
                counts[name] = counts.get(name, 0) + value


class TimedScheduler(ApsScheduler):
    """The manager's APScheduler with every job's callable wrapped to time it and add up its outcome."""

    def __init__(self) -> None:
        super().__init__()
        self._times_lock = threading.Lock()
        self.times: dict[str, JobTimes] = {}

    def schedule(self, name: str, func: Callable[[], object], *, delay_ms: int, period_ms: int) -> None:
        """Schedule ``func`` timed under its job name (one group for the post-roll one-shots). O(log n)."""
        group = JOB_POST_ROLL_FLUSH if name.startswith(_ONE_SHOT_FLUSH_PREFIX) else name
        with self._times_lock:
            times = self.times.setdefault(group, JobTimes())

        def timed() -> object:
            started = time.perf_counter()
            try:
                result = func()
            except BaseException:
                with self._times_lock:
                    times.failures += 1
                    times.seconds.append(time.perf_counter() - started)
                raise
            with self._times_lock:
                times.seconds.append(time.perf_counter() - started)
                times.add_outcome(result)
            return result

        super().schedule(name, timed, delay_ms=delay_ms, period_ms=period_ms)


@dataclass(slots=True)
class WriterStats:
    """What one writer did; latencies in nanoseconds."""

    appends: int = 0
    records: int = 0
    bytes: int = 0
    markers: int = 0
    commits: int = 0
    aborts: int = 0
    duplicates: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    marker_latencies_ns: list[int] = field(default_factory=list)


class Writer:
    """One producer thread's work: ``quota`` appends to its own ``partitions`` (no other writer touches
    them)."""

    def __init__(
        self,
        index: int,
        logs: Sequence[Log],
        partitions: Sequence[int],
        registry: Registry,
        quota: int,
        values: Sequence[bytes],
        errors: Errors,
        capture: list[tuple[int, bytes]] | None = None,
    ) -> None:
        self.index = index
        self.producer = PRODUCERS[index % len(PRODUCERS)]
        self.logs = logs
        self.partitions = list(partitions)
        self.registry = registry
        self.quota = quota
        self.values = values
        self.errors = errors
        self.capture = capture
        self.rng = random.Random(SEED + index)
        self.compression = (
            CompressionType.LZ4 if self.producer is Producer.PLAIN_LZ4 else CompressionType.NONE
        )
        idempotent = self.producer in (Producer.IDEMPOTENT, Producer.TRANSACTIONAL)
        self.producer_id = FIRST_PRODUCER_ID + index if idempotent else PLAIN_PRODUCER_ID
        self.sequences = dict.fromkeys(self.partitions, 0)
        self.stats = WriterStats()

    def run(self) -> None:
        """Append until the quota is met; the first error is recorded and ends this writer. O(quota)."""
        try:
            while self.stats.appends < self.quota:
                if self.producer is Producer.TRANSACTIONAL:
                    self._transaction()
                else:
                    self._append(self.rng.choice(self.partitions), Kind.PLAIN)
        except Exception:
            self.errors.add_exception(f"writer {self.index} ({self.producer.value})")

    def _records(self, partition: int, base_offset: int) -> tuple[list[SimpleRecord], list[int]]:
        rng = self.rng
        now = time.time_ns() // 1_000_000
        records = []
        digests = []
        for i in range(rng.randint(1, MAX_RECORDS_PER_BATCH)):
            key = b"%d:%d" % (partition, base_offset + i)
            value = rng.choice(self.values)[: rng.choice(VALUE_SIZES)]
            headers = (Header("writer", b"%d" % self.index),) if rng.randrange(HEADER_EVERY) == 0 else ()
            records.append(SimpleRecord(value, key, now, headers))
            digests.append(record_digest(key, value, now, headers))
        return records, digests

    def _append(self, partition: int, kind: Kind) -> None:
        log = self.logs[partition]
        base = log.log_end_offset
        records, digests = self._records(partition, base)
        idempotent = self.producer_id != PLAIN_PRODUCER_ID
        batch = build_batch(
            records,
            compression=self.compression,
            producer_id=self.producer_id,
            producer_epoch=PRODUCER_EPOCH if idempotent else -1,
            base_sequence=self.sequences[partition] if idempotent else -1,
            is_transactional=kind is not Kind.PLAIN,
        )
        self.registry.register(partition, base, digests, kind)
        started = time.perf_counter_ns()
        try:
            info = log.append_as_leader(batch)
        except BaseException:
            self.registry.rollback(partition, base)
            raise
        self.stats.latencies_ns.append(time.perf_counter_ns() - started)
        if (info.first_offset, info.last_offset, info.duplicate) != (base, base + len(records) - 1, False):
            raise AssertionError(
                f"partition {partition}: append at {base} of {len(records)} records answered {info}"
            )
        if idempotent:
            self.sequences[partition] += len(records)
        if self.producer is Producer.IDEMPOTENT and self.rng.randrange(RETRY_EVERY) == 0:
            retried = log.append_as_leader(batch)
            if not retried.duplicate or (retried.first_offset, retried.last_offset) != (
                base,
                info.last_offset,
            ):
                raise AssertionError(
                    f"partition {partition}: retry of the batch at {base} answered {retried}"
                )
            self.stats.duplicates += 1
        if self.capture is not None:
            self.capture.append((partition, batch))
        self.stats.appends += 1
        self.stats.records += len(records)
        self.stats.bytes += len(batch)

    def _transaction(self) -> None:
        rng = self.rng
        aborted = rng.randrange(ABORT_EVERY) == 0
        chosen = rng.sample(self.partitions, rng.randint(1, min(3, len(self.partitions))))
        planned = [p for p in chosen for _ in range(rng.randint(1, 2))][: self.quota - self.stats.appends]
        for partition in planned:
            self._append(partition, Kind.TXN_ABORTED if aborted else Kind.TXN_COMMITTED)
        control = ControlRecordType.ABORT if aborted else ControlRecordType.COMMIT
        for partition in dict.fromkeys(planned):
            log = self.logs[partition]
            base = log.log_end_offset
            self.registry.register(partition, base, [0], Kind.MARKER_ABORT if aborted else Kind.MARKER_COMMIT)
            started = time.perf_counter_ns()
            try:
                info = log.append_end_txn_marker(self.producer_id, PRODUCER_EPOCH, control, COORDINATOR_EPOCH)
            except BaseException:
                self.registry.rollback(partition, base)
                raise
            self.stats.marker_latencies_ns.append(time.perf_counter_ns() - started)
            if info.first_offset != base:
                raise AssertionError(
                    f"partition {partition}: marker expected at {base}, appended at {info.first_offset}"
                )
            self.stats.markers += 1
        if aborted:
            self.stats.aborts += 1
        else:
            self.stats.commits += 1


@dataclass(slots=True)
class ReaderStats:
    """What one reader did; latencies in nanoseconds."""

    isolation: Isolation
    fetches: int = 0
    empty: int = 0
    out_of_range: int = 0
    batches: int = 0
    records: int = 0
    filtered: int = 0
    bytes: int = 0
    latencies_ns: list[int] = field(default_factory=list)


class Reader:
    """One consumer thread: random partitions, near the end or at a random retained offset, every record
    checked."""

    def __init__(
        self, index: int, logs: Sequence[Log], registry: Registry, stop: threading.Event, errors: Errors
    ) -> None:
        self.index = index
        self.logs = logs
        self.registry = registry
        self.stop = stop
        self.errors = errors
        self.rng = random.Random(SEED * 2 + index)
        isolation = Isolation.READ_COMMITTED if index % 2 else Isolation.READ_UNCOMMITTED
        self.stats = ReaderStats(isolation)

    def run(self) -> None:
        """Fetch and check until ``stop`` is set; the first error is recorded and ends this reader.
        O(fetches)."""
        try:
            while not self.stop.is_set():
                self._fetch_one()
        except Exception:
            self.errors.add_exception(f"reader {self.index} ({self.stats.isolation.value})")

    def _fetch_one(self) -> None:
        rng = self.rng
        partition = rng.randrange(len(self.logs))
        log = self.logs[partition]
        start, end = log.log_start_offset, log.log_end_offset
        if end <= start:
            time.sleep(0.001)
            return
        recent = rng.random() < 0.5
        offset = max(start, end - rng.randint(1, RECENT_WINDOW)) if recent else rng.randrange(start, end)
        started = time.perf_counter_ns()
        try:
            fetch = log.read(offset, FETCH_BYTES, isolation=self.stats.isolation)
        except OffsetOutOfRangeError:
            # Retention moved the log start past ``offset`` after it was chosen: a consumer resets, no fault.
            self.stats.out_of_range += 1
            return
        self.stats.latencies_ns.append(time.perf_counter_ns() - started)
        self.stats.fetches += 1
        self.stats.bytes += len(fetch.records)
        if not fetch.records:
            self.stats.empty += 1
            return
        try:
            check_fetch(self.registry, partition, offset, fetch, self.stats)
        except AssertionError as err:
            # What the log looks like now tells a retention race (segments gone since the read) from a bad read.
            raise AssertionError(
                f"{err}; read from segment {fetch.segment_base_offset}; the log now: start "
                f"{log.log_start_offset}, end {log.log_end_offset}, segments {log.segments.base_offsets()}"
            ) from None


def check_fetch(
    registry: Registry, partition: int, offset: int, fetch: FetchDataInfo, stats: ReaderStats
) -> None:
    """Check a fetch of ``partition`` from ``offset`` against the registry, as described in the module
    docstring; raise AssertionError on the first discrepancy. O(fetch size)."""
    where = f"partition {partition} fetch at {offset}"
    batches = fetch.batches()
    if not batches or not batches[0].base_offset <= offset <= batches[0].last_offset:
        raise AssertionError(
            f"{where}: first batch {batches[0] if batches else None} does not hold the offset"
        )
    committed = stats.isolation is Isolation.READ_COMMITTED
    aborted_queue = sorted(fetch.aborted_transactions or (), key=lambda t: t.first_offset)
    aborted_pids: set[int] = set()
    digests, kinds = registry.digests[partition], registry.kinds[partition]
    expected_next = batches[0].base_offset
    for batch in batches:
        batch.ensure_valid()
        if batch.base_offset != expected_next:
            raise AssertionError(f"{where}: batch at {batch.base_offset}, expected {expected_next}")
        expected_next = batch.last_offset + 1
        if batch.last_offset >= len(digests):
            raise AssertionError(
                f"{where}: batch up to {batch.last_offset} was never written ({len(digests)} offsets)"
            )
        stats.batches += 1
        records = batch.records()
        if committed and batch.producer_id >= 0:
            # A read_committed consumer's filter (Kafka's Fetcher): aborted transactions starting at or before
            # this batch make their producer's transactional batches invisible until its ABORT marker.
            while aborted_queue and aborted_queue[0].first_offset <= batch.last_offset:
                aborted_pids.add(aborted_queue.pop(0).producer_id)
        if batch.is_control:
            control = ControlRecordType.parse(records[0].key)
            marker = Kind.MARKER_ABORT if control is ControlRecordType.ABORT else Kind.MARKER_COMMIT
            if kinds[batch.base_offset] != marker:
                raise AssertionError(
                    f"{where}: {control.name} marker at {batch.base_offset}, "
                    f"written {Kind(kinds[batch.base_offset]).name}"
                )
            if control is ControlRecordType.ABORT:
                aborted_pids.discard(batch.producer_id)
            continue
        filtered = committed and batch.is_transactional and batch.producer_id in aborted_pids
        for record in records:
            written = kinds[record.offset]
            if not batch.is_transactional:
                allowed: tuple[Kind, ...] = (Kind.PLAIN,)
            elif filtered:
                allowed = (Kind.TXN_ABORTED,)
            elif committed:
                allowed = (Kind.TXN_COMMITTED,)
            else:
                allowed = (Kind.TXN_COMMITTED, Kind.TXN_ABORTED)
            if written not in allowed:
                raise AssertionError(
                    f"{where}: record {record.offset} written as {Kind(written).name}, "
                    f"{'filtered' if filtered else 'delivered'} in a {stats.isolation.value} fetch (batch "
                    f"{batch.base_offset}..{batch.last_offset} of producer {batch.producer_id}; aborted transactions "
                    f"returned {fetch.aborted_transactions})"
                )
            if (
                record_digest(record.key, record.value, record.timestamp, record.headers)
                != digests[record.offset]
            ):
                raise AssertionError(
                    f"{where}: record {record.offset} differs from what was written ({record})"
                )
        stats.records += len(records)
        stats.filtered += len(records) if filtered else 0


@dataclass(frozen=True, slots=True)
class Layout:
    """Partitions, their topics and the segment size of one run."""

    partitions: int
    segment_bytes: int

    @classmethod
    def for_run(cls, partitions: int, appends: int) -> Layout:
        """About ``SEGMENTS_PER_PARTITION`` segments per partition for ``appends`` appends. O(1)."""
        per_partition = appends * MEAN_BATCH_BYTES // partitions
        return cls(partitions, max(MIN_SEGMENT_BYTES, per_partition // SEGMENTS_PER_PARTITION // 1024 * 1024))

    def topic_partition(self, index: int) -> tuple[str, int]:
        """Topic and partition of partition number ``index``: pairs alternate between the topics, so creating
        the logs in index order (the manager alternates the dirs) puts both topics in both dirs. O(1)."""
        return (SIZED_TOPIC, TIMED_TOPIC)[index // 2 % 2], index // 4 * 2 + index % 2

    def topic_overrides(self) -> dict[str, dict[str, str]]:
        """Each topic's retention. O(1)."""
        return {
            SIZED_TOPIC: {
                "retention.bytes": str(SIZED_RETENTION_SEGMENTS * self.segment_bytes),
                "retention.ms": "-1",
            },
            TIMED_TOPIC: {"retention.ms": str(TIMED_RETENTION_MS), "retention.bytes": "-1"},
        }

    def manager(
        self, dirs: Sequence[Path], jobs: dict[str, int], scheduler: ApsScheduler | None = None
    ) -> LogManager:
        """A started manager over ``dirs`` with these topics' retention and ``jobs`` settings. O(1) on empty
        dirs."""
        broker = BrokerConfig.from_properties(
            {**jobs, "log.segment.bytes": self.segment_bytes, "log.dirs": ",".join(str(d) for d in dirs)}
        )
        manager = LogManager(broker, topic_overrides=self.topic_overrides(), scheduler=scheduler)
        manager.startup()
        return manager

    def create_logs(self, manager: LogManager) -> list[Log]:
        """Every partition's log, in index order. O(partitions)."""
        return [manager.get_or_create_log(*self.topic_partition(i)) for i in range(self.partitions)]

    def describe(self) -> str:
        """One line for the report. O(1)."""
        sized = sum(self.topic_partition(i)[0] == SIZED_TOPIC for i in range(self.partitions))
        return (
            f"{self.partitions} partitions over {LOG_DIRS} log dirs: topic {SIZED_TOPIC!r} ({sized}, "
            f"retention.bytes {SIZED_RETENTION_SEGMENTS * self.segment_bytes:,}) and {TIMED_TOPIC!r} "
            f"({self.partitions - sized}, "
            f"retention.ms {TIMED_RETENTION_MS:,}); segment.bytes {self.segment_bytes:,}"
        )


def value_pool() -> list[bytes]:
    """64 log-like values of the largest size; a record's value is a prefix of one. O(1)."""
    rng = random.Random(SEED)
    return [text_value(rng, max(VALUE_SIZES)) for _ in range(64)]


def make_writers(
    logs: Sequence[Log],
    registry: Registry,
    writers: int,
    appends: int,
    errors: Errors,
    capture: list[tuple[int, bytes]] | None = None,
) -> list[Writer]:
    """``writers`` writers, each owning a run of consecutive partitions (so both topics), quotas adding up to
    ``appends``. O(partitions)."""
    values = value_pool()
    return [
        Writer(
            w,
            logs,
            range(w * len(logs) // writers, (w + 1) * len(logs) // writers),
            registry,
            appends // writers + (1 if w < appends % writers else 0),
            values,
            errors,
            capture,
        )
        for w in range(writers)
    ]


@dataclass(frozen=True, slots=True)
class Pass:
    """Totals and wall time of one throughput pass."""

    appends: int
    records: int
    bytes: int
    seconds: float

    @classmethod
    def of(cls, writers: Sequence[Writer], seconds: float) -> Pass:
        """The writers' totals over ``seconds``. O(writers)."""
        stats = [w.stats for w in writers]
        return cls(
            sum(s.appends for s in stats), sum(s.records for s in stats), sum(s.bytes for s in stats), seconds
        )


@dataclass(frozen=True, slots=True)
class SingleThread:
    """The single-thread pass and the bytes it appended (for the raw pass)."""

    timing: Pass
    latencies_ns: list[int]
    batches: list[tuple[int, bytes]]


def log_dirs(scratch: Path) -> list[Path]:
    """The emptied log dirs of a pass. O(files removed)."""
    return [fresh_dir(scratch / f"logdir{i}") for i in range(LOG_DIRS)]


def run_single_thread(
    scratch: Path, layout: Layout, writers: int, appends: int, errors: Errors
) -> SingleThread:
    """The writers one after another in this thread, no readers, no periodic jobs. O(appends)."""
    manager = layout.manager(log_dirs(scratch), QUIET_CONFIG)
    captured: list[tuple[int, bytes]] = []
    try:
        logs = layout.create_logs(manager)
        team = make_writers(logs, Registry(layout.partitions), writers, appends, errors, captured)
        started = time.perf_counter()
        for writer in team:
            writer.run()
        seconds = time.perf_counter() - started
    finally:
        manager.shutdown()
    shutil.rmtree(scratch)
    return SingleThread(
        Pass.of(team, seconds), sorted(ns for w in team for ns in w.stats.latencies_ns), captured
    )


def write_raw(scratch: Path, partitions: int, batches: Sequence[tuple[int, bytes]]) -> float:
    """One ``os.write`` per batch to its partition's file (partition ``p`` in dir ``p % 2``), then an fsync of
    every file; returns the seconds. O(bytes)."""
    dirs = log_dirs(scratch)
    fds = [
        os.open(dirs[p % LOG_DIRS] / f"partition-{p}.raw", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for p in range(partitions)
    ]
    try:
        write = os.write
        started = time.perf_counter()
        for partition, batch in batches:
            write(fds[partition], batch)
        for fd in fds:
            os.fsync(fd)
        return time.perf_counter() - started
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(scratch)


@dataclass(slots=True)
class LoadRun:
    """Everything the load phase measured."""

    timing: Pass
    writers: list[Writer]
    readers: list[Reader]
    jobs: dict[str, JobTimes]
    shutdown_s: float
    end_offsets: dict[str, int]
    dirs: list[Path]
    registry: Registry


def run_load(
    scratch: Path, layout: Layout, writers: int, readers: int, appends: int, errors: Errors
) -> LoadRun:
    """The load phase: writers, readers and every job, then a clean shutdown. O(appends + reads)."""
    dirs = log_dirs(scratch)
    scheduler = TimedScheduler()
    manager = layout.manager(dirs, JOB_CONFIG, scheduler)
    registry = Registry(layout.partitions)
    stop = threading.Event()
    logs = layout.create_logs(manager)
    team = make_writers(logs, registry, writers, appends, errors)
    consumers = [Reader(r, logs, registry, stop, errors) for r in range(readers)]
    reader_threads = [threading.Thread(target=c.run, name=f"load-reader-{c.index}") for c in consumers]
    writer_threads = [threading.Thread(target=w.run, name=f"load-writer-{w.index}") for w in team]
    try:
        for thread in reader_threads:
            thread.start()
        started = time.perf_counter()
        for thread in writer_threads:
            thread.start()
        for thread in writer_threads:
            thread.join()
        seconds = time.perf_counter() - started
    finally:
        stop.set()
        for thread in reader_threads:
            thread.join()
        end_offsets = {str(log.topic_partition): log.log_end_offset for log in manager.all_logs()}
        shutdown_started = time.perf_counter()
        manager.shutdown()
        shutdown_s = time.perf_counter() - shutdown_started
    registry._check()
    return LoadRun(
        Pass.of(team, seconds), team, consumers, scheduler.times, shutdown_s, end_offsets, dirs, registry
    )


@dataclass(frozen=True, slots=True)
class Reopen:
    """The reopen after the load: recovery, end offsets and the scan of every retained record."""

    recovered_segments: int
    end_offsets: dict[str, int]
    records_checked: int
    batches_checked: int
    seconds: float


def reopen_and_scan(dirs: Sequence[Path], layout: Layout, registry: Registry) -> Reopen:
    """Reopen the dirs (no jobs run), read every partition from its log start to its end with every batch and
    record checked as a read_uncommitted reader checks them, and shut down. O(retained bytes)."""
    started = time.perf_counter()
    manager = layout.manager(dirs, QUIET_CONFIG)
    index_of = {layout.topic_partition(i): i for i in range(layout.partitions)}
    stats = ReaderStats(Isolation.READ_UNCOMMITTED)
    try:
        recovered = sum(log.recovery.recovered_segments for log in manager.all_logs())
        end_offsets = {}
        for log in manager.all_logs():
            end_offsets[str(log.topic_partition)] = log.log_end_offset
            partition = index_of[log.topic_partition.topic, log.topic_partition.partition]
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
                check_fetch(registry, partition, offset, fetch, stats)
                offset = fetch.batches()[-1].last_offset + 1
    finally:
        manager.shutdown()
    return Reopen(recovered, end_offsets, stats.records, stats.batches, time.perf_counter() - started)


def _us(ns: float) -> str:
    return f"{ns / 1000:,.0f}"


def latency_row(name: str, values_ns: Sequence[int]) -> list[str]:
    """p50, p99, p99.9 and max in microseconds of ascending ``values_ns``. O(1)."""
    if not values_ns:
        return [name, "0", "-", "-", "-", "-"]
    return [
        name,
        f"{len(values_ns):,}",
        *(_us(percentile(values_ns, f)) for f in (0.5, 0.99, 0.999)),
        _us(values_ns[-1]),
    ]


@dataclass(slots=True)
class LoadResult:
    """The whole run: limits, load phase, checks."""

    layout: Layout
    raw_s: float
    single: SingleThread
    load: LoadRun
    verify: VerifyReport
    reopen: Reopen
    errors: Errors
    logs: ErrorLogHandler
    scratch: Path
    load_average: float
    phases: dict[str, float]
    problems: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    @property
    def ratio_to_single_thread(self) -> float:
        """Load appends/s over single-thread appends/s without readers or jobs."""
        load, single = self.load.timing, self.single.timing
        return (load.appends / load.seconds) / (single.appends / single.seconds)

    @property
    def ratio_to_raw(self) -> float:
        """Load MB/s over raw os.write + fsync MB/s of the single-thread pass's bytes."""
        load = self.load.timing
        return mb_per_s(load.bytes, load.seconds) / mb_per_s(self.single.timing.bytes, self.raw_s)

    def throughput_table(self) -> str:
        """Raw, single-thread and load throughput. O(1)."""
        load, single = self.load.timing, self.single.timing
        limit = single.appends / single.seconds
        rows = []
        for name, p in (
            (
                "raw: os.write per batch + fsync per file (the single thread's bytes)",
                Pass(single.appends, single.records, single.bytes, self.raw_s),
            ),
            ("single thread: the writers one after another, no readers, no periodic jobs", single),
            (f"load: {len(self.load.writers)} writers + {len(self.load.readers)} readers + every job", load),
        ):
            rows.append(
                [
                    name,
                    f"{p.appends:,}",
                    f"{p.records:,}",
                    f"{p.bytes / 1e6:,.1f}",
                    f"{p.seconds:.2f}",
                    f"{p.appends / p.seconds:,.0f}",
                    f"{p.records / p.seconds:,.0f}",
                    f"{mb_per_s(p.bytes, p.seconds):,.1f}",
                    f"{p.appends / p.seconds / limit:.3f}",
                ]
            )
        headers = [
            "pass",
            "appends",
            "records",
            "MB",
            "seconds",
            "appends/s",
            "records/s",
            "MB/s",
            "x single thread",
        ]
        return table(headers, rows)

    def latency_table(self) -> str:
        """Append, marker and read latencies. O(operations log operations)."""
        writers, readers = self.load.writers, self.load.readers
        rows = [
            latency_row("load: append_as_leader", sorted(ns for w in writers for ns in w.stats.latencies_ns)),
            latency_row(
                "load: append_end_txn_marker",
                sorted(ns for w in writers for ns in w.stats.marker_latencies_ns),
            ),
            latency_row("single thread: append_as_leader", self.single.latencies_ns),
        ]
        for isolation in (Isolation.READ_UNCOMMITTED, Isolation.READ_COMMITTED):
            chosen = sorted(
                ns for r in readers if r.stats.isolation is isolation for ns in r.stats.latencies_ns
            )
            rows.append(latency_row(f"load: read 32 KiB, {isolation.value}", chosen))
        return table(["operation", "count", "p50", "p99", "p99.9", "max"], rows)

    def job_table(self) -> str:
        """Each job's period, runs, skipped runs, failures, run times and outcome. O(runs log runs)."""
        rows = []
        for name in [*JOB_PERIOD_KEYS, JOB_POST_ROLL_FLUSH]:
            times = self.load.jobs.get(name, JobTimes())
            seconds = sorted(times.seconds)
            period = (
                f"{JOB_CONFIG[JOB_PERIOD_KEYS[name]]:,}" if name in JOB_PERIOD_KEYS else "after each roll"
            )
            rows.append(
                [
                    name,
                    period,
                    f"{len(seconds):,}",
                    f"{self.logs.skipped.get(name, 0):,}",
                    f"{times.failures}",
                    f"{percentile(seconds, 0.5) * 1e3:,.1f}" if seconds else "-",
                    f"{seconds[-1] * 1e3:,.1f}" if seconds else "-",
                    ", ".join(f"{k} {v:,}" for k, v in sorted(times.outcome.items())) or "-",
                ]
            )
        return table(["job", "period ms", "runs", "skipped", "failures", "p50 ms", "max ms", "outcome"], rows)

    def writer_table(self) -> str:
        """What each producer kind did. O(writers)."""
        rows = []
        for producer in PRODUCERS:
            group = [w.stats for w in self.load.writers if w.producer is producer]
            if group:
                rows.append(
                    [
                        producer.value,
                        f"{len(group)}",
                        f"{sum(s.appends for s in group):,}",
                        f"{sum(s.records for s in group):,}",
                        f"{sum(s.duplicates for s in group):,}",
                        f"{sum(s.commits for s in group):,} / {sum(s.aborts for s in group):,}",
                        f"{sum(s.markers for s in group):,}",
                    ]
                )
        headers = [
            "writers",
            "threads",
            "appends",
            "records",
            "retries answered as duplicates",
            "txns commit / abort",
            "markers",
        ]
        return table(headers, rows)

    def reader_table(self) -> str:
        """What the readers of each isolation level fetched and checked. O(readers)."""
        rows = []
        for isolation in (Isolation.READ_UNCOMMITTED, Isolation.READ_COMMITTED):
            group = [r.stats for r in self.load.readers if r.stats.isolation is isolation]
            if group:
                rows.append(
                    [
                        isolation.value,
                        f"{len(group)}",
                        f"{sum(s.fetches for s in group):,}",
                        f"{sum(s.empty for s in group):,}",
                        f"{sum(s.out_of_range for s in group):,}",
                        f"{sum(s.batches for s in group):,}",
                        f"{sum(s.records for s in group):,}",
                        f"{sum(s.filtered for s in group):,}",
                        f"{mb_per_s(sum(s.bytes for s in group), self.load.timing.seconds):,.1f}",
                    ]
                )
        headers = [
            "readers",
            "threads",
            "fetches",
            "empty",
            "out of range",
            "batches checked",
            "records checked",
            "of which filtered (aborted)",
            "MB/s",
        ]
        return table(headers, rows)

    def report(self) -> str:
        """Every table and check, as printed. O(operations log operations)."""
        verify, reopen = self.verify, self.reopen
        warnings = ", ".join(f"{name} {count}" for name, count in sorted(self.logs.warnings.items()))
        lines = [
            f"{self.layout.describe()}; under {shown(self.scratch)}; batches of 1-{MAX_RECORDS_PER_BATCH} records "
            f"of {min(VALUE_SIZES)}-{max(VALUE_SIZES)}-byte values; MB = 10^6 bytes; one run each (raw: best of "
            f"the repeats); load average at the start {self.load_average:.2f} (other work on the machine moves "
            "every figure)",
            "",
            self.throughput_table(),
            "",
            f"ratio load / single thread (appends/s) = {self.ratio_to_single_thread:.3f}; "
            f"load / raw (MB/s) = {self.ratio_to_raw:.4f}",
            "",
            "latency (us; appends exclude the writer's own batch encoding, reads exclude decoding and checks)",
            "",
            self.latency_table(),
            "",
            "scheduled jobs during the load phase (run times in ms; skipped: runs due while the previous one was "
            "still running, which APScheduler drops; outcome adds up what the runs reported)",
            "",
            self.job_table(),
            "",
            self.writer_table(),
            "",
            self.reader_table(),
            "",
            f"shutdown {self.load.shutdown_s:.2f} s; verify_paths: {verify.segments:,} segments, "
            f"{verify.batches:,} batches, {verify.records:,} records, {len(verify.problems)} problems; reopen: "
            f"{reopen.recovered_segments} segments recovered, {len(reopen.end_offsets)} logs, scan of every "
            f"retained record: {reopen.batches_checked:,} batches, {reopen.records_checked:,} records checked "
            f"({reopen.seconds:.1f} s)",
            "phases (wall s, each with its set-up and shutdown): "
            + ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.phases.items()),
            f"engine warnings: {warnings or 'none'}",
            f"errors: {self.errors.count}",
            *(f"  {message}" for message in self.errors.messages),
            *(f"  {problem}" for problem in verify.problems[:5]),
            "checks: " + ("all passed" if not self.problems else "FAILED: " + "; ".join(self.problems)),
            "not exercised: " + ("; ".join(self.gaps) or "nothing, every job ran and segments were deleted"),
        ]
        return "\n".join(lines)

    def summary(self) -> str:
        """One line for run_all. O(appends)."""
        load = self.load.timing
        appends_ns = sorted(ns for w in self.load.writers for ns in w.stats.latencies_ns)
        p99 = _us(percentile(appends_ns, 0.99)) if appends_ns else "-"
        return (
            f"load: {load.appends / load.seconds:,.0f} appends/s, {load.records / load.seconds:,.0f} rec/s, "
            f"{mb_per_s(load.bytes, load.seconds):,.1f} MB/s with {len(self.load.readers)} readers and every job; "
            f"append p99 {p99} us; load/single thread = {self.ratio_to_single_thread:.3f}; "
            f"errors {self.errors.count}; checks {'passed' if not self.problems else 'FAILED'}"
        )


def find_problems(result: LoadResult, expected_appends: int) -> list[str]:
    """Every correctness check of the run that failed, as text. O(partitions)."""
    problems = []
    if result.errors.count:
        problems.append(f"{result.errors.count} errors")
    if result.load.timing.appends != expected_appends:
        problems.append(f"{result.load.timing.appends:,} appends made, {expected_appends:,} expected")
    if not result.verify.ok:
        problems.append(f"verify_paths found {len(result.verify.problems)} problems")
    if result.reopen.recovered_segments:
        problems.append(
            f"reopen after a clean shutdown recovered {result.reopen.recovered_segments} segments"
        )
    if result.reopen.end_offsets != result.load.end_offsets:
        problems.append("end offsets after the reopen differ from those before the shutdown")
    return problems


def find_gaps(result: LoadResult) -> list[str]:
    """What the run did not exercise (a run too short for some job or for retention), as text. O(jobs)."""
    gaps = [f"job {name} never ran" for name, times in result.load.jobs.items() if not times.seconds]
    if not any(times.outcome.get("segments deleted") for times in result.load.jobs.values()):
        gaps.append(
            "no segment was deleted during the load (a longer run, more --appends, exercises retention)"
        )
    return gaps


def timed_phase(phases: dict[str, float], name: str, fn: Callable[[], _T]) -> _T:
    """``fn()``, its wall time recorded in ``phases[name]``. O(fn)."""
    started = time.perf_counter()
    result = fn()
    phases[name] = time.perf_counter() - started
    return result


def _option(args: argparse.Namespace, name: str, default: int) -> int:
    # run_all does not register this benchmark's own options, so they may be absent from ``args``.
    value = getattr(args, name, None)
    return default if value is None else int(value)


def run(args: argparse.Namespace) -> LoadResult:
    """Measure the limits, run the load, check everything and print the report. O(appends + reads)."""
    appends = _option(args, "appends", QUICK_APPENDS if args.quick else DEFAULT_APPENDS)
    writers = _option(args, "writers", DEFAULT_WRITERS)
    readers = _option(args, "readers", DEFAULT_READERS)
    partitions = _option(args, "partitions", DEFAULT_PARTITIONS)
    if appends < writers * SINGLE_THREAD_DIVISOR or writers < 1 or readers < 0 or partitions < writers:
        raise SystemExit(
            "need --writers >= 1, --readers >= 0, --partitions >= --writers, --appends >= 10 x --writers"
        )
    scratch = args.data_dir / "load-run"
    layout = Layout.for_run(partitions, appends)
    single_appends = appends // SINGLE_THREAD_DIVISOR
    errors = Errors()
    handler = ErrorLogHandler(errors)
    # Counted and reported, not printed: APScheduler warns of every run skipped while the previous one runs.
    loggers = [logging.getLogger(name) for name in ("logmgr", "apscheduler")]
    propagate = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    load_average = os.getloadavg()[0]
    phases: dict[str, float] = {}
    try:
        single = timed_phase(
            phases,
            "single thread",
            lambda: run_single_thread(scratch / "single-thread", layout, writers, single_appends, errors),
        )
        raw_s = timed_phase(
            phases,
            "raw",
            lambda: min(
                write_raw(scratch / "raw", partitions, single.batches) for _ in range(repeats(args, 3))
            ),
        )
        load = timed_phase(
            phases, "load", lambda: run_load(scratch / "load", layout, writers, readers, appends, errors)
        )
        verify = timed_phase(phases, "verify_paths", lambda: verify_paths(load.dirs))
        reopen = timed_phase(
            phases, "reopen + scan", lambda: reopen_and_scan(load.dirs, layout, load.registry)
        )
    finally:
        for logger, was in zip(loggers, propagate, strict=True):
            logger.removeHandler(handler)
            logger.propagate = was
    result = LoadResult(
        layout, raw_s, single, load, verify, reopen, errors, handler, scratch, load_average, phases
    )
    result.problems = find_problems(result, appends)
    result.gaps = find_gaps(result)
    print(result.report())
    if args.profile:
        print(
            profile(lambda: run_single_thread(scratch / "profile", layout, writers, single_appends, errors))
        )
    if result.problems:
        raise SystemExit(f"load test failed; data kept in {scratch}")
    shutil.rmtree(scratch)
    return result


def add_args(parser: argparse.ArgumentParser) -> None:
    """The load test's own options. O(1)."""
    parser.add_argument(
        "--appends",
        type=int,
        default=None,
        help=f"data batches appended in all (default {DEFAULT_APPENDS:,}, {QUICK_APPENDS:,} with --quick)",
    )
    parser.add_argument(
        "--writers", type=int, default=None, help=f"writer threads (default {DEFAULT_WRITERS})"
    )
    parser.add_argument(
        "--readers", type=int, default=None, help=f"reader threads (default {DEFAULT_READERS})"
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help=f"partitions over the two log dirs (default {DEFAULT_PARTITIONS})",
    )


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(appends + reads)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
