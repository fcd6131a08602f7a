"""Log (logmgr.log): appends as leader and follower, idempotent and transactional producers, Kafka's roll rules,
reads under every isolation level, timestamp lookups, flush, truncation, DeleteRecords, retention with delayed and
reader-safe deletion, clean close and reopen, and a seeded random stress test against an in-memory model.

Every test runs on real files in ``tmp_path`` with a :class:`~logmgr.clock.ManualClock`, so time rules are exact.
"""

from __future__ import annotations

import itertools
import random
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCheckpointFile,
)
from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    TransactionCoordinatorFencedError,
)
from logmgr.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AbortedTransaction,
    FetchDataInfo,
    Isolation,
    Log,
)
from logmgr.log_loader import load_log
from logmgr.producer_state import AppendOrigin, ProducerStateManager
from logmgr.segment_deleter import SegmentDeleter, SegmentReaders
from segments.log_segment import LogSegment
from segments.naming import (
    DELETED_SUFFIX,
    log_file,
    offset_index_file,
    producer_snapshot_file,
    time_index_file,
    transaction_index_file,
)
from segments.records import (
    ControlRecordType,
    DefaultRecordBatch,
    SimpleRecord,
    TimestampType,
    build_batch,
)
from segments.transaction_index import AbortedTxn, TransactionIndex
from tests.conftest import FAILURE_DEADLINE_S, ContendedLock, wait_until

# A multiple of 1000: LogSegment keeps its creation time as float seconds, exact for whole seconds.
T0 = 1_700_000_000_000
DELETE_DELAY = 60_000


def open_log(
    directory: Path,
    clock: ManualClock,
    *,
    clean: bool = False,
    deleter: SegmentDeleter | None = None,
    readers: SegmentReaders | None = None,
    **props: object,
) -> Log:
    """A log in ``directory`` (a ``topic-partition`` dir) with Kafka topic configs given as keyword arguments
    (``segment_bytes=300`` means ``segment.bytes=300``)."""
    config = LogConfig.from_properties({key.replace("_", "."): str(value) for key, value in props.items()})
    return load_log(directory, config, clock=clock, had_clean_shutdown=clean, deleter=deleter, readers=readers)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


def batch(
    *values: bytes,
    ts: int | list[int] = T0,
    base_offset: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    leader_epoch: int = -1,
) -> bytes:
    """A magic-2 batch of ``values`` (timestamps ``ts``: one for all, or one per record)."""
    stamps = ts if isinstance(ts, list) else [ts] * len(values)
    return build_batch(
        [SimpleRecord(value, None, stamp) for value, stamp in zip(values, stamps, strict=True)],
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        partition_leader_epoch=leader_epoch,
    )


def records_of(fetch: FetchDataInfo) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of every data record in the fetched whole batches."""
    return [(r.offset, r.value) for b in fetch.batches() if not b.is_control for r in b.records()]


def read_all(log: Log, isolation: Isolation = Isolation.LOG_END) -> list[tuple[int, bytes | None]]:
    """Every data record from the log start, following the reads across segments."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while True:
        fetch = log.read(offset, 1 << 20, isolation=isolation)
        batches = fetch.batches()
        if not batches:
            return out
        out.extend((r.offset, r.value) for b in batches if not b.is_control for r in b.records())
        offset = batches[-1].last_offset + 1


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def legacy_message(value: bytes, offset: int = 0) -> bytes:
    """A magic-1 message (offset, size, CRC-32, magic, attributes, timestamp, null key, value)."""
    body = struct.pack(">bbqi", 1, 0, T0, -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


# -- append as leader -------------------------------------------------------------------------------------------


def test_leader_assigns_offsets_from_the_log_end_across_batches(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    first = log.append_as_leader(batch(b"a", b"b", b"c", base_offset=777))
    second = log.append_records([SimpleRecord(b"d"), SimpleRecord(b"e")])
    third = log.append_as_leader(batch(b"f", base_offset=5) + batch(b"g", b"h", base_offset=0))
    assert (first.first_offset, first.last_offset, first.records, first.batches) == (0, 2, 3, 1)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert (third.first_offset, third.last_offset, third.batches, third.records) == (5, 7, 2, 3)
    assert (first.position, second.position) == (0, first.valid_bytes)
    assert third.position == first.valid_bytes + second.valid_bytes
    assert log.log_end_offset == 8 and log.size_in_bytes == sum(i.valid_bytes for i in (first, second, third))
    assert read_all(log) == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]))
    assert [b.base_offset for b in log.read(0, 1 << 20).batches()] == [0, 3, 5, 6]
    log._check()


def test_leader_epoch_is_stamped_and_checkpointed_on_a_new_epoch(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a", leader_epoch=99), leader_epoch=2)
    log.append_as_leader(batch(b"b"), leader_epoch=2)
    log.append_records([SimpleRecord(b"c")], leader_epoch=5)
    assert [b.partition_leader_epoch for b in log.read(0, 1 << 20).batches()] == [2, 2, 5]
    expected = [EpochEntry(2, 0), EpochEntry(5, 2)]
    assert log.leader_epochs.entries == expected
    assert LeaderEpochCheckpointFile(pdir / LEADER_EPOCH_CHECKPOINT_FILE).read() == expected
    assert log.leader_epochs.end_offset_for(2, log.log_end_offset) == 2
    log._check()


def test_log_append_time_topic_stamps_the_clock_with_a_valid_crc(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, message_timestamp_type="LogAppendTime")
    clock.advance(5_000)
    info = log.append_as_leader(batch(b"a", b"b", ts=[111, 222]))
    assert info.max_timestamp == T0 + 5_000
    (stored,) = log.read(0, 1 << 20).batches()
    stored.ensure_valid()
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert stored.max_timestamp == T0 + 5_000
    assert [r.timestamp for r in stored.records()] == [T0 + 5_000] * 2
    assert log.offset_for_timestamp(T0 + 5_000) == (0, T0 + 5_000)


def test_leader_producer_state_matches_a_replay_of_the_stamped_log(pdir: Path, clock: ManualClock) -> None:
    """A leader's producer state is built from the batches as the producer sent them plus the offsets and append
    time their headers get as they are written: it equals what a replay of the stored (stamped) batches builds, for
    a multi-batch append of idempotent and transactional producers and a marker, on a LogAppendTime topic."""
    log = open_log(pdir, clock, message_timestamp_type="LogAppendTime")
    clock.advance(5_000)
    log.append_as_leader(batch(b"x", ts=111))
    clock.advance(1)
    log.append_as_leader(
        batch(b"a", b"b", ts=[1, 2]) + batch(b"c", ts=3, pid=7, epoch=0, seq=0, txn=True)
        + batch(b"d", b"e", ts=4, pid=8, epoch=1, seq=0),
        leader_epoch=4,
    )
    clock.advance(1)
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 2, leader_epoch=4)
    replay = ProducerStateManager(pdir / "replay", clock=clock)
    stored = log.read(0, 1 << 20).batches()
    assert [(b.base_offset, b.max_timestamp) for b in stored] == [
        (0, T0 + 5_000), (1, T0 + 5_001), (3, T0 + 5_001), (4, T0 + 5_001), (6, T0 + 5_002)
    ]
    for stored_batch in stored:
        stored_batch.ensure_valid()
        replay.on_batch(stored_batch, AppendOrigin.REPLICATION)
    def entries(manager: ProducerStateManager) -> dict[int, object]:
        return {pid: entry.to_snapshot_entry() for pid, entry in manager.active_producers.items()}
    assert entries(log.producer_state) == entries(replay) and set(entries(replay)) == {7, 8}
    assert log.producer_state.active_producers[8].last_data_offset == 5
    assert log.producer_state.active_producers[7].to_snapshot_entry().timestamp == T0 + 5_002


def test_create_time_records_keep_their_timestamps(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    info = log.append_as_leader(batch(b"a", b"b", b"c", ts=[300, 100, 200]))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (300, 2)
    (stored,) = log.read(0, 1 << 20).batches()
    assert stored.timestamp_type is TimestampType.CREATE_TIME
    assert [r.timestamp for r in stored.records()] == [300, 100, 200]
    clock.advance(1)
    no_timestamp = log.append_records([SimpleRecord(b"d"), SimpleRecord(b"e", None, 42)])
    assert [r.timestamp for r in log.read(3, 1 << 20).batches()[0].records()] == [T0 + 1, 42]
    assert no_timestamp.max_timestamp == T0 + 1


# -- timestamp validation (Kafka's LogValidator.validateTimestamp, KIP-937) -----------------------------------------


def test_timestamps_outside_the_before_and_after_windows_refuse_the_whole_append(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, message_timestamp_before_max_ms=1_000, message_timestamp_after_max_ms=500)
    # The bounds are inclusive: exactly 1000 ms old and 500 ms ahead pass.
    log.append_as_leader(batch(b"a", b"b", ts=[T0 - 1_000, T0 + 500]))
    # One stale record fails its batch, and the append is all or nothing: the good first batch is not written.
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(batch(b"ok") + batch(b"c", b"d", ts=[T0, T0 - 1_001]))
    assert refused.value.record_errors == [
        (1, f"Timestamp {T0 - 1_001} of message with offset 1 is out of range. "
            f"The timestamp should be within [{T0 - 1_000}, {T0 + 500}]")
    ]
    assert "topic-0: One or more records have been rejected due to invalid timestamp (batch 1" in str(refused.value)
    with pytest.raises(InvalidTimestampError):
        log.append_records([SimpleRecord(b"e", None, T0 + 501)])
    assert log.log_end_offset == 2
    # The window follows the broker's clock: the same timestamp passes once the clock has caught up.
    clock.advance(1)
    log.append_records([SimpleRecord(b"e", None, T0 + 501)])
    # NO_TIMESTAMP is exempt (a raw batch; append_records would stamp the clock).
    log.append_as_leader(batch(b"f", ts=-1))
    assert [v for _, v in read_all(log)] == [b"a", b"b", b"e", b"f"]
    log._check()


def test_legacy_difference_bounds_the_windows_left_at_their_default(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, message_timestamp_difference_max_ms=100)
    assert log.config.timestamp_bounds == (100, 100)
    for stamp in (T0 - 101, T0 + 101):
        with pytest.raises(InvalidTimestampError):
            log.append_as_leader(batch(b"x", ts=stamp))
    log.append_as_leader(batch(b"x", ts=T0 - 100))
    # An explicit window wins over the legacy setting; the other still falls back to it.
    log.config = log.config.with_overrides({"message.timestamp.after.max.ms": "10000"})
    assert log.config.timestamp_bounds == (100, 10_000)
    log.append_as_leader(batch(b"y", ts=T0 + 10_000))
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(b"y", ts=T0 - 101))
    assert log.log_end_offset == 2


