"""Crash test of the log cleaner (issue 12): a forked child appends to a compacted log and cleans it in a loop
(``.cleaned`` -> ``.swap`` -> replace, checkpoint writes) until the test kills it with SIGKILL at a random moment
(every other cycle, a random moment after the child reported its first completed pass: whatever the machine's
speed, some passes complete); after every kill the log is reopened (the loader completes or undoes the interrupted swap) and must agree with
the model. The record at offset ``o`` is determined by ``o`` (key ``o mod 11``, a tombstone when ``o mod 5 == 0``),
so the model needs no state from the child:

* no ``.cleaned`` or ``.swap`` file survives the reopen, the cleaner checkpoint parses;
* every record served is the one its offset determines (cleaning never rewrites a record), offsets increase;
* for each key, its latest record below the log end is there unless it is a tombstone (latest value per key);
* the log's invariants hold; the next cycle appends and cleans on.

``LOGMGR_CLEANER_CRASH_CYCLES`` (default 24; 2,000 with ``LOGMGR_SOAK=1``) and ``LOGMGR_CRASH_SEED`` change the run.
"""

from __future__ import annotations

import os
import random
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from logmgr.cleaner.log_cleaner import LogCleaner
from logmgr.cleaner.manager import CleanerCheckpoints
from logmgr.clock import SystemClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from segments.naming import CLEANED_SUFFIX, SWAP_SUFFIX
from segments.records import SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S

SOAK = os.environ.get("LOGMGR_SOAK") == "1"
CYCLES = int(os.environ.get("LOGMGR_CLEANER_CRASH_CYCLES", "2000" if SOAK else "24"))
SEED = int(os.environ.get("LOGMGR_CRASH_SEED", "12"))
KEYS = 11
CONFIG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1_500,
    delete_retention_ms=30,
    file_delete_delay_ms=0,
    min_cleanable_dirty_ratio=0.01,
)
BROKER = BrokerConfig(log_cleaner_dedupe_buffer_size=24 * 64)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork + SIGKILL crash test (Linux)")


def key_of(offset: int) -> bytes:
    return b"k%d" % (offset % KEYS)


def value_of(offset: int) -> bytes | None:
    return None if offset % 5 == 0 else b"value-%d" % offset


def append_some(log: Log, count: int) -> None:
    for _ in range(count):
        offset = log.log_end_offset
        log.append_records([SimpleRecord(value_of(offset), key_of(offset))])


def child(directory: Path, passes: int) -> None:
    """Append and clean until killed (never returns); write one byte to the descriptor ``passes`` after each
    cleaning pass."""
    log = load_log(directory, CONFIG, clock=SystemClock())
    cleaner = LogCleaner(BROKER, lambda: {directory.parent: [log]}, SystemClock())
    while True:
        append_some(log, 40)
        log.roll()
        cleaner.clean_log(directory.parent, log)
        os.write(passes, b".")


def check(log: Log, root: Path) -> None:
    leftovers = [p.name for p in log.dir.iterdir() if p.name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    assert not leftovers, leftovers
    CleanerCheckpoints(root).read()
    present: dict[int, bytes | None] = {}
    offset = log.log_start_offset
    previous = -1
    while offset < log.log_end_offset:
        fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
        batches = fetch.batches()
        if not batches:
            break
        for batch in batches:
            for record in batch.records():
                assert record.offset > previous
                previous = record.offset
                assert record.key == key_of(record.offset), record.offset
                assert record.value == value_of(record.offset), record.offset
                present[record.offset] = record.value
            offset = batch.last_offset + 1
    end = log.log_end_offset
    for key in range(KEYS):
        candidates = [o for o in range(max(log.log_start_offset, end - KEYS), end) if o % KEYS == key]
        if candidates and value_of(candidates[-1]) is not None:
            assert candidates[-1] in present, f"latest value of key {key} (offset {candidates[-1]}) is gone"
    log._check()


def test_sigkill_during_cleaning_keeps_the_model(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    directory = tmp_path / "compacted-0"
    log = load_log(directory, CONFIG, clock=SystemClock())
    append_some(log, 100)
    log.close()
    for cycle in range(CYCLES):
        passes, passes_out = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child is killed
            try:
                os.close(passes)
                child(directory, passes_out)
            finally:
                os._exit(1)
        os.close(passes_out)
        if cycle % 2:
            # Every other kill comes after a completed pass (counted in work, not time): however slow the machine,
            # the run cleans, and kills land in later passes too.
            ready, _, _ = select.select([passes], [], [], FAILURE_DEADLINE_S)
            assert ready and os.read(passes, 1) == b".", "the child completed no cleaning pass"
        time.sleep(rng.uniform(0.02, 0.4))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(passes)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the cleaning child died on its own"
        log = load_log(directory, CONFIG, clock=SystemClock())
        try:
            check(log, tmp_path)
        finally:
            log.close()
    assert CleanerCheckpoints(tmp_path).read(), "no cleaning pass completed in any cycle"
