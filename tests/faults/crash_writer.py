"""The process the crash test kills: a fork server whose children append to a log until SIGKILL arrives.

Started once per test as ``python crash_writer.py`` (the import of logmgr dominates a cold start, so children are
forked from this already-initialised server, which itself runs no threads). Protocol on stdin/stdout, one line
each:

* ``RUN <log_dir> <cycle> <seed> <ack_path>`` -> ``PID <pid>``: fork a writer child.
* ``REAP <pid>`` -> ``EXIT <pid> <code>``: wait for it (negative code: killed by that signal). The child is only
  reaped on request, so its pid cannot be reused before the test has sent its signal.

A writer child opens the log dir with a :class:`~logmgr.log_manager.LogManager`, appends batches with mixed codecs
(some from an idempotent producer, some of those retried to check duplicate detection, some in transactions that
end with a COMMIT or ABORT marker chosen by :func:`aborts`), with the retention and checkpoint jobs running on
short intervals and the key index on, and after each
``log.flush()`` appends ``FLUSHED <log end offset> <active segment base> <active segment size>`` to ``ack_path``
(``O_APPEND`` + fsync): everything below that log end offset must survive the crash. Record contents derive from
their offsets (:func:`records_for`), so the test recomputes what every offset must hold.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
from segments.compression import CompressionType
from segments.records import ControlRecordType, Header, SimpleRecord

TOPIC = "crash"
PARTITION = 0
PRODUCER_ID_BASE = 1000
"""Cycle ``n``'s idempotent producer id is ``PRODUCER_ID_BASE + n`` (epoch 0, sequences from 0)."""
TXN_PRODUCER_ID_BASE = 500_000
"""Cycle ``n``'s transactional producer id is ``TXN_PRODUCER_ID_BASE + n`` (epoch 0, sequences from 0)."""
COORDINATOR_EPOCH = 7
_MAX_CHILD_SECONDS = 60.0
"""A child the test forgot to kill stops on its own (exit code 3) instead of running forever."""


def broker_properties(log_dir: Path) -> dict[str, str]:
    """The broker config shared by the writer and the test: small segments and index intervals, so a short run
    rolls many segments and writes many index entries; physical deletion without delay."""
    return {
        "log.dirs": str(log_dir),
        "log.segment.bytes": str(64 * 1024),
        "log.index.interval.bytes": "1024",
        "log.segment.delete.delay.ms": "0",
        # The jobs run while the writer appends, so kills also land inside retention and checkpoint writes.
        # Retention by size keeps far more than a cycle writes: it runs, but only the test moves the log start.
        "log.retention.check.interval.ms": "100",
        "log.retention.bytes": str(1 << 30),
        "log.flush.offset.checkpoint.interval.ms": "150",
        "log.flush.start.offset.checkpoint.interval.ms": "150",
        # The key index's dispatcher thread writes .keyindex files while the writer appends, so kills land inside
        # its writes too; the test checks Log.query_by_key against a scan after every reopen.
        "logmgr.key.index.enable": "true",
    }


def aborts(marker_offset: int) -> bool:
    """Whether the writer ends a transaction with ABORT (else COMMIT) when its marker lands at
    ``marker_offset``: a rule the test can check from the marker alone. O(1)."""
    return marker_offset % 3 == 0


def key_for(offset: int) -> bytes | None:
    """The key the record at ``offset`` carries (every seventh has none). O(1)."""
    return None if offset % 7 == 0 else b"key-%d" % offset


