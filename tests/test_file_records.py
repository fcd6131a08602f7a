"""FileRecords and the batch walk: file operations on real files, Kafka's iteration rules (partial tail, minimum
size, size limit), the 8 MiB read window, and fuzzing of the walk over arbitrary bytes."""

from __future__ import annotations

import errno
import os
import random
import resource
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.compression import CompressionType
from segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    StorageFormatError,
    UnsupportedMagicError,
)
from segments.file_records import FileBatch, FileRecords, batch_view, iter_batches, walk_batches
from segments.legacy import LegacyRecordBatch
from segments.records import DefaultRecordBatch, SimpleRecord, build_batch
from tests.small_disk_helpers import run_in_child
from tests.test_legacy import VALID_ENTRIES, legacy_like_bytes
from tests.test_records import VALID_BATCHES, batch_like_bytes

WINDOW = 8 * 1024 * 1024


def _batch(base_offset: int, value: bytes = b"value", codec: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch(
        [SimpleRecord(value, b"key", 1_000 + base_offset)], base_offset=base_offset, compression=codec
    )


def _positions(batches: list[bytes]) -> list[int]:
    positions, position = [], 0
    for data in batches:
        positions.append(position)
        position += len(data)
    return positions


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000000.log"


def _write_log(path: Path, batches: list[bytes], tail: bytes = b"") -> None:
    with FileRecords(path, writable=True, create=True) as log:
        for data in batches:
            log.append(data)
        if tail:
            log.append(tail)
        log.flush()


# --- file operations --------------------------------------------------------------------------------------------


def test_append_read_and_iterate(log_path: Path) -> None:
    batches = [_batch(i * 10, codec=codec) for i, codec in enumerate(CompressionType)]
    with FileRecords(log_path, writable=True, create=True) as log:
        assert log.size_in_bytes == 0
        assert list(log.batches()) == []
        for expected, data in zip(_positions(batches), batches, strict=True):
            assert log.append(data) == expected
        assert log.size_in_bytes == sum(map(len, batches)) == os.path.getsize(log_path)
        assert log.read(0, len(batches[0])) == batches[0]
        assert log.read(log.size_in_bytes - 3, 100) == batches[-1][-3:]
        assert log.read(log.size_in_bytes, 10) == b""
        assert log.read(0, 0) == b""
        found = list(log.batches())
        assert [f.position for f in found] == _positions(batches)
        assert [f.batch.raw_bytes() for f in found] == batches
        assert [f.size_in_bytes for f in found] == [len(b) for b in batches]
        assert found[-1].end_position == log.size_in_bytes
        for f in found:
            f.batch.ensure_valid()
            assert f.batch.records()[0].offset == f.batch.base_offset
        log.flush()
    assert log.closed
    log.close()  # closing twice is harmless


def test_read_only_rejects_writes(log_path: Path) -> None:
    _write_log(log_path, [_batch(0)])
    with FileRecords(log_path) as log:
        assert log.size_in_bytes == len(_batch(0))
        with pytest.raises(PermissionError):
            log.append(b"x")
        with pytest.raises(PermissionError):
            log.truncate_to(0)
        assert len(list(log.batches())) == 1


def test_missing_file_without_create(log_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        FileRecords(log_path)


def test_truncate_to(log_path: Path) -> None:
    batches = [_batch(i) for i in range(5)]
    _write_log(log_path, batches)
    with FileRecords(log_path, writable=True) as log:
        cut = _positions(batches)[3]
        assert log.truncate_to(cut) == sum(map(len, batches[3:]))
        assert log.size_in_bytes == cut == os.path.getsize(log_path)
        assert [f.batch.base_offset for f in log.batches()] == [0, 1, 2]
        with pytest.raises(ValueError):
            log.truncate_to(cut + 1)
        with pytest.raises(ValueError):
            log.truncate_to(-1)
        assert log.truncate_to(cut) == 0
        assert log.append(batches[3]) == cut
        assert [f.batch.base_offset for f in log.batches()] == [0, 1, 2, 3]


def test_rename_keeps_the_file_open(log_path: Path) -> None:
    _write_log(log_path, [_batch(0)])
    target = log_path.with_name(log_path.name + ".deleted")
    with FileRecords(log_path, writable=True) as log:
        log.rename_to(target)
        assert log.path == target
        assert not log_path.exists() and target.exists()
        log.append(_batch(1))
        assert [f.batch.base_offset for f in log.batches()] == [0, 1]
    assert os.path.getsize(target) == 2 * len(_batch(0))


def test_close_trims_bytes_past_the_logical_size(log_path: Path) -> None:
    _write_log(log_path, [_batch(0)])
    log = FileRecords(log_path, writable=True)
    with open(log_path, "ab") as other:  # e.g. a preallocated tail
        other.write(b"\x00" * 100)
    assert log.size_in_bytes == len(_batch(0))
    log.close()
    assert os.path.getsize(log_path) == len(_batch(0))


def test_existing_file_size_includes_zero_tail(log_path: Path) -> None:
    log_path.write_bytes(_batch(0) + b"\x00" * 40)
    with FileRecords(log_path) as log:
        assert log.size_in_bytes == len(_batch(0)) + 40
        with pytest.raises(CorruptRecordError, match="smaller than the minimum record overhead") as info:
            list(log.batches())
        assert info.value.position == len(_batch(0))
        assert info.value.path == str(log_path)


# --- iteration rules --------------------------------------------------------------------------------------------


def test_batches_honours_start_and_end(log_path: Path) -> None:
    batches = [_batch(i, b"v" * i) for i in range(6)]
    positions = _positions(batches)
    _write_log(log_path, batches)
    with FileRecords(log_path) as log:
        assert [f.batch.base_offset for f in log.batches(positions[2])] == [2, 3, 4, 5]
        assert [f.batch.base_offset for f in log.batches(positions[1], positions[4])] == [1, 2, 3]
        # An end inside a batch stops before that batch, as for a partial tail.
        assert [f.batch.base_offset for f in log.batches(0, positions[4] + 20)] == [0, 1, 2, 3]
        assert [f.position for f in log.batches(positions[3], end=10**9)] == positions[3:]
        assert list(log.batches(log.size_in_bytes)) == []
        assert list(log.batches(positions[2], positions[2])) == []


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 18, 40, 60, -1])
def test_partial_trailing_batch_ends_iteration(log_path: Path, cut: int) -> None:
    batches = [_batch(i) for i in range(3)]
    _write_log(log_path, batches, tail=_batch(3)[:cut])
    with FileRecords(log_path) as log:
        found = list(log.batches())
    assert [f.batch.base_offset for f in found] == [0, 1, 2]
    assert found[-1].end_position == sum(map(len, batches))