def test_log_append_time_topics_ignore_the_windows_but_refuse_producer_log_append_time(
    pdir: Path, clock: ManualClock
) -> None:
    log = open_log(pdir, clock, message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0)
    log.append_as_leader(batch(b"a", ts=1))  # overwritten with the append time, never judged
    producer_stamped = build_batch(
        [SimpleRecord(b"b", None, T0)], timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=T0
    )
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(producer_stamped)
    assert "Producer should not set timestamp type to LogAppendTime" in refused.value.record_errors[0][1]
    # On a CreateTime topic such a batch is judged by its max timestamp (what its records report).
    create = open_log(pdir.with_name("topic-1"), clock, message_timestamp_after_max_ms=0)
    create.append_as_leader(producer_stamped)
    late = build_batch([SimpleRecord(b"c", None, T0)], timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=T0 + 1)
    with pytest.raises(InvalidTimestampError):
        create.append_as_leader(late)
    # Kafka validates only what a leader appends: replication and restores copy batches as they are.
    create.append_as_follower(build_batch(
        [SimpleRecord(b"d", None, 0)], base_offset=1, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=0
    ))
    assert create.log_end_offset == 2 and log.log_end_offset == 1


def test_max_message_bytes_is_enforced_and_nothing_written(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, max_message_bytes=200)
    log.append_as_leader(batch(b"small"))
    big = batch(b"x" * 200)
    with pytest.raises(RecordBatchTooLargeError, match=r"max\.message\.bytes 200"):
        log.append_as_leader(big)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_follower(DefaultRecordBatch(big).with_base_offset(1))
    assert log.log_end_offset == 1 and log.size_in_bytes == len(batch(b"small"))


def test_an_append_larger_than_segment_bytes_is_rejected(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_bytes=200)
    with pytest.raises(RecordBatchTooLargeError, match=r"segment\.bytes 200"):
        log.append_as_leader(batch(b"x" * 100, b"y" * 100))
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(batch(b"x" * 90) + batch(b"y" * 90))
    assert log.log_end_offset == 0 and log.size_in_bytes == 0 and len(log.segments) == 1
    log.append_as_leader(batch(b"x" * 100))
    assert log.log_end_offset == 1


def _corrupt_crc(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    return bytes(damaged)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(_corrupt_crc(batch(b"value")), id="crc"),
        pytest.param(batch(b"ok") + _corrupt_crc(batch(b"value")), id="crc-second-batch"),
        pytest.param(legacy_message(b"old"), id="legacy-magic"),
        pytest.param(batch(b"value")[:-3], id="partial"),
        pytest.param(batch(b"ok") + batch(b"value")[:30], id="partial-tail"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00" * 5, id="too-short"),
    ],
)
def test_invalid_appends_are_rejected_and_nothing_is_written(
    pdir: Path, clock: ManualClock, bad: bytes
) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"before"))
    size = log.size_in_bytes
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bad)
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(bad)
    assert (log.log_end_offset, log.size_in_bytes) == (1, size)
    assert read_all(log) == [(0, b"before")]
    log._check()


def test_a_batch_whose_record_count_lies_is_rejected(pdir: Path, clock: ManualClock) -> None:
    good = bytearray(batch(b"a", b"b"))
    struct.pack_into(">i", good, 57, 3)
    struct.pack_into(">I", good, 17, crc32c(bytes(good[21:])))
    log = open_log(pdir, clock)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(good))
    assert log.log_end_offset == 0


# -- append as follower -----------------------------------------------------------------------------------------


