"""File and directory names: the format doc's examples, Kafka's parsing leniencies, rejections, round trips."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments._native.listing import canonical_offsets, list_directory
from segments.errors import InvalidOffsetError, InvalidPartitionDirError, InvalidTopicError
from segments.java_numbers import parse_java_int
from segments.naming import (
    CHECKPOINT_SUFFIX,
    CLEANED_SUFFIX,
    DELETE_DIR_SUFFIX,
    DELETED_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    SWAP_SUFFIX,
    PartitionDirName,
    TopicPartition,
    delete_dir_name,
    filename_prefix_from_offset,
    future_dir_name,
    is_index_file,
    is_log_file,
    is_partition_dir_name,
    log_file,
    offset_from_file_name,
    offset_index_file,
    parse_kraft_snapshot_name,
    producer_snapshot_file,
    stray_dir_name,
    time_index_file,
    transaction_index_file,
    validate_topic,
)

LEGAL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
topics = st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=249).filter(lambda t: t not in (".", ".."))
partitions = st.integers(0, 2**31 - 1)
unique_ids = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
offsets = st.integers(0, 2**63 - 1)


# --- segment files --------------------------------------------------------------------------------------------


def test_doc_examples() -> None:
    assert filename_prefix_from_offset(368769) == "00000000000000368769"
    assert log_file("/data/t-0", 368769) == Path("/data/t-0/00000000000000368769.log")
    assert log_file(Path("/d"), 0, SWAP_SUFFIX).name == "00000000000000000000.log.swap"
    assert offset_from_file_name("00000000000000368769.log") == 368769
    assert offset_from_file_name("00000000000000000000.log.swap") == 0


def test_every_segment_file_shape() -> None:
    directory = Path("/logs/topic-3")
    assert offset_index_file(directory, 5).name == "00000000000000000005.index"
    assert time_index_file(directory, 5, CLEANED_SUFFIX).name == "00000000000000000005.timeindex.cleaned"
    assert (
        transaction_index_file(directory, 5, DELETED_SUFFIX).name == "00000000000000000005.txnindex.deleted"
    )
    assert producer_snapshot_file(str(directory), 2**63 - 1) == directory / "09223372036854775807.snapshot"
    for bad in (-1, 2**63):
        with pytest.raises(ValueError):
            filename_prefix_from_offset(bad)


@given(
    offset=offsets, suffix=st.sampled_from([".log", ".index", ".timeindex.deleted", ".snapshot", ".log.swap"])
)
def test_offset_round_trip(offset: int, suffix: str) -> None:
    name = filename_prefix_from_offset(offset) + suffix
    assert len(name.split(".")[0]) == 20
    assert offset_from_file_name(name) == offset


def test_offset_from_file_name_follows_parse_long() -> None:
    # Kafka reads the text before the first '.' with Long.parseLong: any width, a sign, Unicode digits.
    assert offset_from_file_name("12.index") == 12
    assert offset_from_file_name("+7.log") == 7
    assert offset_from_file_name("-1.log") == -1
    assert offset_from_file_name("\u0663.log") == 3
    for bad in ("abc.log", "nodot", ".log", "1_000.log", " 1.log", "9223372036854775808.log", "0x10.log"):
        with pytest.raises(InvalidOffsetError):
            offset_from_file_name(bad)


def _strict_offset(name: str) -> int | None:
    """Kafka's offsetFromFileName without any shortcut: Long.parseLong of the text before the first '.'."""
    dot = name.find(".")
    if dot < 0:
        return None
    try:
        return parse_java_int(name[:dot], 64)
    except ValueError:
        return None


def _offset_or_none(name: str) -> int | None:
    try:
        return offset_from_file_name(name)
    except InvalidOffsetError:
        return None


_NAME_CHARS = st.sampled_from("0123456789.+-a \u0663\uff11")


