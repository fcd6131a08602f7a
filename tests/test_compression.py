"""Kafka's codec framings: round trips, exact header bytes, Kafka reader quirks, limits, fuzzing, real files."""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import struct
import zlib
from pathlib import Path

import cramjam
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from segments.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    CompressionType,
    _Sink,
    compress,
    compression_from_attributes,
    decompress,
)
from segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from tests.conftest import CLIENTS_GENERATED, require_fixtures

CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]
ALL_CODECS = [CompressionType.NONE, *CODECS]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
LZ4_HEADER = bytes.fromhex("04224d18604082")


def _payload(seed: int, size: int) -> bytes:
    """Half random, half repetitive text, so both stored and compressed blocks occur."""
    rnd = random.Random(seed)
    parts: list[bytes] = []
    total = 0
    while total < size:
        part = (
            rnd.randbytes(rnd.randrange(1, 4000))
            if rnd.random() < 0.5
            else b"record %d " % rnd.randrange(99) * 50
        )
        parts.append(part)
        total += len(part)
    return b"".join(parts)[:size]


payloads = st.one_of(
    st.binary(max_size=3000),
    st.builds(_payload, st.integers(0, 2**32), st.integers(0, 200_000)),
)


# --- names and attribute bits ---------------------------------------------------------------------------------


def test_names_are_kafkas() -> None:
    assert [c.name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]
    for codec in CompressionType:
        assert CompressionType.from_name(codec.name) is codec
    for bad in ("GZIP", "Gzip", "brotli", ""):
        with pytest.raises(ValueError):
            CompressionType.from_name(bad)


def test_compression_from_attributes() -> None:
    for codec_id in range(5):
        # Only the low three bits name the codec; the timestamp-type, transactional, control bits do not.
        assert compression_from_attributes(codec_id | 0x78) == codec_id
    for codec_id in (5, 6, 7):
        with pytest.raises(UnsupportedCompressionError):
            compression_from_attributes(codec_id | 0x08)


def test_unknown_codec_and_magic() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"x")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedCompressionError):
        compress(7, b"x")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedMagicError):
        decompress(CompressionType.GZIP, compress(CompressionType.GZIP, b"x"), magic=3)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_needs_magic_2(magic: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match="magic"):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"abc"), magic=magic)


# --- round trips ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
@given(data=payloads)
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    if codec is not CompressionType.ZSTD:
        assert decompress(codec, packed, magic=1) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_empty(codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, b"")) == b""


@pytest.mark.parametrize(
    ("codec", "levels"),
    [
        (CompressionType.GZIP, [-1, 1, 9]),
        (CompressionType.LZ4, [1, 9, 17]),
        (CompressionType.ZSTD, [-131072, -5, 1, 22]),
    ],
)
def test_levels(codec: CompressionType, levels: list[int]) -> None:
    data = _payload(7, 100_000)
    for level in levels:
        assert decompress(codec, compress(codec, data, level=level)) == data


@pytest.mark.parametrize(
    ("codec", "level"),
    [
        (CompressionType.GZIP, 0),
        (CompressionType.GZIP, 10),
        (CompressionType.LZ4, 0),
        (CompressionType.LZ4, 18),
        (CompressionType.ZSTD, 23),
        (CompressionType.ZSTD, -131073),
        (CompressionType.SNAPPY, 1),
        (CompressionType.NONE, 1),
    ],
)
def test_bad_levels(codec: CompressionType, level: int) -> None:
    with pytest.raises(ValueError):
        compress(codec, b"abc", level=level)


# --- exact framing bytes --------------------------------------------------------------------------------------


def test_gzip_header_and_trailer() -> None:
    data = b"hello kafka" * 10
    packed = compress(CompressionType.GZIP, data)
    assert packed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert packed[-8:] == struct.pack("<II", zlib.crc32(data), len(data))
    assert gzip.decompress(packed) == data
    assert compress(CompressionType.GZIP, b"") == bytes.fromhex("1f8b08000000000000ff") + b"\x03\x00" + bytes(
        8
    )


