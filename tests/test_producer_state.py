"""Producer state (Kafka's ProducerStateManager): sequence and epoch validation, transactions and the last stable
offset, snapshots on disk, truncation, expiry and snapshot pruning."""

from __future__ import annotations

import json
import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkpoints.producer_snapshot import (
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)
from logmgr.clock import ManualClock
from logmgr.errors import (
    ConfigError,
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    LogmgrError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from logmgr.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchMetadata,
    EndedTxn,
    ProducerStateManager,
    decrement_sequence,
    snapshots_to_prune,
    stray_snapshots,
)
from segments.errors import CorruptRecordError
from segments.file_records import FileRecords
from segments.java_numbers import INT32_MAX
from segments.naming import producer_snapshot_file
from segments.records import (
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
    increment_sequence,
)
from segments.transactions import CompletedTxn, TransactionTracker
from tests.conftest import CLIENTS_GENERATED, require_fixtures

CLIENT, COORDINATOR, REPLICATION = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.REPLICATION
T0 = 1_700_000_000_000
DAY = 86_400_000


def data(
    offset: int, pid: int, epoch: int, seq: int, count: int = 1, *, txn: bool = False, ts: int = T0
) -> DefaultRecordBatch:
    records = [SimpleRecord(b"v%d" % i, timestamp=ts + i) for i in range(count)]
    return DefaultRecordBatch(
        build_batch(
            records,
            base_offset=offset,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
        )
    )


def marker(
    offset: int, pid: int, epoch: int, *, abort: bool, coordinator_epoch: int = 0, ts: int = T0
) -> DefaultRecordBatch:
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    return DefaultRecordBatch(
        build_end_txn_marker(
            offset=offset,
            timestamp=ts,
            partition_leader_epoch=0,
            producer_id=pid,
            producer_epoch=epoch,
            marker=EndTransactionMarker(kind, coordinator_epoch),
        )
    )


def state(manager: ProducerStateManager) -> dict[int, ProducerSnapshotEntry]:
    return {pid: entry.to_snapshot_entry() for pid, entry in manager.active_producers.items()}


def full_state(manager: ProducerStateManager) -> object:
    return (
        {
            pid: (entry.batch_metadata, entry.to_snapshot_entry())
            for pid, entry in manager.active_producers.items()
        },
        manager.ongoing_txns,
        manager.first_unstable_offset(),
        manager.map_end_offset,
    )


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.fixture
def manager(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock=ManualClock(T0))


# -- errors module ------------------------------------------------------------------------------------------------


def test_error_hierarchy() -> None:
    err = ConfigError("producer.id.expiration.ms", "must be at least 1")
    assert isinstance(err, LogmgrError) and isinstance(err, ValueError)
    assert (
        str(err) == "producer.id.expiration.ms: must be at least 1" and err.key == "producer.id.expiration.ms"
    )
    with pytest.raises(ConfigError):
        ProducerStateManager(Path("/nonexistent"), producer_id_expiration_ms=0)


# -- sequence arithmetic ------------------------------------------------------------------------------------------


@given(st.integers(0, INT32_MAX), st.integers(0, INT32_MAX))
def test_decrement_sequence_inverts_increment(sequence: int, delta: int) -> None:
    assert decrement_sequence(increment_sequence(sequence, delta), delta) == sequence


def test_batch_metadata_first_values_wrap() -> None:
    metadata = BatchMetadata(last_seq=1, last_offset=14, offset_delta=4, timestamp=T0)
    assert (metadata.first_seq, metadata.first_offset) == (INT32_MAX - 2, 10)


# -- client validation --------------------------------------------------------------------------------------------


def test_new_producer_accepts_any_first_sequence(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 7, 3, 1234, 2), CLIENT)
    entry = manager.last_entry(7)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.last_data_offset) == (
        3,
        1234,
        1235,
        1,
    )
    assert manager.map_end_offset == 2
    manager._check()


