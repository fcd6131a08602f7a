"""Producer-state ``.snapshot`` files: layout, CRC, corruption detection and the real brokers' files."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkpoints.producer_snapshot import (
    ENTRY_SIZE,
    HEADER_SIZE,
    ProducerSnapshot,
    ProducerSnapshotEntry,
    parse_producer_snapshot,
    read_producer_snapshot,
    serialize_producer_snapshot,
    write_producer_snapshot,
)
from segments.errors import CorruptSnapshotError, InvalidOffsetError
from segments.java_numbers import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from segments.naming import producer_snapshot_file
from tests.conftest import KAFKA_REAL, require_fixtures

I16, I32, I64 = st.integers(INT16_MIN, INT16_MAX), st.integers(INT32_MIN, INT32_MAX), st.integers(INT64_MIN, INT64_MAX)
ENTRIES = st.lists(st.builds(ProducerSnapshotEntry, I64, I16, I32, I64, I32, I64, I32, I64), max_size=20)

ENTRY = ProducerSnapshotEntry(
    producer_id=1000,
    producer_epoch=2,
    last_sequence=41,
    last_offset=387,
    offset_delta=4,
    timestamp=1_700_000_000_123,
    coordinator_epoch=-1,
    current_txn_first_offset=-1,
)


def _error(data: bytes) -> CorruptSnapshotError:
    with pytest.raises(CorruptSnapshotError) as caught:
        parse_producer_snapshot(data, "/d/t-0/00000000000000000388.snapshot")
    assert caught.value.path == "/d/t-0/00000000000000000388.snapshot"
    return caught.value


def test_crc32c_is_castagnoli() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_layout_field_by_field() -> None:
    data = serialize_producer_snapshot([ENTRY])
    assert (HEADER_SIZE, ENTRY_SIZE, len(data)) == (10, 46, 56)
    assert data[0:2] == b"\x00\x01"
    assert data[6:10] == b"\x00\x00\x00\x01"
    assert data[10:18] == (1000).to_bytes(8, "big")  # producerId
    assert data[18:20] == (2).to_bytes(2, "big")  # epoch
    assert data[20:24] == (41).to_bytes(4, "big")  # lastSequence
    assert data[24:32] == (387).to_bytes(8, "big")  # lastOffset
    assert data[32:36] == (4).to_bytes(4, "big")  # offsetDelta
    assert data[36:44] == (1_700_000_000_123).to_bytes(8, "big")  # timestamp
    assert data[44:48] == b"\xff\xff\xff\xff"  # coordinatorEpoch
    assert data[48:56] == b"\xff" * 8  # currentTxnFirstOffset
    assert int.from_bytes(data[2:6], "big") == crc32c.crc32c(data[6:])


def test_empty_snapshot_bytes() -> None:
    data = serialize_producer_snapshot([])
    assert data == b"\x00\x01" + crc32c.crc32c(b"\x00" * 4).to_bytes(4, "big") + b"\x00" * 4
    assert parse_producer_snapshot(data) == []


@given(ENTRIES)
def test_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    data = serialize_producer_snapshot(entries)
    assert len(data) == HEADER_SIZE + ENTRY_SIZE * len(entries)
    parsed = parse_producer_snapshot(data)
    assert parsed == entries
    assert serialize_producer_snapshot(parsed) == data


@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes_raise_only_typed_errors(data: bytes) -> None:
    try:
        parse_producer_snapshot(data)
    except CorruptSnapshotError as err:
        assert err.position is not None


@given(ENTRIES.filter(bool), st.data())
def test_every_single_bit_flip_is_detected(entries: list[ProducerSnapshotEntry], data: st.DataObject) -> None:
    original = serialize_producer_snapshot(entries)
    bit = data.draw(st.integers(0, len(original) * 8 - 1))
    flipped = bytearray(original)
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptSnapshotError):
        parse_producer_snapshot(bytes(flipped))


def _with_crc(body_after_crc: bytes, version: int = 1) -> bytes:
    return struct.pack(">hI", version, crc32c.crc32c(body_after_crc)) + body_after_crc


@pytest.mark.parametrize(
    ("data", "position", "words"),
    [
        (b"", 0, "truncated header"),
        (b"\x00\x01\x00\x00", 4, "truncated header"),
        (_with_crc(b"\x00\x00\x00\x00", version=0), 0, "version 0"),
        (_with_crc(b"\x00\x00\x00\x00", version=2), 0, "version 2"),
        (_with_crc(b"\xff\xff\xff\xff"), 6, "negative entry count -1"),
        (_with_crc(b"\x00\x00\x00\x01" + b"\x00" * 45), 55, "truncated"),
        (_with_crc(b"\x7f\xff\xff\xff"), 10, "truncated"),
        (_with_crc(b"\x00\x00\x00\x00" + b"\x00"), 10, "trailing bytes"),
        (_with_crc(b"\x00\x00\x00\x01" + b"\x00" * 47), 56, "trailing bytes"),
        (b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", 2, "CRC mismatch"),
    ],
)
def test_malformed(data: bytes, position: int, words: str) -> None:
    err = _error(data)
    assert err.position == position
    assert words in err.message
    assert str(err).startswith(f"/d/t-0/00000000000000000388.snapshot: position {position}: ")


def test_entry_fields_are_range_checked() -> None:
    with pytest.raises(ValueError):
        ProducerSnapshotEntry(0, INT16_MAX + 1, 0, 0, 0, 0, 0, -1)
    with pytest.raises(ValueError):
        ProducerSnapshotEntry(INT64_MAX + 1, 0, 0, 0, 0, 0, 0, -1)
    with pytest.raises(ValueError):
        ProducerSnapshotEntry(0, 0, 0, 0, 0, 0, INT32_MAX + 1, -1)


def test_read_write(tmp_path: Path) -> None:
    path = producer_snapshot_file(tmp_path, 388)
    write_producer_snapshot(path, [ENTRY])
    assert read_producer_snapshot(path) == ProducerSnapshot(388, [ENTRY])
    write_producer_snapshot(path, [], sync=False)
    assert read_producer_snapshot(path) == ProducerSnapshot(388, [])
    assert os.listdir(tmp_path) == ["00000000000000000388.snapshot"]


def test_failed_write_keeps_old_file(tmp_path: Path) -> None:
    path = producer_snapshot_file(tmp_path, 5)
    write_producer_snapshot(path, [ENTRY])
    before = path.read_bytes()
    with pytest.raises(AttributeError):
        write_producer_snapshot(path, [ENTRY, "not an entry"])  # type: ignore[list-item]
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name]


def test_read_errors_name_the_file(tmp_path: Path) -> None:
    path = producer_snapshot_file(tmp_path, 7)
    path.write_bytes(serialize_producer_snapshot([ENTRY])[:-1])
    with pytest.raises(CorruptSnapshotError) as caught:
        read_producer_snapshot(path)
    assert (caught.value.path, caught.value.position) == (str(path), 55)
    bad_name = tmp_path / "snapshot"
    bad_name.write_bytes(serialize_producer_snapshot([]))
    with pytest.raises(InvalidOffsetError):
        read_producer_snapshot(bad_name)


# --- real broker files ----------------------------------------------------------------------------------------

REAL_SNAPSHOTS = (
    sorted(str(p.relative_to(KAFKA_REAL)) for p in KAFKA_REAL.rglob("*.snapshot")) if KAFKA_REAL.exists() else []
)
DATASETS = sorted(p.name for p in KAFKA_REAL.iterdir() if (p / "README.md").exists()) if KAFKA_REAL.exists() else []
_README_COUNTS = re.compile(
    r"Producer-state \.snapshot files: (\d+) \(with producer entries: (\d+), total entries (\d+)"
)


def test_real_snapshots_present() -> None:
    require_fixtures(KAFKA_REAL)
    assert REAL_SNAPSHOTS, f"no .snapshot files found under {KAFKA_REAL}"


@pytest.mark.parametrize("relative", REAL_SNAPSHOTS)
def test_real_snapshot_round_trips_byte_for_byte(relative: str) -> None:
    path = KAFKA_REAL / relative
    data = path.read_bytes()
    snapshot = read_producer_snapshot(path)
    assert path.name == f"{snapshot.offset:020d}.snapshot"
    assert serialize_producer_snapshot(snapshot.entries) == data


@pytest.mark.parametrize("dataset", DATASETS)
def test_real_snapshot_counts_match_readme(dataset: str) -> None:
    root = KAFKA_REAL / dataset
    found = _README_COUNTS.search((root / "README.md").read_text())
    assert found is not None, "README states no producer snapshot counts"
    files, with_entries, total = map(int, found.groups())
    snapshots = [read_producer_snapshot(p) for p in root.rglob("*.snapshot")]
    assert len(snapshots) == files
    assert sum(1 for s in snapshots if s.entries) == with_entries
    assert sum(len(s.entries) for s in snapshots) == total


def test_real_snapshot_counts_of_running_kraft_36(kafka_real: Path) -> None:
    snapshots = [read_producer_snapshot(p) for p in (kafka_real / "kraft-3.6-running-snapshots").rglob("*.snapshot")]
    assert (len(snapshots), sum(1 for s in snapshots if s.entries)) == (7, 4)
    assert sum(len(s.entries) for s in snapshots) == 12
    # The one transactional producer of kraft-3.7 (ksqlDB's command topic) committed: no open transaction.
    txn = [e for p in (kafka_real / "kraft-3.7-clean-transactions").rglob("*.snapshot")
           for e in read_producer_snapshot(p).entries]
    assert len(txn) == 1
    assert txn[0].producer_id >= 0
    assert txn[0].current_txn_first_offset == -1
