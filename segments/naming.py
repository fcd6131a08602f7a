"""Names of Kafka's log files and partition directories (format doc §2).

Segment files are named by their base offset zero-padded to 20 digits plus a suffix (``.log``, ``.index``, ...),
optionally followed by a transient suffix (``.deleted``, ``.cleaned``, ``.swap``). Partition directories are
``<topic>-<partition>``, or ``<topic>-<partition>.<uniqueId>-delete|-future|-stray`` while being deleted, moved
between log dirs, or set aside as strays. Parsing follows Kafka's own rules (``LogFileUtils``,
``LocalLog.parseTopicPartitionName``), including their leniencies: numbers are read the way Java's
``Long.parseLong`` / ``Integer.parseInt`` read them (an optional sign, any Unicode decimal digits).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Literal, Self

from segments.errors import InvalidOffsetError, InvalidPartitionDirError, InvalidTopicError
from segments.java_numbers import INT32_MAX, INT64_MAX, parse_java_int

__all__ = [
    "CHECKPOINT_SUFFIX",
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "MAX_TOPIC_LENGTH",
    "SNAPSHOT_SUFFIX",
    "STRAY_DIR_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "DirKind",
    "PartitionDirName",
    "TopicPartition",
    "delete_dir_name",
    "filename_prefix_from_offset",
    "future_dir_name",
    "is_index_file",
    "is_log_file",
    "is_partition_dir_name",
    "log_file",
    "offset_from_file_name",
    "offset_index_file",
    "parse_kraft_snapshot_name",
    "parse_topic_partition",
    "producer_snapshot_file",
    "stray_dir_name",
    "time_index_file",
    "transaction_index_file",
    "validate_topic",
    "validate_topic_partition",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CHECKPOINT_SUFFIX = ".checkpoint"
"""Suffix of a KRaft metadata snapshot, ``<20-digit end offset>-<10-digit epoch>.checkpoint``."""

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_LENGTH = 249
"""Longest legal topic name; leaves room in 255-character file names for ``-<partition>`` and suffixes."""

_OFFSET_WIDTH = 20
_EPOCH_WIDTH = 10
_MAX_FILE_NAME = 255

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_KRAFT_SNAPSHOT = re.compile(rf"([0-9]{{{_OFFSET_WIDTH}}})-([0-9]{{{_EPOCH_WIDTH}}})\.checkpoint")
# A uniqueId holds no whitespace (the patterns use \S) and no '.' (parsing cuts at the last one). Parsing can
# yield an empty one (``t-0.x-1.-delete`` is topic ``t-0.x``), which Kafka accepts but never writes.
_UNIQUE_ID = re.compile(r"[^.\s]*", re.ASCII)

DirKind = Literal["live", "delete", "future", "stray"]

_KIND_SUFFIXES: dict[DirKind, str] = {
    "delete": DELETE_DIR_SUFFIX,
    "future": FUTURE_DIR_SUFFIX,
    "stray": STRAY_DIR_SUFFIX,
}
# Java's \S is ASCII-only (not whitespace among space, \t, \n, \x0b, \f, \r); re.ASCII gives the same class.
_KIND_PATTERNS: dict[DirKind, re.Pattern[str]] = {
    kind: re.compile(rf"(\S+)-(\S+)\.(\S+){re.escape(suffix)}", re.ASCII)
    for kind, suffix in _KIND_SUFFIXES.items()
}


def _parse_java_integer(text: str, bits: int) -> int | None:
    """``text`` as Java's ``parseInt``/``parseLong`` reads it, else None."""
    try:
        return parse_java_int(text, bits)
    except ValueError:
        return None

def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded name every file of the segment starting at ``offset`` begins with. O(1).

    Raises ``ValueError`` for an offset outside ``0..2**63-1``.
    """
    if not 0 <= offset <= INT64_MAX:
        raise ValueError(f"offset {offset} cannot name a segment file (must be 0..{INT64_MAX})")
    # zfill: half the time of a format spec, which a load pays a few times per segment.
    return str(offset).zfill(_OFFSET_WIDTH)


def _segment_file(directory: str | PathLike[str], offset: int, kind_suffix: str, suffix: str) -> Path:
    # A Path is joined as it is: Path(path) would parse it again (a log load names files by the thousand).
    parent = directory if isinstance(directory, Path) else Path(directory)
    return parent / f"{filename_prefix_from_offset(offset)}{kind_suffix}{suffix}"


def log_file(directory: str | PathLike[str], offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset:020>.log<suffix>`` (suffix e.g. ``.deleted``, ``.cleaned``, ``.swap``). O(1)."""
    return _segment_file(directory, offset, LOG_SUFFIX, suffix)