def test_duplicates_within_the_cached_batches(manager: ProducerStateManager) -> None:
    batches = [data(2 * i, 1, 0, 2 * i, 2) for i in range(NUM_BATCHES_TO_RETAIN)]
    for batch in batches:
        manager.on_batch(batch, CLIENT)
    before = full_state(manager)
    for i in range(NUM_BATCHES_TO_RETAIN):
        retry = data(100 + i, 1, 0, 2 * i, 2)
        with pytest.raises(DuplicateSequenceError) as caught:
            manager.on_batch(retry, CLIENT)
        duplicate = caught.value.duplicate
        assert duplicate is not None
        assert (duplicate.first_offset, duplicate.last_offset) == (2 * i, 2 * i + 1)
        assert (duplicate.first_seq, duplicate.last_seq) == (2 * i, 2 * i + 1)
    assert full_state(manager) == before
    # Same sequences under another epoch are no duplicate: a new epoch must start at 0.
    with pytest.raises(OutOfOrderSequenceError):
        manager.on_batch(data(100, 1, 1, 2, 2), CLIENT)
    manager._check()


def test_sixth_older_batch_is_out_of_order_not_duplicate(manager: ProducerStateManager) -> None:
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        manager.on_batch(data(i, 1, 0, i), CLIENT)
    entry = manager.last_entry(1)
    assert entry is not None and len(entry.batch_metadata) == NUM_BATCHES_TO_RETAIN and entry.first_seq == 1
    with pytest.raises(OutOfOrderSequenceError):
        manager.on_batch(data(50, 1, 0, 0), CLIENT)
    with pytest.raises(DuplicateSequenceError):
        manager.on_batch(data(50, 1, 0, 1), CLIENT)


def test_sequence_wraps_past_int_max(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, INT32_MAX - 1, 3), CLIENT)
    entry = manager.last_entry(1)
    assert entry is not None and (entry.first_seq, entry.last_seq) == (INT32_MAX - 1, 0)
    manager.on_batch(data(3, 1, 0, 1, 1), CLIENT)
    manager.on_batch(data(10, 2, 0, INT32_MAX), CLIENT)
    manager.on_batch(data(11, 2, 0, 0), CLIENT)
    with pytest.raises(DuplicateSequenceError):
        manager.on_batch(data(12, 2, 0, 0), CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        manager.on_batch(data(12, 2, 0, 2), CLIENT)
    manager._check()


def test_epoch_bump_resets_sequence_to_zero(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, 0, 3), CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        manager.on_batch(data(3, 1, 1, 3), CLIENT)
    manager.on_batch(data(3, 1, 1, 0, 2), CLIENT)
    entry = manager.last_entry(1)
    assert entry is not None
    assert entry.producer_epoch == 1 and [b.first_offset for b in entry.batch_metadata] == [3]
    manager.on_batch(data(5, 1, 1, 2), CLIENT)


def test_out_of_order_sequences(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, 0, 2), CLIENT)
    before = full_state(manager)
    for seq in (3, 1, 0xFFFF, INT32_MAX):
        with pytest.raises(OutOfOrderSequenceError):
            manager.on_batch(data(2, 1, 0, seq), CLIENT)
    assert full_state(manager) == before


def test_older_epoch_is_refused_except_under_replication(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 5, 0), CLIENT)
    for origin in (CLIENT, COORDINATOR):
        with pytest.raises(InvalidProducerEpochError):
            manager.on_batch(data(1, 1, 4, 1), origin)
    manager.on_batch(data(1, 1, 4, 77), REPLICATION)
    entry = manager.last_entry(1)
    assert entry is not None and entry.producer_epoch == 4 and entry.last_seq == 77


def test_replication_and_coordinator_skip_sequence_checks(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, 0), CLIENT)
    manager.on_batch(data(1, 1, 0, 40), REPLICATION)
    manager.on_batch(data(2, 1, 0, 7), COORDINATOR)
    manager.on_batch(data(3, 1, 0, 7), REPLICATION)  # a duplicate is only refused for clients
    entry = manager.last_entry(1)
    assert entry is not None and [b.last_seq for b in entry.batch_metadata] == [0, 40, 7, 7]


def test_non_transactional_batch_inside_a_transaction(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, 0, txn=True), CLIENT)
    before = full_state(manager)
    for origin in (CLIENT, REPLICATION):
        with pytest.raises(InvalidTxnStateError):
            manager.on_batch(data(1, 1, 0, 1), origin)
    assert full_state(manager) == before
    manager.on_batch(data(1, 1, 0, 1, txn=True), CLIENT)
    assert manager.ongoing_txns == {1: 0}