def test_snappy_framing() -> None:
    assert compress(CompressionType.SNAPPY, b"") == XERIAL_HEADER
    data = _payload(3, 100_000)
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    pos, blocks = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data


def _lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    """(stored, block bytes) of a frame written with the fixed 7-byte header, checking the end mark."""
    pos, blocks = 7, list[tuple[bool, bytes]]()
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        if word == 0:
            assert pos + 4 == len(frame)
            return blocks
        size = word & 0x7FFFFFFF
        blocks.append((bool(word & 0x80000000), frame[pos + 4 : pos + 4 + size]))
        pos += 4 + size


def test_lz4_framing() -> None:
    assert LZ4_HEADER[6] == (xxhash.xxh32_intdigest(b"\x60\x40") >> 8) & 0xFF == 0x82
    assert compress(CompressionType.LZ4, b"") == LZ4_HEADER + bytes(4)
    text = b"abcdefgh" * 20_000  # 160000 bytes: blocks of 65536, 65536, 28928
    blocks = _lz4_blocks(compress(CompressionType.LZ4, text))
    assert [stored for stored, _ in blocks] == [False, False, False]
    sizes = [cramjam.lz4.decompress_block_into(block, bytearray(65536)) for _, block in blocks]
    assert sizes == [65536, 65536, 160_000 - 2 * 65536]


def test_lz4_incompressible_blocks_are_stored() -> None:
    data = random.Random(5).randbytes(150_000)
    packed = compress(CompressionType.LZ4, data)
    blocks = _lz4_blocks(packed)
    assert blocks == [(True, data[:65536]), (True, data[65536:131072]), (True, data[131072:])]
    assert decompress(CompressionType.LZ4, packed) == data


# --- reader rules ---------------------------------------------------------------------------------------------


def test_snappy_raw_block_without_header() -> None:
    data = _payload(11, 50_000)
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    # Shorter than a header, even when it starts like one: still a raw block (which this is not).
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER[:10])


def test_snappy_concatenated_streams() -> None:
    a, b = _payload(1, 40_000), _payload(2, 10)
    packed = compress(CompressionType.SNAPPY, a) + compress(CompressionType.SNAPPY, b)
    assert decompress(CompressionType.SNAPPY, packed) == a + b
    assert decompress(CompressionType.SNAPPY, packed + XERIAL_HEADER) == a + b


def test_snappy_stream_end_quirks() -> None:
    a = b"some data" * 100
    packed = compress(CompressionType.SNAPPY, a)
    # snappy-java stops without error on 1-3 trailing bytes, and on a magic-looking word whose header is not.
    assert decompress(CompressionType.SNAPPY, packed + b"\x00\x01\x02") == a
    assert decompress(CompressionType.SNAPPY, packed + b"\x82SNA" + bytes(12)) == a
    with pytest.raises(CorruptRecordError, match="truncated header") as err:
        decompress(CompressionType.SNAPPY, packed + b"\x82SNAPPY")
    assert err.value.position == len(packed)


def test_snappy_errors_and_positions() -> None:
    packed = compress(CompressionType.SNAPPY, b"x" * 100)
    with pytest.raises(CorruptRecordError, match="negative chunk length") as err:
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + b"\xff\xff\xff\xfe")
    assert err.value.position == 16
    with pytest.raises(CorruptRecordError, match="runs past the end") as err:
        decompress(CompressionType.SNAPPY, packed[:-1])
    assert err.value.position == 16
    with pytest.raises(CorruptRecordError, match="incompatible xerial version"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER[:8] + bytes(8))
    with pytest.raises(CorruptRecordError, match="empty"):
        decompress(CompressionType.SNAPPY, b"")


