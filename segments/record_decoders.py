"""The record decoders of Kafka's ``kafka-dump-log``: ``--offsets-decoder``, ``--transaction-log-decoder`` and
``--cluster-metadata-decoder`` (``OffsetsMessageParser``, ``TransactionLogMessageParser`` and
``ClusterMetadataLogMessageParser`` in ``core/src/main/scala/kafka/tools/DumpLogSegments.scala``).

Each ``parse_*`` function takes a record's key and value and returns the key string and payload string Kafka's
parser returns (``None`` for Scala's ``None``), byte for byte, including the lines for unknown record types,
tombstones (``<DELETE>``) and records that do not decode. Kafka's messages name the record offset, which the
key and value do not carry: pass ``offset=record.offset`` (keyword) to get Kafka's exact text.

Where Kafka's parser throws instead of returning (the offsets decoder on a record without a key, the
transaction-log decoder on anything it cannot read), these functions raise
:class:`~segments.errors.CorruptRecordError` with the same message. Where Kafka prints a Java exception
message for bytes that do not decode, the text is Kafka's (:attr:`MessageFormatError.java_message`); Java
messages that are ``null`` print ``null`` as Kafka's ``String.format`` does.

:func:`decode_metadata_record` is the typed form of the cluster-metadata decoder for the engine: one KRaft
metadata record value (``MetadataRecordSerde`` framing) as a :class:`MetadataRecord`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from segments.errors import CorruptRecordError
from segments.kafka_messages import (
    MessageFormatError,
    MessageSchema,
    json_text,
    message_json,
    read_message,
    read_unsigned_varint,
)
from segments.kafka_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_COORDINATOR_RECORDS,
    GROUP_METADATA_VALUE,
    METADATA_RECORDS,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
)

__all__ = [
    "DELETE_PAYLOAD",
    "MetadataRecord",
    "decode_metadata_record",
    "metadata_type_name",
    "parse_cluster_metadata_record",
    "parse_offsets_record",
    "parse_transaction_log_record",
]

DELETE_PAYLOAD = "<DELETE>"
"""What the coordinator decoders print for a tombstone (null value)."""

_INT16 = struct.Struct(">h")
_METADATA_FRAME_VERSION = 1
_CONSUMER_PROTOCOL_TYPE = "consumer"

# TransactionState ids and their Scala object names (kafka.coordinator.transaction.TransactionState).
_TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
_EMPTY_STATE = 0
# TransactionVersion feature levels (TV_0 .. TV_2) that TransactionVersion.fromFeatureLevel accepts.
_TRANSACTION_VERSIONS = range(3)


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One decoded KRaft metadata record: ``type_name`` as ``MetadataRecordType`` prints it (``TOPIC_RECORD``),
    its apiKey, version and ``data`` in the shape of Kafka's ``<Name>JsonConverter`` (uuids as base64 text)."""

    type_name: str
    api_key: int
    version: int
    data: dict[str, Any]


def metadata_type_name(schema: MessageSchema) -> str:
    """``MessageGenerator.toSnakeCase(name).toUpperCase()``: ``ZkMigrationStateRecord`` ->
    ``ZK_MIGRATION_STATE_RECORD``. O(len(name))."""
    out = []
    previous_upper = True
    for char in schema.name:
        if char.isupper():
            if not previous_upper:
                out.append("_")
            previous_upper = True
        else:
            previous_upper = False
        out.append(char.upper())
    return "".join(out)


def _java_text(message: str | None) -> str:
    return "null" if message is None else message


def _int16(value: int) -> int:
    return (value + 2**15) % 2**16 - 2**15


# -- cluster metadata -----------------------------------------------------------------------------------------


def _metadata_failure(text: str, position: int) -> MessageFormatError:
    err = MessageFormatError(f"metadata record: {text}", position=position)
    err.java_message = text
    return err


