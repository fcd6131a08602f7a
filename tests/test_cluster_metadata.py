"""The KRaft metadata image: every real KRaft dir loads with the topics and configs it holds, and generated
``__cluster_metadata-0`` dirs (snapshot + log built with the project's batch builder) give the image Kafka would:
later records win, null deletes, removed topics vanish, a torn or corrupt log tail ends the valid prefix."""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from logmgr.cluster_metadata import CLUSTER_METADATA_DIR, ConfigEntry, load_cluster_metadata
from segments.errors import StorageFormatError
from segments.kafka_messages import MessageSchema, write_message, write_unsigned_varint
from segments.kafka_schemas import (
    CONFIG_RECORD,
    PARTITION_RECORD,
    REMOVE_TOPIC_RECORD,
    SNAPSHOT_FOOTER_RECORD,
    SNAPSHOT_HEADER_RECORD,
    TOPIC_RECORD,
)
from segments.naming import filename_prefix_from_offset
from segments.records import ControlRecordType, SimpleRecord, build_batch
from tests.conftest import KAFKA_REAL, require_fixtures

ORDERS = uuid.UUID(int=11)
CLICKS = uuid.UUID(int=12)


def _metadata(schema: MessageSchema, value: dict[str, Any]) -> bytes:
    assert schema.api_key is not None
    return write_unsigned_varint(1) + write_unsigned_varint(schema.api_key) + write_unsigned_varint(0) + write_message(schema, 0, value)


def _topic(name: str, topic_id: uuid.UUID) -> bytes:
    return _metadata(TOPIC_RECORD, {"name": name, "topicId": topic_id})


def _partition(topic_id: uuid.UUID, partition: int) -> bytes:
    return _metadata(PARTITION_RECORD, {"partitionId": partition, "topicId": topic_id, "replicas": [1], "isr": [1], "leader": 1})


