"""Kafka's ``LogValidator.validateBatch`` offset checks on an append: a leader assigns offsets from each batch's
last offset delta, so a batch whose delta disagrees with its record count (or is negative) is refused before
anything is written; a follower keeps the deltas (compaction leaves fewer records than offsets) but never a
negative one. A client's append (origin CLIENT) also refuses control batches and producer batches with a negative
base sequence, as Kafka does; coordinators and followers write those."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from logmgr.config import LogConfig
from logmgr.errors import InvalidRecordError
from logmgr.log import Log
from logmgr.log_loader import load_log
from logmgr.producer_state import AppendOrigin
from segments.records import (
    ControlRecordType,
    EndTransactionMarker,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
)

_LAST_OFFSET_DELTA = 23
_RECORDS_COUNT = 57


def _batch(records: int, *, delta: int | None = None, count: int | None = None, base: int = 0) -> bytes:
    """An uncompressed batch of ``records`` records with its last offset delta and record count replaced (CRC
    recomputed: the checks after it are reached)."""
    out = bytearray(build_batch([SimpleRecord(b"v%d" % n, b"k") for n in range(records)]))
    struct.pack_into(">q", out, 0, base)
    if delta is not None:
        struct.pack_into(">i", out, _LAST_OFFSET_DELTA, delta)
    if count is not None:
        struct.pack_into(">i", out, _RECORDS_COUNT, count)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _log(tmp_path: Path) -> Log:
    return load_log(tmp_path / "t-0", LogConfig())


def test_bug_a_negative_last_offset_delta_moved_the_log_end_offset_backwards(tmp_path: Path) -> None:
    log = _log(tmp_path)
    try:
        log.append_as_leader(_batch(10))
        size = log.size_in_bytes
        with pytest.raises(InvalidRecordError, match=r"invalid batch at position 0: Batch has an invalid offset "
                                                     r"range: \[0, -6\]"):
            log.append_as_leader(_batch(3, delta=-6))
        with pytest.raises(InvalidRecordError, match=r"invalid offset range: \[10, 5\]"):
            log.append_as_follower(_batch(3, delta=-5, base=10))
        assert (log.log_end_offset, log.size_in_bytes) == (10, size)
        log._check()
    finally:
        log.close()


@pytest.mark.parametrize(
    ("records", "delta", "count", "message"),
    [
        pytest.param(3, 0, None, r"Inconsistent batch offset range \[0, 0\] and count of records 3", id="overlap"),
        pytest.param(3, 99, None, r"Inconsistent batch offset range \[0, 99\] and count of records 3", id="gap"),
        pytest.param(1, 0, 0, r"Invalid reported count for record batch: 0", id="no-records"),
    ],
)
def test_bug_a_leader_assigned_offsets_from_a_last_offset_delta_its_records_disagree_with(
    tmp_path: Path, records: int, delta: int, count: int | None, message: str
) -> None:
    """Offsets came from the delta: a batch of 3 records claiming 1 offset made the next append's offsets overlap
    its records (their offset deltas 1 and 2), one claiming 100 left offsets no record holds."""
    log = _log(tmp_path)
    try:
        log.append_as_leader(_batch(2))
        with pytest.raises(InvalidRecordError, match=message):
            log.append_as_leader(_batch(records, delta=delta, count=count))
        assert (log.log_end_offset, log.size_in_bytes) == (2, len(_batch(2)))
        info = log.append_as_leader(_batch(3))
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (2, 4, 5)
    finally:
        log.close()


def test_a_follower_keeps_a_delta_past_its_records(tmp_path: Path) -> None:
    """A compacted batch keeps its last offset delta with fewer records: a follower copies it as it is."""
    log = _log(tmp_path)
    try:
        info = log.append_as_follower(_batch(2, delta=9))
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 9, 10)
    finally:
        log.close()


# -- Kafka's client-only rules (validateBatch for AppendOrigin.CLIENT) --------------------------------------------


def _control_batch() -> bytes:
    """An ABORT marker of producer 5, as a transaction coordinator writes it."""
    return build_end_txn_marker(
        offset=0, timestamp=0, partition_leader_epoch=0, producer_id=5, producer_epoch=0,
        marker=EndTransactionMarker(ControlRecordType.ABORT, 0),
    )


def _producer_batch(base_sequence: int) -> bytes:
    return build_batch([SimpleRecord(b"v", b"k")], producer_id=5, producer_epoch=0, base_sequence=base_sequence)


def _written(log: Log) -> tuple[int, int, object]:
    """What an append may change: log end, bytes, producer 5's state."""
    return log.log_end_offset, log.size_in_bytes, log.producer_state.last_entry(5)


