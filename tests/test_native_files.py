"""segments._native.files: whole small files compared and written only when different, never through a link."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments._native.files import holds, open_for_reading, write_if_different


@settings(max_examples=200, deadline=None)
@given(old=st.one_of(st.none(), st.binary(max_size=64)), new=st.binary(max_size=64))
def test_write_if_different_leaves_exactly_the_bytes(tmp_path_factory: pytest.TempPathFactory, old: bytes | None, new: bytes) -> None:
    path = tmp_path_factory.mktemp("w") / "f.index"
    if old is not None:
        path.write_bytes(old)
    before = path.stat().st_mtime_ns if old is not None else None
    write_if_different(str(path), new)
    assert path.read_bytes() == new
    if old == new:
        assert path.stat().st_mtime_ns == before


def test_equal_file_is_not_modified(tmp_path: Path) -> None:
    path = tmp_path / "f.index"
    path.write_bytes(b"12345678")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    write_if_different(path, b"12345678")
    assert path.stat().st_mtime_ns == 1_000_000_000
    # A longer file is cut.
    write_if_different(path, b"1234")
    assert path.read_bytes() == b"1234"


def test_links_are_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "outside"
    target.write_bytes(b"keep")
    link = tmp_path / "f.index"
    link.symlink_to(target)
    with pytest.raises(OSError) as raised:
        write_if_different(str(link), b"data")
    assert raised.value.errno == errno.ELOOP and raised.value.filename == str(link)
    with pytest.raises(OSError) as raised:
        open_for_reading(str(link))
    assert raised.value.errno == errno.ELOOP
    assert not holds(str(link), b"keep")
    assert target.read_bytes() == b"keep"


def test_holds_only_a_regular_file_with_exactly_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "1.snapshot"
    assert not holds(str(path), b"x")
    path.write_bytes(b"abc")
    assert holds(str(path), b"abc")
    assert not holds(str(path), b"ab")
    assert not holds(str(path), b"abcd")
    fifo = tmp_path / "2.snapshot"
    os.mkfifo(fifo)
    # Opened without blocking, and not a regular file.
    assert not holds(str(fifo), b"")


def test_open_for_reading_gives_descriptor_and_size(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(b"x" * 100)
    fd, size = open_for_reading(path)
    try:
        assert size == 100 and os.pread(fd, 10, 0) == b"x" * 10
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError) as raised:
        open_for_reading(str(tmp_path / "missing.log"))
    assert raised.value.filename == str(tmp_path / "missing.log")


def test_errors_name_the_file_and_action(tmp_path: Path) -> None:
    directory = tmp_path / "d.index"
    directory.mkdir()
    with pytest.raises(IsADirectoryError) as raised:
        write_if_different(str(directory), b"x")
    assert raised.value.filename == str(directory)
    with pytest.raises(ValueError, match="embedded null byte"):
        write_if_different(str(tmp_path / "a\0b"), b"x")