def _frame_field(data: bytes | memoryview, position: int, entity: str) -> tuple[int, int]:
    """``AbstractApiMessageSerde.unsignedIntToShort``: the value and the position after it."""
    try:
        value, end = read_unsigned_varint(data, position, "metadata record frame")
    except MessageFormatError:
        raise _metadata_failure(f"Error while reading {entity}", position) from None
    if value > 0x7FFF:
        raise _metadata_failure(f"Value for {entity} was too large.", position)
    return _int16(value), end


def decode_metadata_record(value: bytes | memoryview | None) -> MetadataRecord:
    """Decode one ``__cluster_metadata`` record value as ``MetadataRecordSerde.read`` does: unsigned varint frame
    version (1), apiKey and version, then the message, and nothing after it. O(len(value)).

    Raises :class:`MessageFormatError` (its ``java_message`` the text of Kafka's ``MetadataParseException``) for
    a null value, an unknown frame version or apiKey, bytes that do not decode, or trailing bytes.
    """
    if value is None:
        # Kafka's reader dereferences the null buffer while reading the frame version.
        raise _metadata_failure("Error while reading frame version", 0)
    frame_version, position = _frame_field(value, 0, "frame version")
    if frame_version == 0:
        raise _metadata_failure(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
            "release of KRaft in 2.8 to newer versions are not supported.",
            0,
        )
    if frame_version != _METADATA_FRAME_VERSION:
        raise _metadata_failure(
            f"Could not deserialize metadata record due to unknown frame version {frame_version}"
            f"(only frame version {_METADATA_FRAME_VERSION} is supported)",
            0,
        )
    api_key, position = _frame_field(value, position, "type")
    version, position = _frame_field(value, position, "version")
    schema = METADATA_RECORDS.get(api_key)
    if schema is None:
        raise _metadata_failure(
            f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}", position
        )
    try:
        message, end = read_message(schema, version, value, position)
    except MessageFormatError as err:
        wrapped = MessageFormatError(f"{err.message} (type {api_key} version {version})", position=err.position)
        wrapped.java_message = f"Failed to deserialize record with type {api_key}"
        raise wrapped from None
    if end < len(value):
        raise _metadata_failure(f"Found {len(value) - end} byte(s) of garbage after {api_key}", end)
    return MetadataRecord(metadata_type_name(schema), api_key, version, message_json(schema, version, message))


def parse_cluster_metadata_record(
    key: bytes | None, value: bytes | None, *, offset: int = -1
) -> tuple[str | None, str | None]:
    """``ClusterMetadataLogMessageParser.parse``: no key; the payload is
    ``{"type":"<TYPE>","version":<n>,"data":{...}}`` or ``Error at <offset>, skipping. <reason>``. O(len(value)).
    """
    del key  # metadata records carry no key and Kafka's parser ignores it
    try:
        record = decode_metadata_record(value)
    except MessageFormatError as err:
        return None, f"Error at {offset}, skipping. {_java_text(err.java_message)}"
    return None, json_text({"type": record.type_name, "version": record.version, "data": record.data})


# -- __consumer_offsets ---------------------------------------------------------------------------------------


class _CoordinatorError(Exception):
    """A ``RuntimeException`` of ``CoordinatorRecordSerde.deserialize`` (its message is Kafka's)."""


class _UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


def _read_version(data: bytes, name: str) -> int:
    if len(data) < _INT16.size:
        raise _CoordinatorError(f"Could not read version from {name}'s buffer.")
    (version,) = _INT16.unpack_from(data)
    return int(version)


def _read_coordinator_message(schema: MessageSchema, data: bytes, version: int, name: str) -> dict[str, Any]:
    try:
        message, _ = read_message(schema, version, data, _INT16.size)
    except MessageFormatError as err:
        raise _CoordinatorError(
            f"Could not read record with version {version} from {name}'s buffer due to: "
            f"{_java_text(err.java_message)}."
        ) from None
    return message


def _consumer_protocol_json(schema: MessageSchema, data: bytes) -> dict[str, Any] | None:
    """The embedded consumer protocol bytes (int16 version + message) as JSON, or None when they do not decode
    (Kafka then keeps the bytes)."""
    if len(data) < _INT16.size:
        return None
    (version,) = _INT16.unpack_from(data)
    try:
        message, _ = read_message(schema, version, data, _INT16.size)
    except MessageFormatError:
        return None
    return message_json(schema, version, message)


