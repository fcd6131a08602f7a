"""Kafka's compression codecs, with Kafka's own framing for each (format doc §1.4).

What goes on disk for a compressed batch is not the bare output of each algorithm:

* gzip: an RFC 1952 stream, written with the header Java's ``GZIPOutputStream`` produces
  (``1f8b 08 00 00000000 00 ff``); the reader accepts concatenated members like the JDK reader.
* snappy: snappy-java's (xerial) stream framing, not Google's framing format: a 16-byte header, then
  ``i32 BE length | raw snappy block`` chunks of at most 32 KiB of input each.
* lz4: Kafka's own LZ4 frame writer (fixed FLG/BD, 64 KiB independent blocks, no checksums) and its reader,
  including the magic-0 quirk of a wrong header checksum (KAFKA-3160).
* zstd: a standard zstd frame, valid with magic 2 only.

Every decoder enforces ``max_size`` on its output before (or while) producing it, so a small corrupt or hostile
batch cannot make the reader allocate far more than the caller allowed. :func:`decompress_chunks` yields the
output in pieces of at most a few hundred KiB (a snappy block, a slice of an inflate or zstd stream), so a reader
that consumes them as they come holds one piece, never the whole output; lz4 blocks are decoded straight into the
buffer of their piece (no copy per block, no join of records spanning the blocks of a piece), sized from the
frame's blocks and never above ``max_size``. Library exceptions never escape:
malformed input raises :class:`~segments.errors.CorruptRecordError` (or a subclass) naming the codec, with the byte
position inside the compressed input when it is known.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Generator, Iterator
from typing import Literal, Self, TypeVar

import cramjam
import xxhash
import zstandard

from segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "CompressionType",
    "compress",
    "compression_from_attributes",
    "decompress",
    "decompress_chunks",
]

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024
"""Default cap on the decompressed size of one compressed region (bytes)."""

CHUNK_SIZE = 256 * 1024
"""Largest piece :func:`decompress_chunks` yields from an inflate or zstd stream (snappy yields its own blocks: at
most 64 KiB for Kafka's writer; lz4 whole blocks up to this size, or one larger block)."""

_CODEC_MASK = 0x07

# cramjam reports bad input with its own DecompressionError, but some decoders (zstd frame parsing) raise
# OSError and argument checks raise ValueError; all three mean "these bytes do not decode".
_LIBRARY_ERRORS = (cramjam.DecompressionError, OSError, ValueError)


class CompressionType(enum.IntEnum):
    """Compression codec ids stored in the low three attribute bits of a batch (and of a legacy message)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def name(self) -> str:
        """Kafka's ``CompressionType.name``: ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``. O(1)."""
        return self._name_.lower()

    @classmethod
    def from_name(cls, name: str) -> Self:
        """The codec whose Kafka name is exactly ``name`` (lower case, as in topic configs). O(1).

        Raises ``ValueError`` for any other string.
        """
        if name != name.lower() or name.upper() not in cls.__members__:
            raise ValueError(
                f"unknown compression name {name!r}; expected one of none, gzip, snappy, lz4, zstd"
            )
        return cls[name.upper()]


def compression_from_attributes(attributes: int) -> CompressionType:
    """The codec named by the low three bits of a batch's (or legacy message's) attributes. O(1).

    Ids 5-7 are undefined in Kafka and raise :class:`UnsupportedCompressionError`.
    """
    codec_id = attributes & _CODEC_MASK
    if codec_id > CompressionType.ZSTD:
        raise UnsupportedCompressionError(f"unknown compression type id {codec_id}")
    return CompressionType(codec_id)


def compress(codec: CompressionType, data: bytes | memoryview, *, level: int | None = None) -> bytes:
    """Compress ``data`` exactly the way Kafka's producer-side writer frames it for ``codec``. O(len(data)).

    ``level`` follows Kafka's ranges: gzip 1-9 (or -1 for the deflate default), lz4 1-17 (default 9), zstd
    -131072..22 (default 3); none and snappy take no level. An out-of-range level raises ``ValueError``.
    """
    codec = _known_codec(codec)
    if codec is CompressionType.NONE:
        _reject_level(codec, level)
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_compress(data, _checked_level(codec, level, -1, 1, 9, allowed_extra=-1))
    if codec is CompressionType.SNAPPY:
        _reject_level(codec, level)
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data, _checked_level(codec, level, _LZ4_DEFAULT_LEVEL, 1, 17))
    return bytes(cramjam.zstd.compress(data, level=_checked_level(codec, level, 3, -131072, 22)))