def offset_index_file(directory: str | PathLike[str], offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset:020>.index<suffix>``. O(1)."""
    return _segment_file(directory, offset, INDEX_SUFFIX, suffix)


def time_index_file(directory: str | PathLike[str], offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset:020>.timeindex<suffix>``. O(1)."""
    return _segment_file(directory, offset, TIME_INDEX_SUFFIX, suffix)


def transaction_index_file(directory: str | PathLike[str], offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset:020>.txnindex<suffix>``. O(1)."""
    return _segment_file(directory, offset, TXN_INDEX_SUFFIX, suffix)


def producer_snapshot_file(directory: str | PathLike[str], offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset:020>.snapshot<suffix>``; ``offset`` is the next offset after the snapshot's state. O(1)."""
    return _segment_file(directory, offset, SNAPSHOT_SUFFIX, suffix)


def offset_from_file_name(name: str) -> int:
    """The offset a segment-style file name starts with: the text before the first ``.``. O(len(name)).

    Like Kafka's ``LogFileUtils.offsetFromFileName`` the text need not be 20 digits; it is read as a Java
    ``long``. Raises :class:`InvalidOffsetError` when there is no ``.`` or the text is not such a number.
    """
    dot = name.find(".")
    if dot == _OFFSET_WIDTH:
        prefix = name[:dot]
        if prefix.isascii() and prefix.isdigit():
            canonical = int(prefix)
            if canonical <= INT64_MAX:
                # A canonical name (every name Kafka writes): what the strict parse below gives it.
                return canonical
    if dot < 0:
        raise InvalidOffsetError(f"file name {name!r} has no '.' after its offset")
    offset = _parse_java_integer(name[:dot], 64)
    if offset is None:
        raise InvalidOffsetError(f"file name {name!r} does not start with an offset (a 64-bit integer)")
    return offset


def is_log_file(name: str) -> bool:
    """Whether ``name`` ends with ``.log`` (Kafka's test; transient suffixes after it do not count). O(1)."""
    return name.endswith(LOG_SUFFIX)


def is_index_file(name: str) -> bool:
    """Whether ``name`` ends with ``.index``, ``.timeindex`` or ``.txnindex``. O(1)."""
    return name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))