def test_markers_epochs_and_coordinator_epochs(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 3, 0, txn=True), CLIENT)
    with pytest.raises(InvalidProducerEpochError):
        manager.on_batch(marker(1, 1, 2, abort=False), COORDINATOR)
    manager.on_batch(marker(1, 1, 3, abort=False, coordinator_epoch=9), COORDINATOR)
    manager.on_batch(data(2, 1, 3, 1, txn=True), CLIENT)
    with pytest.raises(TransactionCoordinatorFencedError):
        manager.on_batch(marker(3, 1, 3, abort=True, coordinator_epoch=8), COORDINATOR)
    assert manager.ongoing_txns == {1: 2}
    # A follower keeps what the leader wrote, stale coordinator epoch included.
    completed = manager.on_batch(marker(3, 1, 3, abort=True, coordinator_epoch=8), REPLICATION)
    assert completed == CompletedTxn(1, 2, 3, True, 4)
    entry = manager.last_entry(1)
    assert entry is not None and entry.coordinator_epoch == 8 and entry.current_txn_first_offset is None
    # A marker ending no transaction completes nothing.
    assert manager.on_batch(marker(4, 1, 3, abort=False, coordinator_epoch=9), COORDINATOR) is None
    manager._check()


def test_marker_with_higher_epoch_clears_cached_batches(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 7, 0, 2, txn=True), CLIENT)
    assert manager.on_batch(marker(2, 1, 8, abort=True), COORDINATOR) == CompletedTxn(1, 0, 2, True, 3)
    entry = manager.last_entry(1)
    assert entry is not None and entry.producer_epoch == 8 and entry.is_empty
    with pytest.raises(OutOfOrderSequenceError):
        manager.on_batch(data(3, 1, 8, 2), CLIENT)
    manager.on_batch(data(3, 1, 8, 0), CLIENT)


def test_control_batch_that_is_not_a_marker_is_corrupt(manager: ProducerStateManager) -> None:
    key = EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 0).key_bytes()
    batch = DefaultRecordBatch(
        build_batch(
            [SimpleRecord(b"\x00\x00", key, T0)],
            base_offset=0,
            producer_id=1,
            producer_epoch=0,
            is_control=True,
        )
    )
    with pytest.raises(CorruptRecordError, match="LEADER_CHANGE"):
        manager.on_batch(batch)
    assert manager.is_empty() and manager.map_end_offset == 0


def test_batches_without_producer_only_move_the_map_end(manager: ProducerStateManager) -> None:
    assert manager.on_batch(DefaultRecordBatch(build_batch([SimpleRecord(b"x")], base_offset=4))) is None
    assert manager.is_empty() and manager.map_end_offset == 5
    with pytest.raises(ValueError):
        manager.update(manager.prepare_update(-1, CLIENT))


def test_manual_protocol_and_complete_txn_errors(manager: ProducerStateManager) -> None:
    info = manager.prepare_update(1, CLIENT)
    info.append(data(0, 1, 0, 0, 2, txn=True), 0, None)
    assert [t.first_offset for t in info.started_transactions] == [0]
    assert manager.is_empty()  # nothing is applied before update()
    manager.update(info)
    manager.map_end_offset = 2
    other = manager.prepare_update(2, CLIENT)
    other.append(data(2, 2, 0, 0, txn=True), 2, None)
    manager.update(other)
    manager.map_end_offset = 3
    info = manager.prepare_update(1, COORDINATOR)
    ended = info.append(marker(3, 1, 0, abort=True), 3, None)
    assert ended == EndedTxn(1, 0, 3, True)
    manager.update(info)
    assert manager.last_stable_offset(ended) == 2
    assert manager.complete_txn(ended) == CompletedTxn(1, 0, 3, True, 2)
    with pytest.raises(ValueError):
        manager.complete_txn(ended)
    with pytest.raises(ValueError):
        manager.complete_txn(EndedTxn(1, 2, 9, False))  # producer 2's transaction, not 1's


# -- transactions and stable offsets ------------------------------------------------------------------------------