@given(
    name=st.one_of(
        # Near-canonical: 20 characters (digits mostly) before a suffix, around the int64 limit too.
        st.builds(
            lambda prefix, suffix: prefix + suffix,
            st.one_of(
                st.text(_NAME_CHARS, min_size=20, max_size=20),
                st.integers(0, 10**20 - 1).map(lambda n: f"{n:020d}"),
                st.integers(2**63 - 5, 2**63 + 5).map(lambda n: f"{n:020d}"),
            ),
            st.sampled_from([".log", ".index", ".log.swap", "", "x.log", ".", ".."]),
        ),
        st.text(_NAME_CHARS, max_size=30),
    )
)
def test_offset_from_file_name_agrees_with_the_strict_parse(name: str) -> None:
    # The canonical 20-digit fast path gives what Long.parseLong gives, and every other name takes the strict path.
    assert _offset_or_none(name) == _strict_offset(name)


_NEAR_CANONICAL = st.one_of(
    st.text(_NAME_CHARS, min_size=19, max_size=21),
    st.integers(0, 10**20 - 1).map(lambda n: f"{n:020d}"),
    st.integers(2**63 - 5, 2**63 + 5).map(lambda n: f"{n:020d}"),
)


@given(stems=st.lists(_NEAR_CANONICAL, max_size=6), suffix=st.sampled_from([".log", ".snapshot"]))
def test_canonical_offsets_are_the_one_by_one_parse(stems: list[str], suffix: str) -> None:
    # The bulk parse answers only when every name is canonical, and then as offset_from_file_name does.
    names = [stem + suffix for stem in stems]
    offsets = canonical_offsets(names, suffix)
    canonical = all(len(stem) == 20 and stem.isascii() and stem.isdigit() and int(stem) < 2**63 for stem in stems)
    assert offsets == ([offset_from_file_name(name) for name in names] if canonical else None)


_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".deleted", ".swap", ".tmp")


@given(
    names=st.lists(
        st.builds(
            lambda stem, tail: stem + tail,
            st.text("0.ab\xe9", max_size=4),
            st.sampled_from([*_SUFFIXES, ".log.deleted", ".checkpoint.tmp", "log", ".lo", ".logs", "", "."]),
        ).filter(lambda name: name not in ("", ".", "..")),
        unique=True,
    )
)
def test_list_directory_groups_names_as_endswith(names: list[str]) -> None:
    # Each regular file in the group of the one suffix it ends with (one-dot suffixes: at most one matches), in
    # listing order (os.listdir's).
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            Path(directory, name).touch()
        files, links, by_suffix = list_directory(directory, _SUFFIXES)
        listed = os.listdir(directory)
    assert files == set(names)
    assert links == frozenset()
    assert by_suffix == {suffix: [name for name in listed if name.endswith(suffix)] for suffix in _SUFFIXES}


def test_list_directory_tells_links_and_skips_what_is_not_a_file(tmp_path: Path) -> None:
    # A link to a regular file counts as a file (Path.is_file follows it); every link is named as one; a directory,
    # a dangling link and a link to a directory are not files.
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "sub.log").mkdir()
    os.symlink("00000000000000000000.log", tmp_path / "00000000000000000001.log")
    os.symlink("missing", tmp_path / "00000000000000000002.log")
    os.symlink("sub.log", tmp_path / "00000000000000000003.log")
    files, links, by_suffix = list_directory(tmp_path, (".log",))
    assert files == {"00000000000000000000.log", "00000000000000000001.log"}
    assert links == {"00000000000000000001.log", "00000000000000000002.log", "00000000000000000003.log"}
    assert sorted(by_suffix[".log"]) == sorted(files)


def test_list_directory_decodes_names_as_listdir(tmp_path: Path) -> None:
    # A name that is not UTF-8 comes back with surrogate escapes, as os.listdir gives it.
    raw = os.fsencode(tmp_path) + b"/\xff\xfe.log"
    with open(raw, "wb"):
        pass
    files, _, by_suffix = list_directory(tmp_path, (".log",))
    assert files == set(os.listdir(tmp_path))
    assert by_suffix[".log"] == os.listdir(tmp_path)


def test_list_directory_names_the_directory_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        list_directory(tmp_path / "absent", (".log",))
    assert missing.value.filename == tmp_path / "absent"
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        list_directory(str(tmp_path / "file"), (".log",))