def decompress(
    codec: CompressionType,
    data: bytes | memoryview,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Decode one compressed region as Kafka's reader for ``magic`` would. O(len(data) + output size).

    Raises :class:`CorruptRecordError` for malformed input, :class:`RecordTooLargeError` when the output would
    exceed ``max_size`` bytes, :class:`UnsupportedCompressionError` for zstd below magic 2 or an unknown codec,
    and :class:`UnsupportedMagicError` for a magic other than 0, 1 or 2. Holds the whole output: readers that
    may meet hostile input use :func:`decompress_chunks`.
    """
    return b"".join(decompress_chunks(codec, data, magic=magic, max_size=max_size))


def decompress_chunks(
    codec: CompressionType,
    data: bytes | memoryview,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[bytes | bytearray]:
    """:func:`decompress`, yielding the output in pieces as it is produced. O(len(data) + output size) time,
    O(len(data) + one piece) memory.

    Argument checks (magic, codec) raise on the first ``next``; a malformed stream raises when the decoder
    reaches the damage, after the pieces before it were yielded, and an output passing ``max_size`` raises
    :class:`RecordTooLargeError` before the piece that would pass it is yielded.
    """
    if magic not in (0, 1, 2):
        raise UnsupportedMagicError(f"unknown magic {magic}")
    codec = _known_codec(codec)
    raw = bytes(data)
    sink = _Sink(codec, max_size)
    if codec is CompressionType.NONE:
        yield sink.take(raw, 0)
    elif codec is CompressionType.GZIP:
        yield from _gzip_decompress(raw, sink)
    elif codec is CompressionType.SNAPPY:
        yield from _snappy_decompress(raw, sink)
    elif codec is CompressionType.LZ4:
        # Kafka wrote magic-0 LZ4 frames with a header checksum over the wrong bytes and skips the check there.
        yield from _lz4_decompress(raw, sink, verify_header_checksum=magic != 0)
    elif magic < 2:
        raise UnsupportedCompressionError(f"zstd compression is not valid with magic {magic}")
    else:
        yield from _zstd_decompress(raw, sink)


def _known_codec(codec: int) -> CompressionType:
    """``codec`` as a CompressionType, so callers may also pass a bare id; unknown ids are unsupported."""
    if not CompressionType.NONE <= codec <= CompressionType.ZSTD:
        raise UnsupportedCompressionError(f"unknown compression type id {codec}")
    return CompressionType(codec)


_Chunk = TypeVar("_Chunk", bytes, bytearray)


class _Sink:
    """Counts the decompressed output handed out so far, refusing to let it grow past ``max_size``."""

    def __init__(self, codec: CompressionType, max_size: int) -> None:
        self.codec = codec
        self.max_size = max_size
        self.size = 0

    def room(self) -> int:
        return self.max_size - self.size

    def reserve(self, size: int, position: int) -> None:
        """Fail before decoding a unit whose (declared or bounded) output would pass the limit."""
        if size > self.room():
            raise RecordTooLargeError(
                f"{self.codec.name}: decompressed data would exceed the limit of {self.max_size} bytes "
                f"({self.size} so far, next unit up to {size})",
                position=position,
            )

    def take(self, chunk: _Chunk, position: int) -> _Chunk:
        """``chunk``, counted against the limit (raises before handing out a chunk that would pass it)."""
        self.reserve(len(chunk), position)
        self.size += len(chunk)
        return chunk

    def corrupt(self, what: str, position: int | None) -> CorruptRecordError:
        return CorruptRecordError(f"{self.codec.name}: {what}", position=position)

    def _check(self) -> None:
        assert 0 <= self.size <= self.max_size


def _checked_level(
    codec: CompressionType,
    level: int | None,
    default: int,
    low: int,
    high: int,
    *,
    allowed_extra: int | None = None,
) -> int:
    if level is None:
        return default
    if low <= level <= high or level == allowed_extra:
        return level
    raise ValueError(f"{codec.name} compression level {level} is outside {low}..{high}")


def _reject_level(codec: CompressionType, level: int | None) -> None:
    if level is not None:
        raise ValueError(f"{codec.name} compression takes no level (got {level})")


# --- gzip -----------------------------------------------------------------------------------------------------

# What java.util.zip.GZIPOutputStream writes: no flags, mtime 0, XFL 0, OS 255 ("unknown", JDK 16+).
_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")
_GZIP_FHCRC, _GZIP_FEXTRA, _GZIP_FNAME, _GZIP_FCOMMENT = 0x02, 0x04, 0x08, 0x10
_GZIP_TRAILER_SIZE = 8


def _gzip_compress(data: bytes | memoryview, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + (len(data) & 0xFFFFFFFF).to_bytes(
        4, "little"
    )
    return _GZIP_HEADER + body + trailer


def _gzip_header_end(raw: bytes, start: int, sink: _Sink) -> int:
    """Position just after the member header at ``start``; raises CorruptRecordError if there is none."""
    end = len(raw)
    if end - start < 10:
        raise sink.corrupt("truncated member header", start)
    if raw[start] != 0x1F or raw[start + 1] != 0x8B:
        raise sink.corrupt(f"not a gzip member (magic {raw[start : start + 2].hex()})", start)
    if raw[start + 2] != 8:
        raise sink.corrupt(f"unsupported compression method {raw[start + 2]}", start + 2)
    flags = raw[start + 3]
    pos = start + 10
    if flags & _GZIP_FEXTRA:
        if end - pos < 2:
            raise sink.corrupt("truncated extra field length", pos)
        pos += 2 + int.from_bytes(raw[pos : pos + 2], "little")
        if pos > end:
            raise sink.corrupt("truncated extra field", start)
    for flag, field in ((_GZIP_FNAME, "file name"), (_GZIP_FCOMMENT, "comment")):
        if flags & flag:
            nul = raw.find(0, pos)
            if nul < 0:
                raise sink.corrupt(f"unterminated {field} in member header", pos)
            pos = nul + 1
    if flags & _GZIP_FHCRC:
        if end - pos < 2:
            raise sink.corrupt("truncated header CRC", pos)
        expected = zlib.crc32(raw[start:pos]) & 0xFFFF
        stored = int.from_bytes(raw[pos : pos + 2], "little")
        if stored != expected:
            raise sink.corrupt(f"header CRC mismatch (stored 0x{stored:04x}, computed 0x{expected:04x})", pos)
        pos += 2
    return pos


def _gzip_decompress(raw: bytes, sink: _Sink) -> Iterator[bytes]:
    start = 0
    body = _gzip_header_end(raw, start, sink)
    while True:
        start = yield from _inflate_member(raw, start, body, sink)
        if start >= len(raw):
            return
        # Like the JDK reader Kafka uses, bytes after a member that do not open another member are ignored.
        try:
            body = _gzip_header_end(raw, start, sink)
        except CorruptRecordError:
            return


def _inflate_member(raw: bytes, member: int, body: int, sink: _Sink) -> Generator[bytes, None, int]:
    """Inflate the member whose deflate data starts at ``body``, yielding pieces of at most :data:`CHUNK_SIZE`
    bytes; return the position after its trailer."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    pending: bytes | memoryview = memoryview(raw)[body:]
    crc = 0
    size = 0
    while not inflater.eof:
        try:
            # Asking for one byte more than the room left is enough to detect an oversized output.
            chunk = inflater.decompress(pending, min(sink.room() + 1, CHUNK_SIZE))
        except zlib.error as err:
            raise sink.corrupt(f"invalid deflate data in the member starting here: {err}", member) from None
        progressed = bool(chunk) or len(inflater.unconsumed_tail) < len(pending)
        pending = inflater.unconsumed_tail
        if not progressed and not inflater.eof:
            raise sink.corrupt("deflate data ends before the end of the member", member)
        yield sink.take(chunk, member)
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
    trailer = len(raw) - len(inflater.unused_data)
    if len(raw) - trailer < _GZIP_TRAILER_SIZE:
        raise sink.corrupt("truncated member trailer", trailer)
    stored_crc = int.from_bytes(raw[trailer : trailer + 4], "little")
    stored_size = int.from_bytes(raw[trailer + 4 : trailer + 8], "little")
    if stored_crc != crc & 0xFFFFFFFF:
        raise sink.corrupt(
            f"CRC-32 mismatch (stored 0x{stored_crc:08x}, computed 0x{crc & 0xFFFFFFFF:08x})", trailer
        )
    if stored_size != size & 0xFFFFFFFF:
        raise sink.corrupt(f"size mismatch (stored {stored_size}, decompressed {size})", trailer + 4)
    return trailer + _GZIP_TRAILER_SIZE


# --- snappy (xerial framing) ----------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_VERSION = 1
_XERIAL_MIN_COMPATIBLE = 1
_XERIAL_HEADER = (
    _XERIAL_MAGIC + _XERIAL_VERSION.to_bytes(4, "big") + _XERIAL_MIN_COMPATIBLE.to_bytes(4, "big")
)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
_XERIAL_BLOCK_SIZE = 32 * 1024
# A chunk length equal to the first four magic bytes (read as i32 BE) marks a concatenated stream's header.
_XERIAL_MAGIC_HEAD = int.from_bytes(_XERIAL_MAGIC[:4], "big", signed=True)
# Best case of the raw format: a copy element with a 2-byte offset, 3 bytes long, repeats 64 bytes.
_SNAPPY_MAX_EXPANSION_NUM, _SNAPPY_MAX_EXPANSION_DEN = 64, 3


def _snappy_compress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return b"".join(parts)


def _is_xerial_header(raw: bytes, start: int, sink: _Sink) -> bool:
    """Whether a full xerial header at ``start`` carries the magic; an incompatible version is corrupt."""
    if raw[start : start + len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        return False
    version = int.from_bytes(raw[start + 8 : start + 12], "big", signed=True)
    if version < _XERIAL_MIN_COMPATIBLE:
        raise sink.corrupt(
            f"stream written with incompatible xerial version {version} (at least {_XERIAL_MIN_COMPATIBLE} needed)",
            start + 8,
        )
    return True


def _snappy_decompress(raw: bytes, sink: _Sink) -> Iterator[bytes]:
    if not raw:
        raise sink.corrupt("empty input", 0)
    if len(raw) < _XERIAL_HEADER_SIZE or not _is_xerial_header(raw, 0, sink):
        # snappy-java falls back to one raw block for anything not starting with its stream header.
        yield _snappy_block(raw, 0, sink)
        return
    pos = _XERIAL_HEADER_SIZE
    # snappy-java ends the stream silently when fewer than four bytes remain for a chunk length.
    while len(raw) - pos >= 4:
        chunk_size = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
        if chunk_size == _XERIAL_MAGIC_HEAD:
            if len(raw) - pos < _XERIAL_HEADER_SIZE:
                raise sink.corrupt("truncated header of a concatenated stream", pos)
            if not _is_xerial_header(raw, pos, sink):
                return
            pos += _XERIAL_HEADER_SIZE
            continue
        if chunk_size < 0:
            raise sink.corrupt(f"negative chunk length {chunk_size}", pos)
        body = pos + 4
        if len(raw) - body < chunk_size:
            raise sink.corrupt(f"chunk of {chunk_size} bytes runs past the end ({len(raw) - body} left)", pos)
        yield _snappy_block(raw[body : body + chunk_size], body, sink)
        pos = body + chunk_size


def _snappy_block(block: bytes, position: int, sink: _Sink) -> bytes:
    try:
        declared = int(cramjam.snappy.decompress_raw_len(block))
    except _LIBRARY_ERRORS as err:
        raise sink.corrupt(f"invalid raw block length preamble: {err}", position) from None
    sink.reserve(declared, position)
    # The decoder allocates the declared length before reading the block, so a six-byte block could claim (and
    # cost) up to the whole limit. No snappy element expands more than a 3-byte copy of 64 bytes does.
    if declared > len(block) * _SNAPPY_MAX_EXPANSION_NUM // _SNAPPY_MAX_EXPANSION_DEN:
        raise sink.corrupt(
            f"raw block of {len(block)} bytes declares {declared} decompressed bytes, more than it can encode",
            position,
        )
    try:
        out = bytes(cramjam.snappy.decompress_raw(block))
    except _LIBRARY_ERRORS as err:
        raise sink.corrupt(f"invalid raw block: {err}", position) from None
    if len(out) != declared:
        raise sink.corrupt(f"raw block declares {declared} bytes but holds {len(out)}", position)
    return sink.take(out, position)


# --- lz4 (Kafka's frame) --------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_DEFAULT_LEVEL = 9
_LZ4_FLG_VERSION_1 = 0x40
_LZ4_FLG_BLOCK_INDEPENDENT = 0x20
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_RESERVED = 0x03
_LZ4_BD_64KB = 4
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_LZ4_WRITE_FLG = _LZ4_FLG_VERSION_1 | _LZ4_FLG_BLOCK_INDEPENDENT
_LZ4_WRITE_BD = _LZ4_BD_64KB << 4


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor, seed=0) >> 8) & 0xFF