@pytest.mark.parametrize("tail_size", [1, 16, 17])
def test_short_zero_tail_is_not_corrupt(tail_size: int) -> None:
    """Regression (17-byte tail): Kafka's FileLogInputStream only reads a header when more than 17 bytes remain,
    so a tail of exactly 17 zero bytes (declared size 0) ends iteration instead of being reported as corrupt."""
    data = _batch(0) + b"\x00" * tail_size
    assert [f.position for f in iter_batches(data)] == [0]


@pytest.mark.parametrize("size", [-(1 << 31), -1, 0, 13])
def test_size_below_minimum_is_corrupt(log_path: Path, size: int) -> None:
    good = _batch(0)
    _write_log(log_path, [good], tail=struct.pack(">qi", 1, size) + b"\x02" * 40)
    with FileRecords(log_path) as log:
        walk = log.batches()
        assert next(walk).position == 0
        with pytest.raises(CorruptRecordError, match=f"record size {size} smaller") as info:
            next(walk)
    assert info.value.position == len(good)
    assert info.value.path == str(log_path)
    assert str(log_path) in str(info.value)


@pytest.mark.parametrize("size", [14, 30, 48])
def test_magic2_batch_below_header_size(size: int) -> None:
    data = _batch(0) + struct.pack(">qii", 5, size, -1) + b"\x02" + b"\x00" * (size - 5)
    walk = iter_batches(data, path="x.log")
    next(walk)
    with pytest.raises(CorruptRecordError, match="minimum allowed overhead") as info:
        next(walk)
    assert (info.value.path, info.value.position) == ("x.log", len(_batch(0)))


def test_two_gib_length_stops_iteration(log_path: Path) -> None:
    good = _batch(0)
    huge = struct.pack(">qii", 1, (1 << 31) - 1, -1) + b"\x02" + b"\x00" * 60
    _write_log(log_path, [good], tail=huge)
    with FileRecords(log_path) as log:
        assert [f.position for f in log.batches()] == [0]
        with pytest.raises(RecordTooLargeError, match="larger than the maximum allowed 1000") as info:
            list(log.batches(max_batch_size=1000))
        assert info.value.position == len(good)
        assert info.value.path == str(log_path)
        # The limit applies to every batch, the first one too.
        with pytest.raises(RecordTooLargeError) as info:
            list(log.batches(max_batch_size=len(good) - 13))
        assert info.value.position == 0