def test_transactions_lso_and_first_unstable_offset(manager: ProducerStateManager) -> None:
    manager.on_batch(data(0, 1, 0, 0, 2, txn=True), CLIENT)
    manager.on_batch(data(2, 2, 0, 0, txn=True), CLIENT)
    manager.on_batch(data(3, 3, 0, 0), CLIENT)
    assert manager.first_unstable_offset() == manager.first_undecided_offset() == 0
    assert manager.ongoing_txns == {1: 0, 2: 2}
    # Producer 1 aborts while producer 2's transaction is open: LSO is 2's first offset.
    assert manager.on_batch(marker(4, 1, 0, abort=True), COORDINATOR) == CompletedTxn(1, 0, 4, True, 2)
    assert manager.first_undecided_offset() == 2
    assert manager.first_unstable_offset() == 0  # the abort marker is not replicated yet
    manager.on_high_watermark_updated(4)
    assert manager.first_unstable_offset() == 0
    manager.on_high_watermark_updated(5)
    assert manager.first_unstable_offset() == 2
    assert manager.on_batch(marker(5, 2, 0, abort=False), COORDINATOR) == CompletedTxn(2, 2, 5, False, 6)
    assert manager.first_undecided_offset() is None and manager.first_unstable_offset() == 2
    assert not manager.is_empty()
    manager.on_log_start_offset_incremented(6)
    assert manager.first_unstable_offset() is None and manager.map_end_offset == 6
    manager._check()


def test_fixture_transactions_through_replication(tmp_path: Path) -> None:
    folder = require_fixtures(CLIENTS_GENERATED / "transactions-0")
    expected = json.loads((folder / "aborted_transactions.json").read_text())
    manager = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    completed: list[CompletedTxn] = []
    with FileRecords(folder / "00000000000000000000.log") as log:
        for found in log.batches():
            txn = manager.on_batch(found.batch)
            manager._check()
            if txn is not None:
                completed.append(txn)
    aborted = [
        {"producerId": t.producer_id, "firstOffset": t.first_offset, "lastOffset": t.last_offset,
         "lastStableOffset": t.last_stable_offset}
        for t in completed if t.is_aborted
    ]  # fmt: skip
    assert aborted == [
        {key: txn[key] for key in ("producerId", "firstOffset", "lastOffset", "lastStableOffset")}
        for txn in expected["abortedTransactions"]
    ]
    committed = [(t.producer_id, t.first_offset, t.last_offset) for t in completed if not t.is_aborted]
    assert committed == [
        (txn["producerId"], txn["firstOffset"], txn["lastOffset"])
        for txn in expected["committedTransactions"]
    ]
    assert manager.ongoing_txns == {} and expected["openTransactionsAtEnd"] == []
    assert manager.map_end_offset == 22 and manager.first_unstable_offset() == 0
    manager.on_high_watermark_updated(22)
    assert manager.first_unstable_offset() is None
    entry = manager.last_entry(3000)
    assert entry is not None and entry.producer_epoch == 8 and entry.coordinator_epoch == 4


def test_fixture_idempotent_through_client(tmp_path: Path) -> None:
    folder = require_fixtures(CLIENTS_GENERATED / "idempotent-0")
    manager = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    with FileRecords(folder / "00000000000000000000.log") as log:
        batches = [found.batch for found in log.batches()]
    for batch in batches:
        assert manager.on_batch(batch, CLIENT) is None
        manager._check()
    assert manager.map_end_offset == 22
    entries = state(manager)
    assert (entries[4242].producer_epoch, entries[4242].last_sequence, entries[4242].last_offset) == (
        1,
        2,
        21,
    )
    assert (entries[9001].last_sequence, entries[9001].last_offset) == (5, 20)
    # Every batch still cached is refused as a duplicate when a client resends it.
    for batch in batches:
        if batch.producer_id == 9001 or (batch.producer_id == 4242 and batch.producer_epoch == 1):
            with pytest.raises(DuplicateSequenceError):
                manager.on_batch(batch, CLIENT)


# -- snapshots ----------------------------------------------------------------------------------------------------


def _populate(manager: ProducerStateManager) -> None:
    for i in range(7):
        manager.on_batch(data(i, 1, 2, i, ts=T0 + i), CLIENT)
    manager.on_batch(data(7, 2, 0, 0, 3, txn=True, ts=T0 + 7), CLIENT)
    manager.on_batch(data(10, 3, 1, 5, txn=True, ts=T0 + 10), CLIENT)
    manager.on_batch(marker(11, 3, 1, abort=False, coordinator_epoch=6, ts=T0 + 11), COORDINATOR)