def value_for(offset: int) -> bytes:
    """The value of the record at ``offset``: 0-400 bytes, half repetitive text (so codecs have work), half hash.
    O(size)."""
    length = (offset * 2_654_435_761) % 401
    digest = hashlib.blake2b(offset.to_bytes(8, "big"), digest_size=32).digest()
    text = b"offset %d " % offset
    pattern = text * (length // (2 * len(text)) + 1) + digest * (length // 64 + 1)
    return pattern[:length]


def headers_for(offset: int) -> tuple[Header, ...]:
    """Every fifth record has two headers (one with a null value). O(1)."""
    if offset % 5:
        return ()
    return (Header("o", b"%d" % offset), Header("null", None))


def records_for(start: int, count: int) -> list[SimpleRecord]:
    """The records for offsets ``[start, start + count)`` (timestamps left to the log). O(count)."""
    return [SimpleRecord(value_for(o), key_for(o), headers=headers_for(o)) for o in range(start, start + count)]


def _ack(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def write_until_killed(log_dir: Path, cycle: int, seed: int, ack_path: Path) -> None:
    """Open the log and append (flushing and acknowledging every few appends) for at most a minute."""
    rng = random.Random(seed)
    codecs = list(CompressionType)
    manager = LogManager(BrokerConfig.from_properties(broker_properties(log_dir)))
    manager.startup()
    log = manager.get_or_create_log(TOPIC, PARTITION)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _ack(ack, f"START {log.log_end_offset}")
    producer_id = PRODUCER_ID_BASE + cycle
    sequence = 0
    txn_producer_id = TXN_PRODUCER_ID_BASE + cycle
    txn_sequence = 0
    txn_open = False
    flush_every = rng.randint(1, 8)
    deadline = time.monotonic() + _MAX_CHILD_SECONDS
    appends = 0
    while time.monotonic() < deadline:
        start = log.log_end_offset
        count = rng.randint(1, 24)
        codec = rng.choice(codecs)
        records = records_for(start, count)
        draw = rng.random()
        if txn_open and draw < 0.3:
            # End the open transaction as the coordinator would; the marker takes one offset.
            marker = ControlRecordType.ABORT if aborts(start) else ControlRecordType.COMMIT
            log.append_end_txn_marker(txn_producer_id, 0, marker, COORDINATOR_EPOCH)
            txn_open = False
            continue
        if draw < 0.15:
            info = log.append_records(
                records, compression=codec, producer_id=txn_producer_id, producer_epoch=0,
                base_sequence=txn_sequence, is_transactional=True,
            )
            txn_sequence += count
            txn_open = True
        elif draw < 0.45:
            info = log.append_records(
                records, compression=codec, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
            )
            if rng.random() < 0.2:
                retry = log.append_records(
                    records, compression=codec, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
                )
                _expect(
                    retry.duplicate and retry.first_offset == info.first_offset,
                    f"retried batch at sequence {sequence} was not answered as a duplicate: {retry}",
                )
            sequence += count
        else:
            info = log.append_records(records, compression=codec)
        _expect(
            (info.first_offset, info.last_offset) == (start, start + count - 1),
            f"append of {count} records at {start} got offsets {info.first_offset}-{info.last_offset}",
        )
        appends += 1
        if appends % flush_every == 0:
            log.flush()
            active = log.active_segment
            _ack(ack, f"FLUSHED {log.log_end_offset} {active.base_offset} {active.size}")
            if rng.random() < 0.3:
                # Checkpoint writes (and snapshot pruning) get killed midway too.
                manager.checkpoint_recovery_points()


def _child(args: list[str]) -> NoReturn:
    log_dir, cycle, seed, ack_path = Path(args[0]), int(args[1]), int(args[2]), Path(args[3])
    # The protocol pipe belongs to the server: the child's prints go to stderr.
    os.dup2(2, 1)
    code = 3
    try:
        write_until_killed(log_dir, cycle, seed, ack_path)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(code)


def serve() -> None:
    """The fork-server loop (see the module docstring); returns at end of input."""
    print("READY", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "RUN":
            pid = os.fork()
            if pid == 0:
                _child(args)
            print(f"PID {pid}", flush=True)
        elif command == "REAP":
            pid = int(args[0])
            _, status = os.waitpid(pid, 0)
            print(f"EXIT {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
        else:
            raise SystemExit(f"crash_writer: unknown command {line!r}")


if __name__ == "__main__":
    serve()