def test_walk_batches_never_reads_a_huge_declared_size() -> None:
    data = struct.pack(">qii", 0, (1 << 31) - 1, -1) + b"\x02" + b"\x00" * 100
    requested: list[int] = []

    def read(position: int, size: int) -> bytes:
        requested.append(size)
        return data[position : position + size]

    assert list(walk_batches(read, 0, len(data))) == []
    assert max(requested) <= len(data)


def test_mixed_magic_log() -> None:
    data = VALID_ENTRIES[0] + VALID_BATCHES[0] + VALID_ENTRIES[2] + VALID_BATCHES[-1]
    found = list(iter_batches(data))
    assert [type(f.batch) for f in found] == [
        LegacyRecordBatch,
        DefaultRecordBatch,
        LegacyRecordBatch,
        DefaultRecordBatch,
    ]
    assert [f.batch.magic for f in found] == [0, 2, 1, 2]
    for f in found:
        f.batch.ensure_valid()


def test_iter_batches_start_and_memoryview() -> None:
    batches = [_batch(i) for i in range(4)]
    data = b"".join(batches)
    positions = _positions(batches)
    assert [f.position for f in iter_batches(memoryview(data), start=positions[1])] == positions[1:]


# --- batch_view ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 16])
def test_batch_view_short_buffer(size: int) -> None:
    """Regression (batch_view on a short buffer raised IndexError): it is a typed error now."""
    with pytest.raises(CorruptRecordError) as info:
        batch_view(VALID_BATCHES[0][:size])
    assert info.value.position == 0


def test_batch_view_dispatches_on_magic() -> None:
    assert isinstance(batch_view(VALID_ENTRIES[0]), LegacyRecordBatch)
    assert isinstance(batch_view(VALID_ENTRIES[1]), LegacyRecordBatch)
    assert isinstance(batch_view(VALID_BATCHES[0]), DefaultRecordBatch)
    odd = bytearray(VALID_BATCHES[0])
    odd[16] = 3
    view = batch_view(bytes(odd))
    assert isinstance(view, DefaultRecordBatch)
    with pytest.raises(UnsupportedMagicError):
        view.ensure_valid()


# --- the 8 MiB window -------------------------------------------------------------------------------------------


def test_iteration_across_window_boundaries(log_path: Path) -> None:
    rng = random.Random(1234)
    batches = [_batch(i, rng.randbytes(16_000 + rng.randrange(400))) for i in range(600)]
    # One batch larger than a whole window, so the walk must read past its usual window size.
    batches.insert(300, _batch(300_000, b"\xab" * (WINDOW + 1000)))
    positions = _positions(batches)
    total = positions[-1] + len(batches[-1])
    assert total > 2 * WINDOW
    _write_log(log_path, batches, tail=batches[0][:30])
    with FileRecords(log_path) as log:
        found = list(log.batches())
        # Batches stay readable after the walk moved on to later windows.
        assert [f.position for f in found] == positions
        assert any(f.position < WINDOW < f.end_position for f in found)
        for f, data in zip(found, batches, strict=True):
            assert f.batch.raw_bytes() == data
            f.batch.ensure_valid()
        assert found[300].batch.records()[0].value == b"\xab" * (WINDOW + 1000)
        assert found[-1].batch.records()[0].value == DefaultRecordBatch(batches[-1]).records()[0].value
        # Starting anywhere, including just before a window edge, finds the same batches.
        for index in (1, 250, 299, 301, 450, len(batches) - 1):
            assert [f.position for f in log.batches(positions[index])] == positions[index:]


# --- fuzzing ---------------------------------------------------------------------------------------------------


logs = st.lists(
    st.one_of(batch_like_bytes, legacy_like_bytes, st.sampled_from(VALID_BATCHES)), max_size=4
).map(b"".join)


