"""``<logdir>/meta.properties``: which broker and cluster a log directory belongs to.

A Java properties file as ``Properties.store`` writes it: a comment line (Kafka passes an empty comment, so
``#``), a ``#<Date.toString()>`` line, then ``key=value`` lines. Keys: ``version`` (0 = ZooKeeper era, with an
optional ``broker.id``; 1 = KRaft, with required ``node.id`` and ``cluster.id``), ``cluster.id`` and the optional
``directory.id`` (a base64 UUID).

To rewrite a broker's file byte for byte, :class:`MetaProperties` keeps the header comment lines, the key order
and the line separator it was read with; only :meth:`MetaProperties.create` makes up new comments. Java writes
entries in hash order (JDK < 18) or sorted by key (JDK >= 18); fresh files use the sorted order.

Kafka reads the file as ISO-8859-1, so this module does too and writes characters up to U+00FF as single bytes
(characters above as ``\\uXXXX`` escapes): what it writes reads back identically, by Kafka and by itself.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike

from checkpoints.atomic import atomic_write_bytes
from checkpoints.java_text import check_line_separator, line_separator, split_lines
from checkpoints.kafka_uuid import uuid_from_kafka, uuid_to_kafka
from segments.errors import CorruptCheckpointError
from segments.java_numbers import check_java_int, parse_java_int

META_PROPERTIES_FILE = "meta.properties"
VERSION_KEY = "version"
BROKER_ID_KEY = "broker.id"
NODE_ID_KEY = "node.id"
CLUSTER_ID_KEY = "cluster.id"
DIRECTORY_ID_KEY = "directory.id"
ZK_VERSION = 0
KRAFT_VERSION = 1

# Whitespace as java.util.Properties sees it (no \n or \r: those end lines).
_PROPERTIES_WHITESPACE = " \t\f"
# String.trim() removes every character up to U+0020.
# What Java's String.trim() removes (every char <= U+0020); Kafka trims property values with it.
JAVA_TRIMMED = "".join(map(chr, range(0x21)))
_ESCAPE = re.compile(r"\\(?:u(?P<hex>.{0,4})|(?P<char>.))", re.DOTALL)
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_UNESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!",
            "\\": "\\\\"}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class _PropertyError(ValueError):
    """A property value Kafka rejects; ``key`` lets the parser point at the line that set it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class MetaProperties:
    """The content of ``meta.properties``.

    ``properties`` is the source of truth, in file order; ``version``, ``node_id`` (``broker.id`` in version 0,
    ``node.id`` in version 1), ``cluster_id`` and ``directory_id`` are derived from it and validated as Kafka
    validates them (``ValueError`` otherwise).
    """

    properties: Mapping[str, str]
    header_comments: tuple[str, ...] = ()
    # How lines end, not what they say: two files differing only in it hold equal properties.
    line_separator: str = field(default="\n", compare=False)
    version: int = field(init=False, compare=False)
    node_id: int | None = field(init=False, compare=False)
    cluster_id: str | None = field(init=False, compare=False)
    directory_id: uuid.UUID | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))
        object.__setattr__(self, "header_comments", tuple(self.header_comments))
        check_line_separator(self.line_separator)
        for comment in self.header_comments:
            if comment.lstrip(_PROPERTIES_WHITESPACE)[:1] not in ("#", "!") or re.search("[\r\n]", comment):
                raise ValueError(f"not a single comment line: {comment!r}")
        version, node_id, cluster_id, directory_id = _interpret(self.properties)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "node_id", node_id)
        object.__setattr__(self, "cluster_id", cluster_id)
        object.__setattr__(self, "directory_id", directory_id)

    @classmethod
    def create(
        cls,
        *,
        version: int,
        node_id: int | None,
        cluster_id: str | None,
        directory_id: uuid.UUID | None = None,
        now: datetime | None = None,
    ) -> MetaProperties:
        """A fresh file's content, as a current broker would store it: ``#`` and date comments, keys sorted. O(1).

        ``now`` (default: the current local time; naive means local) is rendered like Java's ``Date.toString()``,
        zone abbreviation included.
        """
        properties = {VERSION_KEY: str(version)}
        if cluster_id is not None:
            properties[CLUSTER_ID_KEY] = cluster_id
        if node_id is not None:
            id_key = BROKER_ID_KEY if version == ZK_VERSION else NODE_ID_KEY
            properties[id_key] = str(check_java_int(node_id, 32, id_key))
        if directory_id is not None:
            properties[DIRECTORY_ID_KEY] = uuid_to_kafka(directory_id)
        stamp = now or datetime.now()
        if stamp.tzinfo is None:
            # Date.toString() shows the JVM's default zone; a naive time is taken as local.
            stamp = stamp.astimezone()
        return cls(dict(sorted(properties.items())), header_comments=("#", "#" + _java_date(stamp)))


def parse_meta_properties(data: bytes, path: str | PathLike[str] | None = None) -> MetaProperties:
    """Parse ``meta.properties`` bytes with ``java.util.Properties.load`` rules, then Kafka's checks. O(n).

    Comment lines before the first property are kept as ``header_comments``; later comments and blank lines
    are not kept. A key set twice keeps its first position and its last value. Raises
    :class:`~segments.errors.CorruptCheckpointError` with the 1-based line of the offending property (no line
    when a required property is missing).
    """
    text = data.decode("latin-1")
    properties: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    header: list[str] = []
    for number, line, is_comment in logical_lines(text):
        if is_comment:
            if not properties:
                header.append(line)
            continue
        try:
            key, value = split_entry(line)
        except ValueError as err:
            raise CorruptCheckpointError(str(err), path=path, line=number) from None
        properties[key] = value
        lines_of[key] = number
    try:
        return MetaProperties(properties, tuple(header), line_separator(text))
    except _PropertyError as err:
        raise CorruptCheckpointError(str(err), path=path, line=lines_of.get(err.key)) from None


