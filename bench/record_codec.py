"""Record decode and encode throughput (records/s): ours next to kafka-python and aiokafka on the same batches.

Input: ``--batches`` batches (default 100) of 1000 records each: 10-byte keys, 100-byte log-like values
(compressible about 2x), increasing timestamps, no headers. Every implementation decodes the *same* batch bytes
(built once by our ``build_batch``, uncompressed and lz4) and encodes from the *same* ``(key, value, timestamp,
headers)`` tuples.

* decode = construct the batch view and iterate every record, reading offset, timestamp, key and value;
* encode = build one batch from 1000 tuples, compression included (ours converts each tuple to a
  ``SimpleRecord``, its header pairs to ``Header`` objects when it has any; the peers call ``builder.append`` per
  tuple).

Before timing, every decoder's records are compared with the input, and every encoder's output is decoded by
ours and compared too (so the peers read our lz4 frames and we read theirs).

Peers: kafka-python (``kafka.record.default_records``; its lz4 needs the ``lz4`` package), aiokafka's C
extension (``aiokafka.record._crecords``) and aiokafka's pure-Python classes (``_DefaultRecordBatchPy``,
``_DefaultRecordBatchBuilderPy``). A peer that cannot run a codec is reported as n/a with the reason.

Run: ``.venv/bin/python bench/record_codec.py [--batches N | --quick] [--repeats R] [--profile]``.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from itertools import starmap
from typing import Any, Protocol

from _common import bench_main, best_of, profile, repeats, table, text_value

from segments.compression import CompressionType
from segments.records import DefaultRecordBatch, Header, SimpleRecord, build_batch

RECORDS_PER_BATCH = 1000
VALUE_SIZE = 100
DEFAULT_BATCHES = 100
QUICK_BATCHES = 10
BASE_TIMESTAMP = 1_700_000_000_000
CODECS = (CompressionType.NONE, CompressionType.LZ4)

Item = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]
"""One record to encode: (key, value, timestamp, headers), the shape producer clients take."""


class _RecordLike(Protocol):
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


Decoder = Callable[[bytes], Iterable[Any]]
Encoder = Callable[[Sequence[Item], CompressionType], bytes | bytearray]


@dataclass(frozen=True, slots=True)
class Impl:
    """One implementation: how it decodes and encodes, and why it cannot run a codec (``None`` = it can)."""

    name: str
    decode: Decoder
    encode: Encoder
    unavailable: Callable[[CompressionType], str | None]


def _decode_ours(buf: bytes) -> Iterable[Any]:
    return DefaultRecordBatch(buf).records()


def _encode_ours(items: Sequence[Item], codec: CompressionType) -> bytes:
    return build_batch(
        [
            SimpleRecord(value, key, ts, tuple(starmap(Header, headers)) if headers else ())
            for key, value, ts, headers in items
        ],
        compression=codec,
    )


def _peer_encoder(builder_class: Any) -> Encoder:
    def encode(items: Sequence[Item], codec: CompressionType) -> bytes | bytearray:
        # magic, compression, is_transactional, producer id/epoch, base sequence, batch size (never full here)
        builder = builder_class(2, int(codec), 0, -1, -1, -1, 1 << 30)
        append = builder.append
        for offset, (key, value, ts, headers) in enumerate(items):
            append(offset, ts, key, value, headers)
        result: bytes | bytearray = builder.build()
        return result

    return encode


def _always(_: CompressionType) -> str | None:
    return None


def implementations() -> list[Impl]:
    """Ours first, then every peer that imports (a missing package is reported, not fatal). O(1)."""
    impls = [Impl("ours (logmgr)", _decode_ours, _encode_ours, _always)]
    try:
        import kafka.codec
        from kafka.record.default_records import DefaultRecordBatch as KBatch
        from kafka.record.default_records import DefaultRecordBatchBuilder as KBuilder

        def kafka_unavailable(codec: CompressionType) -> str | None:
            if codec is CompressionType.LZ4 and not kafka.codec.has_lz4():
                return "kafka-python needs the 'lz4' package for lz4"
            return None

        impls.append(
            Impl(
                f"kafka-python {_version('kafka-python')}", KBatch, _peer_encoder(KBuilder), kafka_unavailable
            )
        )
    except ImportError as err:
        print(f"kafka-python not importable: {err}")
    try:
        from aiokafka.record import default_records as ak
    except ImportError as err:
        print(f"aiokafka not importable: {err}")
        return impls
    ak_version = _version("aiokafka")
    try:
        from aiokafka.record._crecords import DefaultRecordBatch as CBatch
        from aiokafka.record._crecords import DefaultRecordBatchBuilder as CBuilder

        impls.append(Impl(f"aiokafka {ak_version} C ext", CBatch, _peer_encoder(CBuilder), _always))
    except ImportError as err:
        print(f"aiokafka C extension not importable: {err}")
    impls.append(
        Impl(
            f"aiokafka {ak_version} pure Python",
            ak._DefaultRecordBatchPy,
            _peer_encoder(ak._DefaultRecordBatchBuilderPy),
            _always,
        )
    )
    return impls


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def make_items(batches: int, seed: int = 7) -> list[list[Item]]:
    """``batches`` lists of 1000 (key, value, timestamp, headers) tuples. O(batches * 1000)."""
    rng = random.Random(seed)
    out: list[list[Item]] = []
    for b in range(batches):
        base = BASE_TIMESTAMP + b * RECORDS_PER_BATCH
        out.append(
            [(b"key-%06d" % i, text_value(rng, VALUE_SIZE), base + i, []) for i in range(RECORDS_PER_BATCH)]
        )
    return out


def consume(decode: Decoder, batches: Sequence[bytes]) -> int:
    """Decode every batch and read offset, timestamp, key and value of every record; returns a sum so the reads
    are not dead code. O(records)."""
    total = 0
    for buf in batches:
        for r in decode(buf):
            total += r.offset + r.timestamp + len(r.key) + len(r.value)
    return total


def encode_all(encode: Encoder, items: Sequence[Sequence[Item]], codec: CompressionType) -> int:
    """Encode every batch; returns the total encoded size. O(records)."""
    return sum(len(encode(batch, codec)) for batch in items)


def _expected(
    items: Sequence[Item],
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [(i, ts, k, v, list(h)) for i, (k, v, ts, h) in enumerate(items)]


def _as_tuples(
    records: Iterable[Any],
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out = []
    for r in records:
        headers = [(h.key, h.value) if isinstance(h, Header) else (h[0], h[1]) for h in r.headers]
        out.append((r.offset, r.timestamp, r.key, r.value, headers))
    return out


def check_agreement(
    impl: Impl, codec: CompressionType, items: Sequence[Sequence[Item]], inputs: Sequence[bytes]
) -> None:
    """Raise ``AssertionError`` unless ``impl`` decodes ``inputs`` to ``items`` and its encoding of ``items``
    decodes (by ours) to ``items`` with the codec's attribute set. O(records)."""
    for batch_items, buf in zip(items, inputs, strict=True):
        expected = _expected(batch_items)
        if _as_tuples(impl.decode(buf)) != expected:
            raise AssertionError(f"{impl.name} decodes {codec.name} batches differently from the input")
        encoded = bytes(impl.encode(batch_items, codec))
        ours = DefaultRecordBatch(encoded)
        ours.ensure_valid()
        if ours.compression is not codec:
            raise AssertionError(f"{impl.name} wrote compression {ours.compression.name}, asked {codec.name}")
        if _as_tuples(ours.records()) != expected:
            raise AssertionError(f"{impl.name} encodes {codec.name} batches that we decode differently")