def test_snapshot_round_trip(tmp_path: Path, manager: ProducerStateManager) -> None:
    _populate(manager)
    path = manager.take_snapshot()
    assert path == producer_snapshot_file(tmp_path, 12) and files(tmp_path) == [
        "00000000000000000012.snapshot"
    ]
    assert manager.take_snapshot() is None  # the map has not advanced
    on_disk = read_producer_snapshot(path)
    assert on_disk.offset == 12 and [e.producer_id for e in on_disk.entries] == [1, 2, 3]
    assert on_disk.entries[0] == ProducerSnapshotEntry(1, 2, 6, 6, 0, T0 + 6, -1, -1)
    assert on_disk.entries[1] == ProducerSnapshotEntry(2, 0, 2, 9, 2, T0 + 9, -1, 7)
    assert on_disk.entries[2] == ProducerSnapshotEntry(3, 1, 5, 10, 0, T0 + 11, 6, -1)

    reloaded = ProducerStateManager(tmp_path, clock=ManualClock(T0 + 100))
    assert reloaded.snapshot_offsets() == [12] and reloaded.map_end_offset == 0
    reloaded.truncate_and_reload(0, 12)
    reloaded._check()
    assert state(reloaded) == state(manager)
    assert reloaded.map_end_offset == 12 and reloaded.ongoing_txns == {2: 7}
    entry = reloaded.last_entry(1)
    assert entry is not None and len(entry.batch_metadata) == 1  # only the newest batch is persisted
    reloaded.on_batch(data(12, 1, 2, 7), CLIENT)
    with pytest.raises(DuplicateSequenceError):
        reloaded.on_batch(data(13, 1, 2, 6), CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        reloaded.on_batch(data(13, 1, 2, 5), CLIENT)  # was cached before the reload, not any more
    assert reloaded.take_snapshot(sync=False) == producer_snapshot_file(tmp_path, 13)


def test_reload_after_truncation(tmp_path: Path, manager: ProducerStateManager) -> None:
    for offset in range(0, 40):
        manager.on_batch(data(offset, 1, 0, offset), CLIENT)
        if offset + 1 in (10, 20, 30, 40):
            manager.take_snapshot()
    assert manager.snapshot_offsets() == [10, 20, 30, 40]
    manager.truncate_and_reload(0, 25, T0)
    assert manager.snapshot_offsets() == [10, 20] and manager.map_end_offset == 20
    entry = manager.last_entry(1)
    assert entry is not None and entry.last_data_offset == 19
    for offset in range(20, 25):  # the caller replays the log from the map end offset
        manager.on_batch(data(offset, 1, 0, offset), REPLICATION)
    # Log start at a snapshot offset deletes that snapshot; the map already ends at the log end: no reload.
    manager.truncate_and_reload(20, 25, T0)
    assert manager.snapshot_offsets() == [] and manager.map_end_offset == 25
    assert files(tmp_path) == []
    entry = manager.last_entry(1)
    assert entry is not None and entry.last_data_offset == 24
    # Without any snapshot the map restarts at the log start offset.
    manager.truncate_and_reload(20, 23, T0)
    assert manager.is_empty() and manager.map_end_offset == 20
    manager._check()


def test_corrupt_snapshot_is_deleted_and_older_one_loaded(
    tmp_path: Path, manager: ProducerStateManager
) -> None:
    manager.on_batch(data(0, 1, 0, 0), CLIENT)
    manager.take_snapshot()
    manager.on_batch(data(1, 1, 0, 1), CLIENT)
    newest = manager.take_snapshot()
    assert newest is not None
    raw = bytearray(newest.read_bytes())
    raw[-1] ^= 0xFF
    newest.write_bytes(bytes(raw))
    (tmp_path / "00000000000000000005.snapshot").write_bytes(b"\x00\x01")  # truncated header
    reloaded = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    reloaded.truncate_and_reload(0, 10)
    assert reloaded.map_end_offset == 1 and reloaded.snapshot_offsets() == [1]
    assert files(tmp_path) == ["00000000000000000001.snapshot"]
    entry = reloaded.last_entry(1)
    assert entry is not None and entry.last_seq == 0


@given(st.binary(max_size=200))
def test_arbitrary_snapshot_bytes_never_escape(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        producer_snapshot_file(directory, 7).write_bytes(content)
        manager = ProducerStateManager(directory, clock=ManualClock(T0))
        manager.truncate_and_reload(0, 10)
        manager._check()
        assert manager.map_end_offset in (0, 7)
        assert manager.snapshot_offsets() == ([7] if manager.map_end_offset == 7 else [])


def test_snapshot_listing_ignores_other_files(tmp_path: Path) -> None:
    for name in ("00000000000000000003.snapshot.deleted", "notanoffset.snapshot", "00000000000000000004.log"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "00000000000000000009.snapshot").mkdir()
    write_producer_snapshot(tmp_path / "8.snapshot", [])
    manager = ProducerStateManager(tmp_path)
    assert manager.snapshot_offsets() == [8] and manager.snapshot_path(8) == tmp_path / "8.snapshot"
    manager._check()
    assert ProducerStateManager(tmp_path / "absent").snapshot_offsets() == []


# -- expiry -------------------------------------------------------------------------------------------------------


def test_expiry_boundary_and_open_transactions(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=DAY, clock=clock)
    manager.on_batch(data(0, 1, 0, 0, ts=T0), CLIENT)
    manager.on_batch(data(1, 2, 0, 0, txn=True, ts=T0), CLIENT)
    manager.on_batch(data(2, 3, 0, 0, ts=T0 + 10), CLIENT)
    assert manager.remove_expired_producers(T0 + DAY - 1) == []
    clock.set(T0 + DAY)
    assert manager.remove_expired_producers() == [1]  # now - last timestamp >= expiration
    assert sorted(manager.active_producers) == [2, 3]
    manager.take_snapshot()
    # Expired entries are also left out when a snapshot is loaded.
    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=DAY, clock=clock)
    reloaded.truncate_and_reload(0, 3, T0 + DAY + 10)
    assert sorted(reloaded.active_producers) == [2] and reloaded.ongoing_txns == {2: 1}
    # The producer is unknown again: any sequence is accepted.
    manager.on_batch(data(3, 1, 0, 999), CLIENT)


# -- snapshot deletion and pruning --------------------------------------------------------------------------------


def _snapshots_at(manager: ProducerStateManager, offsets: list[int]) -> None:
    for offset in offsets:
        manager.map_end_offset = offset
        manager.take_snapshot(sync=False)


def test_delete_rename_and_truncate_fully(tmp_path: Path, manager: ProducerStateManager) -> None:
    _snapshots_at(manager, [10, 20, 30, 40])
    assert manager.oldest_snapshot_offset() == 10 and manager.latest_snapshot_offset() == 40
    renamed = manager.rename_snapshot_to_deleted(20)
    assert renamed == tmp_path / "00000000000000000020.snapshot.deleted" and renamed.exists()
    assert manager.rename_snapshot_to_deleted(20) is None
    assert manager.delete_snapshot(30) and not manager.delete_snapshot(30)
    assert manager.delete_snapshots_below(40) == [10]
    assert files(tmp_path) == ["00000000000000000020.snapshot.deleted", "00000000000000000040.snapshot"]
    manager.on_batch(data(40, 1, 0, 0), CLIENT)
    manager.truncate_fully_and_start_at(100)
    assert manager.is_empty() and manager.map_end_offset == 100 and manager.snapshot_offsets() == []
    assert files(tmp_path) == ["00000000000000000020.snapshot.deleted"]
    assert manager.take_snapshot() == producer_snapshot_file(tmp_path, 100)
    manager._check()


def test_snapshots_to_prune_examples() -> None:
    bases = [0, 100, 200, 300, 400]
    snapshots = [0, 100, 200, 300, 400, 450]
    # Recovery point in the active segment: keep the last two segments.
    assert snapshots_to_prune(snapshots, bases, 450) == [0, 100, 200]
    # Recovery point behind: keep from the segment below it.
    assert snapshots_to_prune(snapshots, bases, 150) == [0]
    # A recovery point exactly at a base: the segment strictly below it is the recovery point's segment.
    assert snapshots_to_prune(snapshots, bases, 200) == [0]
    # Snapshots of segments deleted by retention (below the first segment) go too.
    assert snapshots_to_prune([20, 50, 300, 400], [300, 400], 10) == [20, 50]
    assert snapshots_to_prune([5, 300], [300], 500) == [5]
    with pytest.raises(ValueError):
        snapshots_to_prune([1], [], 0)


@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=8, unique=True),
    st.lists(st.integers(0, 1200), max_size=12),
    st.integers(0, 1200),
)
def test_snapshots_to_prune_properties(bases: list[int], snapshots: list[int], recovery_point: int) -> None:
    pruned = snapshots_to_prune(snapshots, bases, recovery_point)
    ordered = sorted(bases)
    last_two = ordered[-2:]
    recovery_segment = max([b for b in ordered if b <= recovery_point], default=ordered[0])
    assert pruned == sorted(set(pruned)) and set(pruned) <= set(snapshots)
    for offset in set(snapshots):
        if offset < ordered[0]:
            assert offset in pruned
        elif offset >= last_two[0] or offset >= recovery_segment:
            assert offset not in pruned


