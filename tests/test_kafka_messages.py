"""The schema-driven message engine: write-then-read round trips over every schema and version, arbitrary bytes
giving only typed errors, Kafka's wire details (compact lengths, tagged fields, lenient versions) and Jackson's
JSON text."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.errors import CorruptRecordError
from segments.kafka_messages import (
    Field,
    JavaDouble,
    MessageFormatError,
    MessageSchema,
    Versions,
    java_double,
    json_text,
    message_json,
    read_message,
    write_message,
)
from segments.kafka_schemas import (
    ALL_SCHEMAS,
    CONSUMER_GROUP_METADATA_VALUE,
    PARTITION_CHANGE_RECORD,
    SNAPSHOT_HEADER_RECORD,
    TOPIC_RECORD,
    TRANSACTION_LOG_VALUE,
    USER_SCRAM_CREDENTIAL_RECORD,
    VOTERS_RECORD,
)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return st.integers(low, high)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "uuid":
        return st.uuids()
    if kind == "string":
        return st.text(max_size=8)
    return st.binary(max_size=8)


def _field_value(spec: Field, version: int, context: Versions) -> st.SearchStrategy[Any]:
    inner = context.intersect(spec.versions)
    if spec.is_struct:
        element: st.SearchStrategy[Any] = _struct_value(spec.fields, version, inner)
    else:
        element = _scalar(spec.element)
    value = st.lists(element, max_size=3) if spec.is_array else element
    if spec.nullable.member(version, context):
        value = st.none() | value
    return value


def _struct_value(fields: tuple[Field, ...], version: int, context: Versions) -> st.SearchStrategy[dict[str, Any]]:
    present = {spec.key: _field_value(spec, version, context) for spec in fields if spec.versions.member(version, context)}
    return st.fixed_dictionaries(present)


@st.composite
def _schema_version_value(draw: st.DrawFn) -> tuple[MessageSchema, int, dict[str, Any]]:
    schema = draw(st.sampled_from(ALL_SCHEMAS))
    version = draw(st.integers(schema.valid.low, schema.valid.high))
    return schema, version, draw(_struct_value(schema.fields, version, schema.valid))


def _present(schema_fields: tuple[Field, ...], version: int, context: Versions, value: dict[str, Any]) -> dict[str, Any]:
    """What survives a round trip: the fields present in the version (the rest read as defaults)."""
    out = {}
    for spec in schema_fields:
        if spec.key in value and spec.versions.member(version, context):
            item = value[spec.key]
            if spec.is_struct and item is not None:
                inner = context.intersect(spec.versions)
                item = [_present(spec.fields, version, inner, x) for x in item] if spec.is_array else _present(spec.fields, version, inner, item)
            out[spec.key] = item
    return out


@given(_schema_version_value())
def test_every_schema_round_trips_write_then_read(case: tuple[MessageSchema, int, dict[str, Any]]) -> None:
    schema, version, value = case
    encoded = write_message(schema, version, value)
    decoded, end = read_message(schema, version, encoded)
    assert end == len(encoded)
    assert _present(schema.fields, version, schema.valid, decoded) == value
    # The decoded value re-encodes to the same bytes, and its JSON form prints.
    assert write_message(schema, version, decoded) == encoded
    json_text(message_json(schema, version, decoded))


@given(st.sampled_from(ALL_SCHEMAS), st.integers(-5, 40), st.binary(max_size=200))
def test_arbitrary_bytes_give_only_typed_errors(schema: MessageSchema, version: int, data: bytes) -> None:
    try:
        value, end = read_message(schema, version, data)
    except CorruptRecordError as err:
        assert isinstance(err, MessageFormatError)
        assert err.position is not None and 0 <= err.position <= len(data)
        assert schema.name in str(err)
    else:
        assert 0 <= end <= len(data)
        json_text(message_json(schema, version, value))


def test_huge_declared_array_is_refused_before_allocating() -> None:
    # TopicRecord v0: a compact string name declared 268435454 bytes long in 4 varint bytes.
    with pytest.raises(MessageFormatError) as info:
        read_message(TOPIC_RECORD, 0, b"\xff\xff\xff\x7f")
    assert info.value.java_message == "string field name had invalid length 268435454"
    assert "TopicRecord.name" in str(info.value)
    # UserScramCredentialRecord v0: empty name, mechanism 0, then a salt of 268435454 bytes.
    with pytest.raises(MessageFormatError) as info:
        read_message(USER_SCRAM_CREDENTIAL_RECORD, 0, b"\x01\x00\xff\xff\xff\x7f")
    assert info.value.java_message == "Error reading byte array of 268435454 byte(s): only 0 byte(s) available"
    assert info.value.position == 2
    voters = VOTERS_RECORD
    with pytest.raises(MessageFormatError) as info:
        read_message(voters, 0, b"\x00\x00\xff\xff\xff\x7f")
    assert info.value.java_message == (
        "Tried to allocate a collection of size 268435454, but there are only 0 bytes remaining."
    )


def test_error_names_nested_field_and_position() -> None:
    data = write_message(VOTERS_RECORD, 0, {"version": 0, "voters": [{"voterId": 1, "endpoints": [{"name": "x", "host": "h", "port": 1}]}]})
    with pytest.raises(MessageFormatError) as info:
        read_message(VOTERS_RECORD, 0, data[:-8])
    assert "VotersRecord.voters[0]." in str(info.value)
    assert info.value.position is not None and info.value.position <= len(data) - 8


def test_non_nullable_null_uses_kafka_wording() -> None:
    with pytest.raises(MessageFormatError) as info:
        read_message(TOPIC_RECORD, 0, b"\x00" + bytes(17))
    assert info.value.java_message == "non-nullable field name was serialized as null"


def test_unknown_tagged_fields_are_skipped_and_known_ones_read() -> None:
    base = write_message(PARTITION_CHANGE_RECORD, 0, {"partitionId": 3, "topicId": uuid.UUID(int=5)})
    assert base.endswith(b"\x00")  # no tagged field: everything default
    # Tag 1 (leader) = 7, then an unknown tag 40 with 3 bytes.
    tagged = base[:-1] + b"\x02" + b"\x01\x04\x00\x00\x00\x07" + b"\x28\x03abc"
    value, end = read_message(PARTITION_CHANGE_RECORD, 0, tagged)
    assert end == len(tagged)
    assert value["leader"] == 7 and value["isr"] is None
    assert message_json(PARTITION_CHANGE_RECORD, 0, value) == {
        "partitionId": 3,
        "topicId": "AAAAAAAAAAAAAAAAAAAABQ",
        "leader": 7,
    }


def test_tagged_field_written_only_when_not_default_in_tag_order() -> None:
    encoded = write_message(PARTITION_CHANGE_RECORD, 0, {"leader": 2, "isr": [1], "replicas": None})
    # partitionId -1, zero uuid, then 2 tagged fields: tag 0 (isr, compact array) before tag 1 (leader);
    # replicas is null, its default, so it is not written.
    assert encoded == (
        b"\xff\xff\xff\xff" + bytes(16) + b"\x02" + b"\x00\x05\x02\x00\x00\x00\x01" + b"\x01\x04\x00\x00\x00\x02"
    )
    value, _ = read_message(PARTITION_CHANGE_RECORD, 0, encoded)
    assert (value["isr"], value["leader"], value["replicas"]) == ([1], 2, None)


def test_tagged_field_absent_version_defaults() -> None:
    # TransactionLogValue v0 is not flexible: the tagged producer ids are absent and read as -1.
    v0 = write_message(TRANSACTION_LOG_VALUE, 0, {"producerId": 5, "transactionPartitions": None})
    value, _ = read_message(TRANSACTION_LOG_VALUE, 0, v0)
    assert value["previousProducerId"] == -1 and value["clientTransactionVersion"] == 0
    assert "previousProducerId" not in message_json(TRANSACTION_LOG_VALUE, 0, value)


def test_version_above_highest_reads_like_the_highest() -> None:
    # Kafka's generated readers only test bounds narrower than the message's: version 9 of a "0" schema reads.
    data = write_message(SNAPSHOT_HEADER_RECORD, 0, {"version": 0, "lastContainedLogTimestamp": 42})
    value, _ = read_message(SNAPSHOT_HEADER_RECORD, 9, data)
    assert value["lastContainedLogTimestamp"] == 42


def test_versions_membership_follows_version_conditional() -> None:
    context = Versions.parse("0-4")
    assert Versions.parse("2-4").member(99, context)  # no upper check: same highest as the context
    assert not Versions.parse("0-2").member(3, context)
    assert not Versions.parse("none").member(0, context)


def test_json_text_matches_jackson() -> None:
    node = {"a": "q\"\\\n\x01é", "b": [1, None, True], "c": JavaDouble(1e7), "d": JavaDouble(float("nan"))}
    assert json_text(node) == '{"a":"q\\"\\\\\\n\\u0001é","b":[1,null,true],"c":1.0E7,"d":"NaN"}'


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (0.001, "0.001"), (1e-4, "1.0E-4"), (123456.5, "123456.5"), (1e7, "1.0E7"), (-2.5e-10, "-2.5E-10"),
     (0.0, "0.0"), (-0.0, "-0.0"), (float("inf"), "Infinity"), (1234567.0, "1234567.0")],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_consumer_group_metadata_value_bytes() -> None:
    # ConsumerGroupMetadataValue v0 {epoch: 10}: int32 then an empty tagged-field section.
    assert write_message(CONSUMER_GROUP_METADATA_VALUE, 0, {"epoch": 10}) == b"\x00\x00\x00\x0a\x00"