@pytest.mark.parametrize("suffix", ["log", ".log.deleted", "", "x.log", ".l\xf6g"])
def test_list_directory_refuses_a_suffix_not_of_one_leading_dot(suffix: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one dot"):
        list_directory(tmp_path, (".index", suffix))


def test_file_kinds() -> None:
    assert is_log_file("00000000000000000000.log")
    assert not is_log_file("00000000000000000000.log.deleted")
    assert all(is_index_file(f"0.{ext}") for ext in ("index", "timeindex", "txnindex"))
    assert not is_index_file("0.index.swap")
    assert not is_index_file("0.log")


def test_kraft_snapshot_names() -> None:
    assert CHECKPOINT_SUFFIX == ".checkpoint"
    assert parse_kraft_snapshot_name("00000000000000012345-0000000007.checkpoint") == (12345, 7)
    for bad in (
        "00000000000000012345-0000000007.checkpoint.deleted",
        "00000000000000012345-0000000007.checkpoint.part",
        "0000000000012345-0000000007.checkpoint",
        "00000000000000012345-7.checkpoint",
        "00000000000000012345.snapshot",
        "99999999999999999999-0000000007.checkpoint",
        "00000000000000012345-9999999999.checkpoint",
    ):
        assert parse_kraft_snapshot_name(bad) is None


# --- topics ---------------------------------------------------------------------------------------------------


def test_validate_topic_examples() -> None:
    for good in ("t", "__consumer_offsets", "my.topic_name-1", "a" * 249, "...", "-"):
        validate_topic(good)
    for bad in ("", ".", "..", "a/b", "../etc", "a\0b", "a b", "тема", "a" * 250, "t\n"):
        with pytest.raises(InvalidTopicError):
            validate_topic(bad)


@given(topic=topics)
def test_legal_topics_pass(topic: str) -> None:
    validate_topic(topic)


@given(topic=st.text(min_size=1, max_size=260))
def test_topic_validation_matches_the_rule(topic: str) -> None:
    legal = (
        len(topic) <= 249 and topic not in (".", "..") and re.fullmatch(r"[a-zA-Z0-9._-]+", topic) is not None
    )
    if legal:
        validate_topic(topic)
    else:
        with pytest.raises(InvalidTopicError):
            validate_topic(topic)


# --- partitions and their directories -------------------------------------------------------------------------


def test_topic_partition() -> None:
    tp = TopicPartition("my-topic", 12)
    assert str(tp) == "my-topic-12"
    assert TopicPartition.parse("my-topic-12") == tp
    assert TopicPartition.parse("t--1") == TopicPartition("t-", 1)
    for bad in ("topic", "-1", "t-", "t-x", "t-1.5", "t-2147483648"):
        with pytest.raises(InvalidPartitionDirError):
            TopicPartition.parse(bad)


def test_partition_dir_examples() -> None:
    assert PartitionDirName.parse("orders-3") == PartitionDirName("orders", 3)
    assert PartitionDirName.parse("__cluster_metadata-0") == PartitionDirName("__cluster_metadata", 0)
    uid = "0f6c3c1e84b14bd8b2f7c4e4a6c1c0de"
    for kind, suffix in (
        ("delete", DELETE_DIR_SUFFIX),
        ("future", FUTURE_DIR_SUFFIX),
        ("stray", STRAY_DIR_SUFFIX),
    ):
        parsed = PartitionDirName.parse(f"my.topic-0.{uid}{suffix}")
        assert parsed == PartitionDirName("my.topic", 0, kind, uid)  # type: ignore[arg-type]
        assert parsed.name == f"my.topic-0.{uid}{suffix}"
        assert parsed.topic_partition == TopicPartition("my.topic", 0)


def test_partition_dir_kafka_leniencies() -> None:
    # Integer.parseInt takes a '+' and Unicode digits; the unique id is not checked beyond the pattern.
    assert PartitionDirName.parse("t-+5") == PartitionDirName("t", 5)
    assert PartitionDirName.parse("t-\u0665") == PartitionDirName("t", 5)
    assert PartitionDirName.parse("t-0.x-delete").unique_id == "x"
    assert PartitionDirName.parse("t-0.x-1.-delete") == PartitionDirName("t-0.x", 1, "delete", "")
    assert PartitionDirName.parse("my topic-0").topic == "my topic"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "topic",
        "-0",
        "t-",
        "t-x",
        "t-2147483648",
        "t-0.abc",
        "t-0.-delete",
        "t-0.abc def-delete",
        "a.b-c-delete",
        "a-b.c.d-delete",
        "t-0-future",
        ".-stray",
    ],
)
def test_partition_dir_rejections(name: str) -> None:
    with pytest.raises(InvalidPartitionDirError):
        PartitionDirName.parse(name)
    assert not is_partition_dir_name(name)


