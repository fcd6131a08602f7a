"""Crash test: a writer process is killed with SIGKILL at random moments; every reopen must recover the log.

Each cycle forks a writer child (``crash_writer.py``) that appends to the same log dir until the test kills it
after a random delay (seeded). Some cycles then also simulate a power loss of the unflushed tail: the newest
``.log`` file is cut or overwritten with garbage beyond what the last acknowledged flush covered. A fresh
LogManager reopens the dir and the test checks:

* recovery ran (no clean-shutdown marker) or not (marker still there: the child died before removing it);
* the log start offset is what the previous cycle left, and the log end offset reaches the last acknowledged
  flush: every record below it is present with the key, value and headers its offset determines;
* every batch served from the log start to the log end has a valid CRC and decodes, the records beyond the last
  flush that survived are byte-identical too, and nothing is served at or past the log end;
* the idempotent producer's state survived: resending the last batch it wrote is answered as a duplicate;
* transactions: the test, acting as the coordinator after a crash, aborts every transaction the producer state
  still holds open; then a read_committed consumer (Kafka's fetcher algorithm over the aborted transactions the
  log returns, i.e. the ``.txnindex``) sees exactly the data records that the markers in the log leave
  committed, and every writer-written marker is the one :func:`aborts` chose;
* the key index (on in the writer): ``Log.query_by_key`` for a sample of keys equals a scan of the log, for keys
  of live records, of records below the log start and of offsets at or past the log end (cut by recovery or never
  written), while the dispatcher catches up after the reopen, once it has caught up, and after the log start moved
  and segments were deleted;
* appends continue; after a clean shutdown ``verify_paths`` finds no problem (indexes, snapshots, checkpoints).

Between cycles the test raises the log start offset and runs retention, so the log (and each cycle's check) stays
small. ``LOGMGR_CRASH_CYCLES`` (default 100; 2,000 with ``LOGMGR_SOAK=1``) and ``LOGMGR_CRASH_SEED`` change the
run; with ``LOGMGR_FAULT_REPORT=FILE`` the figures are appended to FILE as one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import IO

import pytest

from checkpoints.clean_shutdown import CleanShutdownMarker
from logmgr.config import BrokerConfig
from logmgr.errors import OffsetOutOfRangeError
from logmgr.log import Isolation, Log
from logmgr.log_manager import LogManager
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.errors import StorageFormatError
from segments.file_records import iter_batches
from segments.naming import LOG_SUFFIX, offset_from_file_name
from segments.records import ControlRecordType, DefaultRecordBatch, EndTransactionMarker
from tests.conftest import FAILURE_DEADLINE_S, calm_disk, child_env
from tests.faults.crash_writer import (
    COORDINATOR_EPOCH,
    PARTITION,
    PRODUCER_ID_BASE,
    TOPIC,
    TXN_PRODUCER_ID_BASE,
    aborts,
    broker_properties,
    headers_for,
    key_for,
    records_for,
    value_for,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash writer is a fork server (POSIX only)")

WRITER = Path(__file__).with_name("crash_writer.py")
SOAK = os.environ.get("LOGMGR_SOAK") == "1"
CYCLES = int(os.environ.get("LOGMGR_CRASH_CYCLES", "2000" if SOAK else "100"))
SEED = int(os.environ.get("LOGMGR_CRASH_SEED", "20240611"))
KEEP_RECORDS = 2_000
"""Records kept below the log end between cycles (the rest goes through DeleteRecords + retention)."""
KEYS_SAMPLED = 8
"""Offsets sampled per key-index check in each of three ranges: live, below the log start, past the log end."""
TORN_TAIL_PROBABILITY = 0.35
FETCH_BYTES = 256 * 1024


class ForkServer:
    """The running ``crash_writer.py`` server (see its module docstring for the protocol)."""

    def __init__(self, stderr: IO[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
            env=child_env(),
        )
        self._unreaped: set[int] = set()
        self._expect("READY")

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _expect(self, word: str) -> list[str]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        parts = line.split()
        if not parts or parts[0] != word:
            raise AssertionError(f"crash writer server answered {line!r}, expected {word} (see its stderr)")
        return parts[1:]

    def run(self, log_dir: Path, cycle: int, seed: int, ack: Path) -> int:
        """Fork a writer child; returns its pid (not reaped until :meth:`reap`)."""
        self._send(f"RUN {log_dir} {cycle} {seed} {ack}")
        pid = int(self._expect("PID")[0])
        self._unreaped.add(pid)
        return pid

    def reap(self, pid: int) -> int:
        """Wait for the child; its exit code (``-9`` when SIGKILL ended it)."""
        self._send(f"REAP {pid}")
        answer = self._expect("EXIT")
        assert int(answer[0]) == pid
        self._unreaped.discard(pid)
        return int(answer[1])

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # A test that failed between RUN and REAP leaves a writer running: stop it before the server goes.
        for pid in list(self._unreaped):
            os.kill(pid, signal.SIGKILL)
            self.reap(pid)
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=FAILURE_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


@dataclass(slots=True)
class Durable:
    """What must survive: offsets below ``log_end_offset`` and bytes below ``size`` of segment ``base``."""

    log_end_offset: int
    base: int
    size: int


@dataclass(slots=True)
class Figures:
    cycles: int = 0
    killed_before_first_flush: int = 0
    acknowledged_flushes: int = 0
    torn_tails: int = 0
    recovered_segments: int = 0
    truncated_bytes: int = 0
    records_checked: int = 0
    records_beyond_last_flush: int = 0
    lost_records: int = 0
    corrupt_served: int = 0
    duplicates_detected: int = 0
    transactions_committed: int = 0
    transactions_aborted: int = 0
    aborted_after_crash: int = 0
    read_committed_records: int = 0
    keys_queried: int = 0

    def __str__(self) -> str:
        return ", ".join(f"{f.name.replace('_', ' ')} {getattr(self, f.name)}" for f in fields(self))


def _acknowledged(ack: Path, before: Durable) -> tuple[Durable, int]:
    """The last ``FLUSHED`` line the child completed (a torn last line is ignored) and how many there were."""
    durable, flushes = before, 0
    for line in ack.read_text().splitlines(keepends=True):
        parts = line.split()
        if line.endswith("\n") and parts[0] == "FLUSHED":
            durable = Durable(int(parts[1]), int(parts[2]), int(parts[3]))
            flushes += 1
    return durable, flushes


def _tear_tail(partition_dir: Path, durable: Durable, rng: random.Random) -> bool:
    """Simulate a power loss of unflushed data in the newest ``.log``: cut it, or overwrite a stretch with
    garbage, strictly beyond the durable bytes. False when that file has nothing unflushed."""
    newest = max(partition_dir.glob(f"*{LOG_SUFFIX}"), key=lambda p: offset_from_file_name(p.name))
    base = offset_from_file_name(newest.name)
    assert base >= durable.base, f"{newest.name} is older than the last flushed segment {durable.base}"
    floor = durable.size if base == durable.base else 0
    size = newest.stat().st_size
    if size <= floor:
        return False
    cut = rng.randint(floor, size - 1)
    with open(newest, "r+b") as f:
        if rng.random() < 0.5:
            f.truncate(cut)
        else:
            f.seek(cut)
            f.write(rng.randbytes(min(size - cut, rng.randint(1, 64))))
    return True


@dataclass(slots=True)
class LastIdempotent:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    count: int
    codec: CompressionType


def _check_contents(log: Log, acked: int, figures: Figures) -> LastIdempotent | None:
    """Read the whole log as a consumer would and compare every record with what its offset determines."""
    end = log.log_end_offset
    offset = log.log_start_offset
    last_idempotent: LastIdempotent | None = None
    while offset < end:
        fetch = log.read(offset, FETCH_BYTES, isolation=Isolation.LOG_END)
        fetched_from = offset
        try:
            for found in iter_batches(fetch.records):
                batch = found.batch
                assert isinstance(batch, DefaultRecordBatch)
                batch.ensure_valid()
                if batch.is_control:
                    offset = max(offset, batch.last_offset + 1)
                    continue
                for record in batch.records():
                    if record.offset < offset:
                        continue
                    if record.offset != offset:
                        raise AssertionError(f"offset {offset} expected, {record.offset} served")
                    if (record.key, record.value, record.headers) != (key_for(offset), value_for(offset), headers_for(offset)):
                        raise AssertionError(f"offset {offset}: wrong key, value or headers served")
                    offset += 1
                if PRODUCER_ID_BASE <= batch.producer_id < TXN_PRODUCER_ID_BASE:
                    last_idempotent = LastIdempotent(
                        batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.base_offset,
                        batch.records_count, batch.compression,
                    )
        except (StorageFormatError, AssertionError) as err:
            figures.corrupt_served += 1
            raise AssertionError(f"corrupt data served at offset {offset}: {err}") from err
        if offset == fetched_from:
            # The log claims offsets it cannot serve. (A fetch may hold only a control batch, e.g. a marker that
            # ends a segment: it serves no record but moves the offset on.)
            figures.lost_records += end - offset
            raise AssertionError(f"nothing served at offset {offset} below the log end {end}")
    figures.records_checked += end - log.log_start_offset
    figures.records_beyond_last_flush += max(0, end - max(acked, log.log_start_offset))
    assert log.read(end, FETCH_BYTES, isolation=Isolation.LOG_END).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, FETCH_BYTES, isolation=Isolation.LOG_END)
    return last_idempotent


# The test's own coordinator writes its markers with this epoch, so they are told apart from the writer's.
RECOVERY_COORDINATOR_EPOCH = COORDINATOR_EPOCH + 1


def _abort_open_transactions(log: Log, figures: Figures) -> None:
    """What a transaction coordinator does after the producer died: abort every transaction still open."""
    open_producers = list(log.producer_state.ongoing_txns)
    for producer_id in open_producers:
        log.append_end_txn_marker(producer_id, 0, ControlRecordType.ABORT, RECOVERY_COORDINATOR_EPOCH)
    figures.aborted_after_crash += len(open_producers)


def _committed_view_from_markers(log: Log, figures: Figures) -> list[int]:
    """The data offsets a read_committed consumer must see, derived from the batches and markers alone (no
    index): a transactional record is visible iff the next marker of its producer is a COMMIT. Also checks that
    every writer-written marker is the one :func:`aborts` chose for its offset."""
    data: list[tuple[int, int, bool]] = []  # (offset, producer, transactional)
    markers: dict[int, list[tuple[int, bool]]] = {}  # producer -> [(marker offset, committed)]
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for batch in log.read(offset, FETCH_BYTES, isolation=Isolation.LOG_END).batches():
            if batch.last_offset < offset:
                continue
            if batch.is_control:
                record = batch.records()[0]
                control = ControlRecordType.parse(record.key)
                committed = control is ControlRecordType.COMMIT
                markers.setdefault(batch.producer_id, []).append((batch.base_offset, committed))
                figures.transactions_committed += committed
                figures.transactions_aborted += not committed
                epoch = EndTransactionMarker.parse(control, record.value).coordinator_epoch
                if epoch == COORDINATOR_EPOCH:
                    assert committed is not aborts(batch.base_offset), f"marker at {batch.base_offset} is not the writer's"
                else:
                    assert epoch == RECOVERY_COORDINATOR_EPOCH and not committed
            else:
                data.extend((r.offset, batch.producer_id, batch.is_transactional) for r in batch.records() if r.offset >= offset)
            offset = max(offset, batch.last_offset + 1)
    visible = []
    for record_offset, producer_id, transactional in data:
        if transactional:
            following = [committed for at, committed in markers.get(producer_id, []) if at > record_offset]
            assert following, f"transactional record {record_offset} has no marker after the coordinator's aborts"
            if not following[0]:
                continue
        visible.append(record_offset)
    return visible


def _read_committed_view(log: Log) -> list[int]:
    """The data offsets a read_committed consumer sees: Kafka's fetcher drops the transactional batches of a
    producer from the first offset of an aborted transaction the log returns (its ``.txnindex``) until that
    producer's ABORT marker."""
    seen: list[int] = []
    aborted_producers: set[int] = set()
    pending: list[tuple[int, int]] = []
    offset = log.log_start_offset
    stable = log.last_stable_offset
    while offset < stable:
        fetch = log.read(offset, FETCH_BYTES, isolation=Isolation.READ_COMMITTED)
        pending = sorted({*pending, *((t.first_offset, t.producer_id) for t in fetch.aborted_transactions or ())})
        batches = [b for b in fetch.batches() if b.last_offset >= offset and b.base_offset < stable]
        if not batches:
            break
        for batch in batches:
            while pending and pending[0][0] <= batch.last_offset:
                aborted_producers.add(pending.pop(0)[1])
            if batch.is_control:
                if ControlRecordType.parse(batch.records()[0].key) is ControlRecordType.ABORT:
                    aborted_producers.discard(batch.producer_id)
            elif not (batch.is_transactional and batch.producer_id in aborted_producers):
                seen.extend(r.offset for r in batch.records() if r.offset >= offset)
            offset = max(offset, batch.last_offset + 1)
    return seen