@dataclass(frozen=True, slots=True)
class Row:
    """One implementation on one codec: best times in seconds (``None`` when n/a) and encoded bytes."""

    impl: str
    codec: CompressionType
    decode_s: float | None
    encode_s: float | None
    encoded_bytes: int | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class CodecResult:
    """All rows of one run."""

    records: int
    runs: int
    rows: list[Row]

    def _ours(self, codec: CompressionType) -> Row:
        return next(r for r in self.rows if r.codec is codec and r.impl.startswith("ours"))

    def ratio(self, row: Row, attr: str) -> float | None:
        """Our rate divided by ``row``'s rate for ``attr`` (``decode_s``/``encode_s``): >1 means ours is faster."""
        mine, theirs = getattr(self._ours(row.codec), attr), getattr(row, attr)
        if mine is None or theirs is None:
            return None
        return float(theirs / mine)

    def report(self) -> str:
        """The result table, as printed. O(rows)."""

        def rate(seconds: float | None) -> str:
            return "n/a" if seconds is None else f"{self.records / seconds:,.0f}"

        def ratio(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.2f}"

        rows = [
            [
                row.codec.name,
                row.impl,
                rate(row.decode_s),
                rate(row.encode_s),
                ratio(self.ratio(row, "decode_s")),
                ratio(self.ratio(row, "encode_s")),
                "n/a" if row.encoded_bytes is None else f"{row.encoded_bytes / self.records:.1f}",
            ]
            for row in self.rows
        ]
        notes = [f"n/a: {row.impl} {row.codec.name}: {row.note}" for row in self.rows if row.note]
        return "\n".join(
            [
                f"{self.records:,} records per pass ({self.records // RECORDS_PER_BATCH} batches x "
                f"{RECORDS_PER_BATCH}), {VALUE_SIZE}-byte values; best of {self.runs} runs; "
                "ratio = ours rate / peer rate (>1: ours faster)",
                "",
                table(
                    [
                        "codec",
                        "implementation",
                        "decode rec/s",
                        "encode rec/s",
                        "ours/peer dec",
                        "ours/peer enc",
                        "bytes/rec",
                    ],
                    rows,
                ),
                *notes,
            ]
        )

    def summary(self) -> str:
        """Lines for run_all. O(rows)."""
        lines = []
        for row in self.rows:
            if row.impl.startswith("ours"):
                continue
            dec, enc = self.ratio(row, "decode_s"), self.ratio(row, "encode_s")
            if dec is None or enc is None:
                continue
            lines.append(
                f"record codec {row.codec.name:>4} vs {row.impl}: ours/peer decode {dec:.2f}, encode {enc:.2f}"
            )
        for codec in CODECS:
            ours = self._ours(codec)
            if ours.decode_s is not None and ours.encode_s is not None:
                lines.append(
                    f"record codec {codec.name:>4} ours: decode {self.records / ours.decode_s:,.0f} rec/s, "
                    f"encode {self.records / ours.encode_s:,.0f} rec/s"
                )
        return "\n".join(lines)


