"""kafka-dump-log's offsets, transaction-log and cluster-metadata decoders: Kafka's strings from
DumpLogSegmentsTest / TransactionLogTest / MetadataRecordSerdeTest, arbitrary bytes, and every record of the real
fixtures."""

from __future__ import annotations

import contextlib
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.errors import CorruptRecordError
from segments.file_records import FileRecords
from segments.kafka_messages import MessageSchema, write_message, write_unsigned_varint
from segments.kafka_schemas import (
    CONFIG_RECORD,
    CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_METADATA_KEY,
    CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    TOPIC_RECORD,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
)
from segments.record_decoders import (
    decode_metadata_record,
    parse_cluster_metadata_record,
    parse_offsets_record,
    parse_transaction_log_record,
)
from tests.conftest import KAFKA_REAL, require_fixtures


def _prefixed(schema: MessageSchema, version: int, value: dict[str, Any]) -> bytes:
    """``MessageUtil.toVersionPrefixedBytes``: int16 version, then the message."""
    return struct.pack(">h", version) + write_message(schema, version, value)


def _metadata(schema: MessageSchema, version: int, value: dict[str, Any]) -> bytes:
    assert schema.api_key is not None
    return (
        write_unsigned_varint(1)
        + write_unsigned_varint(schema.api_key)
        + write_unsigned_varint(version)
        + write_message(schema, version, value)
    )


# -- __consumer_offsets (DumpLogSegmentsTest.testOffsetsMessageParser) -------------------------------------------


def test_offsets_missing_key_raises_kafka_message() -> None:
    with pytest.raises(CorruptRecordError, match=r"^Failed to decode message at offset 0 using offset topic decoder \(message had a missing key\)$"):
        parse_offsets_record(None, None, offset=0)


def test_offsets_consumer_group_metadata() -> None:
    key = _prefixed(CONSUMER_GROUP_METADATA_KEY, 3, {"groupId": "group"})
    value = _prefixed(CONSUMER_GROUP_METADATA_VALUE, 0, {"epoch": 10})
    assert parse_offsets_record(key, value, offset=0) == (
        '{"type":"3","data":{"groupId":"group"}}',
        '{"version":"0","data":{"epoch":10}}',
    )
    assert parse_offsets_record(key, None, offset=0) == ('{"type":"3","data":{"groupId":"group"}}', "<DELETE>")


def _group_metadata(subscription: bytes, assignment: bytes) -> bytes:
    member = {
        "memberId": "member",
        "clientId": "client",
        "clientHost": "host",
        "groupInstanceId": "instance",
        "sessionTimeout": 100,
        "rebalanceTimeout": 1000,
        "subscription": subscription,
        "assignment": assignment,
    }
    return _prefixed(
        GROUP_METADATA_VALUE,
        4,
        {"protocolType": "consumer", "protocol": "range", "leader": "member", "generation": 10, "currentStateTimestamp": -1, "members": [member]},
    )


_GROUP_PREFIX = (
    '{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range",'
    '"leader":"member","currentStateTimestamp":-1,"members":[{"memberId":"member",'
    '"groupInstanceId":"instance","clientId":"client","clientHost":"host",'
    '"rebalanceTimeout":1000,"sessionTimeout":100,'
)


def test_offsets_group_metadata_decodes_consumer_protocol() -> None:
    subscription = _prefixed(
        CONSUMER_PROTOCOL_SUBSCRIPTION,
        3,
        {"topics": ["foo"], "userData": None, "ownedPartitions": [{"topic": "foo", "partitions": [0]}], "generationId": 0, "rackId": "rack"},
    )
    assignment = _prefixed(
        CONSUMER_PROTOCOL_ASSIGNMENT, 3, {"assignedPartitions": [{"topic": "foo", "partitions": [0]}], "userData": None}
    )
    key = _prefixed(GROUP_METADATA_KEY, 2, {"group": "group"})
    assert parse_offsets_record(key, _group_metadata(subscription, assignment), offset=0) == (
        '{"type":"2","data":{"group":"group"}}',
        _GROUP_PREFIX + '"subscription":{"topics":["foo"],'
        '"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"userData":null}}]}}',
    )


def test_offsets_group_metadata_keeps_malformed_protocol_bytes() -> None:
    key = _prefixed(GROUP_METADATA_KEY, 2, {"group": "group"})
    assert parse_offsets_record(key, _group_metadata(b"Subscription", b"Assignment"), offset=0) == (
        '{"type":"2","data":{"group":"group"}}',
        _GROUP_PREFIX + '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}',
    )