def test_gzip_concatenated_members_and_header_fields() -> None:
    a, b = _payload(4, 30_000), b"second member"
    # The stdlib writer's header has other XFL/OS bytes; the hand-made one sets FEXTRA, FNAME, FCOMMENT, FHCRC.
    fields = b"\x1f\x8b\x08\x1e\x00\x00\x00\x00\x00\x03" + b"\x03\x00abc" + b"name\x00" + b"comment\x00"
    member = fields + struct.pack("<H", zlib.crc32(fields) & 0xFFFF) + compress(CompressionType.GZIP, b)[10:]
    packed = gzip.compress(a, compresslevel=1) + member + compress(CompressionType.GZIP, b"")
    assert decompress(CompressionType.GZIP, packed) == a + b
    # The JDK reader Kafka uses ignores whatever follows a member when it does not open another member.
    assert decompress(CompressionType.GZIP, packed + b"garbage") == a + b
    assert decompress(CompressionType.GZIP, packed + b"\x1f\x8b\x08") == a + b
    bad_hcrc = bytearray(member)
    bad_hcrc[len(fields)] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="header CRC"):
        decompress(CompressionType.GZIP, bytes(bad_hcrc))


def test_gzip_errors_and_positions() -> None:
    packed = compress(CompressionType.GZIP, b"payload " * 50)
    with pytest.raises(CorruptRecordError, match="not a gzip member") as err:
        decompress(CompressionType.GZIP, b"\x00" * 20)
    assert err.value.position == 0
    with pytest.raises(CorruptRecordError, match="truncated member header"):
        decompress(CompressionType.GZIP, b"")
    with pytest.raises(CorruptRecordError, match="compression method"):
        decompress(CompressionType.GZIP, packed[:2] + b"\x07" + packed[3:])
    bad_crc = bytearray(packed)
    bad_crc[-8] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC-32 mismatch") as err:
        decompress(CompressionType.GZIP, bytes(bad_crc))
    assert err.value.position == len(packed) - 8
    bad_size = bytearray(packed)
    bad_size[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="size mismatch"):
        decompress(CompressionType.GZIP, bytes(bad_size))
    with pytest.raises(CorruptRecordError, match="trailer"):
        decompress(CompressionType.GZIP, packed[:-3])
    with pytest.raises(CorruptRecordError, match="deflate data ends"):
        decompress(CompressionType.GZIP, packed[:20])


def _lz4_frame(flg: int, bd: int, body: bytes, *, content_size: bytes = b"", hc: int | None = None) -> bytes:
    descriptor = bytes((flg, bd)) + content_size
    if hc is None:
        hc = (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF
    return bytes.fromhex("04224d18") + descriptor + bytes((hc,)) + body


def _lz4_block(data: bytes, *, checksum: bool = False) -> bytes:
    packed = bytes(cramjam.lz4.compress_block(data, store_size=False))
    return (
        struct.pack("<I", len(packed))
        + packed
        + (struct.pack("<I", xxhash.xxh32_intdigest(packed)) if checksum else b"")
    )


def test_lz4_header_checksum_by_magic() -> None:
    frame = bytearray(compress(CompressionType.LZ4, b"abc" * 100))
    # Kafka's magic-0 writer hashed the magic bytes too (KAFKA-3160), giving 0x1a instead of 0x82.
    frame[6] = (xxhash.xxh32_intdigest(bytes(frame[:6])) >> 8) & 0xFF
    assert frame[6] == 0x1A
    assert decompress(CompressionType.LZ4, bytes(frame), magic=0) == b"abc" * 100
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="descriptor checksum") as err:
            decompress(CompressionType.LZ4, bytes(frame), magic=magic)
        assert err.value.position == 6