def test_stray_snapshots_rule() -> None:
    assert stray_snapshots([0, 5, 10, 15, 20, 25], [0, 10, 20]) == [5, 15]  # 25: the clean-shutdown snapshot
    assert stray_snapshots([5, 15], [0, 10, 20]) == [5, 15]
    assert stray_snapshots([3, 7], []) == [3]
    assert stray_snapshots([0, 10], [0, 10]) == []


def test_remove_straggling_and_prune_methods(tmp_path: Path, manager: ProducerStateManager) -> None:
    _snapshots_at(manager, [5, 10, 20, 30, 40, 45])
    write_producer_snapshot(producer_snapshot_file(tmp_path, 3), [])  # written behind the manager's back
    assert manager.remove_straggling_snapshots([10, 20, 30, 40]) == [3, 5]
    assert manager.snapshot_offsets() == [10, 20, 30, 40, 45]
    assert manager.prune_snapshots_pre_2_8([10, 20, 30, 40], recovery_point=45) == [10, 20]
    assert files(tmp_path) == ["00000000000000000030.snapshot", "00000000000000000040.snapshot",
                               "00000000000000000045.snapshot"]  # fmt: skip
    manager._check()


def test_update_partition_dir(tmp_path: Path) -> None:
    old, new = tmp_path / "t-0", tmp_path / "t-0.abc-delete"
    old.mkdir()
    manager = ProducerStateManager(old)
    _snapshots_at(manager, [7])
    old.rename(new)
    manager.update_partition_dir(new)
    assert manager.partition_dir == new and manager.delete_snapshot(7) and files(new) == []


