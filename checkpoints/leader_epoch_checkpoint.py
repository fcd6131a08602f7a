"""``<partition dir>/leader-epoch-checkpoint``: ``epoch startOffset`` lines under a version-0 header."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike

from checkpoints.checkpoint_file import TextCheckpointFile, format_checkpoint, parse_checkpoint
from segments._native.text import checkpoint_entries
from segments.java_numbers import check_java_int, parse_java_int

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
LEADER_EPOCH_CHECKPOINT_VERSION = 0


@dataclass(frozen=True)
class EpochEntry:
    """The first offset written under leader ``epoch``."""

    epoch: int
    start_offset: int

    def __post_init__(self) -> None:
        check_java_int(self.epoch, 32, "epoch")
        check_java_int(self.start_offset, 64, "start offset")


def _parse_entry(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise ValueError(f"expected 2 fields (epoch startOffset), found {len(fields)}")
    return EpochEntry(parse_java_int(fields[0], 32), parse_java_int(fields[1], 64))


def parse_leader_epoch_checkpoint(data: bytes, path: str | PathLike[str] | None = None) -> list[EpochEntry]:
    """Parse a leader-epoch checkpoint's bytes into its entries in file order. O(n).

    Raises :class:`~segments.errors.CorruptCheckpointError` with the 1-based line for any malformation.
    Ordering between entries is the epoch cache's business, not the file format's, so it is not checked. A file
    in the form Kafka writes is read by one compiled pass (:func:`~segments._native.text.checkpoint_entries`),
    anything else by the interpreted reader.
    """
    rows = checkpoint_entries(data, LEADER_EPOCH_CHECKPOINT_VERSION, (32, 64))
    if rows is not None:
        return [EpochEntry(epoch, start_offset) for epoch, start_offset in rows]
    return parse_checkpoint(data, version=LEADER_EPOCH_CHECKPOINT_VERSION, parse_entry=_parse_entry, path=path)


def format_leader_epoch_checkpoint(entries: Iterable[EpochEntry], *, line_separator: str = "\n") -> bytes:
    """Serialize ``entries`` in order, exactly as Kafka writes them. O(n)."""
    lines = [f"{entry.epoch} {entry.start_offset}" for entry in entries]
    return format_checkpoint(LEADER_EPOCH_CHECKPOINT_VERSION, lines, line_separator=line_separator)


class LeaderEpochCheckpointFile(TextCheckpointFile[list[EpochEntry], Iterable[EpochEntry]]):
    """The leader-epoch checkpoint of one partition directory.

    ``read()`` gives the entries in file order; ``write(entries)`` replaces the file atomically.
    """

    def _parse(self, data: bytes) -> list[EpochEntry]:
        return parse_leader_epoch_checkpoint(data, self.path)

    def _format(self, content: Iterable[EpochEntry]) -> bytes:
        return format_leader_epoch_checkpoint(content)