def test_client_append_of_a_control_batch_is_refused(tmp_path: Path) -> None:
    """A client wrote a transaction marker: Kafka refuses it, only a coordinator writes control batches."""
    log = _log(tmp_path)
    try:
        log.append_as_leader(_batch(2))
        before = _written(log)
        with pytest.raises(InvalidRecordError, match=r"^t-0: invalid batch at position 0: Clients are not allowed to "
                                                     r"write control records$"):
            log.append_as_leader(_control_batch())
        assert _written(log) == before
        # A coordinator's marker (and a follower's copy of it) is taken.
        log.append_as_leader(_control_batch(), origin=AppendOrigin.COORDINATOR)
        assert log.log_end_offset == 3
        log._check()
    finally:
        log.close()


def test_client_append_with_a_negative_base_sequence_is_refused(tmp_path: Path) -> None:
    """An idempotent producer's batch with base sequence -1 (NO_SEQUENCE): Kafka refuses it from a client; a new
    producer's first batch takes any sequence, so it was kept as producer 5's state."""
    log = _log(tmp_path)
    try:
        log.append_as_leader(_batch(2))
        before = _written(log)
        with pytest.raises(InvalidRecordError, match=r"^t-0: invalid batch at position 0: Invalid sequence number -1 in "
                                                     r"record batch with producerId 5$"):
            log.append_as_leader(_producer_batch(-1))
        assert _written(log) == before and before[2] is None
        log.append_as_leader(_producer_batch(0))
        assert log.log_end_offset == 3
        log._check()
    finally:
        log.close()


def test_client_append_refuses_a_control_batch_after_a_good_one_writing_nothing(tmp_path: Path) -> None:
    log = _log(tmp_path)
    try:
        log.append_as_leader(_batch(2))
        before = _written(log)
        good = _producer_batch(0)
        with pytest.raises(InvalidRecordError, match=rf"invalid batch at position {len(good)}: Clients are not "):
            log.append_as_leader(good + _control_batch())
        assert _written(log) == before
        log._check()
    finally:
        log.close()


_KINDS = {
    "plain": lambda: _batch(1),
    "control": _control_batch,
    "negative-sequence": lambda: _producer_batch(-1),
    "producer": lambda: _producer_batch(0),
}


@pytest.mark.parametrize("origin", list(AppendOrigin), ids=lambda o: o.name)
@pytest.mark.parametrize("kind", list(_KINDS))
def test_client_only_rules_refuse_exactly_what_kafka_refuses(tmp_path: Path, origin: AppendOrigin, kind: str) -> None:
    """Kafka's validateBatch refuses a control batch or a producer's negative base sequence iff the origin is
    CLIENT; a follower (REPLICATION) copies what its leader wrote."""
    log = _log(tmp_path)
    try:
        data = _KINDS[kind]()
        refused = origin is AppendOrigin.CLIENT and kind in ("control", "negative-sequence")
        before = _written(log)
        try:
            if origin is AppendOrigin.REPLICATION:
                log.append_as_follower(data)
            else:
                log.append_as_leader(data, origin=origin)
        except InvalidRecordError:
            assert refused
            assert _written(log) == before
        else:
            assert not refused
            assert log.log_end_offset == 1
        log._check()
    finally:
        log.close()
