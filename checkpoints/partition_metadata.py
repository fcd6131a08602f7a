"""``<partition dir>/partition.metadata``: the topic id of the partition.

Exact content Kafka writes (no trailing newline, ``\\n`` whatever the platform)::

    version: 0
    topic_id: <22-character base64 UUID>

Kafka's reader takes the first two lines, splits each on the first ``:`` followed by whitespace, requires the
keys ``version`` and ``topic_id``, a version >= 0 (newer versions are accepted for downgrade compatibility) and
a non-zero topic id; anything after the second line is ignored.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from os import PathLike

from checkpoints.atomic import atomic_write_bytes
from checkpoints.java_text import JAVA_WHITESPACE, decode_utf8, split_lines
from checkpoints.kafka_uuid import ZERO_UUID, uuid_from_kafka, uuid_to_kafka
from segments.errors import CorruptCheckpointError
from segments.java_numbers import check_java_int, parse_java_int

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0

_KEY_SEPARATOR = re.compile(":" + JAVA_WHITESPACE + "+")


@dataclass(frozen=True)
class PartitionMetadata:
    """The content of ``partition.metadata``."""

    version: int
    topic_id: uuid.UUID

    def __post_init__(self) -> None:
        if check_java_int(self.version, 32, "version") < 0:
            raise ValueError(f"partition metadata version {self.version} is negative")
        if self.topic_id == ZERO_UUID:
            raise ValueError("the zero UUID is not a topic id")


def parse_partition_metadata(data: bytes, path: str | PathLike[str] | None = None) -> PartitionMetadata:
    """Parse ``partition.metadata`` bytes. O(n).

    Raises :class:`~segments.errors.CorruptCheckpointError` with the 1-based line for any malformation.
    """
    lines = split_lines(decode_utf8(data, path))
    version_text = _value(lines, 1, "version", path)
    try:
        version = parse_java_int(version_text, 32)
    except ValueError as err:
        raise CorruptCheckpointError(f"malformed version: {err}", path=path, line=1) from None
    if version < 0:
        raise CorruptCheckpointError(f"unsupported partition metadata version {version}", path=path, line=1)
    try:
        topic_id = uuid_from_kafka(_value(lines, 2, "topic_id", path))
    except ValueError as err:
        raise CorruptCheckpointError(f"malformed topic_id: {err}", path=path, line=2) from None
    if topic_id == ZERO_UUID:
        raise CorruptCheckpointError("topic_id is the zero UUID", path=path, line=2)
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(metadata: PartitionMetadata) -> bytes:
    """The exact bytes Kafka writes for ``metadata``. O(1)."""
    return f"version: {metadata.version}\ntopic_id: {uuid_to_kafka(metadata.topic_id)}".encode("ascii")


def read_partition_metadata(path: str | PathLike[str]) -> PartitionMetadata:
    """Read and parse the file at ``path`` (``FileNotFoundError`` when absent: the topic id is unknown). O(n)."""
    with open(path, "rb") as source:
        return parse_partition_metadata(source.read(), path)


def write_partition_metadata(path: str | PathLike[str], metadata: PartitionMetadata) -> None:
    """Atomically replace the file at ``path`` with ``metadata`` (tmp, fsync, rename, fsync dir). O(1)."""
    atomic_write_bytes(path, format_partition_metadata(metadata))


def _value(lines: list[str], number: int, key: str, path: str | PathLike[str] | None) -> str:
    if len(lines) < number:
        raise CorruptCheckpointError(f"missing the {key!r} line", path=path, line=number)
    parts = _KEY_SEPARATOR.split(lines[number - 1], maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        raise CorruptCheckpointError(f"expected '{key}: <value>', found {lines[number - 1]!r}", path=path, line=number)
    return parts[1]
