"""Record batches decoded into Arrow columns in bulk.

The records of many magic-2 batches are framed, checked and copied into Arrow-ready buffers (offsets,
timestamps, key/value offsets + data + validity bitmaps, headers) by one native kernel
(:func:`segments._native.records.decode_columns`, two passes over the bytes without the GIL); the Arrow arrays
are built straight from those buffers, without copying them again.

Every record is checked as strictly as :func:`segments.records.decode_records` checks it (the kernel shares
its record parser): a field running past its record, a varint longer than its type allows or bytes left over
mark the batch corrupt; the batch is then decoded again by the scalar decoder so the error carries its exact
message and position.

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
from segments._native.records import RecordColumns, decode_columns
from segments.errors import CorruptRecordError
from segments.records import RECORD_BATCH_OVERHEAD, DefaultRecordBatch, Record, RecordBatch, TimestampType

# A chunk is flushed as one Arrow batch at this many rows or this many bytes of records, whichever comes first:
# big enough that the per-chunk work (one kernel call, Arrow and numpy assembly) vanishes per row, small enough to
# bound a task's memory.
TARGET_ROWS = 65_536
TARGET_BYTES = 32 * 1024 * 1024

# Spark turns Kafka's epoch milliseconds into microseconds with an exact multiplication; beyond this it fails.
_MAX_SPARK_MILLIS = (2**63 - 1) // 1000

_I64 = npt.NDArray[np.int64]


class _Corrupt(Exception):
    """A queued batch (by index) whose records the kernel refused; the caller re-decodes it with the scalar
    decoder to get the precise error."""

    def __init__(self, batch: int) -> None:
        super().__init__(batch)
        self.batch = batch


def _binary_array(
    offsets: bytearray, data: bytearray, validity: bytearray | None, nulls: int, n: int, type_: pa.DataType
) -> pa.Array:
    """An Arrow binary array over the kernel's buffers (no copy); the bitmap is dropped when nothing is null."""
    bitmap = pa.py_buffer(validity) if nulls and validity is not None else None
    return pa.Array.from_buffers(
        type_, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls if bitmap else 0
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

    ``add`` queues a batch's records region; ``flush`` frames and decodes every queued record in one native call
    and builds the Arrow arrays on its buffers. Records outside ``[min_offset, max_offset)`` are dropped. Errors name
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
        batches = [entry.batch for entry in pending]
        counts = [entry.count for entry in pending]
        decoded = decode_columns(
            [entry.region for entry in pending],
            counts,
            [batch.base_offset for batch in batches],
            [batch.base_timestamp for batch in batches],
            [batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None for batch in batches],
            self.columns.headers,
        )
        if isinstance(decoded, int):
            raise _Corrupt(decoded)
        n = decoded.rows
        return self._assemble(
            _Fields(
                key=_binary_array(
                    decoded.key_offsets, decoded.key_data, decoded.key_validity, decoded.key_nulls, n, pa.binary()
                ),
                value=_binary_array(
                    decoded.value_offsets, decoded.value_data, decoded.value_validity, decoded.value_nulls, n,
                    pa.binary(),
                ),
                offset=np.frombuffer(decoded.offsets, dtype=np.int64),
                timestamp=np.frombuffer(decoded.timestamps, dtype=np.int64),
                timestamp_type=np.frombuffer(decoded.timestamp_types, dtype=np.int32),
                headers=_headers(decoded) if self.columns.headers else None,
                batch_base_offset=np.repeat(np.array([batch.base_offset for batch in batches], dtype=np.int64), counts),
            ),
            np.array(counts, dtype=np.int64),
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


def _spark_micros(millis: _I64) -> _I64:
    if len(millis) and int(np.abs(millis).max()) > _MAX_SPARK_MILLIS:
        bad = int(millis[np.argmax(np.abs(millis))])
        raise CorruptRecordError(f"timestamp {bad} ms is outside the range Spark can represent")
    return millis * 1000


def _headers(decoded: RecordColumns) -> pa.Array:
    """Kafka headers of every record as ``list<struct<key string, value binary>>``; null for a record with none
    (as Spark's Kafka source). O(headers)."""
    keys = _binary_array(decoded.header_key_offsets, decoded.header_key_data, None, 0, decoded.headers, pa.binary())
    try:
        key_strings = keys.cast(pa.string())
    except pa.ArrowInvalid:
        # Kafka's consumer decodes header keys with replacement characters for invalid UTF-8.
        key_strings = pa.array([key.decode("utf-8", "replace") for key in keys.to_pylist()], type=pa.string())
    values = _binary_array(
        decoded.header_value_offsets,
        decoded.header_value_data,
        decoded.header_value_validity,
        decoded.header_value_nulls,
        decoded.headers,
        pa.binary(),
    )
    struct = pa.StructArray.from_arrays(
        [key_strings, values], fields=[pa.field("key", pa.string()), pa.field("value", pa.binary())]
    )
    list_offsets = np.frombuffer(decoded.header_offsets, dtype=np.int32)
    no_headers = list_offsets[1:] == list_offsets[:-1]
    mask = pa.array(no_headers) if bool(no_headers.any()) else None
    return pa.ListArray.from_arrays(pa.array(list_offsets), struct, mask=mask)