def _lz4_block_max(code: int) -> int:
    return 1 << (2 * code + 8)


_LZ4_FRAME_HEADER = _LZ4_MAGIC.to_bytes(4, "little") + bytes(
    (_LZ4_WRITE_FLG, _LZ4_WRITE_BD, _lz4_header_checksum(bytes((_LZ4_WRITE_FLG, _LZ4_WRITE_BD))))
)
_LZ4_WRITE_BLOCK = _lz4_block_max(_LZ4_BD_64KB)


def _lz4_compress(data: bytes | memoryview, level: int) -> bytes:
    view = memoryview(data)
    # Kafka uses lz4-java's fast compressor at its default level and the HC compressor for any other level.
    mode: Literal["default", "high_compression"] = (
        "default" if level == _LZ4_DEFAULT_LEVEL else "high_compression"
    )
    parts = [_LZ4_FRAME_HEADER]
    for start in range(0, len(view), _LZ4_WRITE_BLOCK):
        block = view[start : start + _LZ4_WRITE_BLOCK]
        packed = bytes(cramjam.lz4.compress_block(block, mode=mode, compression=level, store_size=False))
        if len(packed) >= len(block):
            parts.append((len(block) | _LZ4_UNCOMPRESSED_BIT).to_bytes(4, "little"))
            parts.append(bytes(block))
        else:
            parts.append(len(packed).to_bytes(4, "little"))
            parts.append(packed)
    parts.append(bytes(4))
    return b"".join(parts)