def test_offsets_unknown_record_type() -> None:
    key = _prefixed(CONSUMER_GROUP_METADATA_KEY, 3, {"groupId": "group"})
    key = struct.pack(">h", 32767) + key[2:]
    value = _prefixed(CONSUMER_GROUP_METADATA_VALUE, 0, {"epoch": 10})
    assert parse_offsets_record(key, value, offset=0) == ("Unknown record type 32767 at offset 0, skipping.", None)


def test_offsets_value_of_the_wrong_type_reports_kafka_error() -> None:
    key = _prefixed(CONSUMER_GROUP_METADATA_KEY, 3, {"groupId": "group"})
    value = _prefixed(CONSUMER_GROUP_MEMBER_METADATA_VALUE, 0, {})
    assert parse_offsets_record(key, value, offset=0) == (
        "Error at offset 0, skipping. Could not read record with version 0 from value's buffer due to: "
        "Error reading byte array of 536870911 byte(s): only 1 byte(s) available.",
        None,
    )


def test_offsets_short_key_and_value() -> None:
    assert parse_offsets_record(b"\x00", None, offset=7) == (
        "Error at offset 7, skipping. Could not read version from key's buffer.",
        None,
    )
    key = _prefixed(CONSUMER_GROUP_METADATA_KEY, 3, {"groupId": "g"})
    assert parse_offsets_record(key, b"\x00\x00\x00", offset=7) == (
        "Error at offset 7, skipping. Could not read record with version 0 from value's buffer due to: null.",
        None,
    )


@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_offsets_arbitrary_bytes_never_raise(key: bytes, value: bytes | None) -> None:
    key_text, _ = parse_offsets_record(key, value, offset=1)
    assert key_text is not None


# -- __transaction_state (TransactionLogTest) ------------------------------------------------------------------


def _txn_value(version: int, status: int, partitions: list[dict[str, Any]] | None, **extra: Any) -> bytes:
    return _prefixed(
        TRANSACTION_LOG_VALUE,
        version,
        {
            "producerId": 1334,
            "producerEpoch": 0,
            "transactionTimeoutMs": 1000,
            "transactionStatus": status,
            "transactionPartitions": partitions,
            "transactionLastUpdateTimestampMs": 0,
            "transactionStartTimestampMs": 0,
            **extra,
        },
    )


def test_transaction_metadata_parsing() -> None:
    key = _prefixed(TRANSACTION_LOG_KEY, 0, {"transactionalId": "id"})
    value = _txn_value(1, 1, [{"topic": "topic", "partitionIds": [0]}], clientTransactionVersion=2)
    assert parse_transaction_log_record(key, value) == (
        "transaction_metadata::transactionalId=id",
        "producerId:1334,producerEpoch:0,state=Ongoing,partitions=[topic-0],txnLastUpdateTimestamp=0,txnTimeoutMs=1000",
    )
    assert parse_transaction_log_record(key, None) == ("transaction_metadata::transactionalId=id", "<DELETE>")


def test_transaction_empty_state_ignores_partitions_and_v0_reads() -> None:
    key = _prefixed(TRANSACTION_LOG_KEY, 0, {"transactionalId": "id"})
    assert parse_transaction_log_record(key, _txn_value(0, 0, None))[1] == (
        "producerId:1334,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=0,txnTimeoutMs=1000"
    )


def test_transaction_partitions_in_scala_hash_set_order() -> None:
    key = _prefixed(TRANSACTION_LOG_KEY, 0, {"transactionalId": "id"})
    value = _txn_value(0, 2, [{"topic": "b", "partitionIds": [1, 0]}, {"topic": "a", "partitionIds": [3, 2, 1, 0, 4]}])
    payload = parse_transaction_log_record(key, value)[1]
    assert payload is not None
    listed = payload.split("partitions=[")[1].split("]")[0].split(",")
    # A 16-slot table (neither sizeHint grows it); TopicPartition("a", p).hashCode() = 31 * (31 + p) + 97, so
    # the buckets (hash & 15) are a-2:0, a-1:1, a-0:2 and b-1:2 (by hash), b-0:3, a-4:14, a-3:15.
    assert listed == ["a-2", "a-1", "a-0", "b-1", "b-0", "a-4", "a-3"]


def test_transaction_unknown_key_version() -> None:
    key = struct.pack(">h", 32767) + write_message(TRANSACTION_LOG_KEY, 0, {"transactionalId": ""})
    assert parse_transaction_log_record(key, b"anything") == ("unknown::version=32767", None)