# -- randomized -----------------------------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(
            st.integers(1, 4), st.integers(0, 3), st.integers(0, 20), st.integers(1, 4), st.integers(0, 3)
        ),
        max_size=25,
    )
)
def test_snapshot_reload_round_trip(steps: list[tuple[int, int, int, int, int]]) -> None:
    """Whatever a replicated log holds, a snapshot reloads to the same per-producer state."""
    with tempfile.TemporaryDirectory() as tmp:
        manager = ProducerStateManager(tmp, producer_id_expiration_ms=2**62, clock=ManualClock(T0))
        offset = 0
        for pid, epoch, seq, count, kind in steps:
            if kind == 3:
                batch = marker(offset, pid, epoch, abort=seq % 2 == 0, coordinator_epoch=count)
            else:
                batch = data(offset, pid, epoch, seq, count, txn=kind == 2)
            try:
                manager.on_batch(batch)
            except InvalidTxnStateError:
                continue
            offset = batch.last_offset + 1
            manager._check()
        manager.take_snapshot()
        reloaded = ProducerStateManager(tmp, producer_id_expiration_ms=2**62, clock=ManualClock(T0))
        reloaded.truncate_and_reload(0, offset)
        reloaded._check()
        assert state(reloaded) == state(manager)
        assert reloaded.ongoing_txns == manager.ongoing_txns
        assert reloaded.map_end_offset == manager.map_end_offset


@dataclass
class _Producer:
    epoch: int
    next_seq: int = 0
    in_txn: bool = False
    # (first sequence, record count, first offset, last offset) of the newest batches, as the manager caches them
    recent: list[tuple[int, int, int, int]] = field(default_factory=list)


