"""The log cleaner against a model (issue 12): a hypothesis state machine appends keyed records, tombstones and
transactional records (committed and aborted), rolls, runs cleaner passes at random points and advances the
clock; after every step the log's reads must agree with the model:

* every record still in the log is the one appended at its offset, unchanged (key, value, timestamp);
* the latest committed record of each key is still there, unless it is a tombstone and ``delete.retention.ms``
  has passed since a pass that could have seen it;
* every record not aborted at or above the cleaner checkpoint is still there;
* below the checkpoint each key appears once;
* a read_committed consumer (Kafka's aborted-transaction filtering) sees exactly the retained committed records.

``LOGMGR_CLEANER_EXAMPLES`` (default 30; 1,000 with ``LOGMGR_SOAK=1``) sets the number of runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from logmgr.cleaner.log_cleaner import LogCleaner
from logmgr.cleaner.manager import CleanerCheckpoints
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from segments.records import ControlRecordType, DefaultRecordBatch, SimpleRecord

T0 = 1_700_000_000_000
DELETE_RETENTION_MS = 1_000
KEYS = [b"k%d" % i for i in range(6)]


@dataclass
class Appended:
    offset: int
    key: bytes
    value: bytes | None
    timestamp: int
    producer_id: int  # -1: not transactional
    status: str  # "committed", "aborted" or "open"


def read_batches(log: Log, isolation: Isolation = Isolation.LOG_END) -> tuple[list[DefaultRecordBatch], list[tuple[int, int]]]:
    """Every batch from the log start (and, read_committed, the aborted transactions reported)."""
    batches: list[DefaultRecordBatch] = []
    aborted: list[tuple[int, int]] = []
    offset = log.log_start_offset
    while True:
        fetch = log.read(offset, 1 << 20, isolation=isolation)
        found = fetch.batches()
        if not found:
            return batches, aborted
        batches.extend(found)
        aborted.extend((t.producer_id, t.first_offset) for t in fetch.aborted_transactions or ())
        offset = found[-1].last_offset + 1


def read_committed_records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer returns (Kafka's Fetcher: skip batches of reported aborted transactions
    until their ABORT marker)."""
    batches, aborted = read_batches(log, Isolation.READ_COMMITTED)
    pending = sorted(set(aborted), key=lambda t: t[1])
    aborting: set[int] = set()
    out = []
    for batch in batches:
        if batch.is_transactional:
            while pending and pending[0][1] <= batch.last_offset:
                aborting.add(pending.pop(0)[0])
        if batch.is_control:
            control = batch.records()
            if control and ControlRecordType.parse(control[0].key) is ControlRecordType.ABORT:
                aborting.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborting:
            continue
        out.extend((r.offset, r.key, r.value) for r in batch.records())
    return out


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="cleaner-model-"))
        self.clock = ManualClock(T0)
        self.config = LogConfig(
            cleanup_policy=("compact",),
            segment_bytes=700,
            delete_retention_ms=DELETE_RETENTION_MS,
            file_delete_delay_ms=0,
            min_cleanable_dirty_ratio=0.01,
        )
        self.log = load_log(self.root / "t-0", self.config, clock=self.clock)
        self.cleaner = LogCleaner(BrokerConfig(log_cleaner_dedupe_buffer_size=24 * 8), lambda: {self.root: [self.log]}, self.clock)
        self.model: list[Appended] = []
        self.sequences: dict[int, int] = {}
        self.open_txns: dict[int, list[Appended]] = {}
        self.clean_times: list[int] = []

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(map_slots=st.sampled_from([4, 8, 64]))
    def sized_map(self, map_slots: int) -> None:
        # A tiny dedupe buffer makes passes stop at a full map (Kafka's partial passes).
        self.cleaner = LogCleaner(
            BrokerConfig(log_cleaner_dedupe_buffer_size=24 * map_slots), lambda: {self.root: [self.log]}, self.clock
        )

    def _append(self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1) -> None:
        now = self.clock.time_ms()
        simple = [SimpleRecord(value, key, now) for key, value in records]
        if producer_id >= 0:
            sequence = self.sequences.get(producer_id, 0)
            info = self.log.append_records(
                simple, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
            )
            self.sequences[producer_id] = sequence + len(records)
        else:
            info = self.log.append_records(simple)
        for i, (key, value) in enumerate(records):
            entry = Appended(info.first_offset + i, key, value, now, producer_id, "open" if producer_id >= 0 else "committed")
            self.model.append(entry)
            if producer_id >= 0:
                self.open_txns.setdefault(producer_id, []).append(entry)

    @rule(
        records=st.lists(
            st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=8))), min_size=1, max_size=3
        )
    )
    def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self._append(records)

    @rule(producer_id=st.sampled_from([7, 8]), key=st.sampled_from(KEYS), value=st.binary(min_size=1, max_size=8))
    def append_transactional(self, producer_id: int, key: bytes, value: bytes) -> None:
        self._append([(key, value)], producer_id)

    @precondition(lambda self: bool(self.open_txns))
    @rule(data=st.data(), commit=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool) -> None:
        producer_id = data.draw(st.sampled_from(sorted(self.open_txns)))
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        self.log.append_end_txn_marker(producer_id, 0, control, 0)
        for entry in self.open_txns.pop(producer_id):
            entry.status = "committed" if commit else "aborted"

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.sampled_from([0, 300, DELETE_RETENTION_MS, 5 * DELETE_RETENTION_MS]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(on_demand=st.booleans())
    def clean(self, on_demand: bool) -> None:
        self.clean_times.append(self.clock.time_ms())
        if on_demand:
            result = self.cleaner.clean_log(self.root, self.log)
            assert result is None or result.error is None, result.error
        else:
            for result in self.cleaner.run_pass().logs:
                assert result.error is None, result.error

    # -- invariants ---------------------------------------------------------------------------------------------

    def _present(self) -> dict[int, tuple[bytes | None, bytes | None, int]]:
        batches, _ = read_batches(self.log)
        present = {}
        for batch in batches:
            if batch.is_control:
                continue
            for record in batch.records():
                present[record.offset] = (record.key, record.value, record.timestamp)
        return present

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        present = self._present()
        by_offset = {entry.offset: entry for entry in self.model}
        for offset, (key, value, timestamp) in present.items():
            entry = by_offset[offset]
            assert (key, value, timestamp) == (entry.key, entry.value, entry.timestamp), offset
        checkpoint = CleanerCheckpoints(self.root).read().get(self.log.topic_partition, 0)
        latest: dict[bytes, Appended] = {}
        for entry in self.model:
            if entry.status == "committed":
                latest[entry.key] = entry
            if entry.offset >= checkpoint and entry.status != "aborted":
                assert entry.offset in present, f"record {entry.offset} above the checkpoint {checkpoint} is gone"
        for key, entry in latest.items():
            if entry.offset in present:
                continue
            assert entry.value is None, f"latest value of {key!r} at {entry.offset} was removed"
            first_pass = min((t for t in self.clean_times if t >= entry.timestamp), default=None)
            assert first_pass is not None and self.clock.time_ms() >= first_pass + DELETE_RETENTION_MS, (
                f"tombstone at {entry.offset} removed before delete.retention.ms"
            )
        below = [by_offset[o] for o in sorted(present) if o < checkpoint and by_offset[o].status == "committed"]
        keys = [entry.key for entry in below]
        assert len(keys) == len(set(keys)), f"duplicate keys below the checkpoint {checkpoint}"

    @invariant()
    def read_committed_sees_the_retained_committed_records(self) -> None:
        present = self._present()
        lso = self.log.last_stable_offset
        expected = [
            (e.offset, e.key, e.value) for e in self.model if e.status == "committed" and e.offset in present and e.offset < lso
        ]
        assert read_committed_records(self.log) == expected

    @invariant()
    def log_invariants_hold(self) -> None:
        self.log._check()


CleanerMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("LOGMGR_CLEANER_EXAMPLES", "1000" if os.environ.get("LOGMGR_SOAK") == "1" else "30")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCleanerModel = CleanerMachine.TestCase
