"""Record batches decoded into Arrow columns in bulk.

A magic-2 batch is a header plus ``records_count`` length-prefixed records. Only the record *lengths* need a
Python loop (each record's start depends on the previous length); every field inside the records is then
decoded for all records of many batches at once with numpy: zig-zag varints are unpacked byte-column by
byte-column, keys and values are gathered from the concatenated records regions with one mask and one
compaction each, and the Arrow arrays are built straight from those buffers. Headers, rare in practice, are
decoded per record and only when asked for.

Every record is checked as strictly as :func:`segments.records.decode_records` checks it: a field running past
its record, a varint longer than its type allows or bytes left over raise :class:`CorruptRecordError`; the
batch is then decoded again by the scalar decoder so the error carries its exact message and position.

Magic 0/1 messages are decoded by :mod:`segments.legacy` (one Python object per record) and converted with
``pyarrow.array``; such data is small and old.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logmgr.spark.schema import OutputColumns, arrow_schema
from segments.errors import CorruptRecordError
from segments.records import RECORD_BATCH_OVERHEAD, DefaultRecordBatch, Record, RecordBatch, TimestampType
from segments.varint import decode_varint

# A chunk is flushed as one Arrow batch at this many rows or this many bytes of records, whichever comes first:
# big enough that numpy's per-call overhead vanishes, small enough to bound a task's memory.
TARGET_ROWS = 65_536
TARGET_BYTES = 32 * 1024 * 1024

# Spark turns Kafka's epoch milliseconds into microseconds with an exact multiplication; beyond this it fails.
_MAX_SPARK_MILLIS = (2**63 - 1) // 1000

_I64 = npt.NDArray[np.int64]
_U8 = npt.NDArray[np.uint8]
_BOOL = npt.NDArray[np.bool_]

# The varint readers look up to 10 bytes past a start; the concatenated buffer is padded so they never fault.
_PAD = bytes(16)


class _Corrupt(Exception):
    """Raised inside the vectorised decode with the failing row (then re-raised with the failing batch's index);
    the caller re-decodes that batch with the scalar decoder to get the precise error."""

    def __init__(self, row: int) -> None:
        super().__init__(row)
        self.row = row
        self.batch = row


def _varints(buf: _U8, pos: _I64, max_bytes: int, bits: int) -> tuple[_I64, _I64]:
    """Zig-zag varints (``bits`` = 32 or 64) at every position of ``pos``: ``(values, sizes)``.

    Raises :class:`_Corrupt` for an encoding longer than ``max_bytes``. O(len(pos) x bytes per varint)."""
    first = buf[pos]
    raw = (first & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    pending = np.flatnonzero(first >= 0x80)
    shift = 7
    while len(pending):
        if shift >= 7 * max_bytes:
            raise _Corrupt(int(pending[0]))
        byte = buf[pos[pending] + size[pending]]
        raw[pending] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[pending] += 1
        pending = pending[byte >= 0x80]
        shift += 7
    if bits == 32:
        # Java's int arithmetic drops bits above 32, as segments.varint does.
        raw &= np.uint64(0xFFFFFFFF)
    half = (raw >> np.uint64(1)).astype(np.int64)
    return half ^ -(raw & np.uint64(1)).astype(np.int64), size


def _gather(buf: _U8, starts: _I64, lengths: _I64) -> tuple[_U8, npt.NDArray[np.int32]]:
    """Concatenate ``buf[starts[i]:starts[i]+lengths[i]]`` (non-overlapping, ascending) and their Arrow offsets.

    The buffer is a run of alternating gaps and fields, so one ``np.repeat`` of [gap, field, gap, ...] flags
    builds the selection mask and one boolean compaction copies the bytes: O(len(buf) + len(starts))."""
    n = len(starts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    if int(offsets[-1]) == 0:
        return np.empty(0, dtype=np.uint8), offsets
    ends = starts + lengths
    runs = np.empty(2 * n + 1, dtype=np.int64)
    runs[0] = starts[0]
    runs[1:-1:2] = lengths
    runs[2:-1:2] = starts[1:] - ends[:-1]
    runs[-1] = len(buf) - ends[-1]
    flags = np.zeros(2 * n + 1, dtype=np.bool_)
    flags[1::2] = True
    return buf[np.repeat(flags, runs)], offsets


def _binary_array(data: _U8, offsets: npt.NDArray[np.int32], valid: _BOOL | None, type_: pa.DataType) -> pa.Array:
    n = len(offsets) - 1
    if valid is None or bool(valid.all()):
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    bitmap = np.packbits(valid, bitorder="little")
    return pa.Array.from_buffers(
        type_, n, [pa.py_buffer(bitmap), pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def constant_string_array(text: str, n: int) -> pa.Array:
    """A string column holding ``text`` ``n`` times, built from two buffers. O(n x len(text))."""
    encoded = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)])


@dataclass(frozen=True, slots=True)
class _Pending:
    """A queued magic-2 batch: its view, its (decompressed) records region, where it starts in the ``.log``, and
    and its record count."""

    batch: DefaultRecordBatch
    region: bytes | memoryview
    position: int
    count: int


@dataclass(frozen=True, slots=True)
class _Fields:
    """The decoded columns of a chunk, before the constant and optional columns are added."""

    key: pa.Array
    value: pa.Array
    offset: _I64
    timestamp: _I64
    timestamp_type: npt.NDArray[np.int32]
    headers: pa.Array | None
    batch_base_offset: _I64


class ColumnarDecoder:
    """Accumulates the batches of one segment slice and emits :class:`pyarrow.RecordBatch` es in Spark's Kafka
    schema (plus the requested extra columns).

    ``add`` frames a batch's records (the only per-record Python work); ``flush`` decodes every other field of
    the queued records at once. Records outside ``[min_offset, max_offset)`` are dropped. Errors name
    ``path`` and the byte position in it.
    """

    def __init__(
        self,
        path: str,
        topic: str,
        partition: int,
        columns: OutputColumns,
        *,
        min_offset: int,
        max_offset: int,
    ) -> None:
        self.path = path
        self.topic = topic
        self.partition = partition
        self.segment = os.path.basename(path)
        self.columns = columns
        self.schema = arrow_schema(columns)
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.dropped = 0  # batches dropped as corrupt by flush(skip_corrupt=True), cumulative
        self._pending: list[_Pending] = []
        self._legacy: list[tuple[RecordBatch, list[Record]]] = []
        self._rows = 0
        self._bytes = 0

    @property
    def pending_rows(self) -> int:
        """Records queued and not yet flushed. O(1)."""
        return self._rows

    @property
    def pending_bytes(self) -> int:
        """Bytes of records regions queued. O(1)."""
        return self._bytes

    @property
    def holds_legacy(self) -> bool:
        """Whether the queue holds magic 0/1 messages (the two kinds are flushed separately). O(1)."""
        return bool(self._legacy)

    def add(
        self, batch: DefaultRecordBatch, region: bytes | memoryview, *, position: int, count: int | None = None
    ) -> None:
        """Queue a magic-2 batch found at ``position`` whose (decompressed) records region is ``region``, or a
        slice of ``count`` whole records of it (a batch too large to decode at once comes in slices). O(1); the
        records are framed and decoded by :meth:`flush`.

        Raises :class:`CorruptRecordError` for a record count the region cannot hold.
        """
        if self._legacy:
            raise RuntimeError("flush legacy rows before adding magic-2 batches")
        count = batch.count_records() if count is None else count
        if count < 0 or count > len(region):
            # Each record takes at least 7 bytes: refuse an absurd count before framing.
            self._raise_for(batch, position)
        if not count:
            if len(region):
                self._raise_for(batch, position)
            return
        self._pending.append(_Pending(batch, region, position, count))
        self._rows += count
        self._bytes += len(region)

    def add_legacy(self, batch: RecordBatch, records: list[Record]) -> None:
        """Queue ``records``, decoded from a magic 0/1 message (a plain message or a compressed wrapper: all of
        its records or a slice of them). O(1)."""
        if self._pending:
            raise RuntimeError("flush magic-2 rows before adding legacy batches")
        self._legacy.append((batch, records))
        self._rows += len(records)

    def flush(self, *, skip_corrupt: bool = False) -> pa.RecordBatch | None:
        """The queued records as one Arrow batch (``None`` when nothing survives the offset bounds). O(bytes).

        A corrupt record raises :class:`CorruptRecordError`; with ``skip_corrupt`` its batch is dropped (and
        counted in :attr:`dropped`) and the rest decoded.
        """
        try:
            if self._legacy:
                return self._flush_legacy()
            while self._pending:
                try:
                    return self._flush_v2()
                except _Corrupt as bad:
                    culprit = self._pending[bad.batch]
                    if not skip_corrupt:
                        self._raise_for(culprit.batch, culprit.position)
                    self.dropped += 1
                    del self._pending[bad.batch]
            return None
        finally:
            self._pending = []
            self._legacy = []
            self._rows = 0
            self._bytes = 0

    # -- magic 2 ----------------------------------------------------------------------------------------------

    def _raise_for(self, batch: RecordBatch, position: int) -> NoReturn:
        # The scalar decoder names the exact defect and its position inside the batch.
        try:
            batch.records()
        except CorruptRecordError as err:
            raise err.at(self.path, position_base=position) from None
        raise CorruptRecordError(
            "records do not match their declared lengths", path=self.path, position=position + RECORD_BATCH_OVERHEAD
        )

    def _flush_v2(self) -> pa.RecordBatch | None:
        pending = self._pending
        buf = np.frombuffer(b"".join([*(entry.region for entry in pending), _PAD]), dtype=np.uint8)
        counts = np.array([entry.count for entry in pending], dtype=np.int64)
        sizes = np.array([len(entry.region) for entry in pending], dtype=np.int64)
        region_starts = np.zeros(len(pending), dtype=np.int64)
        np.cumsum(sizes[:-1], out=region_starts[1:])
        starts = _frame(buf, region_starts, region_starts + sizes, counts)
        try:
            decoded = self._decode_fields(buf, starts, counts)
        except _Corrupt as bad:
            raise _Corrupt(int(np.searchsorted(np.cumsum(counts), bad.row, side="right"))) from None
        return self._assemble(decoded, counts)

    def _decode_fields(self, buf: _U8, starts: _I64, counts: _I64) -> _Fields:
        n = len(starts)
        body_size, size = _varints(buf, starts, 5, 32)
        body = starts + size
        ends = body + body_size  # _frame() proved every record ends where the next begins
        pos = body + 1  # skip the attributes byte
        timestamp_delta, size = _varints(buf, pos, 10, 64)
        pos += size
        offset_delta, size = _varints(buf, pos, 5, 32)
        pos += size
        key_size, size = _varints(buf, pos, 5, 32)
        pos += size
        key_start = pos
        key_len = np.maximum(key_size, 0)
        pos = pos + key_len
        _check(pos <= ends)
        value_size, size = _varints(buf, pos, 5, 32)
        pos += size
        value_start = pos
        value_len = np.maximum(value_size, 0)
        pos = pos + value_len
        _check(pos < ends)  # the header count is still to come
        header_count, size = _varints(buf, pos, 5, 32)
        pos += size
        _check(header_count >= 0)
        _check(header_count <= ends - pos)
        no_headers = header_count == 0
        _check(pos[no_headers] == ends[no_headers])

        batches = [entry.batch for entry in self._pending]
        batch_base_offset = np.repeat(np.array([b.base_offset for b in batches], dtype=np.int64), counts)
        offsets = batch_base_offset + offset_delta
        base_ts = np.repeat(np.array([b.base_timestamp for b in batches], dtype=np.int64), counts)
        timestamps = base_ts + timestamp_delta
        append_time = np.array([b.timestamp_type is TimestampType.LOG_APPEND_TIME for b in batches])
        if append_time.any():
            # LogAppendTime: every record reports the batch's max timestamp (the broker's append time).
            per_row = np.repeat(append_time, counts)
            max_ts = np.repeat(np.array([b.max_timestamp for b in batches], dtype=np.int64), counts)
            timestamps = np.where(per_row, max_ts, timestamps)
            timestamp_type = per_row.astype(np.int32)
        else:
            timestamp_type = np.zeros(n, dtype=np.int32)
        headers = None
        if self.columns.headers:
            headers = _headers(buf, pos, ends, header_count)
        elif not bool(no_headers.all()):
            # Not returned, but checked as the scalar decoder would check them.
            _headers(buf, pos, ends, header_count)
        return _Fields(
            key=_binary_array(*_gather(buf, key_start, key_len), key_size >= 0, pa.binary()),
            value=_binary_array(*_gather(buf, value_start, value_len), value_size >= 0, pa.binary()),
            offset=offsets,
            timestamp=timestamps,
            timestamp_type=timestamp_type,
            headers=headers,
            batch_base_offset=batch_base_offset,
        )

    def _assemble(self, decoded: _Fields, counts: _I64) -> pa.RecordBatch | None:
        batches = [entry.batch for entry in self._pending]
        offsets = decoded.offset
        n = len(offsets)
        arrays: dict[str, pa.Array] = {
            "key": decoded.key,
            "value": decoded.value,
            "topic": constant_string_array(self.topic, n),
            "partition": pa.array(np.full(n, self.partition, dtype=np.int32)),
            "offset": pa.array(offsets),
            "timestamp": pa.array(_spark_micros(decoded.timestamp), type=pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array(decoded.timestamp_type),
        }
        if decoded.headers is not None:
            arrays["headers"] = decoded.headers
        if self.columns.producer_id:
            arrays["producerId"] = pa.array(
                np.repeat(np.array([b.producer_id for b in batches], dtype=np.int64), counts)
            )
        if self.columns.is_transactional:
            arrays["isTransactional"] = pa.array(np.repeat(np.array([b.is_transactional for b in batches]), counts))
        if self.columns.segment:
            arrays["segment"] = constant_string_array(self.segment, n)
        if self.columns.batch_base_offset:
            arrays["batchBaseOffset"] = pa.array(decoded.batch_base_offset)
        table = pa.RecordBatch.from_arrays([arrays[field.name] for field in self.schema], schema=self.schema)
        if offsets[0] < self.min_offset or offsets[-1] >= self.max_offset:  # offsets ascend within a partition
            keep = (offsets >= self.min_offset) & (offsets < self.max_offset)
            if not bool(keep.all()):
                table = table.filter(pa.array(keep))
        return table if table.num_rows else None

    # -- magic 0/1 --------------------------------------------------------------------------------------------

    def _flush_legacy(self) -> pa.RecordBatch | None:
        rows: list[tuple[RecordBatch, Record]] = [
            (batch, record)
            for batch, records in self._legacy
            for record in records
            if self.min_offset <= record.offset < self.max_offset
        ]
        if not rows:
            return None
        n = len(rows)
        arrays: dict[str, pa.Array] = {
            "key": pa.array([record.key for _, record in rows], type=pa.binary()),
            "value": pa.array([record.value for _, record in rows], type=pa.binary()),
            "topic": constant_string_array(self.topic, n),
            "partition": pa.array(np.full(n, self.partition, dtype=np.int32)),
            "offset": pa.array([record.offset for _, record in rows], type=pa.int64()),
            "timestamp": pa.array(
                _spark_micros(np.array([record.timestamp for _, record in rows], dtype=np.int64)),
                type=pa.timestamp("us", tz="UTC"),
            ),
            "timestampType": pa.array([int(batch.timestamp_type) for batch, _ in rows], type=pa.int32()),
            "headers": pa.nulls(n, type=self.schema.field("headers").type) if self.columns.headers else None,
            "producerId": pa.array(np.full(n, -1, dtype=np.int64)),
            "isTransactional": pa.array(np.zeros(n, dtype=np.bool_)),
            "segment": constant_string_array(self.segment, n),
            "batchBaseOffset": pa.array([batch.base_offset for batch, _ in rows], type=pa.int64()),
        }
        return pa.RecordBatch.from_arrays([arrays[field.name] for field in self.schema], schema=self.schema)


# Below this many batches still framing, the per-step numpy overhead exceeds a plain Python loop per record.
_VECTOR_FRAMING_MIN_BATCHES = 8


def _frame(buf: _U8, region_starts: _I64, region_ends: _I64, counts: _I64) -> _I64:
    """Where every record starts (its length varint), for all batches at once.

    Records of one batch are chained (each starts where the previous ends), but batches are independent: step
    ``k`` finds record ``k`` of every batch that has one with a handful of numpy operations, so the Python-level
    work is one step per record of the *longest* batch rather than one per record. The last few long batches
    finish in a scalar loop. Raises :class:`_Corrupt` with the index of a batch whose lengths do not frame its
    records exactly. O(records + max(counts) numpy steps).
    """
    row_base = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=row_base[1:])
    starts = np.empty(int(counts.sum()), dtype=np.int64)
    pos = region_starts.copy()
    active = np.flatnonzero(counts > 0)
    step = 0
    while len(active) >= _VECTOR_FRAMING_MIN_BATCHES:
        here = pos[active]
        ends = region_ends[active]
        _batch_check(here < ends, active)
        starts[row_base[active] + step] = here
        try:
            size, width = _varints(buf, here, 5, 32)
        except _Corrupt as bad:
            raise _Corrupt(int(active[bad.row])) from None
        after = here + width + size
        _batch_check((size >= 6) & (after <= ends), active)
        pos[active] = after
        step += 1
        active = active[counts[active] > step]
    data = buf.data  # a bytes-like view: the scalar tail indexes it without copying the chunk
    for index in active.tolist():
        cursor = int(pos[index])
        end = int(region_ends[index])
        row = int(row_base[index])
        try:
            for k in range(step, int(counts[index])):
                starts[row + k] = cursor
                record_size, body = decode_varint(data, cursor)
                if record_size < 6 or body + record_size > end:
                    raise _Corrupt(index)
                cursor = body + record_size
        except CorruptRecordError:
            raise _Corrupt(index) from None
        pos[index] = cursor
    _batch_check(pos == region_ends, np.arange(len(counts)))
    return starts


def _batch_check(condition: _BOOL, batches: _I64) -> None:
    if not bool(condition.all()):
        raise _Corrupt(int(batches[int(np.argmin(condition))]))


def _check(condition: _BOOL) -> None:
    if not bool(condition.all()):
        raise _Corrupt(int(np.argmin(condition)))


def _spark_micros(millis: _I64) -> _I64:
    if len(millis) and int(np.abs(millis).max()) > _MAX_SPARK_MILLIS:
        bad = int(millis[np.argmax(np.abs(millis))])
        raise CorruptRecordError(f"timestamp {bad} ms is outside the range Spark can represent")
    return millis * 1000


def _headers(buf: _U8, pos: _I64, ends: _I64, header_count: _I64) -> pa.Array:
    """Kafka headers of every record as ``list<struct<key string, value binary>>``; null for a record with none
    (as Spark's Kafka source). Decoded per header: records rarely carry many. O(header bytes)."""
    data = buf.tobytes()
    n = len(pos)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    keys: list[str] = []
    values: list[bytes | None] = []
    with_headers = np.flatnonzero(header_count)
    counts = header_count.astype(np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    for row in with_headers.tolist():
        cursor = int(pos[row])
        end = int(ends[row])
        try:
            for _ in range(int(header_count[row])):
                key_size, cursor = decode_varint(data, cursor)
                if key_size < 0 or cursor + key_size > end:
                    raise _Corrupt(row)
                # Kafka's consumer decodes header keys with replacement characters for invalid UTF-8.
                keys.append(data[cursor : cursor + key_size].decode("utf-8", "replace"))
                cursor += key_size
                value_size, cursor = decode_varint(data, cursor)
                if value_size >= 0:
                    if cursor + value_size > end:
                        raise _Corrupt(row)
                    values.append(data[cursor : cursor + value_size])
                    cursor += value_size
                else:
                    values.append(None)
        except CorruptRecordError:
            raise _Corrupt(row) from None
        if cursor != end:
            raise _Corrupt(row)
    struct = pa.StructArray.from_arrays(
        [pa.array(keys, type=pa.string()), pa.array(values, type=pa.binary())],
        fields=[pa.field("key", pa.string()), pa.field("value", pa.binary())],
    )
    no_headers = header_count == 0
    mask = pa.array(no_headers) if bool(no_headers.any()) else None
    return pa.ListArray.from_arrays(pa.array(list_offsets), struct, mask=mask)
