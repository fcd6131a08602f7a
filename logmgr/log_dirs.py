"""Read-only discovery of a log dir: its live partition dirs and their segments.

Used by tools that must not change a dir (``logmgr info``/``read``/``cleanup --dry-run``, the Spark source):
nothing here creates, resizes, renames or locks a file, so it works next to a running broker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from segments.errors import InvalidPartitionDirError
from segments.log_segment import LogSegment
from segments.naming import LOG_SUFFIX, DirKind, PartitionDirName, TopicPartition, offset_from_file_name


def segment_base_offsets(partition_dir: Path) -> list[int]:
    """Base offsets of the ``.log`` files in ``partition_dir``, ascending. O(entries log entries)."""
    return sorted(
        offset_from_file_name(path.name)
        for path in partition_dir.iterdir()
        if path.name.endswith(LOG_SUFFIX) and path.is_file()
    )


@contextlib.contextmanager
def readonly_segments(partition_dir: Path) -> Iterator[list[LogSegment]]:
    """The segments of ``partition_dir`` opened read-only, by base offset, closed on exit. O(segments).

    A missing index reads as empty, so a dir with trimmed or absent indexes is still readable; no file is
    created, resized or renamed.
    """
    opened: list[LogSegment] = []
    try:
        for base in segment_base_offsets(partition_dir):
            opened.append(LogSegment.open(partition_dir, base, writable=False))
        yield opened
    finally:
        for segment in opened:
            segment.close()


def partition_dirs(log_dir: Path, kind: DirKind = "live") -> list[tuple[TopicPartition, Path]]:
    """Partition dirs of ``log_dir`` of one ``kind`` (by default the live ones: ``-delete``/``-future``/``-stray``
    and other dirs skipped), sorted by topic and partition. Symlinked entries are not followed, so a link cannot
    pull a dir from outside ``log_dir`` into a scan. O(entries)."""
    found = []
    for child in log_dir.iterdir():
        if child.is_symlink() or not child.is_dir():
            continue
        try:
            parsed = PartitionDirName.parse(child.name)
        except InvalidPartitionDirError:
            continue
        if parsed.kind == kind:
            found.append((parsed.topic_partition, child))
    return sorted(found, key=lambda item: (item[0].topic, item[0].partition))
