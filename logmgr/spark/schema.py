"""The DataFrame schema: Spark's own Kafka source schema, plus optional logmgr columns.

Spark's ``format("kafka")`` produces ``key, value, topic, partition, offset, timestamp, timestampType`` and, with
``includeHeaders=true``, ``headers``; every field is nullable. The extra columns (``producerId``,
``isTransactional``, ``segment``, ``batchBaseOffset``) come after them, in that order, when named in the
``extraColumns`` option.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

EXTRA_COLUMNS = ("producerId", "isTransactional", "segment", "batchBaseOffset")

_SPARK_TYPES = {
    "key": "binary",
    "value": "binary",
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
    "timestamp": "timestamp",
    "timestampType": "int",
    "headers": "array<struct<key:string,value:binary>>",
    "producerId": "bigint",
    "isTransactional": "boolean",
    "segment": "string",
    "batchBaseOffset": "bigint",
}

_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

_ARROW_TYPES: dict[str, pa.DataType] = {
    "key": pa.binary(),
    "value": pa.binary(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    # Spark's TimestampType is microseconds since the epoch in UTC.
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestampType": pa.int32(),
    "headers": pa.list_(_HEADER_STRUCT),
    "producerId": pa.int64(),
    "isTransactional": pa.bool_(),
    "segment": pa.string(),
    "batchBaseOffset": pa.int64(),
}


@dataclass(frozen=True)
class OutputColumns:
    """Which optional columns a read returns."""

    headers: bool = False
    producer_id: bool = False
    is_transactional: bool = False
    segment: bool = False
    batch_base_offset: bool = False

    @classmethod
    def of(cls, include_headers: bool, extra: tuple[str, ...]) -> OutputColumns:
        """Columns for the ``includeHeaders`` flag and the ``extraColumns`` names (validated by the caller)."""
        return cls(
            headers=include_headers,
            producer_id="producerId" in extra,
            is_transactional="isTransactional" in extra,
            segment="segment" in extra,
            batch_base_offset="batchBaseOffset" in extra,
        )

    @property
    def names(self) -> list[str]:
        """Column names in output order. O(1)."""
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if self.headers:
            names.append("headers")
        flags = (self.producer_id, self.is_transactional, self.segment, self.batch_base_offset)
        names.extend(name for name, wanted in zip(EXTRA_COLUMNS, flags, strict=True) if wanted)
        return names


def spark_ddl(columns: OutputColumns) -> str:
    """The schema as a Spark DDL string (every field nullable, as Spark's Kafka source). O(1)."""
    return ", ".join(f"{name} {_SPARK_TYPES[name]}" for name in columns.names)


def arrow_schema(columns: OutputColumns) -> pa.Schema:
    """The Arrow schema of the batches a read yields. O(1)."""
    return pa.schema([pa.field(name, _ARROW_TYPES[name]) for name in columns.names])
