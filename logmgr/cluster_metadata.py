"""The KRaft cluster-metadata image of a log dir: topics, partitions and dynamic configs from ``__cluster_metadata``.

In KRaft mode Kafka keeps topic configs (``cleanup.policy``, ``retention.ms``...) and dynamic broker configs in
the metadata log, partition ``__cluster_metadata-0``: snapshots ``<endOffset:020d>-<epoch:010d>.checkpoint``
hold the whole state below their end offset, and ``.log`` segments hold the records after it.
:func:`load_cluster_metadata` rebuilds the part of Kafka's ``MetadataImage`` logmgr needs the way a broker does
at startup: the latest snapshot, then the log's record batches from the snapshot's end offset on.

* The snapshot is the one with the highest ``(end offset, epoch)``, as ``KafkaMetadataLog.latestSnapshotId``.
  When it ends past the log (Kafka's ``truncateToLatestSnapshot`` then empties the log) the log adds nothing.
* Control batches (leader changes, snapshot header/footer, KRaft version and voters) are skipped; every other
  batch's CRC is verified. In the log, the first batch that is torn or corrupt ends the valid prefix, as Kafka's
  recovery would cut it; the image stops there and :attr:`ClusterMetadataImage.warnings` says where. A corrupt
  snapshot raises a :class:`~segments.errors.StorageFormatError` naming the file and byte position.
* Applied records: ``TopicRecord``, ``RemoveTopicRecord`` (drops the topic and its configs), ``PartitionRecord``
  and ``ConfigRecord`` (resource type 2 = topic, 4 = broker; a null value deletes the key; the broker named
  ``""`` is the cluster-wide default). Other record types are decoded and ignored.

Files are only ever opened read-only, batch by batch: memory is bounded by the largest batch (plus the image).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from checkpoints.kafka_uuid import uuid_from_kafka
from segments.errors import CorruptRecordError, StorageFormatError
from segments.file_records import FileBatch, FileRecords
from segments.naming import (
    CHECKPOINT_SUFFIX,
    LOG_SUFFIX,
    filename_prefix_from_offset,
    is_log_file,
    offset_from_file_name,
    parse_kraft_snapshot_name,
)
from segments.record_decoders import MetadataRecord, decode_metadata_record
from segments.records import Record

__all__ = [
    "BROKER_RESOURCE",
    "CLUSTER_METADATA_DIR",
    "TOPIC_RESOURCE",
    "ClusterMetadataImage",
    "ConfigEntry",
    "TopicImage",
    "load_cluster_metadata",
]

CLUSTER_METADATA_DIR = "__cluster_metadata-0"
TOPIC_RESOURCE = 2
"""``ConfigResource.Type.TOPIC`` id in a ``ConfigRecord``."""
BROKER_RESOURCE = 4
"""``ConfigResource.Type.BROKER`` id in a ``ConfigRecord``."""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """A config value and the metadata offset of the record that set it (for a value that came from the
    snapshot: the last offset the snapshot covers)."""

    value: str
    offset: int


@dataclass(frozen=True, slots=True)
class TopicImage:
    """A live topic: name, id and the partition ids its ``PartitionRecord`` s created."""

    name: str
    topic_id: uuid.UUID
    partitions: frozenset[int]


@dataclass(frozen=True, slots=True)
class ClusterMetadataImage:
    """What the metadata log says about topics and configs, with where it came from."""

    topics: Mapping[str, TopicImage]
    topic_configs: Mapping[str, Mapping[str, ConfigEntry]]
    broker_configs: Mapping[str, Mapping[str, ConfigEntry]]
    snapshot: Path | None
    end_offset: int
    warnings: tuple[str, ...]

    def describe_source(self, offset: int) -> str:
        """Where the record at ``offset`` was read: ``snapshot <file>`` for state the snapshot holds, else
        ``__cluster_metadata-0 offset <n>``. O(1)."""
        if self.snapshot is not None:
            snapshot_id = parse_kraft_snapshot_name(self.snapshot.name)
            if snapshot_id is not None and offset < snapshot_id[0]:
                return f"snapshot {self.snapshot.name}"
        return f"{CLUSTER_METADATA_DIR} offset {offset}"


class _ImageBuilder:
    """The mutable image while records are applied."""

    def __init__(self) -> None:
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.partitions: dict[uuid.UUID, set[int]] = {}
        self.topic_configs: dict[str, dict[str, ConfigEntry]] = {}
        self.broker_configs: dict[str, dict[str, ConfigEntry]] = {}

    def apply(self, record: MetadataRecord, offset: int) -> None:
        data = record.data
        if record.type_name == "TOPIC_RECORD":
            topic_id = uuid_from_kafka(data["topicId"])
            self.topic_names[topic_id] = data["name"]
            self.topic_ids[data["name"]] = topic_id
            self.partitions.setdefault(topic_id, set())
        elif record.type_name == "REMOVE_TOPIC_RECORD":
            topic_id = uuid_from_kafka(data["topicId"])
            name = self.topic_names.pop(topic_id, None)
            self.partitions.pop(topic_id, None)
            if name is not None:
                self.topic_ids.pop(name, None)
                # Kafka's MetadataDelta drops the topic's config resource with the topic.
                self.topic_configs.pop(name, None)
        elif record.type_name == "PARTITION_RECORD":
            self.partitions.setdefault(uuid_from_kafka(data["topicId"]), set()).add(data["partitionId"])
        elif record.type_name == "CONFIG_RECORD":
            if data["resourceType"] == TOPIC_RESOURCE:
                configs = self.topic_configs
            elif data["resourceType"] == BROKER_RESOURCE:
                configs = self.broker_configs
            else:
                return
            resource = configs.setdefault(data["resourceName"], {})
            if data["value"] is None:
                resource.pop(data["name"], None)
            else:
                resource[data["name"]] = ConfigEntry(data["value"], offset)

    def freeze(self, snapshot: Path | None, end_offset: int, warnings: list[str]) -> ClusterMetadataImage:
        topics = {
            name: TopicImage(name, topic_id, frozenset(self.partitions.get(topic_id, ())))
            for name, topic_id in self.topic_ids.items()
        }
        return ClusterMetadataImage(
            MappingProxyType(topics),
            _frozen_configs(self.topic_configs),
            _frozen_configs(self.broker_configs),
            snapshot,
            end_offset,
            tuple(warnings),
        )


def _frozen_configs(configs: dict[str, dict[str, ConfigEntry]]) -> Mapping[str, Mapping[str, ConfigEntry]]:
    return MappingProxyType({name: MappingProxyType(dict(entries)) for name, entries in configs.items() if entries})


def _located(err: StorageFormatError, path: Path, batch_position: int) -> StorageFormatError:
    if err.position is None:
        return type(err)(err.message, path=path, position=batch_position)
    return err.at(path, position_base=batch_position)


def _checked_batches(records: FileRecords) -> Iterator[FileBatch]:
    """The file's batches with their CRC verified; raises a located :class:`StorageFormatError` at the first bad
    one. O(bytes read), one batch in memory."""
    for found in records.batches():
        try:
            found.batch.ensure_valid()
        except StorageFormatError as err:
            raise _located(err, records.path, found.position) from None
        yield found


def _batch_records(found: FileBatch, path: Path) -> list[Record]:
    try:
        return found.batch.records()
    except StorageFormatError as err:
        raise _located(err, path, found.position) from None


def _latest_snapshot(directory: Path, names: list[str]) -> tuple[Path, int] | None:
    best: tuple[tuple[int, int], str] | None = None
    for name in names:
        snapshot_id = parse_kraft_snapshot_name(name) if name.endswith(CHECKPOINT_SUFFIX) else None
        if snapshot_id is not None and (best is None or snapshot_id > best[0]):
            best = (snapshot_id, name)
    return None if best is None else (directory / best[1], best[0][0])


def _load_snapshot(path: Path, end_offset: int, builder: _ImageBuilder) -> None:
    """Apply every metadata record of a snapshot; raise located errors for anything corrupt (a snapshot is
    written whole, so a torn one is corrupt)."""
    with FileRecords(path) as records:
        position = 0
        for found in _checked_batches(records):
            position = found.end_position
            if found.batch.is_control:
                continue
            for record in _batch_records(found, path):
                try:
                    decoded = decode_metadata_record(record.value)
                except StorageFormatError as err:
                    raise CorruptRecordError(
                        f"record at snapshot offset {record.offset}: {err.message}", path=path, position=found.position
                    ) from None
                builder.apply(decoded, end_offset - 1)
        if position != records.size_in_bytes:
            raise CorruptRecordError(
                f"{records.size_in_bytes - position} bytes at the end do not form a complete batch",
                path=path,
                position=position,
            )


def _apply_log(
    directory: Path, names: list[str], start_offset: int, builder: _ImageBuilder, warnings: list[str]
) -> int | None:
    """Apply the log's records at offsets >= ``start_offset``; return the next offset after the last batch of
    the valid prefix (None when the log holds no batch)."""
    bases = sorted(offset_from_file_name(name) for name in names if is_log_file(name))
    log_end: int | None = None
    for index, base in enumerate(bases):
        if index + 1 < len(bases) and bases[index + 1] <= start_offset:
            continue  # every batch of this segment is below the snapshot
        path = directory / (filename_prefix_from_offset(base) + LOG_SUFFIX)
        with FileRecords(path) as records:
            position = 0
            try:
                for found in _checked_batches(records):
                    position = found.end_position
                    batch = found.batch
                    log_end = batch.next_offset
                    if batch.is_control or batch.last_offset < start_offset:
                        continue
                    for record in _batch_records(found, path):
                        if record.offset < start_offset:
                            continue
                        try:
                            decoded = decode_metadata_record(record.value)
                        except StorageFormatError as err:
                            warnings.append(f"{path}: offset {record.offset}: record skipped: {err.message}")
                            continue
                        builder.apply(decoded, record.offset)
            except StorageFormatError as err:
                warnings.append(f"{err} (the valid log ends at offset {log_end if log_end is not None else base})")
                return log_end
            if position != records.size_in_bytes:
                warnings.append(
                    f"{path}: position {position}: {records.size_in_bytes - position} bytes do not form a complete "
                    f"batch (torn tail; the valid log ends at offset {log_end if log_end is not None else base})"
                )
                return log_end
    return log_end


def load_cluster_metadata(log_dir: Path) -> ClusterMetadataImage | None:
    """The metadata image of ``log_dir``'s ``__cluster_metadata-0``, or None when the dir has none (a
    ZooKeeper-mode broker). Read-only: works on a read-only dir and never writes. O(bytes of the snapshot and
    of the log after it), memory bounded by the largest batch plus the image.

    Raises :class:`~segments.errors.StorageFormatError` (file and position named) for a corrupt snapshot and
    ``OSError`` for files that cannot be read.
    """
    directory = Path(log_dir) / CLUSTER_METADATA_DIR
    if not directory.is_dir():
        return None
    names = sorted(os.listdir(directory))
    builder = _ImageBuilder()
    warnings: list[str] = []
    latest = _latest_snapshot(directory, names)
    snapshot_path, start_offset = (None, 0) if latest is None else latest
    if snapshot_path is not None:
        _load_snapshot(snapshot_path, start_offset, builder)
    log_end = _apply_log(directory, names, start_offset, builder, warnings)
    if log_end is not None and log_end < start_offset:
        warnings.append(
            f"the log ends at offset {log_end}, before the snapshot's end offset {start_offset}: Kafka truncates "
            "the log to the snapshot, so only the snapshot is used"
        )
    end_offset = start_offset if log_end is None else max(log_end, start_offset)
    return builder.freeze(snapshot_path, end_offset, warnings)