# LZ4's densest encoding (a match length extended by 255 per byte) decodes at most 255 bytes per input byte, plus
# the few bytes of a sequence's minimum match: a safe bound on what one compressed block can produce.
_LZ4_MAX_EXPANSION = 256
_LZ4_EXPANSION_SLACK = 64


def _lz4_decompress(raw: bytes, sink: _Sink, *, verify_header_checksum: bool) -> Iterator[bytearray]:
    """Kafka's ``KafkaLZ4BlockInputStream``: the frame's descriptor and every block header (and block checksum)
    are checked first, then the blocks are decoded straight into buffers of whole blocks, each yielded as a piece
    of at most :data:`CHUNK_SIZE` bytes (or one block). A buffer is sized by the blocks present (a stored block's size; a compressed one's at most its block maximum and
    :data:`_LZ4_MAX_EXPANSION` times its size), never above what ``sink`` still allows, so a frame claiming huge
    sizes allocates no more than its bytes can decode to within the limit. A content size in the descriptor is
    skipped, as Kafka's reader skips it. O(len(raw) + output) time, O(len(raw) + one piece) memory."""
    end = len(raw)
    if end < 6:
        raise sink.corrupt("frame ends inside its header", 0)
    magic = int.from_bytes(raw[0:4], "little")
    if magic != _LZ4_MAGIC:
        raise sink.corrupt(f"bad frame magic 0x{magic:08x} (expected 0x{_LZ4_MAGIC:08x})", 0)
    flg, bd = raw[4], raw[5]
    if flg & _LZ4_FLG_RESERVED:
        raise sink.corrupt(f"reserved FLG bits set (FLG 0x{flg:02x})", 4)
    if not flg & _LZ4_FLG_BLOCK_INDEPENDENT:
        raise sink.corrupt("dependent blocks are not supported", 4)
    if flg >> 6 != 1:
        raise sink.corrupt(f"frame version {flg >> 6} is not supported", 4)
    if bd & 0x8F:
        raise sink.corrupt(f"reserved BD bits set (BD 0x{bd:02x})", 5)
    code = (bd >> 4) & 0x07
    if not 4 <= code <= 7:
        raise sink.corrupt(f"block size code {code} is outside 4..7", 5)
    block_max = _lz4_block_max(code)
    pos = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        if end - pos < 8:
            raise sink.corrupt("frame ends inside the content size", pos)
        pos += 8
    if pos >= end:
        raise sink.corrupt("frame ends before the header checksum", pos)
    if verify_header_checksum:
        expected = _lz4_header_checksum(raw[4:pos])
        if raw[pos] != expected:
            raise sink.corrupt(
                f"frame descriptor checksum mismatch (stored 0x{raw[pos]:02x}, computed 0x{expected:02x})",
                pos,
            )
    pos += 1
    block_checksums = bool(flg & _LZ4_FLG_BLOCK_CHECKSUM)
    blocks: list[tuple[int, int, bool, int]] = []
    """(header position, size, stored, output bound) of every block."""
    while True:
        if end - pos < 4:
            raise sink.corrupt("frame ends before its end mark", pos)
        word = int.from_bytes(raw[pos : pos + 4], "little")
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        if size == 0:
            # The content checksum, when flagged, is read but not verified, as in Kafka's reader.
            if flg & _LZ4_FLG_CONTENT_CHECKSUM and end - pos - 4 < 4:
                raise sink.corrupt("frame ends inside the content checksum", pos + 4)
            break
        if size > block_max:
            raise sink.corrupt(f"block size {size} exceeds the frame maximum {block_max}", pos)
        body = pos + 4
        if end - body < size:
            raise sink.corrupt(f"block of {size} bytes runs past the end ({end - body} left)", pos)
        stored = bool(word & _LZ4_UNCOMPRESSED_BIT)
        block_bound = size if stored else min(block_max, size * _LZ4_MAX_EXPANSION + _LZ4_EXPANSION_SLACK)
        blocks.append((pos, size, stored, block_bound))
        pos = body + size
        if block_checksums:
            if end - pos < 4:
                raise sink.corrupt("frame ends inside a block checksum", pos)
            stored_sum = int.from_bytes(raw[pos : pos + 4], "little")
            computed = xxhash.xxh32_intdigest(raw[body : body + size], seed=0)
            if stored_sum != computed:
                raise sink.corrupt(
                    f"block checksum mismatch (stored 0x{stored_sum:08x}, computed 0x{computed:08x})", pos
                )
            pos += 4
    # Whole blocks are grouped into pieces of at most CHUNK_SIZE bytes (or one block's bound): a record spanning
    # blocks of a piece is not joined, and a reader consuming pieces as they come holds one, not the whole output.
    source = memoryview(raw)
    group: list[tuple[int, int, bool, int]] = []
    group_bound = 0
    for block in blocks:
        if group and group_bound + block[3] > CHUNK_SIZE:
            yield _lz4_decode_blocks(source, group, group_bound, sink)
            group, group_bound = [], 0
        group.append(block)
        group_bound += block[3]
    if group:
        yield _lz4_decode_blocks(source, group, group_bound, sink)