def _check_transactions(log: Log, figures: Figures) -> None:
    _abort_open_transactions(log, figures)
    assert log.last_stable_offset == log.log_end_offset
    expected = _committed_view_from_markers(log, figures)
    assert _read_committed_view(log) == expected, "the read_committed view differs from what the markers decide"
    figures.read_committed_records += len(expected)


def _check_producer_state(log: Log, last: LastIdempotent, figures: Figures) -> None:
    """A retry of the last idempotent batch in the log must be answered with its original offsets."""
    retry = log.append_records(
        records_for(last.base_offset, last.count),
        compression=last.codec,
        producer_id=last.producer_id,
        producer_epoch=last.producer_epoch,
        base_sequence=last.base_sequence,
    )
    assert retry.duplicate, f"retry of producer {last.producer_id} sequence {last.base_sequence} was appended again"
    assert retry.first_offset == last.base_offset
    figures.duplicates_detected += 1


def _keys_by_scan(log: Log) -> dict[bytes, list[int]]:
    """The offsets of every key in the log, by reading it all (the model the key index is checked against)."""
    found: dict[bytes, list[int]] = {}
    start = offset = log.log_start_offset
    while offset < log.log_end_offset:
        for batch in log.read(offset, FETCH_BYTES, isolation=Isolation.LOG_END).batches():
            if not batch.is_control:
                for record in batch.records():
                    if record.key is not None and record.offset >= max(start, offset):
                        found.setdefault(record.key, []).append(record.offset)
            offset = max(offset, batch.last_offset + 1)
    return found