def measure(batches: int, runs: int, *, show_profile: bool = False) -> CodecResult:
    """Check agreement, then time every implementation on every codec. O(runs * impls * records)."""
    items = make_items(batches)
    impls = implementations()
    rows = []
    for codec in CODECS:
        inputs = [_encode_ours(batch, codec) for batch in items]
        for impl in impls:
            reason = impl.unavailable(codec)
            if reason is not None:
                rows.append(Row(impl.name, codec, None, None, None, reason))
                continue
            check_agreement(impl, codec, items, inputs)
            decode_s, _ = best_of(partial(consume, impl.decode, inputs), runs)
            encode_s, size = best_of(partial(encode_all, impl.encode, items, codec), runs)
            rows.append(Row(impl.name, codec, decode_s, encode_s, size))
        if show_profile:
            print(f"--- profile: ours decode {codec.name}")
            print(profile(partial(consume, _decode_ours, inputs)))
            print(f"--- profile: ours encode {codec.name}")
            print(profile(partial(encode_all, _encode_ours, items, codec)))
    return CodecResult(batches * RECORDS_PER_BATCH, runs, rows)


def run(args: argparse.Namespace) -> CodecResult:
    """Measure and print the table. O(runs * impls * records)."""
    batches = args.batches if args.batches is not None else (QUICK_BATCHES if args.quick else DEFAULT_BATCHES)
    result = measure(batches, repeats(args, 5), show_profile=args.profile)
    print(result.report())
    return result


def add_args(parser: argparse.ArgumentParser) -> None:
    """This benchmark's own option. O(1)."""
    parser.add_argument(
        "--batches",
        type=int,
        default=None,
        help=f"batches of {RECORDS_PER_BATCH} records (default {DEFAULT_BATCHES}, {QUICK_BATCHES} with --quick)",
    )


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * impls * records)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