def _lz4_decode_blocks(
    source: memoryview, blocks: list[tuple[int, int, bool, int]], bound: int, sink: _Sink
) -> bytearray:
    """``blocks`` (checked by :func:`_lz4_decompress`: header position, size, stored, output bound) decoded
    straight into one buffer of at most ``bound`` bytes and what ``sink`` still allows, counted by ``sink``.
    O(bound)."""
    out = bytearray(min(bound, sink.room()))
    view = memoryview(out)
    written = 0
    for header, size, stored, block_bound in blocks:
        body = header + 4
        if stored:
            sink.reserve(written + size, header)
            view[written : written + size] = source[body : body + size]
            written += size
            continue
        try:
            written += int(cramjam.lz4.decompress_block_into(source[body : body + size], view[written:]))
        except _LIBRARY_ERRORS as err:
            if written + block_bound > len(out):
                # The buffer stops at the limit: this block may decode to more than it allows.
                sink.reserve(written + block_bound, header)
            raise sink.corrupt(f"invalid compressed block: {err}", header) from None
    view.release()
    # Shrinking a bytearray gives back its tail in place, without copying the output.
    del out[written:]
    return sink.take(out, blocks[0][0])


# --- zstd -----------------------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024
# ZSTD_WINDOWLOG_LIMIT_DEFAULT: the largest window a decoder accepts without being told otherwise.
_ZSTD_WINDOW_MAX = 1 << 27
_ZSTD_RAW, _ZSTD_RLE, _ZSTD_COMPRESSED = 0, 1, 2


