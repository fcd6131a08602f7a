"""JSON-ready views of batches and records, with the field names of Kafka's accessors.

These are the shapes ``logmgr dump --json`` prints and the reference fixtures use (``batches.jsonl`` /
``expected.jsonl``): keys, values and header values are standard base64 (``None`` stays ``null``).
"""

from __future__ import annotations

import base64
from typing import Any

from segments.errors import CorruptRecordError
from segments.file_records import FileBatch
from segments.records import (
    MAGIC_V2,
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    Record,
)


def b64(data: bytes | None) -> str | None:
    """Standard base64 with padding, ``None`` for null. O(len)."""
    return None if data is None else base64.b64encode(data).decode("ascii")


def batch_summary(found: FileBatch) -> dict[str, Any]:
    """Every header field of a batch as Kafka reports it (``batches.jsonl`` shape). O(1) for magic 2; decodes a
    legacy compressed wrapper to count its records and find its base offset."""
    batch = found.batch
    return {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "position": found.position,
        "sizeInBytes": batch.size_in_bytes,
        "crc": batch.checksum,
        "maxTimestamp": batch.max_timestamp,
        "firstTimestamp": batch.first_timestamp if isinstance(batch, DefaultRecordBatch) else None,
        "recordCount": batch.count_records(),
        "magic": batch.magic,
        "attributes": batch.attributes,
        "compression": batch.compression.name,
        "timestampType": batch.timestamp_type.label,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "deleteHorizonMs": batch.delete_horizon_ms,
    }


def control_info(record: Record) -> tuple[ControlRecordType, int | None]:
    """A control record's type and, for COMMIT/ABORT, its coordinator epoch. O(1)."""
    control_type = ControlRecordType.parse(record.key)
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return control_type, EndTransactionMarker.parse(control_type, record.value).coordinator_epoch
    return control_type, None


def record_summary(found: FileBatch, record: Record) -> dict[str, Any]:
    """One record as Kafka's reader reports it (``expected.jsonl`` shape). O(size of the record)."""
    batch = found.batch
    control_type: str | None = None
    coordinator_epoch: int | None = None
    if batch.is_control:
        try:
            kind, coordinator_epoch = control_info(record)
        except CorruptRecordError as err:
            raise err.at(position_base=found.position) from None
        control_type = kind.name
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": batch.timestamp_type.label,
        "key": b64(record.key),
        "value": b64(record.value),
        "headers": [[header.key, b64(header.value)] for header in record.headers],
        "batchBaseOffset": batch.base_offset,
        "batchLastOffset": batch.last_offset,
        "batchPosition": found.position,
        "magic": batch.magic,
        "compression": batch.compression.name,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "sequence": record.sequence,
        "controlType": control_type,
        "coordinatorEpoch": coordinator_epoch,
        "sizeInBytes": record.size_in_bytes,
        "recordChecksum": record.checksum if batch.magic != MAGIC_V2 else None,
    }