def _check_key_index(log: Log, rng: random.Random, figures: Figures) -> None:
    """``Log.query_by_key`` equals a scan for the keys of sampled offsets: live ones, ones below the log start
    (deleted segments or DeleteRecords) and ones at or past the log end (cut by recovery or never written)."""
    expected = _keys_by_scan(log)
    start, end = log.log_start_offset, log.log_end_offset
    ranges = [(start, end), (max(0, start - KEEP_RECORDS), start), (end, end + KEEP_RECORDS)]
    offsets = [rng.randrange(low, high) for low, high in ranges if low < high for _ in range(KEYS_SAMPLED)]
    for offset in offsets:
        key = key_for(offset)
        if key is None:
            continue
        got = [r.offset for r in log.query_by_key(key, max_records=KEEP_RECORDS)]
        assert got == expected.get(key, []), f"query_by_key({key!r}) gave {got}, a scan {expected.get(key, [])}"
        figures.keys_queried += 1


def _reopen_and_check(
    log_dir: Path, durable: Durable, expected_start: int, figures: Figures, keys_rng: random.Random, *, clean: bool
) -> tuple[int, Durable]:
    """One reopen: recover, check, append, trim the log, shut down cleanly. Returns the new log start offset and
    what is durable after the clean shutdown."""
    manager = LogManager(BrokerConfig.from_properties(broker_properties(log_dir)), disk_usage=calm_disk)
    manager.startup()
    try:
        log = manager.get_or_create_log(TOPIC, PARTITION)
        log._check()
        if clean:
            assert log.recovery.recovered_segments == 0, log.recovery.actions
        else:
            assert log.recovery.recovered_segments >= 1, log.recovery.actions
        figures.recovered_segments += log.recovery.recovered_segments
        figures.truncated_bytes += log.recovery.truncated_bytes
        assert log.log_start_offset == expected_start
        if log.log_end_offset < durable.log_end_offset:
            figures.lost_records += durable.log_end_offset - log.log_end_offset
            raise AssertionError(
                f"log end {log.log_end_offset} is below the acknowledged flush {durable.log_end_offset}: "
                f"{log.recovery.actions}"
            )
        last_idempotent = _check_contents(log, durable.log_end_offset, figures)
        # The dispatcher thread is catching up from what the files' headers said at the reopen: index and scan mix.
        _check_key_index(log, keys_rng, figures)
        manager.key_indexer.drain()
        assert log.key_index is not None and log.key_index.progress == log.log_end_offset
        _check_key_index(log, keys_rng, figures)
        if last_idempotent is not None:
            _check_producer_state(log, last_idempotent, figures)
        _check_transactions(log, figures)
        end = log.log_end_offset
        info = log.append_records(records_for(end, 3), compression=CompressionType.LZ4)
        assert (info.first_offset, info.last_offset) == (end, end + 2)
        fetched = log.read(end, FETCH_BYTES, isolation=Isolation.LOG_END).batches()
        assert [(r.offset, r.value) for b in fetched for r in b.records()] == [(o, value_for(o)) for o in range(end, end + 3)]
        log.delete_records_before(max(log.log_start_offset, log.log_end_offset - KEEP_RECORDS))
        manager.cleanup_logs()
        manager.delete_logs()
        assert not manager.deleter.pending()
        log._check()
        _check_key_index(log, keys_rng, figures)
        new_start = log.log_start_offset
    finally:
        manager.shutdown()
    report = verify_paths([log_dir])
    assert report.ok, "\n".join(str(p) for p in report.problems)
    newest = max(log.dir.glob(f"*{LOG_SUFFIX}"), key=lambda p: offset_from_file_name(p.name))
    return new_start, Durable(log.log_end_offset, offset_from_file_name(newest.name), newest.stat().st_size)


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    acks = tmp_path / "acks"
    acks.mkdir()
    rng = random.Random(SEED)
    figures = Figures()
    keys_rng = random.Random(SEED + 1)  # its own stream: the kill schedule stays what SEED gave before
    started = time.monotonic()
    expected_start, durable = _reopen_and_check(log_dir, Durable(0, 0, 0), 0, figures, keys_rng, clean=True)
    partition_dir = log_dir / f"{TOPIC}-{PARTITION}"
    with open(tmp_path / "writer.stderr", "w+") as stderr, ForkServer(stderr) as server:
        for cycle in range(CYCLES):
            ack = acks / f"cycle-{cycle}"
            pid = server.run(log_dir, cycle, rng.randrange(1 << 32), ack)
            time.sleep(rng.uniform(0.02, 0.8))
            os.kill(pid, signal.SIGKILL)
            code = server.reap(pid)
            if code != -signal.SIGKILL:
                stderr.seek(0)
                raise AssertionError(f"cycle {cycle}: writer exited with {code} before the kill:\n{stderr.read()}")
            durable, flushes = _acknowledged(ack, durable) if ack.exists() else (durable, 0)
            figures.acknowledged_flushes += flushes
            figures.killed_before_first_flush += flushes == 0
            clean = CleanShutdownMarker.exists(log_dir)
            if not clean and rng.random() < TORN_TAIL_PROBABILITY:
                figures.torn_tails += _tear_tail(partition_dir, durable, rng)
            try:
                expected_start, durable = _reopen_and_check(
                    log_dir, durable, expected_start, figures, keys_rng, clean=clean
                )
            except AssertionError as err:
                raise AssertionError(f"cycle {cycle} (seed {SEED}): {err}\nfigures: {figures}") from err
            figures.cycles += 1
    elapsed = time.monotonic() - started
    print(f"\ncrash test (seed {SEED}, {elapsed:.1f} s): {figures}")
    report = os.environ.get("LOGMGR_FAULT_REPORT")
    if report:
        with open(report, "a") as out:
            out.write(json.dumps({"test": "crash", "seed": SEED, "seconds": round(elapsed, 1), **asdict(figures)}) + "\n")
    assert figures.lost_records == 0
    assert figures.corrupt_served == 0