def test_lz4_optional_fields() -> None:
    data = b"lz4 optional fields " * 30
    with_size = _lz4_frame(0x68, 0x40, _lz4_block(data) + bytes(4), content_size=struct.pack("<Q", len(data)))
    assert decompress(CompressionType.LZ4, with_size) == data
    with_checksums = _lz4_frame(0x74, 0x70, _lz4_block(data, checksum=True) + bytes(4) + b"\xde\xad\xbe\xef")
    # The content checksum is read, not verified (Kafka's reader); the block checksum is verified.
    assert decompress(CompressionType.LZ4, with_checksums) == data
    broken = bytearray(with_checksums)
    broken[-9] ^= 1
    with pytest.raises(CorruptRecordError, match="block checksum mismatch"):
        decompress(CompressionType.LZ4, bytes(broken))
    with pytest.raises(CorruptRecordError, match="content checksum"):
        decompress(CompressionType.LZ4, with_checksums[:-2])
    # An end mark with the "stored" bit set still ends the frame, as in Kafka.
    assert (
        decompress(CompressionType.LZ4, _lz4_frame(0x60, 0x40, _lz4_block(data) + b"\x00\x00\x00\x80"))
        == data
    )
    # Bytes after the end mark are ignored, as in Kafka.
    assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, data) + b"junk") == data


@pytest.mark.parametrize(
    ("flg", "bd", "message"),
    [
        (0x20, 0x40, "version 0"),
        (0xA0, 0x40, "version 2"),
        (0x61, 0x40, "reserved FLG"),
        (0x40, 0x40, "dependent blocks"),
        (0x60, 0x30, "block size code 3"),
        (0x60, 0x41, "reserved BD"),
        (0x60, 0xC0, "reserved BD"),
    ],
)
def test_lz4_rejected_descriptors(flg: int, bd: int, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decompress(CompressionType.LZ4, _lz4_frame(flg, bd, bytes(4)))


def test_lz4_block_errors() -> None:
    with pytest.raises(CorruptRecordError, match="bad frame magic") as err:
        decompress(CompressionType.LZ4, bytes(16))
    assert err.value.position == 0
    with pytest.raises(CorruptRecordError, match="exceeds the frame maximum") as err:
        decompress(CompressionType.LZ4, _lz4_frame(0x60, 0x40, struct.pack("<I", 65537) + bytes(65537)))
    assert err.value.position == 7
    with pytest.raises(CorruptRecordError, match="end mark"):
        decompress(CompressionType.LZ4, _lz4_frame(0x60, 0x40, _lz4_block(b"x" * 100)))
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        decompress(CompressionType.LZ4, _lz4_frame(0x60, 0x40, struct.pack("<I", 50) + bytes(10)))
    with pytest.raises(CorruptRecordError, match="invalid compressed block"):
        decompress(
            CompressionType.LZ4, _lz4_frame(0x60, 0x40, b"\x05\x00\x00\x00\xff\xff\xff\xff\xff" + bytes(4))
        )
    with pytest.raises(CorruptRecordError, match="header"):
        decompress(CompressionType.LZ4, LZ4_HEADER[:5])


def test_zstd_frames() -> None:
    a, b = _payload(8, 300_000), b"tail"
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"xyz"
    packed = compress(CompressionType.ZSTD, a) + skippable + compress(CompressionType.ZSTD, b, level=-3)
    assert decompress(CompressionType.ZSTD, packed) == a + b
    with pytest.raises(CorruptRecordError, match="unknown frame magic"):
        decompress(CompressionType.ZSTD, packed + b"\x00\x00\x00\x00")
    with pytest.raises(CorruptRecordError, match="no frame"):
        decompress(CompressionType.ZSTD, b"")
    with pytest.raises(CorruptRecordError, match="zstd"):
        decompress(CompressionType.ZSTD, packed[:-1])


# --- size limits ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_max_size(codec: CompressionType) -> None:
    data = _payload(9, 100_000)
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(RecordTooLargeError, match="exceed the limit of 99999 bytes"):
        decompress(codec, packed, max_size=len(data) - 1)


def _zstd_rle_bomb(blocks: int) -> bytes:
    """A frame of RLE blocks, 128 KiB of output per 4 input bytes, with no declared content size."""
    header = struct.pack("<I", 0xFD2FB528) + bytes((0x00, 0x38))  # no FCS, window 128 KiB
    body = b"".join(
        struct.pack("<I", ((i == blocks - 1) | (1 << 1) | (128 * 1024) << 3))[:3] + b"\x00"
        for i in range(blocks)
    )
    return header + body


def test_zstd_bomb_is_refused_before_decoding() -> None:
    assert decompress(CompressionType.ZSTD, _zstd_rle_bomb(4)) == bytes(512 * 1024)
    bomb = _zstd_rle_bomb(4096)  # 512 MiB from 16 KiB
    with pytest.raises(RecordTooLargeError):
        decompress(CompressionType.ZSTD, bomb)
    assert DEFAULT_MAX_DECOMPRESSED < 512 * 1024 * 1024


def test_declared_sizes_are_checked_before_allocation() -> None:
    # A raw snappy block whose preamble declares 4 GiB.
    with pytest.raises(RecordTooLargeError):
        decompress(CompressionType.SNAPPY, b"\xff\xff\xff\xff\x0f\x00")
    lz4_zeros = compress(CompressionType.LZ4, bytes(40 * 1024 * 1024))
    with pytest.raises(RecordTooLargeError):
        decompress(CompressionType.LZ4, lz4_zeros, max_size=1024 * 1024)
    gzip_zeros = compress(CompressionType.GZIP, bytes(40 * 1024 * 1024))
    with pytest.raises(RecordTooLargeError):
        decompress(CompressionType.GZIP, gzip_zeros, max_size=1024 * 1024)


def test_sink_invariant_under_random_steps() -> None:
    rnd = random.Random(42)
    for _ in range(200):
        sink = _Sink(CompressionType.GZIP, rnd.randrange(0, 5000))
        taken = 0
        for _ in range(rnd.randrange(1, 20)):
            chunk = bytes(rnd.randrange(0, 700))
            try:
                taken += len(sink.take(chunk, 0))
            except RecordTooLargeError:
                assert len(chunk) > sink.room()
            sink._check()
        assert taken == sink.size


# --- fuzzing: only typed errors escape ------------------------------------------------------------------------


def _decode_or_typed_error(codec: CompressionType, data: bytes, magic: int) -> None:
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, data, magic=magic, max_size=1 << 20)