def format_meta_properties(meta: MetaProperties) -> bytes:
    """Serialize like ``Properties.store``: header comments, then escaped ``key=value`` lines in order. O(n)."""
    lines = [*meta.header_comments]
    lines.extend(f"{_escape(key, True)}={_escape(value, False)}" for key, value in meta.properties.items())
    return "".join(line + meta.line_separator for line in lines).encode("latin-1")


def read_meta_properties(path: str | PathLike[str]) -> MetaProperties:
    """Read and parse the file at ``path`` (``FileNotFoundError`` when absent: an unformatted dir). O(n)."""
    with open(path, "rb") as source:
        return parse_meta_properties(source.read(), path)


def write_meta_properties(path: str | PathLike[str], meta: MetaProperties) -> None:
    """Atomically replace the file at ``path`` with ``meta`` (tmp, fsync, rename, fsync dir). O(n)."""
    atomic_write_bytes(path, format_meta_properties(meta))


def _interpret(properties: Mapping[str, str]) -> tuple[int, int | None, str | None, uuid.UUID | None]:
    """Kafka's ``MetaProperties.Builder(Properties)`` + ``build()`` checks; raises ``_PropertyError``."""
    version = _int_property(VERSION_KEY, properties.get(VERSION_KEY, "0").strip(JAVA_TRIMMED))
    if version not in (ZK_VERSION, KRAFT_VERSION):
        raise _PropertyError(VERSION_KEY, f"unsupported meta.properties version {version}")
    cluster_id = properties.get(CLUSTER_ID_KEY)
    id_key = BROKER_ID_KEY if version == ZK_VERSION else NODE_ID_KEY
    node_id = None if id_key not in properties else _int_property(id_key, properties[id_key])
    if version == KRAFT_VERSION:
        for key, present in ((CLUSTER_ID_KEY, cluster_id is not None), (NODE_ID_KEY, node_id is not None)):
            if not present:
                raise _PropertyError(key, f"{key} is required in meta.properties version {version}")
    directory_id = None
    if DIRECTORY_ID_KEY in properties:
        try:
            directory_id = uuid_from_kafka(properties[DIRECTORY_ID_KEY])
        except ValueError as err:
            raise _PropertyError(DIRECTORY_ID_KEY, f"{DIRECTORY_ID_KEY}: {err}") from None
    return version, node_id, cluster_id, directory_id


def _int_property(key: str, text: str) -> int:
    try:
        return parse_java_int(text, 32)
    except ValueError as err:
        raise _PropertyError(key, f"{key}: {err}") from None


def logical_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(first line number, logical line, is comment)`` per ``Properties.load``'s line reader.

    Leading whitespace is dropped from every natural line, blank lines are skipped, ``#``/``!`` lines are
    comments (returned whole) and a line ending in an odd number of backslashes continues on the next one.
    """
    natural = split_lines(text)
    index = 0
    while index < len(natural):
        number = index + 1
        line = natural[index].lstrip(_PROPERTIES_WHITESPACE)
        index += 1
        if not line:
            continue
        if line[0] in "#!":
            yield number, natural[number - 1], True
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if index == len(natural):
                break
            line += natural[index].lstrip(_PROPERTIES_WHITESPACE)
            index += 1
        yield number, line, False


def split_entry(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped ``=``, ``:`` or whitespace, then unescape both sides."""
    key_end = value_start = len(line)
    has_separator = False
    escaped = False
    for position, char in enumerate(line):
        if not escaped and char in "=:" + _PROPERTIES_WHITESPACE:
            key_end, value_start = position, position + 1
            has_separator = char in "=:"
            break
        escaped = char == "\\" and not escaped
    while value_start < len(line):
        char = line[value_start]
        if char not in _PROPERTIES_WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return _unescape(line[:key_end]), _unescape(line[value_start:])


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        digits = match.group("hex")
        if digits is None:
            char = match.group("char")
            return _UNESCAPED.get(char, char)
        if _HEX4.fullmatch(digits) is None:
            raise ValueError(f"malformed \\uxxxx escape: {match.group()!r}")
        return chr(int(digits, 16))

    # Java builds UTF-16 code units; pairing escaped surrogates gives the character they encode.
    return _ESCAPE.sub(replace, text).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _escape(text: str, is_key: bool) -> str:
    out = []
    for position, char in enumerate(text):
        if char == " ":
            out.append("\\ " if is_key or position == 0 else " ")
        elif char in _ESCAPED:
            out.append(_ESCAPED[char])
        elif ord(char) > 0xFF:
            units = char.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2))
        else:
            out.append(char)
    return "".join(out)


def _java_date(stamp: datetime) -> str:
    """``java.util.Date.toString()``: ``EEE MMM dd HH:mm:ss zzz yyyy`` in English."""
    zone = stamp.tzname() or "GMT"
    return (
        f"{_DAYS[stamp.weekday()]} {_MONTHS[stamp.month - 1]} {stamp.day:02d} "
        f"{stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d} {zone} {stamp.year}"
    )