def test_transaction_unknown_value_version_raises() -> None:
    key = _prefixed(TRANSACTION_LOG_KEY, 0, {"transactionalId": "id"})
    with pytest.raises(CorruptRecordError, match="Unknown version 5 from the transaction log message value"):
        parse_transaction_log_record(key, b"\x00\x05")


@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_transaction_arbitrary_bytes_give_only_typed_errors(key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(CorruptRecordError):
        parse_transaction_log_record(key, value)


# -- __cluster_metadata (ClusterMetadataLogMessageParser) -----------------------------------------------------


def test_cluster_metadata_topic_record() -> None:
    topic_id = uuid.UUID("c7bd6f9f-a9e0-4bd6-a7fb-e2d1f8d96e4a")
    value = _metadata(TOPIC_RECORD, 0, {"name": "foo", "topicId": topic_id})
    assert parse_cluster_metadata_record(None, value, offset=3) == (
        None,
        '{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"x71vn6ngS9an--LR-NluSg"}}',
    )
    record = decode_metadata_record(value)
    assert (record.type_name, record.api_key, record.version) == ("TOPIC_RECORD", 2, 0)


def test_cluster_metadata_null_config_value() -> None:
    value = _metadata(CONFIG_RECORD, 0, {"resourceType": 2, "resourceName": "t", "name": "retention.ms", "value": None})
    assert parse_cluster_metadata_record(None, value)[1] == (
        '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"t","name":"retention.ms","value":null}}'
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "Error while reading frame version"),
        (b"", "Error while reading frame version"),
        (b"\x00", "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
         "release of KRaft in 2.8 to newer versions are not supported."),
        (b"\x02", "Could not deserialize metadata record due to unknown frame version 2(only frame version 1 is supported)"),
        (b"\x01\xff\xff\x03", "Value for type was too large."),
        (b"\x01\x63\x00", "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 99"),
        (b"\x01\x02\x00\x04", "Failed to deserialize record with type 2"),
        (b"\x01\x14\x00\x00\x07", "Found 1 byte(s) of garbage after 20"),
    ],
)
def test_cluster_metadata_errors_use_kafka_messages(value: bytes | None, reason: str) -> None:
    assert parse_cluster_metadata_record(None, value, offset=12) == (None, f"Error at 12, skipping. {reason}")


@given(st.binary(max_size=80))
def test_cluster_metadata_arbitrary_bytes_never_raise(value: bytes) -> None:
    key, payload = parse_cluster_metadata_record(None, value, offset=0)
    assert key is None and payload is not None


# -- every record of the real fixtures -------------------------------------------------------------------------


def _records(pattern: str, include_control: bool = False) -> list[tuple[Path, Any]]:
    root = require_fixtures(KAFKA_REAL)
    out = []
    for path in sorted(root.glob(pattern)):
        with FileRecords(path) as records:
            for found in records.batches():
                if found.batch.is_control and not include_control:
                    continue
                out.extend((path, record) for record in found.batch.records())
    return out


def test_every_real_cluster_metadata_record_decodes() -> None:
    records = _records("*/*/__cluster_metadata-0/*.checkpoint") + _records("*/*/__cluster_metadata-0/*.log")
    assert len(records) > 100
    types = set()
    for path, record in records:
        decoded = decode_metadata_record(record.value)
        types.add(decoded.type_name)
        _, payload = parse_cluster_metadata_record(record.key, record.value, offset=record.offset)
        assert payload is not None and payload.startswith('{"type":"'), (path, record.offset, payload)
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "FEATURE_LEVEL_RECORD"} <= types


def test_every_real_consumer_offsets_record_decodes() -> None:
    records = _records("*/*/__consumer_offsets-*/*.log")
    assert len(records) > 1000
    for path, record in records:
        key, payload = parse_offsets_record(record.key, record.value, offset=record.offset)
        assert key is not None and key.startswith('{"type":"'), (path, record.offset, key)
        assert payload is not None and (payload == "<DELETE>" or payload.startswith('{"version":"'))


def test_every_real_transaction_state_record_decodes() -> None:
    records = _records("*/*/__transaction_state-*/*.log")
    assert records
    payloads = [parse_transaction_log_record(r.key, r.value, offset=r.offset) for _, r in records]
    assert payloads[1] == (
        "transaction_metadata::transactionalId=default_",
        "producerId:0,producerEpoch:0,state=Ongoing,partitions=[_confluent-ksql-default__command_topic-0],"
        "txnLastUpdateTimestamp=1728561475379,txnTimeoutMs=60000",
    )