@pytest.mark.parametrize("seed", range(6))
def test_random_stress_against_a_model(tmp_path: Path, seed: int) -> None:
    """Random client appends, invalid batches, retries, markers, snapshots, reloads and expiry; the manager is
    checked after every step against a small model and against segments' TransactionTracker."""
    rng = random.Random(seed)
    clock = ManualClock(T0)
    expiration = 50_000
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=expiration, clock=clock)
    tracker = TransactionTracker()
    model: dict[int, _Producer] = {}
    offset = 0

    def accept(batch: DefaultRecordBatch, origin: AppendOrigin) -> CompletedTxn | None:
        nonlocal offset
        completed = manager.on_batch(batch, origin)
        assert completed == tracker.on_batch(batch)
        offset = batch.last_offset + 1
        return completed

    def refuse(batch: DefaultRecordBatch, error: type[Exception]) -> None:
        before = full_state(manager)
        with pytest.raises(error):
            manager.on_batch(batch, CLIENT)
        assert full_state(manager) == before

    for _ in range(400):
        pid = rng.randint(1, 5)
        clock.advance(rng.choice([0, 1, 100, 10_000]))
        now = clock.time_ms()
        producer = model.get(pid)
        action = rng.random()
        if producer is None:
            model[pid] = producer = _Producer(epoch=rng.randint(0, 3), next_seq=rng.choice([0, 5, INT32_MAX]))
        if action < 0.45:
            count = rng.randint(1, 4)
            txn = producer.in_txn or rng.random() < 0.3
            batch = data(offset, pid, producer.epoch, producer.next_seq, count, txn=txn, ts=now)
            accept(batch, CLIENT)
            producer.recent = [
                *producer.recent,
                (producer.next_seq, count, batch.base_offset, batch.last_offset),
            ][-5:]
            producer.next_seq = increment_sequence(producer.next_seq, count)
            producer.in_txn = txn
        elif action < 0.55 and producer.recent:
            first_seq, count, first_offset, last_offset = rng.choice(producer.recent)
            with pytest.raises(DuplicateSequenceError) as caught:
                manager.on_batch(data(offset, pid, producer.epoch, first_seq, count, ts=now), CLIENT)
            assert caught.value.duplicate is not None
            assert (caught.value.duplicate.first_offset, caught.value.duplicate.last_offset) == (
                first_offset,
                last_offset,
            )
        elif action < 0.65 and pid in manager.active_producers:
            kind = rng.randrange(3)
            entry = manager.active_producers[pid]
            if kind == 0:
                gap = increment_sequence(producer.next_seq, rng.randint(1, 3))
                refuse(data(offset, pid, producer.epoch, gap, ts=now), OutOfOrderSequenceError)
            elif kind == 1 and entry.producer_epoch > 0:
                stale = entry.producer_epoch - 1
                refuse(data(offset, pid, stale, producer.next_seq, ts=now), InvalidProducerEpochError)
            elif producer.in_txn:
                refuse(data(offset, pid, producer.epoch, producer.next_seq, ts=now), InvalidTxnStateError)
        elif action < 0.78:
            completed = accept(
                marker(offset, pid, producer.epoch, abort=rng.random() < 0.5, ts=now), COORDINATOR
            )
            assert (completed is not None) == producer.in_txn
            producer.in_txn = False
            if not producer.recent:
                # The producer's epoch is now known without any batch: its next batch must start at 0.
                producer.next_seq = 0
        elif action < 0.83 and not producer.in_txn:
            producer.epoch += 1
            producer.next_seq, producer.recent = 0, []
        elif action < 0.90:
            manager.take_snapshot(sync=False)
            if rng.random() < 0.5:
                reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=expiration, clock=clock)
                reloaded.truncate_and_reload(0, offset)
                assert reloaded.map_end_offset == offset
                for gone, entry_state in state(manager).items():
                    if gone not in reloaded.active_producers:  # expired: left out of the reload
                        assert entry_state.current_txn_first_offset == -1
                        assert now - entry_state.timestamp >= expiration
                        del model[gone]
                assert state(reloaded) == {p: e for p, e in state(manager).items() if p in model}
                manager = reloaded
                for known in model.values():
                    known.recent = known.recent[-1:]
        elif action < 0.95:
            manager.on_high_watermark_updated(offset)
            assert manager.first_unstable_offset() == tracker.first_unstable_offset()
        else:
            for expired in manager.remove_expired_producers():
                assert not model[expired].in_txn
                del model[expired]
        manager._check()
        assert manager.map_end_offset == offset
        assert manager.ongoing_txns == tracker.open_transactions
        assert manager.first_undecided_offset() == tracker.first_unstable_offset()
        assert {p for p, m in model.items() if m.in_txn} == set(manager.ongoing_txns)
        assert sorted(manager.snapshot_offsets()) == [
            int(name.split(".")[0]) for name in files(tmp_path) if name.endswith(".snapshot")
        ]
