"""Follower appends of magic 0/1 entries, as Kafka's ``UnifiedLog.appendAsFollower`` takes them (any magic, no
conversion, offsets kept): the bytes on disk are the entries', the offsets and max timestamps come from their
headers (magic 0 has none: -1, so no time-index entry, as Kafka's ``TimeIndex.maybeAppend`` never passes -1), the
indexes are those recovery builds from the same file, and a corrupt entry is refused typed with nothing written.
Leader appends stay magic-2 only. Entries are built by hand (``tests.test_legacy``), independently of the reader."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from logmgr.clock import ManualClock
from logmgr.errors import InvalidRecordError, RecordBatchTooLargeError
from segments.compression import CompressionType
from segments.naming import log_file
from segments.records import SimpleRecord, build_batch
from tests import test_log
from tests.test_legacy import LEGACY_CODECS, entry, message, wrapper
from tests.test_log import T0, open_log
from tests.test_log_loader import read_legacy

clock = test_log.clock  # the Log tests' fixtures: a ManualClock at T0, and a partition dir in tmp_path
pdir = test_log.pdir


def legacy_batch(magic: int, codec: CompressionType | None, first: int, count: int, *, ts: int = T0) -> bytes:
    """``count`` records at offsets ``first``.. with values ``v<offset>``: plain messages (one entry each) when
    ``codec`` is None, else one wrapper (magic 1: relative inner offsets; magic 0: absolute), timestamps ``ts``
    onwards (magic 1 only)."""
    if codec is None:
        return b"".join(
            entry(first + i, message(magic, b"k", b"v%d" % (first + i), timestamp=ts + i)) for i in range(count)
        )
    inner = [
        (i if magic == 1 else first + i, message(magic, b"k", b"v%d" % (first + i), timestamp=ts + i))
        for i in range(count)
    ]
    return wrapper(magic, codec, first + count - 1, inner, timestamp=ts + count - 1)


def values_at(offsets: range) -> list[tuple[int, bytes | None]]:
    return [(o, b"v%d" % o) for o in offsets]


CODECS = [None, *LEGACY_CODECS]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: "none" if c is None else c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
def test_a_follower_appends_legacy_entries_byte_for_byte(
    pdir: Path, clock: ManualClock, magic: int, codec: CompressionType | None
) -> None:
    # One batch per append and an entry for every append after the first: the append path's indexes can be
    # compared entry for entry with what recovery builds from the same file.
    appends = [legacy_batch(magic, codec, 0, 3), legacy_batch(magic, codec, 5, 2, ts=T0 + 10),
               legacy_batch(magic, codec, 7, 4, ts=T0 + 5)]
    if codec is None:
        # Plain messages are one entry each: append them one by one.
        appends = [e for data in appends for e in _entries(data)]
    log = open_log(pdir, clock, index_interval_bytes=0)
    try:
        infos = [log.append_as_follower(data) for data in appends]
        assert log.log_end_offset == 11
        if codec is not None:
            assert [(i.first_offset, i.last_offset, i.records, i.batches) for i in infos] == [
                (0, 2, 3, 1), (5, 6, 2, 1), (7, 10, 4, 1)
            ]
            expected_max = [T0 + 2, T0 + 11, T0 + 8] if magic == 1 else [-1, -1, -1]
            assert [i.max_timestamp for i in infos] == expected_max
        assert log_file(pdir, 0).read_bytes() == b"".join(appends)
        assert read_legacy(log) == values_at(range(3)) + values_at(range(5, 11))
        assert log.producer_state.active_producers == {} and log.leader_epochs.entries == []
        segment = log.active_segment
        offsets, times = list(segment.offset_index), list(segment.time_index)
        if magic == 0:
            # No timestamps: Kafka's time index keeps no entry, and a timestamp search finds nothing.
            assert times == [] and log.offset_for_timestamp(0) is None
        else:
            assert times and times[-1].timestamp == T0 + 11
            assert log.offset_for_timestamp(T0 + 9) == (5, T0 + 10)
        log._check()
    finally:
        log.close()
    # Recovery of the same file (index files removed) builds the same indexes.
    for suffix in ("*.index", "*.timeindex", "*.snapshot"):
        for path in pdir.glob(suffix):
            path.unlink()
    reopened = open_log(pdir, clock, index_interval_bytes=0)
    try:
        assert reopened.recovery.truncated_bytes == 0 and reopened.log_end_offset == 11
        segment = reopened.active_segment
        assert (list(segment.offset_index), list(segment.time_index)) == (offsets, times)
        assert read_legacy(reopened) == values_at(range(3)) + values_at(range(5, 11))
    finally:
        reopened.close()


def _entries(data: bytes) -> list[bytes]:
    out = []
    position = 0
    while position < len(data):
        (size,) = struct.unpack_from(">i", data, position + 8)
        out.append(data[position : position + 12 + size])
        position += 12 + size
    return out


def test_a_mixed_append_of_legacy_and_magic_2_batches(pdir: Path, clock: ManualClock) -> None:
    legacy = legacy_batch(1, CompressionType.GZIP, 0, 3) + legacy_batch(0, None, 3, 2)
    v2 = build_batch([SimpleRecord(b"v5", None, T0 + 50), SimpleRecord(b"v6", None, T0 + 60)], base_offset=5,
                     producer_id=9, producer_epoch=0, base_sequence=0, partition_leader_epoch=4)
    log = open_log(pdir, clock)
    try:
        info = log.append_as_follower(legacy + v2)
        assert (info.first_offset, info.last_offset, info.batches, info.records) == (0, 6, 4, 7)
        assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 60, 6)
        assert log_file(pdir, 0).read_bytes() == legacy + v2
        assert read_legacy(log) == values_at(range(7))
        assert set(log.producer_state.active_producers) == {9}
        assert [(e.epoch, e.start_offset) for e in log.leader_epochs.entries] == [(4, 5)]
    finally:
        log.close()


def test_a_leader_still_refuses_legacy_entries(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock)
    try:
        with pytest.raises(InvalidRecordError, match="only magic 2 batches can be appended"):
            log.append_as_leader(legacy_batch(1, None, 0, 1))
        assert log.size_in_bytes == 0
    finally:
        log.close()


def _with_crc(data: bytes | bytearray) -> bytes:
    """A single legacy entry with its outer CRC-32 recomputed (damage under a valid CRC)."""
    out = bytearray(data)
    struct.pack_into(">I", out, 12, zlib.crc32(bytes(out[16:])))
    return bytes(out)


def _bad_outer_crc() -> bytes:
    out = bytearray(legacy_batch(1, None, 1, 1))
    out[-1] ^= 0xFF
    return bytes(out)


def _bad_inner_crc() -> bytes:
    inner = [(i, message(1, None, b"v", timestamp=T0)) for i in range(2)]
    damaged = bytearray(inner[1][1])
    damaged[-1] ^= 0xFF
    return wrapper(1, CompressionType.GZIP, 2, [inner[0], (1, bytes(damaged))], timestamp=T0)


def _undecompressable() -> bytes:
    return entry(1, message(1, None, b"\x1f\x8b not gzip at all", timestamp=T0, attributes=int(CompressionType.GZIP)))


def _short_v1() -> bytes:
    # A magic-1 message of the v0 size: no room for its timestamp (a CRC-valid 14-byte body).
    body = struct.pack(">bBii", 1, 0, -1, -1)
    return entry(1, struct.pack(">I", zlib.crc32(body)) + body)


def _value_past_the_end() -> bytes:
    data = bytearray(legacy_batch(0, None, 1, 1))
    struct.pack_into(">i", data, len(data) - 6, 99)  # the value length
    return _with_crc(data)


def _nested() -> bytes:
    inner_wrapper = message(1, None, zlib.compress(b"x"), timestamp=T0, attributes=int(CompressionType.GZIP))
    return wrapper(1, CompressionType.GZIP, 1, [(0, inner_wrapper)], timestamp=T0)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param(_bad_outer_crc(), "record is corrupt", id="outer-crc"),
        pytest.param(legacy_batch(1, None, 1, 1) + _bad_outer_crc()[:-1] + b"\x00", "record is corrupt",
                     id="second-entry-crc"),
        pytest.param(_bad_inner_crc(), "inner message CRC mismatch", id="inner-crc"),
        pytest.param(_undecompressable(), "gzip", id="undecompressable"),
        pytest.param(_short_v1(), "smaller than the v1 record overhead", id="short-v1"),
        pytest.param(_value_past_the_end(), "runs past the message end", id="value-length"),
        pytest.param(_nested(), "nested", id="nested-wrapper"),
        # Magic 0 inner offsets are absolute: one past the wrapper's own (last) offset.
        pytest.param(wrapper(0, CompressionType.GZIP, 1, [(1 << 40, message(0, None, b"a"))]), "invalid offset range",
                     id="inner-offset-past-the-wrapper"),
        pytest.param(legacy_batch(1, None, 0, 1), "below the expected offset 1", id="offset-behind-the-log-end"),
        pytest.param(legacy_batch(1, None, 3, 1) + legacy_batch(1, None, 2, 1), "below the expected offset 4",
                     id="offsets-going-back"),
    ],
)
def test_a_corrupt_legacy_entry_is_refused_typed_and_nothing_is_written(
    pdir: Path, clock: ManualClock, bad: bytes, reason: str
) -> None:
    log = open_log(pdir, clock)
    try:
        log.append_as_follower(legacy_batch(1, None, 0, 1))
        size = log.size_in_bytes
        with pytest.raises(InvalidRecordError, match=reason):
            log.append_as_follower(bad)
        assert (log.log_end_offset, log.size_in_bytes) == (1, size)
        assert read_legacy(log) == values_at(range(1))
        log._check()
    finally:
        log.close()


def test_a_legacy_entry_above_max_message_bytes_is_refused(pdir: Path, clock: ManualClock) -> None:
    log = open_log(pdir, clock, max_message_bytes=100)
    try:
        big = entry(0, message(1, None, b"x" * 200, timestamp=T0))
        with pytest.raises(RecordBatchTooLargeError, match=f"batch of {len(big)} bytes"):
            log.append_as_follower(big)
        assert log.size_in_bytes == 0
    finally:
        log.close()


def test_a_legacy_wrapper_rolls_at_the_log_end_not_its_last_offset(pdir: Path, clock: ManualClock) -> None:
    """A wrapper's header carries its last offset; the segment it rolls into starts at its first (never above a
    record it holds)."""
    first = legacy_batch(1, CompressionType.GZIP, 0, 3)
    second = legacy_batch(1, CompressionType.GZIP, 3, 5)
    log = open_log(pdir, clock, segment_bytes=len(first) + len(second) - 1)
    try:
        log.append_as_follower(first)
        log.append_as_follower(second)
        assert log.segments.base_offsets() == [0, 3]
        assert read_legacy(log) == values_at(range(8))
        log._check()
    finally:
        log.close()