def _zstd_decompress(raw: bytes, sink: _Sink) -> Iterator[bytes]:
    # Every frame header and block header is checked (and each window lowered) before a byte is decoded.
    shrunk, frames = _zstd_frames(raw, sink)
    decoder = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW_MAX)
    view = memoryview(shrunk)
    for start, end in frames:
        # read_to_iter decodes one frame in pieces of at most write_size bytes.
        pieces = decoder.read_to_iter(view[start:end], read_size=CHUNK_SIZE, write_size=CHUNK_SIZE)
        while True:
            try:
                piece = next(pieces, None)
            except zstandard.ZstdError as err:
                raise sink.corrupt(f"invalid frame data: {err}", start) from None
            if piece is None:
                break
            yield sink.take(piece, start)


def _zstd_frames(raw: bytes, sink: _Sink) -> tuple[bytes, list[tuple[int, int]]]:
    """``raw`` with each frame's window descriptor lowered to that frame's output bound (computed from frame
    headers and block headers alone), and the ``[start, end)`` span of every data frame. O(blocks).

    The decoder allocates a frame's whole window before decoding a byte, so a ten-byte frame declaring the
    largest window it accepts (128 MiB) would cost that much. No back-reference reaches past the frame's own
    output, so a window as large as the frame's output bound decodes every valid frame identically.
    """
    if not raw:
        raise sink.corrupt("empty input (no frame)", 0)
    shrunk = bytearray(raw)
    frames: list[tuple[int, int]] = []
    pos = 0
    while pos < len(raw):
        if len(raw) - pos < 4:
            raise sink.corrupt("truncated frame magic", pos)
        magic = int.from_bytes(raw[pos : pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if len(raw) - pos < 8:
                raise sink.corrupt("truncated skippable frame header", pos)
            skip = int.from_bytes(raw[pos + 4 : pos + 8], "little")
            if len(raw) - pos - 8 < skip:
                raise sink.corrupt("skippable frame runs past the end", pos)
            pos += 8 + skip
        elif magic == _ZSTD_MAGIC:
            start = pos
            frame_bound, window_position, pos = _zstd_frame_bound(raw, pos, sink)
            if window_position is not None:
                shrunk[window_position] = min(raw[window_position], _zstd_window_descriptor(frame_bound))
            frames.append((start, pos))
        else:
            raise sink.corrupt(f"unknown frame magic 0x{magic:08x}", pos)
    return bytes(shrunk), frames


def _zstd_window_size(descriptor: int) -> int:
    """The window a ``Window_Descriptor`` byte declares (RFC 8878 §3.1.1.1.2)."""
    window_base = 1 << (10 + (descriptor >> 3))
    return window_base + (window_base >> 3) * (descriptor & 0x07)


def _zstd_window_descriptor(size: int) -> int:
    """The smallest ``Window_Descriptor`` byte declaring a window of at least ``size`` bytes (the largest one
    when none does); descriptors order as the windows they declare."""
    return next((d for d in range(256) if _zstd_window_size(d) >= size), 255)


def _zstd_frame_bound(raw: bytes, start: int, sink: _Sink) -> tuple[int, int | None, int]:
    """Bound on one frame's output, the position of its window descriptor (None in single-segment frames) and
    the position after the frame."""
    end = len(raw)
    pos = start + 4
    if pos >= end:
        raise sink.corrupt("truncated frame header", pos)
    descriptor = raw[pos]
    pos += 1
    if descriptor & 0x08:
        raise sink.corrupt("reserved frame header bit set", pos - 1)
    single_segment = bool(descriptor & 0x20)
    window_size = _ZSTD_BLOCK_MAX
    window_position: int | None = None
    if not single_segment:
        if pos >= end:
            raise sink.corrupt("truncated window descriptor", pos)
        window_size = _zstd_window_size(raw[pos])
        if window_size > _ZSTD_WINDOW_MAX:
            # The reference decoder (and Kafka's zstd-jni) refuses these by default; lowering it must not
            # make such a frame readable here.
            raise sink.corrupt(f"window of {window_size} bytes exceeds the decoder limit {_ZSTD_WINDOW_MAX}", pos)
        window_position = pos
        pos += 1
    pos += (0, 1, 2, 4)[descriptor & 0x03]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if end - pos < fcs_size:
        raise sink.corrupt("truncated frame header", pos)
    content_size: int | None = None
    if fcs_size:
        content_size = int.from_bytes(raw[pos : pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
        pos += fcs_size
    block_max = min(window_size, _ZSTD_BLOCK_MAX)
    bound = 0
    while True:
        if end - pos < 3:
            raise sink.corrupt("truncated block header", pos)
        header = int.from_bytes(raw[pos : pos + 3], "little")
        last, kind, size = header & 1, (header >> 1) & 0x03, header >> 3
        payload = 1 if kind == _ZSTD_RLE else size
        if kind == _ZSTD_COMPRESSED:
            bound += block_max
        elif kind in (_ZSTD_RAW, _ZSTD_RLE):
            bound += size
        else:
            raise sink.corrupt("reserved block type", pos)
        if end - pos - 3 < payload:
            raise sink.corrupt(f"block of {payload} bytes runs past the end", pos)
        pos += 3 + payload
        if last:
            break
    if descriptor & 0x04:
        if end - pos < 4:
            raise sink.corrupt("truncated content checksum", pos)
        pos += 4
    if content_size is not None:
        if content_size > bound:
            # The decoder would allocate the declared size up front; blocks this small cannot fill it.
            raise sink.corrupt(
                f"frame declares {content_size} bytes of content but its blocks hold at most {bound}", start
            )
        bound = content_size
    return bound, window_position, pos
