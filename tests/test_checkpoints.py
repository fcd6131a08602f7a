"""Text checkpoints, partition.metadata, meta.properties, the clean-shutdown marker and atomic writes."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import signal
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkpoints.atomic import atomic_write_bytes, read_file_bytes
from checkpoints.checkpoint_file import parse_checkpoint
from checkpoints.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdownMarker,
    format_clean_shutdown,
    parse_clean_shutdown,
)
from checkpoints.java_text import line_separator, split_lines, split_whitespace
from checkpoints.kafka_uuid import METADATA_TOPIC_ID, ZERO_UUID, uuid_from_kafka, uuid_to_kafka
from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCheckpointFile,
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)
from checkpoints.leader_epoch_checkpoint import _parse_entry as _epoch_entry
from checkpoints.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    format_meta_properties,
    parse_meta_properties,
    read_meta_properties,
    write_meta_properties,
)
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    OFFSET_CHECKPOINT_FILES,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from checkpoints.offset_checkpoint import _parse_entry as _offset_entry
from checkpoints.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    format_partition_metadata,
    parse_partition_metadata,
    read_partition_metadata,
    write_partition_metadata,
)
from segments._native.text import TEXT, checkpoint_entries
from segments.errors import CorruptCheckpointError
from segments.java_numbers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_java_int
from segments.naming import TopicPartition
from tests.conftest import KAFKA_REAL, require_fixtures

SEPARATORS = st.sampled_from(["\n", "\r\n", "\r"])
TOPICS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789._-", min_size=1, max_size=40)
PARTITIONS = st.integers(0, INT32_MAX)
OFFSETS = st.integers(INT64_MIN, INT64_MAX)
OFFSET_MAPS = st.dictionaries(st.builds(TopicPartition, TOPICS, PARTITIONS), OFFSETS, max_size=30)
EPOCH_LISTS = st.lists(st.builds(EpochEntry, st.integers(INT32_MIN, INT32_MAX), OFFSETS), max_size=30)
# Text close to the formats, so fuzzing reaches past the first line more often than random bytes do.
CHECKPOINT_ISH = st.text(alphabet="0123456789+- \t\r\n\x0b\ftopic:_=\\#!u", max_size=60).map(str.encode)
ANY_INPUT = st.one_of(st.binary(max_size=200), CHECKPOINT_ISH)


def _error(parse: Callable[[bytes], object], data: bytes) -> CorruptCheckpointError:
    with pytest.raises(CorruptCheckpointError) as caught:
        parse(data)
    return caught.value


# --- Java text primitives -------------------------------------------------------------------------------------


def test_split_lines_follows_read_line() -> None:
    assert split_lines("") == []
    assert split_lines("a") == ["a"]
    assert split_lines("a\n") == ["a"]
    assert split_lines("a\r\nb\rc\n\nd") == ["a", "b", "c", "", "d"]
    assert split_lines("\n") == [""]
    # Only \n, \r and \r\n end lines for readLine, unlike str.splitlines.
    assert split_lines("a\x0bb\x1cc\u2028d") == ["a\x0bb\x1cc\u2028d"]


def test_split_whitespace_follows_java_pattern_split() -> None:
    assert split_whitespace("") == [""]
    assert split_whitespace("a") == ["a"]
    assert split_whitespace("a b\t\tc") == ["a", "b", "c"]
    assert split_whitespace(" a b") == ["", "a", "b"]
    assert split_whitespace("a b  ") == ["a", "b"]
    assert split_whitespace("   ") == []
    assert split_whitespace("a\x0bb\fc") == ["a", "b", "c"]
    # Java's \s is ASCII-only: a non-breaking space is part of a field.
    assert split_whitespace("a\u00a0b c") == ["a\u00a0b", "c"]


def test_parse_java_int_accepts_what_java_accepts() -> None:
    assert parse_java_int("+7", 32) == 7
    assert parse_java_int("-0", 32) == 0
    assert parse_java_int("0" * 5000 + "12", 32) == 12
    assert parse_java_int("\u0663", 32) == 3  # ARABIC-INDIC DIGIT THREE, as Character.digit reads it
    assert parse_java_int(str(INT32_MIN), 32) == INT32_MIN
    assert parse_java_int(str(INT64_MAX), 64) == INT64_MAX
    for bad in ["", "+", "-", " 1", "1 ", "1_000", "0x10", "1.0", "--1", str(INT32_MAX + 1), "9" * 5000]:
        with pytest.raises(ValueError):
            parse_java_int(bad, 32)
    with pytest.raises(ValueError):
        parse_java_int(str(INT64_MIN - 1), 64)


@given(st.integers(INT64_MIN, INT64_MAX))
def test_parse_java_int_round_trip(value: int) -> None:
    assert parse_java_int(str(value), 64) == value


def test_line_separator_detection() -> None:
    assert line_separator("0\r\n0\r\n") == "\r\n"
    assert line_separator("0\r0\r") == "\r"
    assert line_separator("0\n") == "\n"
    assert line_separator("0") == "\n"


# --- offset checkpoints ---------------------------------------------------------------------------------------


def test_offset_checkpoint_file_names() -> None:
    assert RECOVERY_POINT_CHECKPOINT_FILE == "recovery-point-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT_FILE == "log-start-offset-checkpoint"
    assert REPLICATION_OFFSET_CHECKPOINT_FILE == "replication-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT_FILE == "cleaner-offset-checkpoint"
    assert len(set(OFFSET_CHECKPOINT_FILES)) == 4


def test_offset_checkpoint_exact_bytes() -> None:
    mapping = {TopicPartition("__consumer_offsets", 17): 58, TopicPartition("t", 0): 0}
    expected = b"0\n2\n__consumer_offsets 17 58\nt 0 0\n"
    assert format_offset_checkpoint(mapping) == expected
    assert format_offset_checkpoint(mapping, line_separator="\r\n") == expected.replace(b"\n", b"\r\n")
    assert format_offset_checkpoint({}) == b"0\n0\n"


@given(OFFSET_MAPS, SEPARATORS)
def test_offset_checkpoint_round_trip(mapping: dict[TopicPartition, int], separator: str) -> None:
    data = format_offset_checkpoint(mapping, line_separator=separator)
    parsed = parse_offset_checkpoint(data)
    assert list(parsed.items()) == list(mapping.items())
    assert format_offset_checkpoint(parsed, line_separator=line_separator(data.decode())) == data


@pytest.mark.parametrize("data", [b"", b"0", b"0\n", b"0\r\n", b"0\n0\n", b"0\n0", b"+0\n-0\n"])
def test_offset_checkpoint_empty_forms(data: bytes) -> None:
    assert parse_offset_checkpoint(data) == {}


def test_offset_checkpoint_reader_leniencies() -> None:
    tp = TopicPartition("t", 1)
    # Trailing whitespace and tabs split like Java's \s+; the last line needs no terminator.
    assert parse_offset_checkpoint(b"0\n1\nt\t1  5 \t") == {tp: 5}
    assert parse_offset_checkpoint(b"0\r1\rt 1 5\r") == {tp: 5}
    # A repeated partition keeps its last offset, as Kafka's HashMap does.
    assert parse_offset_checkpoint(b"0\n2\nt 1 5\nt 1 9\n") == {tp: 9}
    # Topics are not validated by Kafka's reader.
    assert parse_offset_checkpoint("0\n1\nt\u00e9/x 1 5\n".encode()) == {TopicPartition("t\u00e9/x", 1): 5}


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"1\n0\n", 1, "version 1"),
        (b"x\n0\n", 1, "version"),
        (b" 0\n0\n", 1, "version"),
        (b"0\nx\n", 2, "entry count"),
        (b"0\n-1\n", 2, "negative"),
        (b"0\n2\nt 0 1\n", 2, "does not match"),
        (b"0\n1\nt 0 1\nt 1 2\n", 2, "does not match"),
        (b"0\n0\nt 0 1\n", 2, "does not match"),
        (b"0\n1\nt 0\n", 3, "expected 3 fields"),
        (b"0\n1\nt 0 1 2\n", 3, "expected 3 fields"),
        (b"0\n1\n t 0 1\n", 3, "expected 3 fields"),
        (b"0\n1\n\n", 3, "expected 3 fields"),
        (b"0\n2\nt 0 1\n\n", 4, "expected 3 fields"),
        (b"0\n1\nt x 1\n", 3, "not an integer"),
        (b"0\n1\nt 0 1.5\n", 3, "not an integer"),
        (b"0\n1\nt 2147483648 1\n", 3, "int32"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "int64"),
        (b"0\r\n1\r\nt 0 1\r\nu\r\n", 4, "expected 3 fields"),
    ],
)
def test_offset_checkpoint_malformed(data: bytes, line: int, words: str) -> None:
    err = _error(lambda d: parse_offset_checkpoint(d, "/data/recovery-point-offset-checkpoint"), data)
    assert err.line == line
    assert words in err.message
    assert str(err).startswith(f"/data/recovery-point-offset-checkpoint: line {line}: ")


def test_offset_checkpoint_invalid_utf8_names_line_and_position() -> None:
    err = _error(parse_offset_checkpoint, b"0\n2\nt 0 1\n\xff 0 1\n")
    assert (err.line, err.position) == (4, 10)


@pytest.mark.parametrize(
    "mapping",
    [
        {TopicPartition("a b", 0): 1},
        {TopicPartition("a\nb", 0): 1},
        {TopicPartition("t", 2**31): 1},
        {TopicPartition("t", 0): 2**63},
        {TopicPartition("t", 0): "12"},
        {TopicPartition("t", 0): True},
    ],
)
def test_offset_checkpoint_refuses_unreadable_values(mapping: dict[TopicPartition, object]) -> None:
    with pytest.raises(ValueError):
        format_offset_checkpoint(mapping)  # type: ignore[arg-type]


def test_offset_checkpoint_file_read_write(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE)
    assert checkpoint.read() == {}  # missing reads as empty, as Kafka creates it empty
    mapping = {TopicPartition("b", 1): 10, TopicPartition("a", 0): 20}
    checkpoint.write(mapping)
    assert list(checkpoint.read().items()) == list(mapping.items())
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_checkpoint_create_if_missing(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE)
    checkpoint.create_if_missing()
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE).read_bytes() == b""
    assert checkpoint.read() == {}
    checkpoint.write({TopicPartition("a", 0): 3})
    checkpoint.create_if_missing()
    assert checkpoint.read() == {TopicPartition("a", 0): 3}
    epochs = LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    epochs.create_if_missing()
    assert epochs.read() == []


def test_offset_checkpoint_failed_write_keeps_old_file(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    checkpoint.write({TopicPartition("a", 0): 5})
    before = (tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE).read_bytes()
    with pytest.raises(ValueError):
        checkpoint.write({TopicPartition("a", 0): 6, TopicPartition("b", 0): 2**64})
    assert (tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [REPLICATION_OFFSET_CHECKPOINT_FILE]


def test_offset_checkpoint_read_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE
    path.write_bytes(b"0\n1\nt 0\n")
    with pytest.raises(CorruptCheckpointError) as caught:
        OffsetCheckpointFile(path).read()
    assert (caught.value.path, caught.value.line) == (str(path), 3)


# --- leader-epoch checkpoints ---------------------------------------------------------------------------------


def test_leader_epoch_exact_bytes() -> None:
    entries = [EpochEntry(0, 0), EpochEntry(2, 634), EpochEntry(4, 31831)]
    assert format_leader_epoch_checkpoint(entries) == b"0\n3\n0 0\n2 634\n4 31831\n"
    assert LEADER_EPOCH_CHECKPOINT_FILE == "leader-epoch-checkpoint"


@given(EPOCH_LISTS, SEPARATORS)
def test_leader_epoch_round_trip(entries: list[EpochEntry], separator: str) -> None:
    data = format_leader_epoch_checkpoint(entries, line_separator=separator)
    parsed = parse_leader_epoch_checkpoint(data)
    assert parsed == entries
    assert format_leader_epoch_checkpoint(parsed, line_separator=line_separator(data.decode())) == data


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"1\n0\n", 1),
        (b"0\n1\n1\n", 3),
        (b"0\n1\n1 2 3\n", 3),
        (b"0\n1\n2147483648 0\n", 3),
        (b"0\n1\n1 x\n", 3),
        (b"0\n2\n1 0\n", 2),
        (b"0\n1\n1 0\n2 5\n", 2),
        (b"0\n1\n\xc3\x28 0\n", 3),
    ],
)
def test_leader_epoch_malformed(data: bytes, line: int) -> None:
    assert _error(parse_leader_epoch_checkpoint, data).line == line


def test_leader_epoch_file_read_write(tmp_path: Path) -> None:
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILE
    path.parent.mkdir()
    checkpoint = LeaderEpochCheckpointFile(path)
    assert checkpoint.read() == []
    checkpoint.write([EpochEntry(3, 100), EpochEntry(5, 200)])
    assert checkpoint.read() == [EpochEntry(3, 100), EpochEntry(5, 200)]
    with pytest.raises(ValueError):
        checkpoint.write([EpochEntry(6, 300), EpochEntry(7, "x")])  # type: ignore[arg-type]
    assert checkpoint.read() == [EpochEntry(3, 100), EpochEntry(5, 200)]
    assert os.listdir(path.parent) == [LEADER_EPOCH_CHECKPOINT_FILE]


# --- Kafka UUID text and partition.metadata -------------------------------------------------------------------


def test_kafka_uuid_text() -> None:
    assert uuid_to_kafka(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_to_kafka(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    parsed = uuid_from_kafka("FSJPF87NQN-J95EDLRWirw")
    assert uuid_to_kafka(parsed) == "FSJPF87NQN-J95EDLRWirw"
    assert uuid_from_kafka("FSJPF87NQN-J95EDLRWirw==") == parsed
    for bad in ["", "FSJPF87NQN-J95EDLRWir", "FSJPF87NQN-J95EDLRWirwA", "FSJPF87NQN+J95EDLRWirw",
                "FSJPF87NQN-J95EDLRWirw=", "FSJPF87NQN-J95EDLRWirw===", " FSJPF87NQN-J95EDLRWirw"]:
        with pytest.raises(ValueError):
            uuid_from_kafka(bad)


@given(st.uuids(allow_nil=True))
def test_kafka_uuid_round_trip(value: uuid.UUID) -> None:
    text = uuid_to_kafka(value)
    assert len(text) == 22
    assert uuid_from_kafka(text) == value


def test_partition_metadata_exact_bytes() -> None:
    assert PARTITION_METADATA_FILE == "partition.metadata"
    data = format_partition_metadata(PartitionMetadata(0, METADATA_TOPIC_ID))
    assert data == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"


@given(st.integers(0, INT32_MAX), st.uuids().filter(lambda u: u != ZERO_UUID))
def test_partition_metadata_round_trip(version: int, topic_id: uuid.UUID) -> None:
    metadata = PartitionMetadata(version, topic_id)
    data = format_partition_metadata(metadata)
    assert parse_partition_metadata(data) == metadata
    assert format_partition_metadata(parse_partition_metadata(data)) == data


def test_partition_metadata_reader_leniencies() -> None:
    expected = PartitionMetadata(0, METADATA_TOPIC_ID)
    assert parse_partition_metadata(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n") == expected
    assert parse_partition_metadata(b"version:\t 0\r\ntopic_id:  AAAAAAAAAAAAAAAAAAAAAQ==") == expected
    assert parse_partition_metadata(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nanything else") == expected
    # Versions above 0 are accepted for downgrade compatibility.
    assert parse_partition_metadata(b"version: 3\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ").version == 3


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"", 1),
        (b"version:0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"Version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b" version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: 0 \ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: 0", 2),
        (b"version: 0\n", 2),
        (b"version: 0\ntopic: AAAAAAAAAAAAAAAAAAAAAQ", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAA", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ ", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA+Q", 2),
        (b"version: 0\ntopic_id: \xff", 2),
    ],
)
def test_partition_metadata_malformed(data: bytes, line: int) -> None:
    err = _error(lambda d: parse_partition_metadata(d, "/d/t-0/partition.metadata"), data)
    assert (err.path, err.line) == ("/d/t-0/partition.metadata", line)


def test_partition_metadata_refuses_invalid_values() -> None:
    with pytest.raises(ValueError):
        PartitionMetadata(0, ZERO_UUID)
    with pytest.raises(ValueError):
        PartitionMetadata(-1, METADATA_TOPIC_ID)


def test_partition_metadata_file(tmp_path: Path) -> None:
    path = tmp_path / PARTITION_METADATA_FILE
    with pytest.raises(FileNotFoundError):
        read_partition_metadata(path)
    metadata = PartitionMetadata(0, uuid.UUID(int=12345))
    write_partition_metadata(path, metadata)
    assert read_partition_metadata(path) == metadata
    assert os.listdir(tmp_path) == [PARTITION_METADATA_FILE]


# --- meta.properties ------------------------------------------------------------------------------------------

PROPERTY_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
KNOWN_KEYS = {"version", "broker.id", "node.id", "cluster.id", "directory.id"}
PLAIN_ID = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=1, max_size=22)


@st.composite
def meta_properties(draw: st.DrawFn) -> MetaProperties:
    version = draw(st.sampled_from([0, 1]))
    required: dict[str, str] = {"version": str(version)}
    if version == 1 or draw(st.booleans()):
        required["node.id" if version == 1 else "broker.id"] = str(draw(st.integers(INT32_MIN, INT32_MAX)))
    if version == 1 or draw(st.booleans()):
        required["cluster.id"] = draw(st.one_of(PLAIN_ID, PROPERTY_TEXT))
    if draw(st.booleans()):
        required["directory.id"] = uuid_to_kafka(draw(st.uuids()))
    extra = draw(st.dictionaries(PROPERTY_TEXT.filter(lambda k: k not in KNOWN_KEYS), PROPERTY_TEXT, max_size=4))
    items = list(required.items()) + list(extra.items())
    order = draw(st.permutations(range(len(items))))
    comments = draw(st.lists(st.text(alphabet="#! abcz019:=\\", max_size=10).map(lambda c: "#" + c), max_size=3))
    return MetaProperties(dict(items[i] for i in order), tuple(comments), draw(SEPARATORS))


@given(meta_properties())
def test_meta_properties_round_trip(meta: MetaProperties) -> None:
    data = format_meta_properties(meta)
    parsed = parse_meta_properties(data)
    assert parsed == meta
    assert list(parsed.properties) == list(meta.properties)
    assert (parsed.version, parsed.node_id, parsed.cluster_id, parsed.directory_id) == (
        meta.version, meta.node_id, meta.cluster_id, meta.directory_id
    )
    assert format_meta_properties(parsed) == data


def test_meta_properties_create_matches_kafka_layout() -> None:
    directory_id = uuid_from_kafka("NuGZI-m8bJ7swnEKaplGaw")
    meta = MetaProperties.create(
        version=1,
        node_id=1,
        cluster_id="5L6g3nShT-eMCtK--X86sw",
        directory_id=directory_id,
        now=datetime(2025, 6, 18, 14, 8, 53, tzinfo=timezone(timedelta(0), "GMT")),
    )
    # Byte-identical to kraft-3.9-clean-metadata's file (a JDK >= 18 broker sorts the keys).
    assert format_meta_properties(meta) == (
        b"#\n#Wed Jun 18 14:08:53 GMT 2025\ncluster.id=5L6g3nShT-eMCtK--X86sw\n"
        b"directory.id=NuGZI-m8bJ7swnEKaplGaw\nnode.id=1\nversion=1\n"
    )
    assert (meta.version, meta.node_id, meta.directory_id) == (1, 1, directory_id)
    zk = MetaProperties.create(version=0, node_id=7, cluster_id=None)
    assert zk.properties == {"broker.id": "7", "version": "0"}
    assert re.fullmatch(r"#[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \S+ \d{4}", zk.header_comments[1])


def test_meta_properties_java_properties_syntax() -> None:
    data = (
        b"  # indented comment\n"
        b"! bang comment\n"
        b"\n"
        b"version = 1\n"
        b"node.id:4\n"
        b"cluster.id   abc\\\n"
        b"     def\\u0041\\:\\=\\\\\n"
        b"spaced\\ key=\\ leading space kept\\tTAB\n"
        b"empty\n"
        b"#late comment\n"
        b"latin=caf\xe9\n"
    )
    meta = parse_meta_properties(data)
    assert meta.header_comments == ("  # indented comment", "! bang comment")
    assert meta.properties == {
        "version": "1",
        "node.id": "4",
        "cluster.id": "abcdefA:=\\",
        "spaced key": " leading space kept\tTAB",
        "empty": "",
        "latin": "caf\u00e9",
    }
    assert (meta.version, meta.node_id, meta.cluster_id) == (1, 4, "abcdefA:=\\")
    # Rewritten in canonical form; Latin-1 stays one byte, as Kafka's ISO-8859-1 reader expects.
    assert format_meta_properties(meta).endswith(
        b"cluster.id=abcdefA\\:\\=\\\\\nspaced\\ key=\\ leading space kept\\tTAB\nempty=\nlatin=caf\xe9\n"
    )


def test_meta_properties_escapes_beyond_latin1() -> None:
    meta = MetaProperties({"version": "0", "x": "\u20ac\U0001f600"})
    data = format_meta_properties(meta)
    assert data == b"version=0\nx=\\u20AC\\uD83D\\uDE00\n"
    assert parse_meta_properties(data) == meta


def test_meta_properties_defaults_to_version_0() -> None:
    meta = parse_meta_properties(b"broker.id=3\n")
    assert (meta.version, meta.node_id, meta.cluster_id, meta.directory_id) == (0, 3, None, None)
    assert parse_meta_properties(b"version= 1 \nnode.id=2\ncluster.id=c\n").version == 1


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"#\nversion=2\n", 2, "unsupported meta.properties version 2"),
        (b"version=x\n", 1, "version"),
        (b"version=0\nbroker.id=one\n", 2, "broker.id"),
        (b"version=0\nbroker.id=1 \n", 2, "broker.id"),
        (b"version=1\ncluster.id=c\nnode.id=99999999999\n", 3, "node.id"),
        (b"version=1\ncluster.id=c\n", None, "node.id is required"),
        (b"version=1\nnode.id=1\n", None, "cluster.id is required"),
        (b"version=0\n\ndirectory.id=nope\n", 3, "directory.id"),
        (b"#\nversion=0\nbad=\\u00G1\n", 3, "malformed \\uxxxx"),
        (b"version=0\nbad=\\u12\n", 2, "malformed \\uxxxx"),
    ],
)
def test_meta_properties_malformed(data: bytes, line: int | None, words: str) -> None:
    err = _error(lambda d: parse_meta_properties(d, "/data/meta.properties"), data)
    assert (err.path, err.line) == ("/data/meta.properties", line)
    assert words in err.message


def test_meta_properties_file(tmp_path: Path) -> None:
    path = tmp_path / META_PROPERTIES_FILE
    meta = MetaProperties.create(version=1, node_id=2, cluster_id="c", directory_id=uuid.UUID(int=99))
    write_meta_properties(path, meta)
    assert read_meta_properties(path) == meta
    assert os.listdir(tmp_path) == [META_PROPERTIES_FILE]
    with pytest.raises(ValueError):
        MetaProperties({"version": "1", "node.id": "1"})
    with pytest.raises(ValueError):
        MetaProperties({"version": "0"}, header_comments=("not a comment",))


# --- clean-shutdown marker ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "epoch"),
    [
        (b"", None),
        (b'{"version":0,"brokerEpoch":53326}', 53326),
        (b'{"version":0,"brokerEpoch":-1}', -1),
        (b'{ "brokerEpoch" : 7, "version" : 0, "future" : [1] }\n', 7),
        (b'{"version":0}', None),
        (b'{"version":0,"brokerEpoch":null}', None),
        (b'{"version":0,"brokerEpoch":true}', None),
        (b'{"version":0,"brokerEpoch":1.5}', None),
        (b'{"version":0,"brokerEpoch":9223372036854775808}', None),
        (b"[1]", None),
        (b"garbage", None),
        (b"\xff\xfe", None),
        (b"[" * 100000, None),
    ],
)
def test_clean_shutdown_parse(data: bytes, epoch: int | None) -> None:
    assert parse_clean_shutdown(data) == CleanShutdownMarker(epoch)


def test_clean_shutdown_format() -> None:
    assert format_clean_shutdown(CleanShutdownMarker(53326)) == b'{"version":0,"brokerEpoch":53326}'
    assert format_clean_shutdown(CleanShutdownMarker(-1)) == b'{"version":0,"brokerEpoch":-1}'
    assert format_clean_shutdown(CleanShutdownMarker(None)) == b""
    with pytest.raises(ValueError):
        CleanShutdownMarker(2**63)


@given(st.one_of(st.none(), OFFSETS))
def test_clean_shutdown_round_trip(epoch: int | None) -> None:
    data = format_clean_shutdown(CleanShutdownMarker(epoch))
    assert parse_clean_shutdown(data) == CleanShutdownMarker(epoch)


@given(ANY_INPUT)
def test_clean_shutdown_fuzz_never_raises(data: bytes) -> None:
    parse_clean_shutdown(data)


def test_clean_shutdown_file_lifecycle(tmp_path: Path) -> None:
    assert not CleanShutdownMarker.exists(tmp_path)
    assert CleanShutdownMarker.read(tmp_path) is None
    CleanShutdownMarker(12).write(tmp_path)
    assert CleanShutdownMarker.exists(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":12}'
    assert CleanShutdownMarker.read(tmp_path) == CleanShutdownMarker(12)
    CleanShutdownMarker().write(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == b""
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b"not json")
    assert CleanShutdownMarker.read(tmp_path) == CleanShutdownMarker(None)  # still a clean shutdown
    CleanShutdownMarker.remove(tmp_path)
    CleanShutdownMarker.remove(tmp_path)  # absent: nothing to do
    assert not CleanShutdownMarker.exists(tmp_path)
    assert os.listdir(tmp_path) == []


# --- every text reader --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parse",
    [parse_offset_checkpoint, parse_leader_epoch_checkpoint, parse_partition_metadata, parse_meta_properties],
    ids=lambda parse: parse.__name__,
)
@given(data=ANY_INPUT)
def test_text_readers_fuzz_raise_only_typed_errors(parse: Callable[[bytes], object], data: bytes) -> None:
    try:
        parse(data)
    except CorruptCheckpointError as err:
        # Only a required meta.properties key that is absent has no line to point at.
        assert err.line is not None or "is required" in err.message


# A checkpoint's lines mutated towards the edges of the compiled pass's form (signs, zeros, range ends, spacing,
# line ends, counts), so both readers meet them.
_EDGE_FIELDS = st.sampled_from(
    ["0", "-0", "+1", "007", "2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807",
     "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "-", "", "t", "t-1", "\u0661", "x y"]
)
_LINES = st.lists(st.lists(_EDGE_FIELDS, min_size=1, max_size=4).map(" ".join), max_size=5)


@st.composite
def _checkpoint_like(draw: st.DrawFn) -> bytes:
    lines = draw(_LINES)
    header = [draw(st.sampled_from(["0", "00", "1", "-0", "+0"])), draw(st.sampled_from([str(len(lines)), "1", "9"]))]
    separator = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    text = separator.join(header + lines) + draw(st.sampled_from([separator, "", "\n\n", " "]))
    return text.encode()


@pytest.mark.parametrize(
    ("fast", "interpreted"),
    [
        (lambda data: checkpoint_entries(data, 0, (32, 64)),
         lambda data: [(e.epoch, e.start_offset) for e in parse_checkpoint(data, version=0, parse_entry=_epoch_entry)]),
        (lambda data: checkpoint_entries(data, 0, (TEXT, 32, 64)),
         lambda data: [(tp.topic, tp.partition, offset)
                       for tp, offset in parse_checkpoint(data, version=0, parse_entry=_offset_entry)]),
    ],
    ids=["leader-epoch", "offsets"],
)
@given(data=st.one_of(_checkpoint_like(), ANY_INPUT))
def test_compiled_checkpoint_pass_reads_what_the_interpreted_reader_reads(
    fast: Callable[[bytes], object], interpreted: Callable[[bytes], object], data: bytes
) -> None:
    # Where the compiled pass answers, the interpreted reader (Java's rules) gives the same entries; where that
    # reader refuses, the compiled pass never answers. None is the compiled pass leaving a file to the reader.
    answer = fast(data)
    try:
        expected = interpreted(data)
    except CorruptCheckpointError:
        assert answer is None
        return
    assert answer is None or answer == expected


def test_compiled_checkpoint_pass_takes_what_kafka_writes() -> None:
    # The form Kafka writes is never left to the interpreted reader (a load reads these by the thousand).
    entries = [EpochEntry(0, 0), EpochEntry(INT32_MAX, INT64_MAX)]
    assert checkpoint_entries(format_leader_epoch_checkpoint(entries), 0, (32, 64)) == [(0, 0), (INT32_MAX, INT64_MAX)]
    offsets = {TopicPartition("t.x_y-z", 7): INT64_MIN, TopicPartition("a", 0): 0}
    assert checkpoint_entries(format_offset_checkpoint(offsets), 0, (TEXT, 32, 64)) == [
        ("t.x_y-z", 7, INT64_MIN), ("a", 0, 0)
    ]


# --- atomic writes --------------------------------------------------------------------------------------------


def test_atomic_write_replaces_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write_bytes(path, b"one")
    atomic_write_bytes(path, b"two", sync=False)
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["f"]


def test_atomic_write_failure_mid_write_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write_bytes(path, b"old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f"]


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Lower RLIMIT_FSIZE inside the block only (a real EFBIG from write(2), even as root).

    The limit applies to every file of the process, pytest's own output included (CI redirects it to a file
    already larger than the limit), so it must be lifted before pytest reports the test.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_atomic_write_disk_error_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT_FILE
    OffsetCheckpointFile(path).write({TopicPartition("a", 0): 1})
    before = path.read_bytes()
    with pytest.raises(OSError) as caught, file_size_limit(4096):
        OffsetCheckpointFile(path).write({TopicPartition("t" * 100, p): p for p in range(100)})
    assert caught.value.errno == errno.EFBIG
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_atomic_write_leaves_foreign_tmp_alone(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write_bytes(path, b"old")
    (tmp_path / "f.tmp").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"old"
    assert (tmp_path / "f.tmp").is_dir()


def test_atomic_write_failed_rename_removes_tmp(tmp_path: Path) -> None:
    target = tmp_path / "d"
    target.mkdir()
    (target / "keep").write_bytes(b"")
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"x")
    assert sorted(os.listdir(tmp_path)) == ["d"]
    assert os.listdir(target) == ["keep"]


# --- real broker files ----------------------------------------------------------------------------------------

def _rewrite_with_same_line_ends(
    parse: Callable[[bytes], list[EpochEntry]] | Callable[[bytes], dict[TopicPartition, int]],
) -> Callable[[bytes], bytes]:
    def rewrite(data: bytes) -> bytes:
        parsed = parse(data)
        separator = line_separator(data.decode())
        if isinstance(parsed, dict):
            return format_offset_checkpoint(parsed, line_separator=separator)
        return format_leader_epoch_checkpoint(parsed, line_separator=separator)

    return rewrite


_REWRITE: dict[str, Callable[[bytes], bytes]] = {
    **{name: _rewrite_with_same_line_ends(parse_offset_checkpoint) for name in OFFSET_CHECKPOINT_FILES},
    LEADER_EPOCH_CHECKPOINT_FILE: _rewrite_with_same_line_ends(parse_leader_epoch_checkpoint),
    PARTITION_METADATA_FILE: lambda data: format_partition_metadata(parse_partition_metadata(data)),
    META_PROPERTIES_FILE: lambda data: format_meta_properties(parse_meta_properties(data)),
    CLEAN_SHUTDOWN_FILE: lambda data: format_clean_shutdown(parse_clean_shutdown(data)),
}


_CHECKPOINT_FILE_CLASSES: dict[str, type[OffsetCheckpointFile] | type[LeaderEpochCheckpointFile]] = {
    **dict.fromkeys(OFFSET_CHECKPOINT_FILES, OffsetCheckpointFile),
    LEADER_EPOCH_CHECKPOINT_FILE: LeaderEpochCheckpointFile,
}


def _real_files() -> list[str]:
    if not KAFKA_REAL.exists():
        return []
    return sorted(str(p.relative_to(KAFKA_REAL)) for p in KAFKA_REAL.rglob("*") if p.name in _REWRITE)


REAL_FILES = _real_files()


def test_real_broker_files_present() -> None:
    require_fixtures(KAFKA_REAL)
    assert REAL_FILES, f"no checkpoint files found under {KAFKA_REAL}"


@pytest.mark.parametrize("relative", REAL_FILES)
def test_real_broker_file_round_trips_byte_for_byte(relative: str, tmp_path: Path) -> None:
    path = KAFKA_REAL / relative
    data = path.read_bytes()
    if data or path.name not in _CHECKPOINT_FILE_CLASSES:
        assert _REWRITE[path.name](data) == data
        return
    # A checkpoint created when its owner started and never written since: it parses as no entries, and is
    # reproduced by creating the file, not by writing an (empty) checkpoint, which would be "0\n0\n".
    assert not _CHECKPOINT_FILE_CLASSES[path.name](path).read()
    recreated = tmp_path / path.name
    _CHECKPOINT_FILE_CLASSES[path.name](recreated).create_if_missing()
    assert recreated.read_bytes() == data


def test_real_broker_file_facts(kafka_real: Path) -> None:
    """Spot checks of values the fixture READMEs state."""
    multiseg = kafka_real / "zk-2.1-clean-multiseg" / "kafka-logs"
    assert OffsetCheckpointFile(multiseg / CLEANER_OFFSET_CHECKPOINT_FILE).read() == {
        TopicPartition("__consumer_offsets", 17): 58
    }
    assert len(OffsetCheckpointFile(multiseg / RECOVERY_POINT_CHECKPOINT_FILE).read()) == 53
    assert CleanShutdownMarker.read(multiseg) == CleanShutdownMarker(None)
    assert read_meta_properties(multiseg / META_PROPERTIES_FILE).node_id == 0
    kraft37 = kafka_real / "kraft-3.7-clean-transactions" / "kafka-data"
    assert CleanShutdownMarker.read(kraft37) == CleanShutdownMarker(53326)
    meta = read_meta_properties(kraft37 / META_PROPERTIES_FILE)
    assert (meta.version, meta.node_id, meta.cluster_id) == (1, 1, "MkU3OEVBNTcwNTJENDM2Qk")
    assert CleanShutdownMarker.read(kafka_real / "zk-3.7.1-clean-multiseg" / "kafka-logs") == CleanShutdownMarker(-1)
    # Checked out with CRLF line ends: Kafka's readLine accepts them, and the rewrite keeps them.
    kraft36 = kafka_real / "kraft-3.6-running-snapshots" / "kafka-logs"
    assert len(OffsetCheckpointFile(kraft36 / REPLICATION_OFFSET_CHECKPOINT_FILE).read()) == 57
    metadata = read_partition_metadata(kraft36 / "__cluster_metadata-0" / PARTITION_METADATA_FILE)
    assert metadata.topic_id == METADATA_TOPIC_ID
    epochs = LeaderEpochCheckpointFile(kraft36 / "__cluster_metadata-0" / LEADER_EPOCH_CHECKPOINT_FILE).read()
    assert epochs == [EpochEntry(1, 0), EpochEntry(2, 6347), EpochEntry(3, 7454), EpochEntry(4, 31831)]


@given(data=st.binary(max_size=3 * (1 << 16) + 7))
def test_read_file_bytes_reads_what_open_reads(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("read") / "file"
    path.write_bytes(data)
    assert read_file_bytes(path) == data == path.read_bytes()


def test_read_file_bytes_raises_what_open_raises_naming_the_path(tmp_path: Path) -> None:
    for path, kind in ((tmp_path / "missing", FileNotFoundError), (tmp_path, IsADirectoryError)):
        with pytest.raises(kind) as raised:
            read_file_bytes(path)
        assert raised.value.filename == str(path)
        with pytest.raises(kind):
            open(path, "rb").close()