def _walk_everything(data: bytes) -> list[FileBatch]:
    """Iterate the whole buffer and read every batch; only typed format errors (with a position) may escape."""
    found: list[FileBatch] = []
    try:
        for f in iter_batches(data, path="fuzz.log"):
            found.append(f)
            calls: list[Callable[[], object]] = [
                f.batch.ensure_valid,
                f.batch.records,
                f.batch.count_records,
                lambda: f.batch.base_offset,  # noqa: B023 - called inside this iteration
                lambda: f.batch.compression,  # noqa: B023
            ]
            for call in calls:
                try:
                    call()
                except StorageFormatError as err:
                    assert err.position is not None, err
    except StorageFormatError as err:
        assert err.path == "fuzz.log"
        assert err.position is not None
    return found


@settings(max_examples=400)
@given(logs)
def test_fuzz_iter_batches(data: bytes) -> None:
    found = _walk_everything(data)
    assert [f.position for f in found] == sorted({f.position for f in found})
    for f in found:
        assert f.end_position <= len(data)


@settings(max_examples=100)
@given(st.lists(st.sampled_from(VALID_BATCHES + VALID_ENTRIES), min_size=1, max_size=6), st.data())
def test_fuzz_valid_logs_with_any_cut(pieces: list[bytes], data: st.DataObject) -> None:
    log = b"".join(pieces)
    cut = data.draw(st.integers(0, len(log)))
    found = list(iter_batches(log[:cut]))
    expected = [p for p, piece in zip(_positions(pieces), pieces, strict=True) if p + len(piece) <= cut]
    assert [f.position for f in found] == expected


def _buffer_shapes(seed: int, many: bool) -> list[bytes | memoryview]:
    """Buffers of random sizes (some empty), every third one a memoryview; with ``many``, more than one
    ``pwritev`` takes (IOV_MAX) after them."""
    rng = random.Random(seed)
    buffers: list[bytes] = [rng.randbytes(rng.choice((0, 1, 7, 61, 300, 5000))) for _ in range(rng.randint(1, 40))]
    if many:
        buffers += [bytes([n % 256]) for n in range(os.sysconf("SC_IOV_MAX") + 5)]
    return [memoryview(b) if n % 3 == 0 else b for n, b in enumerate(buffers)]


@pytest.mark.parametrize("many", [False, True], ids=["few", "past-iov-max"])
def test_append_writes_every_buffer_in_order_through_a_short_write(tmp_path: Path, many: bool) -> None:
    """``append(*buffers)`` writes the buffers' bytes in order at the file's size, in ``pwritev`` calls of at most
    IOV_MAX buffers, and goes on after a short write. A regular file's write is cut short by the kernel only at
    a limit, so each case runs in a forked child under a real RLIMIT_FSIZE placed inside the append (inside a
    buffer, at a buffer edge, past the first IOV_MAX buffers): the first call writes up to the limit, the next one
    starts exactly there and fails with EFBIG, which names the file; the size is unchanged and the bytes before the
    limit are the buffers' in order. With the limit lifted, the next append overwrites the torn bytes."""
    buffers = _buffer_shapes(7 if many else 3, many)
    expected = b"".join(bytes(b) for b in buffers)
    path = tmp_path / "00000000000000000000.log"
    cuts = sorted({1, len(expected) // 2, len(bytes(buffers[0])) or 1, len(expected) - 1})

    def body() -> dict[str, object]:
        facts: dict[str, object] = {}
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        for cut in cuts:
            path.unlink(missing_ok=True)
            with FileRecords(path, writable=True, create=True) as log:
                log.append(b"head")
                resource.setrlimit(resource.RLIMIT_FSIZE, (4 + cut, hard))
                try:
                    log.append(*buffers)
                    facts[f"{cut}"] = "not refused"
                    continue
                except OSError as err:
                    refused = (err.errno, err.filename, str(err))
                finally:
                    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
                torn = path.read_bytes()
                size = log.size_in_bytes
                assert log.append(*buffers) == 4
                facts[f"{cut}"] = (refused, torn, size, log.size_in_bytes)
            facts[f"{cut} final"] = path.read_bytes()
        return facts

    facts = run_in_child(body, ignore_sigxfsz=True)
    for cut in cuts:
        (errno_, filename, message), torn, size, grown = facts[f"{cut}"]  # type: ignore[misc]
        assert errno_ == errno.EFBIG and filename == str(path), message
        assert f"append of {len(expected)} bytes at position 4" in message
        assert torn == b"head" + expected[:cut], f"the bytes before the limit at {cut} are the buffers' in order"
        assert size == 4, "a failed append leaves the size unchanged"
        assert grown == 4 + len(expected) and facts[f"{cut} final"] == b"head" + expected