def _group_metadata_json(message: dict[str, Any], version: int) -> dict[str, Any]:
    """``prepareGroupMetadataValue``: a ``consumer`` group's member subscriptions and assignments decoded."""
    out = message_json(GROUP_METADATA_VALUE, version, message)
    if out.get("protocolType") != _CONSUMER_PROTOCOL_TYPE or not isinstance(out.get("members"), list):
        return out
    for member_json, member in zip(out["members"], message["members"], strict=True):
        for key, schema in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION), ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            if key in member_json and member[key] is not None:
                decoded = _consumer_protocol_json(schema, member[key])
                if decoded is not None:
                    member_json[key] = decoded
    return out


def _decode_offsets(key: bytes, value: bytes | None) -> tuple[str, str]:
    record_type = _read_version(key, "key")
    schemas = GROUP_COORDINATOR_RECORDS.get(record_type)
    if schemas is None:
        raise _UnknownRecordType(record_type)
    key_schema, value_schema = schemas
    key_message = _read_coordinator_message(key_schema, key, record_type, "key")
    key_text = json_text({"type": str(record_type), "data": message_json(key_schema, record_type, key_message)})
    if value is None:
        return key_text, DELETE_PAYLOAD
    value_version = _read_version(value, "value")
    value_message = _read_coordinator_message(value_schema, value, value_version, "value")
    if value_schema is GROUP_METADATA_VALUE:
        data = _group_metadata_json(value_message, value_version)
    else:
        data = message_json(value_schema, value_version, value_message)
    return key_text, json_text({"version": str(value_version), "data": data})


def parse_offsets_record(
    key: bytes | None, value: bytes | None, *, offset: int = -1
) -> tuple[str | None, str | None]:
    """``OffsetsMessageParser.parse`` for a ``__consumer_offsets`` record: ``{"type":"<record type>","data":{...}}``
    and ``{"version":"<n>","data":{...}}`` (or ``<DELETE>``); ``Unknown record type <t> at offset <o>, skipping.``
    or ``Error at offset <o>, skipping. <reason>`` with no payload. O(len(key) + len(value)).

    Raises :class:`CorruptRecordError` for a record without a key, as Kafka's parser throws.
    """
    if key is None:
        raise CorruptRecordError(
            f"Failed to decode message at offset {offset} using offset topic decoder (message had a missing key)"
        )
    try:
        key_text, payload = _decode_offsets(bytes(key), None if value is None else bytes(value))
    except _UnknownRecordType as err:
        return f"Unknown record type {err.record_type} at offset {offset}, skipping.", None
    except _CoordinatorError as err:
        return f"Error at offset {offset}, skipping. {err}", None
    return key_text, payload


# -- __transaction_state --------------------------------------------------------------------------------------


def _transaction_failure(text: str, java_message: str | None = None) -> MessageFormatError:
    err = MessageFormatError(f"transaction log record: {text}")
    err.java_message = text if java_message is None else java_message
    return err


def _java_string_hash(text: str) -> int:
    """``String.hashCode`` over the UTF-16 code units, as an unsigned 32-bit value."""
    raw = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(raw), 2):
        value = (31 * value + (raw[index] << 8 | raw[index + 1])) & 0xFFFFFFFF
    return value


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _improved_hash(topic: str, partition: int) -> int:
    """Scala's ``mutable.HashSet`` hash of a ``TopicPartition``: Java's ``hashCode`` with the high half xored in."""
    original = (31 * (31 + partition) + _java_string_hash(topic)) & 0xFFFFFFFF
    return _signed32(original ^ (original >> 16))


def _table_size_for(capacity: int) -> int:
    value = max(capacity - 1, 4)
    return min((1 << (value.bit_length() - 1)) * 2, 1 << 30)