@pytest.mark.parametrize("codec", ALL_CODECS)
@given(data=st.binary(max_size=400), magic=st.sampled_from([0, 1, 2]))
def test_fuzz_arbitrary_bytes(codec: CompressionType, data: bytes, magic: int) -> None:
    _decode_or_typed_error(codec, data, magic)


@pytest.mark.parametrize("codec", CODECS)
@given(seed=st.integers(0, 2**32), size=st.integers(0, 5000), edits=st.data())
def test_fuzz_mutated_streams(codec: CompressionType, seed: int, size: int, edits: st.DataObject) -> None:
    packed = bytearray(compress(codec, _payload(seed, size)))
    for _ in range(edits.draw(st.integers(1, 4))):
        position = edits.draw(st.integers(0, len(packed)))
        action = edits.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and position < len(packed):
            packed[position] ^= edits.draw(st.integers(1, 255))
        elif action == "cut":
            del packed[position:]
        else:
            packed[position:position] = edits.draw(st.binary(min_size=1, max_size=8))
    _decode_or_typed_error(codec, bytes(packed), 2)


# --- real files written by Kafka's record code ----------------------------------------------------------------


def _v2_batches(path: Path) -> list[bytes]:
    data = path.read_bytes()
    batches, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batches.append(data[pos : pos + 12 + length])
        pos += 12 + length
    assert pos == len(data)
    return batches


def _segment(folder: str) -> Path:
    return require_fixtures(CLIENTS_GENERATED / folder / "00000000000000000000.log")