def _config(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    return _metadata(CONFIG_RECORD, {"resourceType": resource_type, "resourceName": resource, "name": name, "value": value})


def _batch(values: list[bytes], base_offset: int) -> bytes:
    return build_batch([SimpleRecord(value, None, 0) for value in values], base_offset=base_offset, partition_leader_epoch=1)


def _control(kind: ControlRecordType, schema: MessageSchema, value: dict[str, Any], offset: int) -> bytes:
    key = struct.pack(">hh", 0, int(kind))
    return build_batch([SimpleRecord(write_message(schema, 0, value), key, 0)], base_offset=offset, is_control=True)


def _write_snapshot(directory: Path, values: list[bytes], end_offset: int, epoch: int = 1) -> Path:
    path = directory / f"{filename_prefix_from_offset(end_offset)}-{epoch:010d}.checkpoint"
    path.write_bytes(
        _control(ControlRecordType.SNAPSHOT_HEADER, SNAPSHOT_HEADER_RECORD, {"version": 0, "lastContainedLogTimestamp": 0}, 0)
        + _batch(values, 1)
        + _control(ControlRecordType.SNAPSHOT_FOOTER, SNAPSHOT_FOOTER_RECORD, {"version": 0}, 1 + len(values))
    )
    return path


def _write_log(directory: Path, base: int, batches: list[list[bytes]]) -> Path:
    data = b""
    offset = base
    for values in batches:
        data += _batch(values, offset)
        offset += len(values)
    path = directory / f"{filename_prefix_from_offset(base)}.log"
    path.write_bytes(data)
    return path


@pytest.fixture
def metadata_dir(tmp_path: Path) -> Path:
    directory = tmp_path / CLUSTER_METADATA_DIR
    directory.mkdir()
    # An older snapshot that must be ignored, then the latest one at end offset 10.
    _write_snapshot(directory, [_topic("old", uuid.UUID(int=99))], 5)
    _write_snapshot(
        directory,
        [
            _topic("orders", ORDERS),
            _partition(ORDERS, 0),
            _topic("clicks", CLICKS),
            _config(2, "orders", "cleanup.policy", "compact"),
            _config(2, "clicks", "retention.ms", "1000"),
            _config(4, "", "log.retention.ms", "5000"),
        ],
        10,
    )
    # Log records below the snapshot end are already in it; the ones from offset 10 on apply in order.
    _write_log(
        directory,
        0,
        [
            [_topic("ignored", uuid.UUID(int=98))] * 10,
            [_partition(ORDERS, 1), _config(2, "orders", "cleanup.policy", "compact,delete")],
            [_config(2, "orders", "retention.ms", "60000"), _config(2, "orders", "retention.ms", None)],
            [_metadata(REMOVE_TOPIC_RECORD, {"topicId": CLICKS}), _config(4, "1", "log.cleaner.threads", "2")],
        ],
    )
    return tmp_path


def test_generated_dir_image(metadata_dir: Path) -> None:
    image = load_cluster_metadata(metadata_dir)
    assert image is not None
    assert image.warnings == ()
    assert image.snapshot is not None and image.snapshot.name == "00000000000000000010-0000000001.checkpoint"
    assert image.end_offset == 16
    assert set(image.topics) == {"orders"}
    assert image.topics["orders"].topic_id == ORDERS
    assert image.topics["orders"].partitions == frozenset({0, 1})
    orders = image.topic_configs["orders"]
    assert orders["cleanup.policy"].value == "compact,delete"
    assert orders["cleanup.policy"].offset == 11
    assert "retention.ms" not in orders  # set then deleted by a null value
    assert "clicks" not in image.topic_configs  # removed with its topic
    assert image.broker_configs[""]["log.retention.ms"].value == "5000"
    assert image.broker_configs["1"]["log.cleaner.threads"].offset == 15
    assert image.describe_source(image.broker_configs[""]["log.retention.ms"].offset) == (
        "snapshot 00000000000000000010-0000000001.checkpoint"
    )
    assert image.describe_source(11) == "__cluster_metadata-0 offset 11"
    with pytest.raises(TypeError):
        image.topic_configs["orders"]["x"] = orders["cleanup.policy"]  # type: ignore[index]


def test_torn_log_tail_ends_the_valid_prefix_with_a_warning(metadata_dir: Path) -> None:
    log = metadata_dir / CLUSTER_METADATA_DIR / "00000000000000000000.log"
    data = log.read_bytes()
    log.write_bytes(data[:-5])
    image = load_cluster_metadata(metadata_dir)
    assert image is not None
    assert len(image.warnings) == 1 and "torn tail" in image.warnings[0]
    # The last batch (remove clicks, broker 1 config) is gone: clicks is still there.
    assert set(image.topics) == {"orders", "clicks"}
    assert "1" not in image.broker_configs
    assert image.end_offset == 14


def test_corrupt_log_batch_ends_the_valid_prefix_with_a_warning(metadata_dir: Path) -> None:
    log = metadata_dir / CLUSTER_METADATA_DIR / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    log.write_bytes(bytes(data))
    image = load_cluster_metadata(metadata_dir)
    assert image is not None
    assert len(image.warnings) == 1 and "crc" in image.warnings[0].lower()
    assert str(log) in image.warnings[0]
    assert "clicks" in image.topics


def test_corrupt_snapshot_raises_naming_file_and_position(metadata_dir: Path) -> None:
    snapshot = metadata_dir / CLUSTER_METADATA_DIR / "00000000000000000010-0000000001.checkpoint"
    data = bytearray(snapshot.read_bytes())
    data[100] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    with pytest.raises(StorageFormatError) as info:
        load_cluster_metadata(metadata_dir)
    assert info.value.path == str(snapshot)
    assert info.value.position is not None


def test_snapshot_past_the_log_end_is_used_alone(tmp_path: Path) -> None:
    directory = tmp_path / CLUSTER_METADATA_DIR
    directory.mkdir()
    _write_snapshot(directory, [_topic("orders", ORDERS)], 50)
    _write_log(directory, 0, [[_topic("early", CLICKS)]])
    image = load_cluster_metadata(tmp_path)
    assert image is not None
    assert set(image.topics) == {"orders"} and image.end_offset == 50
    assert any("truncates the log to the snapshot" in warning for warning in image.warnings)


def test_log_only_without_snapshot(tmp_path: Path) -> None:
    directory = tmp_path / CLUSTER_METADATA_DIR
    directory.mkdir()
    _write_log(directory, 0, [[_topic("a", ORDERS), _config(2, "a", "segment.bytes", "1024")]])
    image = load_cluster_metadata(tmp_path)
    assert image is not None and image.snapshot is None
    assert image.topic_configs["a"]["segment.bytes"] == ConfigEntry("1024", 1)


def test_no_metadata_partition_gives_none(tmp_path: Path) -> None:
    assert load_cluster_metadata(tmp_path) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_dir_loads(metadata_dir: Path) -> None:
    directory = metadata_dir / CLUSTER_METADATA_DIR
    before = {name: (directory / name).read_bytes() for name in os.listdir(directory)}
    directory.chmod(0o555)
    try:
        image = load_cluster_metadata(metadata_dir)
    finally:
        directory.chmod(0o755)
    assert image is not None and "orders" in image.topics
    assert {name: (directory / name).read_bytes() for name in os.listdir(directory)} == before


# -- real broker dirs --------------------------------------------------------------------------------------------


def _kraft_dirs() -> list[Path]:
    root = require_fixtures(KAFKA_REAL)
    return sorted(path.parent.parent for path in root.glob(f"*/*/{CLUSTER_METADATA_DIR}/partition.metadata"))


def test_every_real_kraft_dir_loads() -> None:
    dirs = _kraft_dirs()
    assert len(dirs) == 4
    for log_dir in dirs:
        image = load_cluster_metadata(log_dir)
        assert image is not None, log_dir
        assert image.warnings == (), (log_dir, image.warnings)


def test_real_zookeeper_dirs_have_no_image() -> None:
    root = require_fixtures(KAFKA_REAL)
    for log_dir in root.glob("zk-*/*"):
        if log_dir.is_dir():
            assert load_cluster_metadata(log_dir) is None


def test_real_confluent_stack_topic_configs() -> None:
    log_dir = require_fixtures(KAFKA_REAL) / "kraft-3.7-clean-transactions" / "kafka-data"
    image = load_cluster_metadata(log_dir)
    assert image is not None
    assert image.snapshot is not None and image.snapshot.name == "00000000000000060500-0000000025.checkpoint"
    for topic in ("_schemas", "docker-connect-configs", "docker-connect-offsets", "docker-connect-status", "__consumer_offsets", "__transaction_state"):
        assert image.topic_configs[topic]["cleanup.policy"].value == "compact", topic
    ksql = image.topic_configs["_confluent-ksql-default__command_topic"]
    assert (ksql["cleanup.policy"].value, ksql["retention.ms"].value) == ("delete", "-1")
    assert len(image.topics["docker-connect-offsets"].partitions) == 25
    assert image.topics["__consumer_offsets"].partitions == frozenset(range(50))
    assert image.describe_source(ksql["retention.ms"].offset).startswith("snapshot ")


def test_real_log_only_dir_reads_broker_default_config() -> None:
    log_dir = require_fixtures(KAFKA_REAL) / "kraft-4.2-clean" / "kafka-logs"
    image = load_cluster_metadata(log_dir)
    assert image is not None and image.snapshot is None
    assert image.broker_configs[""]["min.insync.replicas"].value == "1"
    assert image.topics["demo-topic"].partitions == frozenset({0, 1, 2})
    assert image.topic_configs["__consumer_offsets"]["cleanup.policy"].value == "compact"
    assert image.end_offset > 0