@given(
    topic=topics,
    partition=partitions,
    kind=st.sampled_from(["live", "delete", "future", "stray"]),
    uid=unique_ids,
)
def test_partition_dir_round_trip(topic: str, partition: int, kind: str, uid: str) -> None:
    original = PartitionDirName(topic, partition, kind, None if kind == "live" else uid)  # type: ignore[arg-type]
    assert PartitionDirName.parse(original.name) == original
    assert is_partition_dir_name(original.name)


@given(topic=topics, partition=partitions)
def test_topic_partition_round_trip(topic: str, partition: int) -> None:
    tp = TopicPartition(topic, partition)
    assert TopicPartition.parse(str(tp)) == tp


def test_dir_name_invariants() -> None:
    for bad in (
        ("t", 0, "live", "abc"),
        ("t", 0, "delete", None),
        ("t", 0, "delete", "a.b"),
        ("t", 0, "stray", "a b"),
        ("t", 0, "moved", "abc"),
    ):
        with pytest.raises(ValueError):
            PartitionDirName(*bad)
    with pytest.raises(ValueError):
        delete_dir_name(TopicPartition("t", 0), "")


def test_generated_unique_ids() -> None:
    tp = TopicPartition("events", 4)
    names = {delete_dir_name(tp), future_dir_name(tp), stray_dir_name(tp)}
    assert len(names) == 3
    for name in names:
        parsed = PartitionDirName.parse(name)
        assert parsed.topic_partition == tp
        assert parsed.unique_id is not None and re.fullmatch("[0-9a-f]{32}", parsed.unique_id)
    assert delete_dir_name(tp, "abc") == "events-4.abc-delete"
    assert stray_dir_name(tp, "abc") == "events-4.abc-stray"
    assert future_dir_name(tp, "abc") == "events-4.abc-future"


@given(topic=topics, partition=partitions, uid=unique_ids)
def test_delete_and_stray_names_fit_255(topic: str, partition: int, uid: str) -> None:
    tp = TopicPartition(topic, partition)
    suffix_length = len(f"-{partition}.{uid}") + len("-delete")
    for make, kind_suffix in ((delete_dir_name, "-delete"), (stray_dir_name, "-stray")):
        name = make(tp, uid)
        assert len(name) <= 255
        parsed = PartitionDirName.parse(name)
        assert topic.startswith(parsed.topic)
        assert parsed.partition == partition and parsed.unique_id == uid
        expected_topic_length = min(len(topic), 255 - (suffix_length - len("-delete") + len(kind_suffix)))
        assert len(parsed.topic) == expected_topic_length
    assert PartitionDirName.parse(future_dir_name(tp, uid)).topic == topic


def test_delete_truncation_to_255() -> None:
    tp = TopicPartition("x" * 249, 2**31 - 1)
    uid = "f" * 32
    name = delete_dir_name(tp, uid)
    # -2147483647 (11) + . (1) + uid (32) + -delete (7) = 51 characters, leaving 204 for the topic.
    assert name == "x" * 204 + f"-2147483647.{uid}-delete"
    assert len(name) == 255
    assert len(stray_dir_name(tp, uid)) == 255
    future = future_dir_name(tp, uid)
    assert len(future) == 249 + 51 - len("-delete") + len("-future")
    assert PartitionDirName.parse(future).topic == "x" * 249