@pytest.mark.parametrize(
    ("folder", "codec", "kafka_written"),
    [
        ("gzip-0", CompressionType.GZIP, True),
        ("snappy-0", CompressionType.SNAPPY, True),
        ("lz4-0", CompressionType.LZ4, True),
        ("zstd-aiokafka-0", CompressionType.ZSTD, False),
    ],
)
def test_fixture_records_regions(folder: str, codec: CompressionType, kafka_written: bool) -> None:
    plain = [batch[61:] for batch in _v2_batches(_segment("none-0"))]
    assert len(plain[2]) == 47278  # the README's figure for the 500-record batch
    batches = _v2_batches(_segment(folder))
    assert len(batches) == len(plain)
    for batch, expected in zip(batches, plain, strict=True):
        (attributes,) = struct.unpack_from(">h", batch, 21)
        assert compression_from_attributes(attributes) is codec
        region = memoryview(batch)[61:]
        assert decompress(codec, region) == expected
        if kafka_written and codec is not CompressionType.SNAPPY:
            # Same zlib / lz4 library output as the JDK's deflater and lz4-java: byte-identical batches.
            assert compress(codec, expected) == bytes(region)


def test_fixture_snappy_chunks() -> None:
    batch = _v2_batches(_segment("snappy-0"))[3]
    region = batch[61:]
    assert region[:16] == XERIAL_HEADER
    pos, sizes = 16, []
    while pos < len(region):
        (size,) = struct.unpack_from(">i", region, pos)
        sizes.append(size)
        pos += 4 + size
    assert sizes == [32774, 32774, 8462, 299]
    assert len(decompress(CompressionType.SNAPPY, region)) == 102484


def test_fixture_lz4_stored_block() -> None:
    batches = _v2_batches(_segment("lz4-0"))
    region = batches[3][61:]
    assert region[:7] == LZ4_HEADER
    (first,) = struct.unpack_from("<I", region, 7)
    assert first == 0x80000000 | 65536


def _legacy_messages(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(offset, magic, attributes, value) of each top-level magic 0/1 message."""
    messages, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        magic, attributes = data[pos + 16], data[pos + 17]
        key_at = pos + 18 + (8 if magic == 1 else 0)
        (key_length,) = struct.unpack_from(">i", data, key_at)
        value_at = key_at + 4 + max(key_length, 0)
        (value_length,) = struct.unpack_from(">i", data, value_at)
        messages.append((offset, magic, attributes, data[value_at + 4 : value_at + 4 + value_length]))
        pos += 12 + size
    assert pos == len(data)
    return messages


def _inner_count(inner: bytes) -> int:
    return len(_legacy_messages(inner))


def test_fixture_magic0_lz4_broken_header_checksum() -> None:
    path = _segment("magic0-lz4-0")
    expected = [json.loads(line) for line in (path.parent / "batches.jsonl").read_text().splitlines()]
    messages = _legacy_messages(path.read_bytes())
    assert len(messages) == len(expected) == 2
    for (_, magic, attributes, value), batch in zip(messages, expected, strict=True):
        assert magic == 0 and attributes & 7 == CompressionType.LZ4
        assert value[6] == 0x1A
        assert _inner_count(decompress(CompressionType.LZ4, value, magic=0)) == batch["recordCount"]
        with pytest.raises(CorruptRecordError, match="descriptor checksum"):
            decompress(CompressionType.LZ4, value, magic=2)


def test_fixture_legacy_wrappers() -> None:
    for folder in ("magic0-0", "magic1-0"):
        path = _segment(folder)
        expected = [json.loads(line) for line in (path.parent / "batches.jsonl").read_text().splitlines()]
        messages = _legacy_messages(path.read_bytes())
        for (_, magic, attributes, value), batch in zip(messages, expected, strict=True):
            codec = compression_from_attributes(attributes)
            if codec is not CompressionType.NONE:
                assert _inner_count(decompress(codec, value, magic=magic)) == batch["recordCount"]