def parse_kraft_snapshot_name(name: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` of a KRaft snapshot file name ``<20 digits>-<10 digits>.checkpoint``, else None.

    O(len(name)). Names with a further suffix (``.checkpoint.part``, ``.checkpoint.deleted``) and numbers
    beyond a Java long offset or int epoch give None.
    """
    match = _KRAFT_SNAPSHOT.fullmatch(name)
    if match is None:
        return None
    offset, epoch = int(match.group(1)), int(match.group(2))
    if offset > INT64_MAX or epoch > INT32_MAX:
        return None
    return offset, epoch


# --- topics and partition directories -------------------------------------------------------------------------


def validate_topic(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``name`` is a topic name Kafka accepts. O(len(name)).

    Kafka's rules, checked in its order: not empty, not ``.`` or ``..``, at most 249 characters, only ASCII
    letters, digits, ``.``, ``_`` and ``-``.
    """
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters (has {len(name)})"
        )
    if _LEGAL_TOPIC.fullmatch(name) is None:
        raise InvalidTopicError(
            f"topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )


def validate_topic_partition(tp: TopicPartition) -> None:
    """Raise unless ``tp`` names a partition Kafka could create: :class:`InvalidTopicError` for its topic (see
    :func:`validate_topic`), :class:`InvalidPartitionDirError` for a partition outside ``0..2**31-1`` (whose
    directory name would not parse back to it: ``t--1`` reads as topic ``t-``). O(len(topic))."""
    validate_topic(tp.topic)
    if not 0 <= tp.partition <= INT32_MAX:
        raise InvalidPartitionDirError(f"partition {tp.partition} of {tp.topic!r} is outside 0..{INT32_MAX}")


def parse_topic_partition(text: str) -> TopicPartition:
    """``<topic>-<partition>`` as an operator or a client names a partition: :meth:`TopicPartition.parse`, then
    :func:`validate_topic_partition`, so the result names one directory entry of a log dir. O(len(text))."""
    tp = TopicPartition.parse(text)
    validate_topic_partition(tp)
    return tp


def _split_topic_partition(name: str, original: str) -> tuple[str, int]:
    """``<topic>-<partition>`` split at the last ``-``; ``original`` is the text named in the error."""
    index = name.rfind("-")
    topic, partition_text = name[:index], name[index + 1 :]
    partition = _parse_java_integer(partition_text, 32) if index >= 0 and topic else None
    if partition is not None and partition < 0:
        partition = None
    if partition is None:
        raise InvalidPartitionDirError(
            f"{original!r} is not in the form of topic-partition or topic-partition.uniqueId-delete "
            "(or -future, -stray)"
        )
    return topic, partition


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """A topic and a partition number, as Kafka's ``TopicPartition`` (no validation of either field)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``<topic>-<partition>``, splitting at the last ``-``. O(len(text)).

        The partition is read as a Java ``int`` (so it is never negative here). Raises
        :class:`InvalidPartitionDirError` for a missing ``-``, an empty topic or a non-integer partition.
        """
        return cls(*_split_topic_partition(text, text))


@dataclass(frozen=True, slots=True)
class PartitionDirName:
    """A parsed partition directory name: live, or marked ``-delete``, ``-future`` or ``-stray``.

    ``unique_id`` is None exactly for live directories. For delete and stray directories ``topic`` is what
    the name holds, which Kafka may have truncated to keep the name within 255 characters.
    """

    topic: str
    partition: int
    kind: DirKind = "live"
    unique_id: str | None = None

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        """Raise ``ValueError`` unless ``kind`` and ``unique_id`` agree, the id survives a parse and the topic
        keeps :attr:`name` one directory entry (no ``/`` or NUL)."""
        if "/" in self.topic or "\x00" in self.topic:
            raise ValueError(f"topic {self.topic[:80]!r} holds '/' or NUL")
        if self.kind == "live":
            if self.unique_id is not None:
                raise ValueError("a live partition directory has no unique id")
        elif self.kind not in _KIND_SUFFIXES:
            raise ValueError(f"unknown partition directory kind {self.kind!r}")
        elif self.unique_id is None or _UNIQUE_ID.fullmatch(self.unique_id) is None:
            raise ValueError(f"unique id {self.unique_id!r} must not hold '.' or whitespace")

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition this directory holds. O(1)."""
        return TopicPartition(self.topic, self.partition)

    @property
    def name(self) -> str:
        """The directory name: ``<topic>-<partition>`` or ``<topic>-<partition>.<uniqueId>-<kind>``. O(1)."""
        if self.kind == "live":
            return f"{self.topic}-{self.partition}"
        return f"{self.topic}-{self.partition}.{self.unique_id}{_KIND_SUFFIXES[self.kind]}"

    @classmethod
    def parse(cls, dirname: str) -> Self:
        """Parse a partition directory name with Kafka's ``parseTopicPartitionName`` rules. O(len(dirname)).

        A name ending with ``-delete``, ``-future`` or ``-stray`` must match ``(\\S+)-(\\S+)\\.(\\S+)<suffix>``;
        everything from its last ``.`` is the unique id and suffix. The rest splits at its last ``-`` into a
        non-empty topic and a Java ``int`` partition. Topic names are not validated (``__cluster_metadata-0``
        parses; callers decide what to skip), but a name no directory entry can have (holding ``/`` or NUL) is
        refused, so a parsed name never walks out of its log dir. Raises
        :class:`InvalidPartitionDirError` otherwise.
        """
        if "/" in dirname or "\x00" in dirname:
            raise InvalidPartitionDirError(
                f"{dirname[:80]!r} holds '/' or NUL: a path, not the name of one directory entry"
            )
        kind = next((k for k, suffix in _KIND_SUFFIXES.items() if dirname.endswith(suffix)), None)
        if kind is None:
            return cls(*_split_topic_partition(dirname, dirname))
        suffix = _KIND_SUFFIXES[kind]
        if _KIND_PATTERNS[kind].fullmatch(dirname) is None:
            raise InvalidPartitionDirError(
                f"{dirname!r} ends with {suffix!r} but is not in the form topic-partition.uniqueId{suffix}"
            )
        dot = dirname.rfind(".")
        topic, partition = _split_topic_partition(dirname[:dot], dirname)
        return cls(topic, partition, kind, dirname[dot + 1 : -len(suffix)])


def is_partition_dir_name(name: str) -> bool:
    """Whether :meth:`PartitionDirName.parse` accepts ``name`` (any kind, any topic text). O(len(name))."""
    try:
        PartitionDirName.parse(name)
    except InvalidPartitionDirError:
        return False
    return True


def _new_unique_id(unique_id: str | None) -> str:
    if unique_id == "":
        raise ValueError("an explicit unique id must not be empty")
    return uuid.uuid4().hex if unique_id is None else unique_id


def delete_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uniqueId>-delete``, the topic cut so the name fits 255 characters. O(len(topic)).

    ``unique_id`` defaults to a random UUID in 32 hex digits, as Kafka uses.
    """
    return _capped_dir_name(tp, "delete", _new_unique_id(unique_id))


def stray_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uniqueId>-stray``, the topic cut so the name fits 255 characters. O(len(topic))."""
    return _capped_dir_name(tp, "stray", _new_unique_id(unique_id))


def future_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uniqueId>-future``; never truncated (Kafka does not cap this one). O(len(topic))."""
    return PartitionDirName(tp.topic, tp.partition, "future", _new_unique_id(unique_id)).name


def _capped_dir_name(tp: TopicPartition, kind: DirKind, unique_id: str) -> str:
    full_suffix = PartitionDirName("", tp.partition, kind, unique_id).name
    if len(full_suffix) > _MAX_FILE_NAME:
        raise ValueError(
            f"unique id {unique_id!r} leaves no room for the topic in a {_MAX_FILE_NAME}-char name"
        )
    return tp.topic[: _MAX_FILE_NAME - len(full_suffix)] + full_suffix
