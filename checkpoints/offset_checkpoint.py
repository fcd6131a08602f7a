"""Per-log-directory offset checkpoints: ``topic partition offset`` lines under a version-0 header.

Four files share this format at the root of every log directory: the recovery points, the log start offsets,
the high watermarks (``replication-offset-checkpoint``) and the cleaner's first dirty offsets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from os import PathLike

from checkpoints.checkpoint_file import TextCheckpointFile, format_checkpoint, parse_checkpoint
from checkpoints.java_text import JAVA_WHITESPACE
from segments._native.text import TEXT, checkpoint_entries
from segments.java_numbers import check_java_int, parse_java_int
from segments.naming import TopicPartition

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
)
OFFSET_CHECKPOINT_VERSION = 0

_HAS_WHITESPACE = re.compile(JAVA_WHITESPACE)


def _parse_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError(f"expected 3 fields (topic partition offset), found {len(fields)}")
    topic, partition, offset = fields
    # Like Kafka's reader, the topic is taken as is (not validated as a topic name).
    return TopicPartition(topic, parse_java_int(partition, 32)), parse_java_int(offset, 64)


def parse_offset_checkpoint(
    data: bytes, path: str | PathLike[str] | None = None
) -> dict[TopicPartition, int]:
    """Parse an offset checkpoint's bytes into ``{partition: offset}`` in file order. O(n).

    A partition listed twice keeps its first position and its last offset (Kafka fills a map). Raises
    :class:`~segments.errors.CorruptCheckpointError` with the 1-based line for any malformation. A file in the
    form Kafka writes is read by one compiled pass (:func:`~segments._native.text.checkpoint_entries`), anything
    else by the interpreted reader.
    """
    rows = checkpoint_entries(data, OFFSET_CHECKPOINT_VERSION, (TEXT, 32, 64))
    if rows is not None:
        return {TopicPartition(topic, partition): offset for topic, partition, offset in rows}
    return dict(parse_checkpoint(data, version=OFFSET_CHECKPOINT_VERSION, parse_entry=_parse_entry, path=path))


def format_offset_checkpoint(mapping: Mapping[TopicPartition, int], *, line_separator: str = "\n") -> bytes:
    """Serialize ``mapping`` in its iteration order, exactly as Kafka writes it. O(n).

    Raises ``ValueError`` for an entry Kafka could not read back: a topic containing whitespace, a partition
    outside int32 or an offset outside int64.
    """
    lines = []
    for tp, offset in mapping.items():
        if _HAS_WHITESPACE.search(tp.topic):
            raise ValueError(f"topic {tp.topic!r} contains whitespace")
        partition = check_java_int(tp.partition, 32, f"partition of {tp.topic!r}")
        value = check_java_int(offset, 64, f"offset of {tp}")
        lines.append(f"{tp.topic} {partition} {value}")
    return format_checkpoint(OFFSET_CHECKPOINT_VERSION, lines, line_separator=line_separator)


class OffsetCheckpointFile(TextCheckpointFile[dict[TopicPartition, int], Mapping[TopicPartition, int]]):
    """One offset checkpoint file on disk (e.g. ``<logdir>/recovery-point-offset-checkpoint``).

    ``read()`` gives ``{partition: offset}`` in file order; ``write(mapping)`` replaces the file atomically.
    """

    def _parse(self, data: bytes) -> dict[TopicPartition, int]:
        return parse_offset_checkpoint(data, self.path)

    def _format(self, content: Mapping[TopicPartition, int]) -> bytes:
        return format_offset_checkpoint(content)