def _scala_set_order(groups: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[str, int]]:
    """The iteration order of the Scala 2.13 ``mutable.HashSet`` that ``TransactionMetadata.addPartitions`` fills,
    one ``++=`` per topic: buckets by index, each sorted by hash. The table length follows the set's own growth
    (``sizeHint`` per added set, the load-factor check on single adds of sets of up to 4 elements). O(n log n)."""
    length, threshold, size = 16, 12, 0
    seen: dict[tuple[str, int], int] = {}
    for topic, partitions in groups:
        added = list(dict.fromkeys(partitions))
        target = _table_size_for(int((len(added) + 1) / 0.75))
        if target > length:
            length, threshold = target, int(target * 0.75)
        for partition in added:
            if len(added) <= 4 and size + 1 >= threshold:
                # Set1..Set4 are added one element at a time through add(), which grows first.
                length, threshold = length * 2, int(length * 2 * 0.75)
            if (topic, partition) not in seen:
                seen[(topic, partition)] = len(seen)
                size += 1
    mask = length - 1
    return sorted(seen, key=lambda tp: (_improved_hash(*tp) & mask, _improved_hash(*tp), seen[tp]))


def parse_transaction_log_record(
    key: bytes | None, value: bytes | None, *, offset: int = -1
) -> tuple[str | None, str | None]:
    """``TransactionLog.formatRecordKeyAndValue``: ``transaction_metadata::transactionalId=<id>`` and
    ``producerId:<p>,producerEpoch:<e>,state=<State>,partitions=[<t-p>,...],txnLastUpdateTimestamp=<ts>,
    txnTimeoutMs=<ms>`` (or ``<DELETE>``); ``unknown::version=<v>`` with no payload for a key version Kafka does
    not know. O(len(key) + len(value)).

    Raises :class:`MessageFormatError` where Kafka's parser throws: no key, a key or value that does not decode,
    an unknown value version, transaction state or transaction version. ``offset`` is accepted for symmetry and
    not printed (Kafka's text has no offset).
    """
    del offset
    if key is None:
        raise _transaction_failure("record has no key", None)
    key = bytes(key)
    if len(key) < _INT16.size:
        raise _transaction_failure("key ends before its version", None)
    (key_version,) = _INT16.unpack_from(key)
    if key_version not in TRANSACTION_LOG_KEY.valid:
        return f"unknown::version={key_version}", None
    key_message, _ = read_message(TRANSACTION_LOG_KEY, key_version, key, _INT16.size)
    key_text = f"transaction_metadata::transactionalId={key_message['transactionalId']}"
    if value is None:
        return key_text, DELETE_PAYLOAD
    value = bytes(value)
    if len(value) < _INT16.size:
        raise _transaction_failure("value ends before its version", None)
    (value_version,) = _INT16.unpack_from(value)
    if value_version not in TRANSACTION_LOG_VALUE.valid:
        raise _transaction_failure(f"Unknown version {value_version} from the transaction log message value")
    txn, _ = read_message(TRANSACTION_LOG_VALUE, value_version, value, _INT16.size)
    status = txn["transactionStatus"]
    if not 0 <= status < len(_TRANSACTION_STATES):
        raise _transaction_failure(f"Unknown transaction state id {status} from the transaction status message")
    if txn["clientTransactionVersion"] not in _TRANSACTION_VERSIONS:
        raise _transaction_failure(f"unknown transaction.version feature level {txn['clientTransactionVersion']}")
    partitions: list[tuple[str, int]] = []
    if status != _EMPTY_STATE:
        groups = txn["transactionPartitions"]
        if groups is None:
            raise _transaction_failure("null partitions in a non-empty transaction", None)
        partitions = _scala_set_order([(group["topic"], group["partitionIds"]) for group in groups])
    listed = ",".join(f"{topic}-{partition}" for topic, partition in partitions)
    return key_text, (
        f"producerId:{txn['producerId']},producerEpoch:{txn['producerEpoch']},"
        f"state={_TRANSACTION_STATES[status]},partitions=[{listed}],"
        f"txnLastUpdateTimestamp={txn['transactionLastUpdateTimestampMs']},txnTimeoutMs={txn['transactionTimeoutMs']}"
    )