def test_follower_keeps_offsets_and_allows_gaps(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    first = log.append_as_follower(batch(b"a", b"b", base_offset=10, leader_epoch=7))
    second = log.append_as_follower(batch(b"c", base_offset=20, leader_epoch=7) + batch(b"d", base_offset=25))
    assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (10, 11, 20, 25)
    assert log.log_end_offset == 26
    assert read_all(log) == [(10, b"a"), (11, b"b"), (20, b"c"), (25, b"d")]
    # An offset inside a gap is served from the next batch, as Kafka does after compaction.
    assert records_of(log.read(15, 1 << 20))[0] == (20, b"c")
    assert log.leader_epochs.entries == [EpochEntry(7, 10)]
    assert [b.partition_leader_epoch for b in log.read(10, 1 << 20).batches()] == [7, 7, -1]
    log._check()


@pytest.mark.parametrize(
    "records",
    [
        pytest.param(batch(b"x", base_offset=5), id="below-end"),
        pytest.param(batch(b"x", base_offset=25), id="at-last-offset"),
        pytest.param(batch(b"x", base_offset=30) + batch(b"y", base_offset=30), id="not-increasing"),
    ],
)
def test_follower_append_below_the_log_end_is_rejected(pdir: Path, clock: ManualClock, records: bytes) -> None:
    log = open_log(pdir, clock)
    log.append_as_follower(batch(b"a", base_offset=20) + batch(b"b", base_offset=25))
    with pytest.raises(InvalidRecordError, match="below the expected offset"):
        log.append_as_follower(records)
    assert log.log_end_offset == 26 and read_all(log) == [(20, b"a"), (25, b"b")]


# -- idempotent producers ---------------------------------------------------------------------------------------


def test_duplicate_of_a_recent_batch_returns_the_original_offsets(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_records([SimpleRecord(b"other")])
    original = log.append_as_leader(batch(b"a", b"b", b"c", pid=1, epoch=0, seq=0, ts=500))
    log.append_as_leader(batch(b"d", pid=1, epoch=0, seq=3))
    size, end = log.size_in_bytes, log.log_end_offset
    retry = log.append_as_leader(batch(b"a", b"b", b"c", pid=1, epoch=0, seq=0, ts=500))
    assert retry.duplicate and not original.duplicate
    assert (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset) == (1, 3)
    assert retry.max_timestamp == 500
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)
    assert [value for _, value in read_all(log)] == [b"other", b"a", b"b", b"c", b"d"]


def test_only_the_last_five_batches_are_remembered_for_duplicates(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    for seq in range(6):
        log.append_as_leader(batch(b"v%d" % seq, pid=1, epoch=0, seq=seq))
    assert log.append_as_leader(batch(b"v1", pid=1, epoch=0, seq=1)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(b"v0", pid=1, epoch=0, seq=0))
    assert log.log_end_offset == 6


def test_out_of_order_sequence_is_refused_and_nothing_written(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a", pid=1, epoch=0, seq=0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(b"b", pid=1, epoch=0, seq=2))
    # A refused batch in a multi-batch append refuses the whole append.
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(b"b", pid=2, epoch=0, seq=0) + batch(b"c", pid=1, epoch=0, seq=5))
    assert log.log_end_offset == 1 and log.producer_state.last_entry(2) is None
    assert not log.append_as_leader(batch(b"b", pid=1, epoch=0, seq=1)).duplicate
    assert log.producer_state.last_entry(1).last_seq == 1  # type: ignore[union-attr]


def test_producer_epoch_fencing(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a", pid=1, epoch=0, seq=0))
    log.append_as_leader(batch(b"b", pid=1, epoch=0, seq=1))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(b"c", pid=1, epoch=1, seq=5))
    log.append_as_leader(batch(b"c", pid=1, epoch=1, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(batch(b"zombie", pid=1, epoch=0, seq=2))
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(1, 0, ControlRecordType.ABORT, 0)
    assert log.log_end_offset == 3
    # A follower keeps what the leader accepted, old epoch or not.
    log.append_as_follower(batch(b"replicated", pid=1, epoch=0, seq=2, base_offset=3))
    assert log.log_end_offset == 4


# -- transactions -----------------------------------------------------------------------------------------------


def _txn_index_entries(log: Log, base_offset: int) -> list[AbortedTxn]:
    index = TransactionIndex(transaction_index_file(log.dir, base_offset), base_offset, writable=False)
    try:
        return index.all_aborted_txns()
    finally:
        index.close()


def test_open_transaction_holds_the_last_stable_offset(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_records([SimpleRecord(b"a"), SimpleRecord(b"b")])
    log.append_as_leader(batch(b"t1", b"t2", pid=7, epoch=0, seq=0, txn=True))
    log.append_records([SimpleRecord(b"c")])
    assert (log.high_watermark, log.last_stable_offset) == (5, 2)
    committed = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert records_of(committed) == [(0, b"a"), (1, b"b")] and committed.aborted_transactions == ()
    assert log.read(2, 1 << 20, isolation=Isolation.READ_COMMITTED).records == b""
    assert len(records_of(log.read(0, 1 << 20))) == 5
    marker = log.append_end_txn_marker(7, 0, ControlRecordType.COMMIT, 3)
    assert marker.first_offset == 5 and log.last_stable_offset == 6
    everything = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert [o for o, _ in records_of(everything)] == [0, 1, 2, 3, 4]
    assert everything.aborted_transactions == ()
    assert _txn_index_entries(log, 0) == []
    assert log.read(0, 1 << 20).aborted_transactions is None


def test_abort_marker_writes_the_txn_index_and_read_committed_returns_it(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_records([SimpleRecord(b"a")])
    log.append_as_leader(batch(b"t1", b"t2", pid=7, epoch=0, seq=0, txn=True))
    log.append_as_leader(batch(b"u1", pid=8, epoch=0, seq=0, txn=True))
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 1)
    # Producer 8 is still open at offset 3, so the stored LSO is 3.
    assert _txn_index_entries(log, 0) == [AbortedTxn(7, 1, 4, 3)]
    assert log.last_stable_offset == 3
    fetch = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert [o for o, _ in records_of(fetch)] == [0, 1, 2]
    assert fetch.aborted_transactions == (AbortedTransaction(7, 1),)
    log.append_end_txn_marker(8, 0, ControlRecordType.ABORT, 1)
    assert _txn_index_entries(log, 0) == [AbortedTxn(7, 1, 4, 3), AbortedTxn(8, 3, 5, 6)]
    fetch = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert fetch.aborted_transactions == (AbortedTransaction(7, 1), AbortedTransaction(8, 3))
    # A fetch starting after producer 7's marker does not see its transaction.
    assert log.read(5, 1 << 20, isolation=Isolation.READ_COMMITTED).aborted_transactions == (
        AbortedTransaction(8, 3),
    )
    assert log.read(6, 1 << 20, isolation=Isolation.READ_COMMITTED).aborted_transactions == ()
    assert log.read(0, 1 << 20).aborted_transactions is None


def test_aborted_transactions_are_collected_from_later_segments(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"t1", pid=7, epoch=0, seq=0, txn=True))
    log.roll()
    log.append_as_leader(batch(b"t2", pid=7, epoch=0, seq=1, txn=True))
    log.roll()
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
    assert log.segments.base_offsets() == [0, 1, 2]
    assert _txn_index_entries(log, 2) == [AbortedTxn(7, 0, 2, 3)]
    fetch = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert records_of(fetch) == [(0, b"t1")]
    assert fetch.aborted_transactions == (AbortedTransaction(7, 0),)


def test_high_watermark_setter_and_provider_bound_the_last_stable_offset(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_records([SimpleRecord(b"a"), SimpleRecord(b"b")])
    log.append_as_leader(batch(b"t1", b"t2", pid=7, epoch=0, seq=0, txn=True))
    log.append_end_txn_marker(7, 0, ControlRecordType.COMMIT, 0)
    log.append_records([SimpleRecord(b"c")])
    assert log.log_end_offset == 6
    log.high_watermark = 1
    assert (log.high_watermark, log.last_stable_offset) == (1, 1)
    log.high_watermark = 4
    # The commit marker (offset 4) is not below the high watermark: the transaction is not stable yet.
    assert log.last_stable_offset == 2
    assert [o for o, _ in records_of(log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED))] == [0, 1]
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == [0, 1, 2, 3]
    log.high_watermark = 5
    assert log.last_stable_offset == 5
    log.high_watermark = 100
    assert log.high_watermark == 6 and log.last_stable_offset == 6
    hw = [3]
    log.set_high_watermark_provider(lambda: hw[0])
    assert (log.high_watermark, log.last_stable_offset) == (3, 3)
    hw[0] = -5
    assert log.high_watermark == log.log_start_offset == 0
    log.set_high_watermark_provider(None)
    assert log.high_watermark == 6
    log._check()


# -- roll -------------------------------------------------------------------------------------------------------


def test_segment_bytes_rolls_before_an_append_that_would_exceed_it(pdir: Path, clock: ManualClock) -> None:
    size = len(batch(b"v"))
    log = open_log(pdir, clock, segment_bytes=3 * size)
    infos = [log.append_as_leader(batch(b"v")) for _ in range(7)]
    assert [i.segment_base_offset for i in infos] == [0, 0, 0, 3, 3, 3, 6]
    assert log.segments.base_offsets() == [0, 3, 6]
    assert all(s.size <= 3 * size for s in log.segments.values())
    log._check()


def test_segment_ms_uses_record_timestamps(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=1_000)
    # The first batch's max timestamp (T0 + 500) is what incoming max timestamps are measured against.
    log.append_as_leader(batch(b"a", b"b", ts=[T0, T0 + 500]))
    log.append_as_leader(batch(b"c", ts=T0 + 1_500))
    log.append_as_leader(batch(b"old", ts=T0 - 10_000))
    assert log.segments.base_offsets() == [0]
    # Wall clock time does not matter while records carry timestamps.
    clock.advance(10_000_000)
    log.append_as_leader(batch(b"d", ts=T0 + 1_000))
    assert log.segments.base_offsets() == [0]
    info = log.append_as_leader(batch(b"e", ts=T0 + 1_501))
    assert info.segment_base_offset == 5 and log.segments.base_offsets() == [0, 5]
    # The new segment measures from its own first batch.
    log.append_as_leader(batch(b"f", ts=T0 + 2_501))
    assert log.segments.base_offsets() == [0, 5]
    log.append_as_leader(batch(b"g", ts=T0 + 2_502))
    assert log.segments.base_offsets() == [0, 5, 7]


def test_segment_ms_uses_the_wall_clock_without_timestamps(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=1_000)
    no_ts = batch(b"x", ts=-1)
    clock.advance(400)
    log.append_as_leader(no_ts)
    clock.advance(600)
    # 1000 ms since the segment object was created: not more than segment.ms yet.
    log.append_as_leader(no_ts)
    assert len(log.segments) == 1
    clock.advance(1)
    log.append_as_leader(no_ts)
    assert log.segments.base_offsets() == [0, 2]
    clock.advance(1_000)
    log.append_as_leader(no_ts)
    assert log.segments.base_offsets() == [0, 2]
    clock.advance(1)
    log.append_as_leader(no_ts)
    assert log.segments.base_offsets() == [0, 2, 4]


def test_records_without_timestamps_are_stamped_by_append_records(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=1_000)
    log.append_records([SimpleRecord(b"a")])
    clock.advance(1_000)
    log.append_records([SimpleRecord(b"b")])
    clock.advance(1)
    info = log.append_records([SimpleRecord(b"c")])
    assert info.segment_base_offset == 2 and info.max_timestamp == T0 + 1_001


def test_an_empty_segment_never_rolls_on_time(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=1_000)
    clock.advance(1_000_000)
    log.append_as_leader(batch(b"a", ts=T0 + 5_000_000))
    assert log.segments.base_offsets() == [0]


def test_segment_jitter_shortens_the_roll_time(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=1_000, segment_jitter_ms=400)
    log._rng = random.Random(3)
    jitters = set()
    for round_ in range(8):
        active = log.roll()
        jitter = active.roll_jitter_ms
        jitters.add(jitter)
        assert 0 <= jitter < 400
        start = T0 + 10_000 * (round_ + 1)
        log.append_as_leader(batch(b"first", ts=start))
        log.append_as_leader(batch(b"edge", ts=start + 1_000 - jitter))
        assert log.active_segment is active
        log.append_as_leader(batch(b"over", ts=start + 1_001 - jitter))
        assert log.active_segment is not active
    assert len(jitters) > 3


def test_jitter_is_bounded_by_segment_ms(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_ms=50, segment_jitter_ms=1_000_000)
    jitters = set()
    for _ in range(8):
        log.append_records([SimpleRecord(b"a")])
        jitters.add(log.roll().roll_jitter_ms)
    assert all(0 <= jitter < 50 for jitter in jitters) and len(jitters) > 1


def test_full_offset_index_rolls(pdir: Path, clock: ManualClock) -> None:
    # 5 offset-index slots; the time index (3 slots) only grows with the max timestamp, which stays put.
    log = open_log(pdir, clock, segment_index_bytes=40, index_interval_bytes=0)
    for _ in range(15):
        log.append_as_leader(batch(b"v", ts=T0))
    first = log.segments.first_segment()
    assert first is not None and len(log.segments) > 1
    assert first.offset_index.entries == 5 and first.time_index.entries == 1
    assert log.segments.base_offsets()[:2] == [0, 6]
    log._check()


def test_full_time_index_rolls(pdir: Path, clock: ManualClock) -> None:
    # 3 time-index slots, the last kept for the roll entry: two entries fill it.
    log = open_log(pdir, clock, segment_index_bytes=36, index_interval_bytes=0)
    for i in range(9):
        log.append_as_leader(batch(b"v", ts=T0 + i))
    first = log.segments.first_segment()
    assert first is not None
    assert log.segments.base_offsets() == [0, 3, 6]
    assert first.time_index.entries == 2 and first.offset_index.entries == 2
    assert first.time_index.last_entry.timestamp == T0 + 2
    log._check()


def test_relative_offset_overflow_rolls(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_follower(batch(b"a", base_offset=0))
    log.append_as_follower(batch(b"fits", base_offset=2**31 - 1))
    assert log.segments.base_offsets() == [0]
    info = log.append_as_follower(batch(b"b", b"c", base_offset=2**31 + 5))
    assert info.segment_base_offset == 2**31 + 5
    assert log.segments.base_offsets() == [0, 2**31 + 5]
    assert records_of(log.read(1, 1 << 20)) == [(2**31 - 1, b"fits")]
    assert records_of(log.read(2**31, 1 << 20)) == [(2**31 + 5, b"b"), (2**31 + 6, b"c")]
    log._check()


def test_an_append_spanning_more_than_a_segment_can_address_is_refused(pdir: Path, clock: ManualClock) -> None:
    """Regression (a follower append whose offsets span more than 2**31 - 1 rolled a segment at its first offset,
    then failed in LogSegment.append with IndexOffsetOverflowError): the empty segment stayed above the log end
    offset, so every later leader append failed."""
    log = open_log(pdir, clock)
    log.append_as_follower(batch(b"a", base_offset=0))
    wide = batch(b"b", base_offset=10) + batch(b"c", base_offset=10 + 2**31)
    with pytest.raises(InvalidRecordError, match="do not fit one segment"):
        log.append_as_follower(wide)
    assert log.segments.base_offsets() == [0] and log.log_end_offset == 1
    assert log.append_as_leader(batch(b"d")).first_offset == 1
    log._check()


def test_roll_trims_indexes_snapshots_producer_state_and_flushes(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, index_interval_bytes=0)
    for i in range(4):
        log.append_as_leader(batch(b"v", pid=3, epoch=0, seq=i, ts=T0 + i))
    old = log.active_segment
    assert offset_index_file(pdir, 0).stat().st_size == 10_485_760
    assert log.recovery_point == 0
    new = log.roll()
    assert new.base_offset == 4 and log.active_segment is new
    assert offset_index_file(pdir, 0).stat().st_size == 8 * old.offset_index.entries == 8 * 3
    # The final time-index entry (max timestamp at roll) is appended before trimming.
    assert time_index_file(pdir, 0).stat().st_size == 12 * old.time_index.entries
    assert old.time_index.last_entry.timestamp == T0 + 3
    assert offset_index_file(pdir, 4).stat().st_size == 10_485_760
    assert producer_snapshot_file(pdir, 4).exists() and 4 in log.producer_state.snapshot_offsets()
    assert log.recovery_point == 4
    # Rolling again at the same offset keeps the empty active segment.
    assert log.roll() is new and log.segments.base_offsets() == [0, 4]
    assert log.roll(10) is not new and log.segments.base_offsets() == [0, 4, 10]
    assert log.log_end_offset == 4
    log.append_as_follower(batch(b"w", base_offset=10))
    assert log.log_end_offset == 11
    log._check()


def test_roll_can_defer_the_flush(pdir: Path, clock: ManualClock) -> None:
    pending: list[object] = []
    config = LogConfig()
    log = load_log(pdir, config, clock=clock, run_async=pending.append)
    log.append_records([SimpleRecord(b"a")])
    log.roll()
    assert log.recovery_point == 0 and len(pending) == 1
    pending.pop()()  # type: ignore[operator]
    assert log.recovery_point == 1


# -- read -------------------------------------------------------------------------------------------------------


def _multi_segment_log(pdir: Path, clock: ManualClock, **props: Any) -> tuple[Log, list[tuple[int, int]]]:
    """A log of batches of 1-3 records over several segments; returns it with each batch's offset range."""
    size = len(batch(b"v00", b"v01", b"v02"))
    log = open_log(pdir, clock, segment_bytes=3 * size, index_interval_bytes=100, **props)
    ranges = []
    for i in range(30):
        count = 1 + i % 3
        info = log.append_as_leader(batch(*[b"v%02d" % i] * count, ts=T0 + 100 * i))
        ranges.append((info.first_offset, info.last_offset))
    assert len(log.segments) > 5
    return log, ranges


def test_read_from_every_offset_returns_the_batch_holding_it(pdir: Path, clock: ManualClock) -> None:
    log, ranges = _multi_segment_log(pdir, clock)
    for first, last in ranges:
        for offset in range(first, last + 1):
            fetch = log.read(offset, 1)
            (found,) = fetch.batches()
            assert (found.base_offset, found.last_offset) == (first, last)
            holder = log.segments.floor_segment(offset)
            assert holder is not None and fetch.segment_base_offset == holder.base_offset
            whole = log.read(offset, 1 << 20)
            segment_end = log.segments.higher_segment(fetch.segment_base_offset)
            end = log.log_end_offset if segment_end is None else segment_end.base_offset
            # A read never crosses into the next segment.
            assert whole.batches()[0].base_offset == first and whole.batches()[-1].last_offset == end - 1
    assert log.read(log.log_end_offset, 1 << 20).records == b""
    log._check()


def test_read_max_bytes_and_min_one_message(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    sizes = [log.append_as_leader(batch(b"x" * (10 * i + 1))).valid_bytes for i in range(5)]
    assert [b.base_offset for b in log.read(0, 1).batches()] == [0]
    # Without min_one_message a batch larger than max_bytes is cut, as in Kafka's LogSegment.read.
    cut = log.read(0, 1, min_one_message=False)
    assert len(cut.records) == 1 and cut.batches() == []
    assert [b.base_offset for b in log.read(0, sizes[0] + sizes[1]).batches()] == [0, 1]
    # A limit inside a batch cuts the bytes (as Kafka does); only whole batches are decoded.
    partial = log.read(1, sizes[1] + sizes[2] + 5)
    assert len(partial.records) == sizes[1] + sizes[2] + 5
    assert [b.base_offset for b in partial.batches()] == [1, 2]
    assert log.read(0, 0).batches()[0].base_offset == 0
    assert log.read(0, 0, min_one_message=False).records == b""
    with pytest.raises(ValueError):
        log.read(0, -1)


def test_read_isolation_bounds(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_bytes=len(batch(b"v0")) * 2)
    for i in range(8):
        log.append_as_leader(batch(b"v%d" % i))
    log.high_watermark = 5
    offsets = [o for o, _ in read_all(log, Isolation.READ_UNCOMMITTED)]
    assert offsets == [0, 1, 2, 3, 4]
    assert [o for o, _ in read_all(log, Isolation.READ_COMMITTED)] == offsets
    assert [o for o, _ in read_all(log)] == list(range(8))
    for offset in range(5, 9):
        assert log.read(offset, 1 << 20).records == b""
        assert log.read(offset, 1 << 20, isolation=Isolation.READ_COMMITTED).records == b""
    assert records_of(log.read(6, 1 << 20, isolation=Isolation.LOG_END)) == [(6, b"v6"), (7, b"v7")]
    assert records_of(log.read(0, 1 << 20, isolation=Isolation.LOG_END, max_offset=1)) == [(0, b"v0")]
    assert records_of(log.read(2, 1 << 20, max_offset=4)) == [(2, b"v2"), (3, b"v3")]


def test_read_outside_the_log_raises_and_at_the_end_is_empty(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    for i in range(4):
        log.append_as_leader(batch(b"v%d" % i))
    assert log.delete_records_before(2) == 2
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1 << 20)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1 << 20)
    at_end = log.read(4, 1 << 20, isolation=Isolation.LOG_END)
    assert at_end.records == b"" and at_end.offset == 4
    assert records_of(log.read(2, 1 << 20)) == [(2, b"v2"), (3, b"v3")]


# -- offset for timestamp ---------------------------------------------------------------------------------------


def test_offset_for_timestamp_across_segments(pdir: Path, clock: ManualClock) -> None:
    log, ranges = _multi_segment_log(pdir, clock)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (log.log_end_offset, -1)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (ranges[-1][1], T0 + 2_900)
    for i, (first, _) in enumerate(ranges):
        assert log.offset_for_timestamp(T0 + 100 * i) == (first, T0 + 100 * i)
        assert log.offset_for_timestamp(T0 + 100 * i - 50) == (first, T0 + 100 * i)
    assert log.offset_for_timestamp(0) == (0, T0)
    assert log.offset_for_timestamp(T0 + 2_901) is None
    log.delete_records_before(ranges[10][0] + 1)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (ranges[10][0] + 1, -1)
    # Records below the log start offset are not found any more.
    assert log.offset_for_timestamp(0) == (ranges[10][0] + 1, T0 + 1_000)


def test_offset_for_timestamp_finds_the_first_record_inside_a_batch(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a", b"b", b"c", ts=[T0 + 10, T0 + 30, T0 + 20]))
    assert log.offset_for_timestamp(T0 + 15) == (1, T0 + 30)
    assert log.offset_for_timestamp(T0 + 30) == (1, T0 + 30)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (2, T0 + 30)


def test_max_timestamp_of_an_empty_log(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
    assert log.offset_for_timestamp(T0) is None


# -- flush ------------------------------------------------------------------------------------------------------


def test_flush_advances_the_recovery_point(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    for i in range(5):
        log.append_as_leader(batch(b"v%d" % i))
    assert log.recovery_point == 0
    clock.advance(7)
    log.flush(3)
    assert log.recovery_point == 3 and log.last_flush_ms == T0 + 7
    log.flush(2)
    assert log.recovery_point == 3
    log.flush(100)
    assert log.recovery_point == 5
    log.append_as_leader(batch(b"x"))
    log.flush()
    assert log.recovery_point == 6
    log._check()


def test_flush_messages_triggers_a_flush(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, flush_messages=3)
    log.append_as_leader(batch(b"a", b"b"))
    assert log.recovery_point == 0
    log.append_as_leader(batch(b"c"))
    assert log.recovery_point == 3
    log.append_as_leader(batch(b"d", b"e"))
    assert log.recovery_point == 3
    log.append_as_leader(batch(b"f", b"g", b"h", b"i"))
    assert log.recovery_point == 9


# -- truncation -------------------------------------------------------------------------------------------------


def _three_segment_log(pdir: Path, clock: ManualClock, **props: Any) -> Log:
    """Offsets 0-8 in segments [0-2], [3-5], [6-8], one record per batch, leader epochs 0, 1, 2 per segment."""
    log = open_log(pdir, clock, segment_bytes=3 * len(batch(b"v0")), **props)
    for i in range(9):
        log.append_as_leader(batch(b"v%d" % i, ts=T0 + i), leader_epoch=i // 3)
    assert log.segments.base_offsets() == [0, 3, 6]
    return log


def test_truncate_inside_the_active_segment(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    log.high_watermark = 9
    assert log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.segments.base_offsets() == [0, 3, 6]
    assert [o for o, _ in read_all(log)] == list(range(8))
    assert not log.truncate_to(8) and not log.truncate_to(100)
    info = log.append_as_leader(batch(b"new"))
    assert info.first_offset == 8 and records_of(log.read(8, 100, isolation=Isolation.LOG_END)) == [(8, b"new")]
    log._check()


def test_bug_a_lock_free_read_overlapping_a_truncation_served_bytes_of_the_rewritten_tail(
    pdir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a read found its byte range, a follower truncation cut the tail and appended other batches, then the
    read copied that range: bytes not starting at a batch (found by the concurrency stress, ~1 run in 60). The
    truncation lands exactly after the segment's read (lookup and copy) here, before the log's read returns; the
    read must answer with the new tail."""
    log = _three_segment_log(pdir, clock)
    original = LogSegment.read
    fired: list[bool] = []

    def truncate_after_the_copy(segment: LogSegment, *args: Any, **kwargs: Any) -> Any:
        fetched = original(segment, *args, **kwargs)
        if not fired:
            fired.append(True)
            assert log.truncate_to(7)
            log.append_as_follower(batch(b"r" * 100, b"x", base_offset=7))
        return fetched

    monkeypatch.setattr(LogSegment, "read", truncate_after_the_copy)
    fetch = log.read(7, 1 << 20, isolation=Isolation.LOG_END)
    assert fired
    assert records_of(fetch) == [(7, b"r" * 100), (8, b"x")]


def test_truncate_inside_a_batch_removes_the_whole_batch(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a", b"b"))
    log.append_as_leader(batch(b"c", b"d", b"e"))
    assert log.truncate_to(3)
    assert log.log_end_offset == 2 and read_all(log) == [(0, b"a"), (1, b"b")]


def test_an_epoch_truncated_from_the_end_is_assigned_again(pdir: Path, clock: ManualClock) -> None:
    """The compiled epoch check keeps the latest entry's epoch while that entry is the list's last: once a
    truncation drops it, the next append compares with the entry now last, and takes the same epoch anew."""
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    log.append_as_leader(batch(b"b"), leader_epoch=1)
    log.append_as_leader(batch(b"c"), leader_epoch=1)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, 1)]
    assert log.truncate_to(1)
    assert log.leader_epochs.entries == [EpochEntry(0, 0)]
    log.append_as_leader(batch(b"b2"), leader_epoch=1)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, 1)]
    log.append_as_leader(batch(b"c2"), leader_epoch=0)  # an older epoch: refused by the cache, stamped as given
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, 1)]
    log._check()


def test_truncate_at_a_segment_boundary(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    assert log.truncate_to(7)
    assert log.truncate_to(6)
    # The segment starting at the target stays, empty (Kafka deletes only segments above the target).
    assert log.segments.base_offsets() == [0, 3, 6] and log.log_end_offset == 6 and log.active_segment.size == 0
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, 3)]
    assert log.truncate_to(3)
    assert log.segments.base_offsets() == [0, 3] and log.active_segment.size == 0
    assert log.leader_epochs.entries == [EpochEntry(0, 0)]
    assert LeaderEpochCheckpointFile(pdir / LEADER_EPOCH_CHECKPOINT_FILE).read() == [EpochEntry(0, 0)]
    assert log.recovery_point <= 3
    info = log.append_as_leader(batch(b"again"), leader_epoch=4)
    assert info.first_offset == 3 and info.segment_base_offset == 3
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(4, 3)]
    log._check()


def test_truncated_segments_are_renamed_then_deleted_once_due(pdir: Path, clock: ManualClock) -> None:
    """Also a regression (the deleter closed a segment after unlinking it, and closing trims its untrimmed
    indexes by name): deleting the truncated-away active segment raised FileNotFoundError."""
    log = _three_segment_log(pdir, clock, file_delete_delay_ms=DELETE_DELAY)
    doomed = log.segments.get(6)
    assert doomed is not None
    log.truncate_to(4)
    assert log.segments.base_offsets() == [0, 3] and log.log_end_offset == 4
    assert log_file(pdir, 6).name + DELETED_SUFFIX in names(pdir)
    assert log_file(pdir, 6).name not in names(pdir)
    assert producer_snapshot_file(pdir, 6).name + DELETED_SUFFIX in names(pdir)
    assert log.deleter.run_due().deleted_segments == 0
    clock.advance(DELETE_DELAY - 1)
    assert log.deleter.run_due().deleted_segments == 0
    clock.advance(1)
    run = log.deleter.run_due()
    assert run.deleted_segments == 1 and doomed.log.closed
    assert not any(name.endswith(DELETED_SUFFIX) for name in names(pdir))
    assert 6 not in log.producer_state.snapshot_offsets()
    log._check()


def test_truncate_below_the_first_segment_truncates_fully(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.truncate_fully_and_start_at(100)
    for i in range(3):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=1)
    log.roll()
    log.append_as_leader(batch(b"v3"), leader_epoch=1)
    assert log.segments.base_offsets() == [100, 103] and log.log_start_offset == 100
    assert log.truncate_to(50)
    assert log.segments.base_offsets() == [50]
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point, log.high_watermark) == (50, 50, 50, 50)
    assert log.leader_epochs.entries == [] and log.producer_state.snapshot_offsets() == []
    assert log.read(50, 100).records == b""
    assert log.append_as_leader(batch(b"x")).first_offset == 50
    log._check()


def test_truncate_fully_at_an_existing_base_offset_starts_a_fresh_segment(pdir: Path, clock: ManualClock) -> None:
    """Regression (truncate_fully_and_start_at reused the files of a segment with the same base offset): the
    new active segment opened the old ``.log`` before it was renamed to ``.deleted``, so the log served the old
    records from a file the deleter would unlink."""
    log = _three_segment_log(pdir, clock)
    log.truncate_fully_and_start_at(6)
    active = log.active_segment
    assert log.segments.base_offsets() == [6] and active.size == 0
    assert active.log.path == log_file(pdir, 6) and log_file(pdir, 6).stat().st_size == 0
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)
    assert log.read(6, 1 << 20).records == b""
    log.append_as_leader(batch(b"fresh"))
    clock.advance(DELETE_DELAY)
    assert log.deleter.run_due().deleted_segments == 3
    assert read_all(log) == [(6, b"fresh")]
    assert log_file(pdir, 6).stat().st_size == active.size > 0
    log.truncate_fully_and_start_at(0)
    assert log.segments.base_offsets() == [0] and log.active_segment.size == 0
    log._check()


def test_truncation_rebuilds_producer_state(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, segment_bytes=3 * len(batch(b"v", pid=1, epoch=0, seq=0)))
    for seq in range(5):
        log.append_as_leader(batch(b"v", pid=1, epoch=0, seq=seq))
    log.append_as_leader(batch(b"w", pid=2, epoch=0, seq=0))
    log.append_as_leader(batch(b"t", pid=3, epoch=0, seq=0, txn=True))
    assert log.last_stable_offset == 6
    assert log.truncate_to(4)
    state = log.producer_state
    assert state.last_entry(2) is None and state.last_entry(3) is None
    assert state.last_entry(1).last_seq == 3  # type: ignore[union-attr]
    assert log.last_stable_offset == log.log_end_offset == 4
    # The producer whose last batch was cut continues from the sequence the log still holds.
    assert log.append_as_leader(batch(b"v", pid=1, epoch=0, seq=4)).first_offset == 4
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(b"v", pid=1, epoch=0, seq=6))
    assert log.append_as_leader(batch(b"w", pid=2, epoch=0, seq=0)).first_offset == 5
    log._check()
    log.producer_state._check()


def test_truncate_to_a_negative_offset_is_refused(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    with pytest.raises(ValueError):
        log.truncate_to(-1)


# -- delete records ---------------------------------------------------------------------------------------------


def test_delete_records_before_raises_the_log_start_offset(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock, retention_ms=-1)
    log.high_watermark = 7
    assert log.delete_records_before(4) == 4
    assert log.delete_records_before(2) == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(8)
    assert log.log_start_offset == 4 and log.leader_epochs.entries == [EpochEntry(1, 4), EpochEntry(2, 6)]
    assert log.segments.base_offsets() == [0, 3, 6]
    assert [o for o, _ in read_all(log)] == list(range(4, 9))
    plan = log.delete_old_segments()
    assert [d.base_offset for d in plan.deletions] == [0] and log.segments.base_offsets() == [3, 6]
    assert log.log_start_offset == 4
    assert log.delete_records_before(7) == 7
    log.delete_old_segments()
    assert log.segments.base_offsets() == [6] and log.log_start_offset == 7
    assert log_file(pdir, 3).name + DELETED_SUFFIX in names(pdir)
    log._check()


def test_start_offset_rule_applies_without_the_delete_policy(pdir: Path, clock: ManualClock) -> None:
    # An empty policy: a compacted topic now refuses these keyless records (issue 12).
    log = _three_segment_log(pdir, clock, cleanup_policy="", retention_ms=1, retention_bytes=1)
    clock.advance(10**9)
    assert log.delete_old_segments().deletions == ()
    log.delete_records_before(6)
    assert [d.base_offset for d in log.delete_old_segments().deletions] == [0, 3]
    assert log.segments.base_offsets() == [6]


# -- retention --------------------------------------------------------------------------------------------------


def _aged_log(pdir: Path, clock: ManualClock, **props: Any) -> Log:
    """Segments [0-2], [3-5], [6-8] with record timestamps one hour apart per segment (T0, +1h, +2h)."""
    log = open_log(pdir, clock, segment_bytes=3 * len(batch(b"v0")), file_delete_delay_ms=DELETE_DELAY, **props)
    for i in range(9):
        log.append_as_leader(batch(b"v%d" % i, ts=T0 + 3_600_000 * (i // 3)))
    assert log.segments.base_offsets() == [0, 3, 6]
    return log


def test_retention_ms_deletes_old_segments_oldest_first(pdir: Path, clock: ManualClock) -> None:
    log = _aged_log(pdir, clock, retention_ms=3_600_000)
    clock.set(T0 + 3_600_000)
    assert log.delete_old_segments().deletions == ()
    clock.set(T0 + 3_600_001)
    plan = log.delete_old_segments()
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [(0, "retention.ms")]
    assert log.segments.base_offsets() == [3, 6] and log.log_start_offset == 3
    clock.set(T0 + 2 * 3_600_000 + 1)
    log.delete_old_segments()
    assert log.segments.base_offsets() == [6] and log.log_start_offset == 6
    assert [o for o, _ in read_all(log)] == [6, 7, 8]
    log._check()


def test_retention_bytes_arithmetic_on_real_segments(pdir: Path, clock: ManualClock) -> None:
    size = len(batch(b"v0"))
    log = _aged_log(pdir, clock, retention_bytes=6 * size - 1)
    assert log.size_in_bytes == 9 * size
    # Excess 3 * size + 1: only the first segment (3 * size) fits in it.
    plan = log.delete_old_segments()
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [(0, "retention.bytes")]
    assert log.delete_old_segments().deletions == ()
    log.config = LogConfig.from_properties({"retention.bytes": str(3 * size)}, log.config)
    assert [d.base_offset for d in log.delete_old_segments().deletions] == [3]
    assert log.size_in_bytes == 3 * size and log.log_start_offset == 6


def test_retention_never_passes_the_high_watermark(pdir: Path, clock: ManualClock) -> None:
    log = _aged_log(pdir, clock, retention_ms=1)
    clock.advance(10 * 3_600_000)
    log.high_watermark = 5
    assert [d.base_offset for d in log.delete_old_segments().deletions] == [0]
    assert log.segments.base_offsets() == [3, 6]
    log.high_watermark = 6
    assert [d.base_offset for d in log.delete_old_segments().deletions] == [3]
    assert log.segments.base_offsets() == [6] and log.log_start_offset == 6
    log._check()


def test_retention_rolls_the_active_segment_when_everything_qualifies(pdir: Path, clock: ManualClock) -> None:
    log = _aged_log(pdir, clock, retention_ms=1)
    clock.advance(10 * 3_600_000)
    plan = log.delete_old_segments()
    assert plan.roll_first and [d.base_offset for d in plan.deletions] == [0, 3, 6]
    assert log.segments.base_offsets() == [9] and log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (9, 9, 9)
    assert log.recovery_point == 9 and producer_snapshot_file(pdir, 9).exists()
    # The last, empty segment is never deleted.
    clock.advance(10 * 3_600_000)
    assert log.delete_old_segments().deletions == ()
    assert log.append_as_leader(batch(b"next")).first_offset == 9
    log._check()


def test_deleted_segment_files_are_renamed_then_removed_after_the_delay(pdir: Path, clock: ManualClock) -> None:
    log = _aged_log(pdir, clock, retention_ms=1)
    clock.advance(3_600_000 + 2)
    log.delete_old_segments()
    assert log.segments.base_offsets() == [6]
    for base in (0, 3):
        for make in (log_file, offset_index_file, time_index_file):
            assert make(pdir, base).name not in names(pdir)
            assert make(pdir, base).name + DELETED_SUFFIX in names(pdir)
    assert producer_snapshot_file(pdir, 3).name + DELETED_SUFFIX in names(pdir)
    assert log.deleter.pending_bytes() == 6 * len(batch(b"v0"))
    clock.advance(DELETE_DELAY - 1)
    assert log.deleter.run_due().deleted_segments == 0
    clock.advance(1)
    run = log.deleter.run_due()
    assert run.deleted_segments == 2 and run.deleted_bytes == 6 * len(batch(b"v0"))
    assert not any(name.endswith(DELETED_SUFFIX) for name in names(pdir))
    assert log.deleter.pending() == []


def test_snapshots_of_deleted_segments_leave_producer_state(pdir: Path, clock: ManualClock) -> None:
    """Regression (deleted segments' producer snapshots were renamed behind the ProducerStateManager's back): the
    manager kept listing ``.snapshot`` files that no longer existed."""
    log = _aged_log(pdir, clock, retention_ms=1)
    assert log.producer_state.snapshot_offsets() == [3, 6]
    clock.advance(3_600_000 + 2)
    log.delete_old_segments()
    assert log.producer_state.snapshot_offsets() == [6]
    assert producer_snapshot_file(pdir, 3).name + DELETED_SUFFIX in names(pdir)
    log.producer_state._check()


# -- reader-safe deletion ---------------------------------------------------------------------------------------


def test_a_held_segment_is_read_while_deleted_and_closed_on_release(pdir: Path, clock: ManualClock) -> None:
    readers = SegmentReaders()
    deleter = SegmentDeleter(clock, readers, force_after_ms=30_000)
    log = _aged_log(pdir, clock, retention_ms=1, deleter=deleter, readers=readers)
    first = log.segments.first_segment()
    assert first is not None
    expected = log.read(0, 1 << 20).records

    def reread() -> bytes:
        fetch = first.read(0, 1 << 20)
        assert fetch is not None
        return fetch.records

    with readers.hold(first):
        clock.advance(10 * 3_600_000)
        log.delete_old_segments()
        assert reread() == expected
        clock.advance(DELETE_DELAY)
        run = deleter.run_due()
        assert run.waiting_for_readers == 1 and run.deleted_segments == 2
        assert log_file(pdir, 0).name + DELETED_SUFFIX in names(pdir)
        assert reread() == expected
        clock.advance(30_000)
        run = deleter.run_due()
        assert (run.forced, run.deleted_segments) == (1, 1)
        # Unlinked, yet the reader still reads the right bytes through its open descriptor and index map.
        assert not any(name.startswith("00000000000000000000") for name in names(pdir))
        assert not first.log.closed and reread() == expected
        assert first.translate_offset(2) is not None
        assert [b.base_offset for b in FetchDataInfo(0, reread(), 0, 0).batches()] == [0, 1, 2]
    assert first.log.closed and deleter.pending() == []


def test_release_of_a_forced_untrimmed_segment_does_not_reopen_its_unlinked_indexes(
    pdir: Path, clock: ManualClock
) -> None:
    """Regression (the last reader's release closed a force-deleted segment with ``LogSegment.close``, which trims
    the indexes by reopening their unlinked names): the reader got FileNotFoundError on leaving ``hold``."""
    readers = SegmentReaders()
    deleter = SegmentDeleter(clock, readers, force_after_ms=0)
    log = _three_segment_log(pdir, clock, deleter=deleter, readers=readers, file_delete_delay_ms=0)
    active = log.active_segment
    with readers.hold(active):
        log.truncate_to(3)
        assert deleter.run_due().forced == 1
        assert not active.log.closed and active.translate_offset(7) is not None
    assert active.log.closed and active.offset_index.entries >= 0
    assert not any(name.endswith(DELETED_SUFFIX) for name in names(pdir))


def test_close_when_released_closes_now_or_on_the_last_release(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    first, second = log.segments.values()[:2]
    readers = SegmentReaders()
    for segment in (first, second):
        segment.rename_to_deleted()
        for path in (segment.log.path, segment.offset_index.path, segment.time_index.path):
            path.unlink()
    assert not readers.close_when_released(first) and first.log.closed
    with readers.hold(second), readers.hold(second):
        assert readers.readers(second) == 2
        assert readers.close_when_released(second) and not second.log.closed
    assert second.log.closed and readers.readers(second) == 0


def test_a_reader_that_releases_before_the_force_time_lets_the_deleter_close(pdir: Path, clock: ManualClock) -> None:
    readers = SegmentReaders()
    deleter = SegmentDeleter(clock, readers, force_after_ms=30_000)
    log = _aged_log(pdir, clock, retention_ms=1, deleter=deleter, readers=readers)
    first = log.segments.first_segment()
    assert first is not None
    with readers.hold(first):
        clock.advance(10 * 3_600_000)
        log.delete_old_segments()
        clock.advance(DELETE_DELAY)
        assert deleter.run_due().waiting_for_readers == 1
    assert not first.log.closed
    assert deleter.run_due().deleted_segments == 1 and first.log.closed
    assert not any(name.endswith(DELETED_SUFFIX) for name in names(pdir))


def test_read_skips_a_segment_closed_between_lookup_and_hold(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    first = log.segments.first_segment()
    assert first is not None
    log.delete_records_before(4)
    log.delete_old_segments()
    log.deleter.run_due(everything=True)
    assert first.log.closed
    # As if the reader had looked the segment up just before it was deleted.
    log.segments.add(first)
    try:
        assert [o for o, _ in records_of(log.read(4, 1 << 20))] == [4, 5]
    finally:
        log.segments.remove(0)


def _deleting_on_first_hold(log: Log, readers: SegmentReaders, log_start: int) -> list[LogSegment]:
    """Make the first hold a read takes delete (and close) the segment it looked up, as a retention deletion
    running between the reader's lookup and its hold would: the hook runs just before the hold is taken."""
    take = readers.acquire
    deleted: list[LogSegment] = []

    def acquire(segment: LogSegment) -> bool:
        if not deleted:
            deleted.append(segment)
            log.delete_records_before(log_start)
            log.delete_old_segments()
            log.deleter.run_due(everything=True)
            assert segment.log.closed
        return take(segment)

    readers.acquire = acquire
    return deleted


def test_read_retries_a_segment_deleted_between_lookup_and_hold(pdir: Path, clock: ManualClock) -> None:
    readers = SegmentReaders()
    log = _three_segment_log(pdir, clock, readers=readers, file_delete_delay_ms=0)
    deleted = _deleting_on_first_hold(log, readers, 3)
    assert [o for o, _ in records_of(log.read(1, 1 << 20))] == [3, 4, 5]
    assert [s.base_offset for s in deleted] == [0] and not log.is_offline


def test_a_bounded_read_retries_a_segment_deleted_between_lookup_and_hold(pdir: Path, clock: ManualClock) -> None:
    """A read bounded inside a segment (high watermark below the log end) translates the bound in it before
    reading: for a segment closed between lookup and hold that translation is retried like its read, not an
    EBADF taking the dir offline (fails so without the closed check in ``Log._position_of``)."""
    readers = SegmentReaders()
    log = _three_segment_log(pdir, clock, readers=readers, file_delete_delay_ms=0)
    log.high_watermark = 5
    deleted = _deleting_on_first_hold(log, readers, 3)
    assert [o for o, _ in records_of(log.read(1, 1 << 20))] == [3, 4]
    assert [s.base_offset for s in deleted] == [0] and not log.is_offline


def test_offset_for_timestamp_skips_a_segment_unlinked_under_it(pdir: Path, clock: ManualClock) -> None:
    """Regression (offset_for_timestamp asked largest_timestamp() before holding the segment; for a segment without
    record timestamps that stats the file by name): a segment deleted since the lookup raised FileNotFoundError."""
    readers = SegmentReaders()
    deleter = SegmentDeleter(clock, readers, force_after_ms=0)
    log = open_log(pdir, clock, deleter=deleter, readers=readers, file_delete_delay_ms=0)
    log.append_as_leader(batch(b"untimed", ts=-1))
    log.roll()
    log.append_as_leader(batch(b"timed", ts=T0 + 5))
    first = log.segments.first_segment()
    assert first is not None and first.max_timestamp_so_far < 0
    with readers.hold(first):
        log.delete_records_before(1)
        log.delete_old_segments()
        assert deleter.run_due().forced == 1 and not first.log.path.exists()
        # As if the lookup had happened just before the deletion.
        log.segments.add(first)
        try:
            assert log.offset_for_timestamp(T0) == (1, T0 + 5)
        finally:
            log.segments.remove(0)


def test_retention_snapshot_waits_for_a_mutation_in_progress(pdir: Path, clock: ManualClock) -> None:
    """Regression (Log.snapshot(), which the manager's cleanup jobs call from their own thread, did not take the log
    lock): it could stat a segment file that a truncation was renaming and fail with FileNotFoundError."""
    log = _three_segment_log(pdir, clock)
    log._lock = lock = ContendedLock(log._lock)  # type: ignore[assignment]
    taken, release = threading.Event(), threading.Event()
    results: list[int] = []

    def writer() -> None:
        with log._lock:
            taken.set()
            release.wait(FAILURE_DEADLINE_S)

    def job() -> None:
        results.append(len(log.snapshot().segments))

    holder = threading.Thread(target=writer)
    holder.start()
    assert taken.wait(FAILURE_DEADLINE_S)
    snapshotter = threading.Thread(target=job)
    snapshotter.start()
    wait_until(lambda: lock.contended.is_set() or not snapshotter.is_alive(), "the snapshot to wait or end")
    assert snapshotter.is_alive() and results == []
    release.set()
    snapshotter.join(FAILURE_DEADLINE_S)
    holder.join(FAILURE_DEADLINE_S)
    assert results == [3]

def test_readers_in_threads_while_the_writer_rolls_truncates_and_deletes(pdir: Path, clock: ManualClock) -> None:
    """Readers never see an error but OffsetOutOfRangeError (the log start moved past them) while segments are
    rolled, truncated away and deleted at once (no delete delay, forced deletion)."""
    readers = SegmentReaders()
    deleter = SegmentDeleter(clock, readers, force_after_ms=0)
    # No offset-index entries and no timestamp lookups: an index resized (trimmed at roll, re-expanded at
    # truncation) under a reader fails that reader in the format layer (AbstractIndex.resize unmaps it).
    log = open_log(
        pdir, clock, deleter=deleter, readers=readers, file_delete_delay_ms=0, segment_bytes=1_000,
        index_interval_bytes=2**31 - 1, retention_bytes=3_000,
    )
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            try:
                offset = rng.randint(log.log_start_offset, log.log_end_offset)
                fetch = log.read(offset, rng.choice([1, 500, 1 << 20]), isolation=rng.choice(list(Isolation)))
                for found in fetch.batches():
                    found.ensure_valid()
                    assert all(r.value is not None and r.value.startswith(b"v") for r in found.records())
                reads[0] += 1
            except OffsetOutOfRangeError:
                pass
            except BaseException as err:  # reported to the main thread
                errors.append(err)
                return

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    rng = random.Random(0)
    try:
        for step in range(300):
            clock.advance(10)
            choice = rng.random()
            if choice < 0.75:
                log.append_records([SimpleRecord(b"v%d" % step * rng.randint(1, 20))])
            elif choice < 0.85 and log.log_end_offset > log.log_start_offset:
                log.truncate_to(rng.randint(log.log_start_offset, log.log_end_offset - 1))
            elif choice < 0.95:
                log.delete_old_segments()
            else:
                log.roll()
            deleter.run_due()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    assert reads[0] > 0
    log._check()

# -- close and reopen -------------------------------------------------------------------------------------------


def test_close_then_reopen_after_a_clean_shutdown_recovers_nothing(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    log.append_as_leader(batch(b"p0", pid=5, epoch=2, seq=0))
    log.append_as_leader(batch(b"t0", pid=6, epoch=0, seq=0, txn=True))
    log.delete_records_before(2)
    before = read_all(log)
    end, epochs = log.log_end_offset, log.leader_epochs.entries
    log.close()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(b"closed"))
    assert producer_snapshot_file(pdir, end).exists()
    reopened = open_log(pdir, clock, clean=True, segment_bytes=3 * len(batch(b"v0")))
    assert reopened.recovery.recovered_segments == 0
    assert (reopened.log_end_offset, reopened.recovery_point) == (end, end)
    assert reopened.segments.base_offsets() == log.segments.base_offsets()
    assert reopened.leader_epochs.entries == epochs
    # The log start offset comes from the caller's checkpoint; here it was not given.
    assert read_all(reopened)[2:] == before
    # Producer state came back from the snapshot: duplicates are detected, the transaction is still open.
    assert reopened.append_as_leader(batch(b"p0", pid=5, epoch=2, seq=0)).duplicate
    assert reopened.last_stable_offset == end - 1
    reopened.append_end_txn_marker(6, 0, ControlRecordType.ABORT, 0)
    assert reopened.read(end - 1, 1 << 20, isolation=Isolation.READ_COMMITTED).aborted_transactions == (
        AbortedTransaction(6, end - 1),
    )
    reopened._check()
    reopened.close()


def test_reopen_after_an_unclean_shutdown_recovers(pdir: Path, clock: ManualClock) -> None:
    log = _three_segment_log(pdir, clock)
    log.flush()
    before = read_all(log)
    # No close(): the process "died" after the flush.
    reopened = open_log(pdir, clock, segment_bytes=3 * len(batch(b"v0")))
    assert reopened.recovery.recovered_segments >= 1
    assert read_all(reopened) == before and reopened.log_end_offset == 9
    reopened._check()



def test_delete_renames_the_directory(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    log.append_records([SimpleRecord(b"a")])
    log.ensure_partition_metadata()
    target = log.delete()
    assert not pdir.exists() and target.parent == pdir.parent
    assert target.name.startswith("topic-0.") and target.name.endswith("-delete")
    assert log_file(target, 0).exists() and (target / "partition.metadata").exists()
    with pytest.raises(KafkaStorageError):
        log.append_records([SimpleRecord(b"b")])


def test_a_full_or_offline_log_dir_refuses_appends_and_an_offline_one_reads(pdir: Path, clock: ManualClock) -> None:
    """A full dir refuses appends only; an offline dir (Kafka's handleLogDirFailure) serves nothing at all."""
    log = open_log(pdir, clock)
    log.dir_state.full = True
    with pytest.raises(LogDirFullError):
        log.append_records([SimpleRecord(b"a")])
    log.dir_state.full = False
    log.append_records([SimpleRecord(b"a")])
    log.dir_state.offline = True
    with pytest.raises(KafkaStorageError):
        log.append_records([SimpleRecord(b"b")])
    with pytest.raises(KafkaStorageError):
        log.truncate_to(0)
    assert log.log_end_offset == 1
    with pytest.raises(KafkaStorageError):
        read_all(log)


# -- arbitrary input --------------------------------------------------------------------------------------------

_FUZZ_DIRS = itertools.count()
_VALID = batch(b"first", b"second", ts=[T0, T0 + 1]) + batch(b"third", pid=3, epoch=0, seq=0)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4).map(
            lambda edits: bytes(_mutate(_VALID, edits))
        ),
        st.integers(0, len(_VALID)).map(lambda cut: _VALID[:cut]),
    ),
    follower=st.booleans(),
)
def test_arbitrary_appends_raise_only_typed_errors_and_write_all_or_nothing(
    tmp_path: Path, data: bytes, follower: bool
) -> None:
    clock = ManualClock(T0)
    pdir = tmp_path / f"fuzz-{next(_FUZZ_DIRS)}"
    log = open_log(pdir, clock, max_message_bytes=10_000)
    before = (log.log_end_offset, log.size_in_bytes)
    try:
        info = log.append_as_follower(data) if follower else log.append_as_leader(data)
    except (InvalidRecordError, RecordBatchTooLargeError, OutOfOrderSequenceError, InvalidProducerEpochError,
            InvalidTxnStateError, TransactionCoordinatorFencedError):
        assert (log.log_end_offset, log.size_in_bytes) == before
    else:
        assert log.size_in_bytes == len(data) and log.log_end_offset == info.last_offset + 1
        for found in log.read(log.log_start_offset, 1 << 20, isolation=Isolation.LOG_END).batches():
            found.ensure_valid()
    log._check()
    log.close()


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytearray:
    out = bytearray(data)
    for position, value in edits:
        out[position] = value
    return out


# -- seeded random stress against an in-memory model -------------------------------------------------------------

TXN_PID = 9
IDEMPOTENT_PID = 4


class _Model:
    """What the log must hold: records by offset (with timestamps), batch boundaries, the transactional
    producer's transactions, and the high watermark the service set.

    Producer state below the log start offset may be forgotten when it is rebuilt (Kafka deletes snapshots at or
    below the log start offset and replays from there): :meth:`reconcile` accepts that, and only that.
    """

    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, int]] = {}
        # base offset -> (last offset, kind): "data", "txn" (a transactional batch), "commit", "abort", or
        # "lost" (a transactional batch whose transaction the log forgot below its start offset).
        self.batches: dict[int, tuple[int, str]] = {}
        self.hw: int | None = None
        # (first, marker) of aborted transactions whose .txnindex entry a recovery rebuilt: its first offset may
        # be an earlier one (see after_recovery).
        self.fuzzy_aborts: set[tuple[int, int]] = set()
        # Timestamps of control records (transaction markers): timestamp lookups find them too, as in Kafka.
        self.marker_stamps: dict[int, int] = {}

    def add(self, first: int, values: list[bytes], stamps: list[int], kind: str) -> None:
        for i, (value, stamp) in enumerate(zip(values, stamps, strict=True)):
            self.records[first + i] = (value, stamp)
        self.batches[first] = (first + max(len(values), 1) - 1, kind)

    def truncate(self, end: int) -> None:
        self.records = {o: r for o, r in self.records.items() if o < end}
        self.marker_stamps = {o: t for o, t in self.marker_stamps.items() if o < end}
        self.batches = {b: v for b, v in self.batches.items() if v[0] < end}
        self.fuzzy_aborts = {(f, m) for f, m in self.fuzzy_aborts if m < end}
        if self.hw is not None:
            self.hw = min(self.hw, end)

    def _walk(self) -> tuple[int | None, list[tuple[int, int]]]:
        open_first: int | None = None
        aborted = []
        for base in sorted(self.batches):
            kind = self.batches[base][1]
            if kind == "txn" and open_first is None:
                open_first = base
            elif kind in ("commit", "abort"):
                if kind == "abort" and open_first is not None:
                    aborted.append((open_first, base))
                open_first = None
        return open_first, aborted

    def open_txn(self) -> int | None:
        """First offset of the open transaction, if any."""
        return self._walk()[0]

    def aborted_ranges(self) -> list[tuple[int, int]]:
        """``(first, marker)`` of every aborted transaction."""
        return self._walk()[1]

    def reconcile(self, log: Log) -> None:
        """After producer state was rebuilt, only a transaction starting below the log start offset may differ:
        a replay from the log start forgets its earlier batches (it then opens at its first batch the replay saw,
        or not at all), and a segment recovery replays whole segments, batches below the log start included."""
        expected = self.open_txn()
        actual = log.producer_state.ongoing_txns.get(TXN_PID)
        if actual == expected:
            return
        start = log.log_start_offset
        below = [first for first in (expected, actual) if first is not None and first < start]
        assert below, (expected, actual, log)
        if expected is not None and expected < start and (actual is None or actual > expected):
            self._relabel("txn", "lost", expected, actual)
        if self.open_txn() != actual:
            assert actual is not None and actual < start and self.batches[actual][1] == "lost", (actual, log)
            self._relabel("lost", "txn", actual, None)
        assert self.open_txn() == actual, (expected, actual, log)

    def _relabel(self, old: str, new: str, first: int, end: int | None) -> None:
        for base, (last, kind) in list(self.batches.items()):
            if kind == old and first <= base and (end is None or base < end):
                self.batches[base] = (last, new)

    def after_recovery(self, log: Log) -> None:
        """A recovery rebuilds the .txnindex from a replay of whole segments, batches below the log start offset
        included, which the state at run time may have forgotten: an aborted transaction may then start earlier."""
        self.fuzzy_aborts |= set(self.aborted_ranges())
        self.reconcile(log)


def _verify(log: Log, model: _Model, rng: random.Random) -> None:
    log._check()
    log.producer_state._check()
    start, end = log.log_start_offset, log.log_end_offset
    present = sorted(o for o in model.records if start <= o < end)
    assert all(o < end for o in model.records)
    # A whole pass from the log start sees exactly the model's records from there on.
    seen = [(o, v) for o, v in read_all(log) if o >= start]
    assert seen == [(o, model.records[o][0]) for o in present]
    # Reads from random offsets: whole batches from the one holding the offset, contiguous, within the bound.
    open_first = model.open_txn()
    hw = log.high_watermark
    assert hw == (end if model.hw is None else max(start, min(model.hw, end)))
    lso = log.last_stable_offset
    assert lso <= hw and (open_first is None or lso <= max(open_first, start))
    if open_first is None and model.hw is None:
        assert lso == end
    aborted_ranges = model.aborted_ranges()
    for _ in range(3):
        offset = rng.randint(start, end)
        isolation = rng.choice(list(Isolation))
        fetch = log.read(offset, rng.choice([1, 100, 400, 1 << 20]), isolation=isolation)
        batches = fetch.batches()
        bound = {Isolation.LOG_END: end, Isolation.READ_UNCOMMITTED: hw, Isolation.READ_COMMITTED: lso}[isolation]
        if offset >= bound:
            assert batches == []
            continue
        if not batches:
            # Nothing below the bound from here, or the limit cut the first batch (min_one_message keeps one).
            assert not [o for o in present if offset <= o < bound]
            continue
        assert batches[0].last_offset >= offset
        assert all(b.last_offset < bound for b in batches)
        got = [(r.offset, r.value) for b in batches if not b.is_control for r in b.records()]
        assert all(model.records[o][0] == v for o, v in got)
        lo, hi = batches[0].base_offset, batches[-1].last_offset
        assert [o for o, _ in got] == sorted(o for o in model.records if lo <= o <= hi and o >= min(lo, start))
        # Nothing was skipped between the requested offset and the first batch.
        assert not [o for o in present if offset <= o < lo]
        if isolation is Isolation.READ_COMMITTED:
            assert fetch.aborted_transactions is not None
            listed = {t.first_offset for t in fetch.aborted_transactions}
            assert all(t.producer_id == TXN_PID for t in fetch.aborted_transactions)
            exact = {first for first, _ in aborted_ranges}
            assert all(f in exact or any(f <= marker for _, marker in model.fuzzy_aborts) for f in listed), listed
            for first, marker in aborted_ranges:
                if (first, marker) not in model.fuzzy_aborts and any(first <= o <= marker for o, _ in got):
                    assert first in listed, (first, marker, got)
    # Timestamp lookups find the lowest offset at or after the log start with a timestamp at or above the target.
    stamps = {o: model.records[o][1] for o in present}
    stamps.update((o, t) for o, t in model.marker_stamps.items() if o >= start)
    if stamps:
        target = rng.choice(list(stamps.values())) + rng.choice([-1, 0, 1])
        expected = next(((o, stamps[o]) for o in sorted(stamps) if stamps[o] >= target), None)
        assert log.offset_for_timestamp(target) == expected
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (start, -1)


def _stress(tmp_path: Path, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    pdir = tmp_path / f"stress-{seed}"
    props = {
        "segment.bytes": "700",
        "segment.ms": "20000",
        "segment.index.bytes": "96",
        "index.interval.bytes": "64",
        "file.delete.delay.ms": "1000",
        "retention.ms": "-1",
    }
    config = LogConfig.from_properties(props)
    log = load_log(pdir, config, clock=clock)
    model = _Model()
    counter = 0
    # Producer epochs: a producer the log forgot (all its state lay below the log start) starts again with a bumped
    # epoch, as a client does after UNKNOWN_PRODUCER_ID (KIP-360).
    epochs = {IDEMPOTENT_PID: -1, TXN_PID: -1}

    def next_sequence(pid: int) -> int:
        entry = log.producer_state.last_entry(pid)
        if entry is None or entry.last_seq < 0:
            epochs[pid] += 1
            return 0
        epochs[pid] = entry.producer_epoch
        return entry.last_seq + 1

    for step in range(steps):
        clock.advance(rng.randint(0, 3_000))
        action = rng.choices(
            ["append", "follower", "idempotent", "txn", "roll", "truncate", "delete_records", "retention", "flush",
             "hw", "reopen"],
            weights=[30, 5, 8, 8, 4, 6, 4, 5, 3, 4, 1],
        )[0]
        end = log.log_end_offset
        if action == "append":
            count = rng.randint(1, 3)
            values = [b"r%d" % (counter + i) for i in range(count)]
            stamps = [clock.time_ms() + rng.randint(-5_000, 5_000) for _ in values]
            counter += count
            info = log.append_as_leader(batch(*values, ts=stamps), leader_epoch=step // 50)
            assert info.first_offset == end and info.last_offset == end + count - 1
            model.add(info.first_offset, values, stamps, "data")
        elif action == "follower":
            base = end + rng.choice([0, 0, 1, 5])
            values = [b"f%d" % counter]
            counter += 1
            stamps = [clock.time_ms()]
            log.append_as_follower(batch(*values, ts=stamps, base_offset=base, leader_epoch=step // 50))
            model.add(base, values, stamps, "data")
        elif action == "idempotent":
            seq = next_sequence(IDEMPOTENT_PID)
            values = [b"i%d" % counter, b"j%d" % counter]
            counter += 1
            stamps = [clock.time_ms()] * 2
            data = batch(*values, ts=stamps, pid=IDEMPOTENT_PID, epoch=epochs[IDEMPOTENT_PID], seq=seq)
            info = log.append_as_leader(data)
            assert not info.duplicate and info.first_offset == end
            model.add(info.first_offset, values, stamps, "data")
            retry = log.append_as_leader(data)
            assert retry.duplicate and (retry.first_offset, retry.last_offset) == (info.first_offset, info.last_offset)
            assert log.log_end_offset == info.last_offset + 1
        elif action == "txn":
            if model.open_txn() is not None and rng.random() < 0.5:
                kind = rng.choice(["commit", "abort"])
                control = ControlRecordType.COMMIT if kind == "commit" else ControlRecordType.ABORT
                info = log.append_end_txn_marker(TXN_PID, epochs[TXN_PID], control, 0)
                model.add(info.first_offset, [], [], kind)
                model.marker_stamps[info.first_offset] = clock.time_ms()
            else:
                seq = next_sequence(TXN_PID)
                values = [b"t%d" % counter]
                counter += 1
                stamps = [clock.time_ms()]
                info = log.append_as_leader(batch(*values, ts=stamps, pid=TXN_PID, epoch=epochs[TXN_PID], seq=seq, txn=True))
                assert not info.duplicate and info.first_offset == end
                model.add(info.first_offset, values, stamps, "txn")
        elif action == "roll":
            log.roll()
        elif action == "truncate":
            if end > log.log_start_offset:
                target = rng.randint(max(0, log.log_start_offset - 2), end - 1)
                assert log.truncate_to(target)
                assert log.log_end_offset <= target
                model.truncate(log.log_end_offset)
                model.reconcile(log)
        elif action == "delete_records":
            hw = log.high_watermark
            target = rng.randint(log.log_start_offset, hw)
            assert log.delete_records_before(target) == max(target, log.log_start_offset)
        elif action == "retention":
            rule = rng.choice(["bytes", "ms", "start"])
            if rule == "bytes":
                override = {"retention.bytes": str(rng.randint(0, max(1, log.size_in_bytes)))}
            elif rule == "ms":
                override = {"retention.ms": str(rng.randint(1, 60_000))}
            else:
                override = {}
            log.config = LogConfig.from_properties(override, config)
            before_start = log.log_start_offset
            plan = log.delete_old_segments()
            log.config = config
            assert log.log_start_offset >= before_start
            assert log.log_start_offset <= log.high_watermark or not plan.deletions
            if plan.deletions:
                assert log.segments.first_segment().base_offset == log.log_start_offset or (  # type: ignore[union-attr]
                    log.segments.first_segment().base_offset <= log.log_start_offset  # type: ignore[union-attr]
                )
        elif action == "flush":
            log.flush()
            assert log.recovery_point == log.log_end_offset
        elif action == "hw":
            boundaries = sorted({b for b in model.batches} | {end, log.log_start_offset})
            model.hw = None if rng.random() < 0.3 else rng.choice(boundaries)
            if model.hw is None:
                log._high_watermark = None
            else:
                log.high_watermark = model.hw
        elif action == "reopen":
            clean = rng.random() < 0.5
            start = log.log_start_offset
            if clean:
                log.close()
            log.deleter.run_due(everything=True)
            log = load_log(pdir, config, clock=clock, had_clean_shutdown=clean, log_start_offset=start)
            assert log.recovery.recovered_segments > 0 or clean
            assert log.recovery.recovered_segments == 0 or not clean
            model.hw = None
            if clean:
                model.reconcile(log)
            else:
                model.after_recovery(log)
        if rng.random() < 0.2:
            log.deleter.run_due()
        _verify(log, model, rng)
    log.close()
    log.deleter.run_due(everything=True)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    _stress(tmp_path, seed, steps=300)


def test_read_committed_racing_retention_of_the_marker_segment_is_out_of_range(
    pdir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (load bench): retention deleted the fetched segment and the later one holding the ABORT marker
    while a read_committed fetch ran; the fetch then returned the aborted batch with no aborted transaction."""
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"t0", b"t1", b"t2", pid=7, epoch=0, seq=0, txn=True))
    log.roll()
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
    log.roll()
    log.append_as_leader(batch(b"after"))
    first = log.segments.first_segment()
    assert first is not None
    original = first.read

    def read_then_retention(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        log.apply_deletions([0, 3], False, reason="retention")
        return found

    monkeypatch.setattr(first, "read", read_then_retention)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)


def test_producer_expiration_runs_under_the_log_lock(
    pdir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (load bench): the expiration job iterated the producers while appends added some ("dictionary
    changed size during iteration"). Deterministic: while the expiration is inside its iteration, an append of a
    new producer runs, and the iteration goes on only once that append has either finished (unlocked: the dict
    changed under the iterator) or is waiting for the log lock (the fix)."""
    log = open_log(pdir, clock)
    log.append_as_leader(batch(b"x", pid=1, epoch=0, seq=0))
    log._lock = lock = ContendedLock(log._lock)  # type: ignore[assignment]
    iterating, appended = threading.Event(), threading.Event()
    is_expired = log.producer_state._is_expired

    def is_expired_meeting_an_append(*args: Any) -> bool:
        iterating.set()
        wait_until(lambda: appended.is_set() or lock.contended.is_set(), "the append to finish or wait for the lock")
        return is_expired(*args)

    monkeypatch.setattr(log.producer_state, "_is_expired", is_expired_meeting_an_append)
    errors: list[BaseException] = []

    def expire() -> None:
        try:
            log.remove_expired_producers(0)
        except BaseException as err:
            errors.append(err)

    expirer = threading.Thread(target=expire)
    expirer.start()
    assert iterating.wait(FAILURE_DEADLINE_S)
    log.append_as_leader(batch(b"y", pid=2, epoch=0, seq=0))
    appended.set()
    expirer.join()
    assert not errors, errors
    assert lock.contended.is_set()
    assert set(log.producer_state.active_producers) == {1, 2}
