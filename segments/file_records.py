"""A ``.log`` file as a sequence of batches (Kafka's ``FileRecords`` + ``FileLogInputStream``).

Iteration follows Kafka's file rule: stop when no more than 17 bytes remain or when a declared size runs past the
end (a partial tail is not an error while iterating; :attr:`FileBatch.position` of the next batch tells the
caller where valid data ends). A declared size below the 14-byte minimum record overhead is corrupt.

Reads go through ``os.pread`` into large windows rather than ``mmap`` so that a reader never faults when the
file is truncated under it; batches are views into immutable window buffers and stay valid after iteration moves
on.

Concurrency: one writer (append/truncate/flush) per file, any number of readers. Readers only use ``pread`` on
the shared descriptor and a snapshot of :attr:`size_in_bytes`, so they need no lock; the writer updates the size
after the bytes are written.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from segments._native.append import RESERVE_LEAST_BYTES, FileAppendState
from segments._native.batches import BatchWalk, FileBatch, locate_batch, register
from segments.errors import CorruptRecordError
from segments.legacy import LegacyRecordBatch
from segments.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    DefaultRecordBatch,
    RecordBatch,
)

register(DefaultRecordBatch, LegacyRecordBatch)

__all__ = [
    "FileBatch",
    "FileRecords",
    "allocate",
    "batch_view",
    "iter_batches",
    "located_error",
    "open_no_follow",
    "read_at",
    "walk_batches",
]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_CLOSED = -1
_OPENING = threading.Lock()
"""Serializes the first open of unopened files (rare: once per file), shared so an unopened file holds no lock."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def open_no_follow(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` that never follows a symbolic link at ``path``: Kafka never links files in a log dir, and
    following one would let an append, a truncation or an index map write outside it. O(1).

    A link raises ``OSError(ELOOP)`` whose message says so and names ``path``; other errors name it too."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link, which is never followed", os.fspath(path)) from None
        raise


def read_at(fd: int, path: str | os.PathLike[str], position: int, size: int) -> bytes:
    """Up to ``size`` bytes of the open file ``fd`` from ``position`` (short only at its end); an ``OSError`` names
    ``path``. O(size).

    The argument order lets ``functools.partial(read_at, fd, path)`` serve as a walk's ``read(position, size)``."""
    # os-level calls (not the compiled core): the fault tests answer them as a failing kernel would.
    chunks = []
    while size > 0:
        try:
            chunk = os.pread(fd, size, position)
        except OSError as err:
            raise located_error(err, path, f"read of {size} bytes at position {position}") from err
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
        size -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _whole_blocks(size: int, info: os.stat_result) -> int:
    """``size`` rounded up to whole blocks of the file ``info`` describes. O(1)."""
    return -(-size // info.st_blksize) * info.st_blksize


def located_error(err: OSError, path: str | os.PathLike[str], action: str) -> OSError:
    """``err`` (an ``OSError`` of the same errno, so of the same subclass) naming ``path`` and the failed action:
    calls on a descriptor or a map raise without a file name. O(1)."""
    return OSError(err.errno, f"{err.strerror or err} ({action})", os.fspath(path))


def allocate(fd: int, length: int, path: str | os.PathLike[str]) -> None:
    """Reserve disk blocks for bytes ``[0, length)`` of the open file ``fd`` (growing it to ``length`` if
    shorter) with ``posix_fallocate``. O(length) at worst (filesystems without fallocate get zeros written).

    A file that will be memory-mapped for writing must have its blocks before the map is written: a write to a
    sparse page of a full disk raises SIGBUS, which kills the process; here the full disk is an ``OSError``
    (``ENOSPC``) naming ``path``, raised before anything depends on the space."""
    try:
        os.posix_fallocate(fd, 0, length)
    except OSError as err:
        raise located_error(err, path, f"allocation of {length} bytes") from err


def batch_view(buffer: bytes | memoryview) -> RecordBatch:
    """A lazy batch view of ``buffer`` (prefix included), chosen by its magic byte. O(1).

    Magic 0/1 give a :class:`LegacyRecordBatch`; anything else a :class:`DefaultRecordBatch` whose
    ``ensure_valid`` rejects a magic other than 2, as Kafka's reader does.
    """
    if len(buffer) < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(
            f"{len(buffer)} bytes cannot hold a batch header up to its magic ({HEADER_SIZE_UP_TO_MAGIC})", position=0
        )
    magic = buffer[16]
    if magic in (0, 1):
        return LegacyRecordBatch(buffer)
    return DefaultRecordBatch(buffer)


def iter_batches(buffer: bytes | memoryview, *, start: int = 0, path: str | None = None) -> Iterator[FileBatch]:
    """Batches of an in-memory log (a whole ``.log`` or a KRaft ``.checkpoint``), with the file rule. O(batches)."""
    view = memoryview(buffer)
    return BatchWalk(None, start, len(view), path=path, buffer=view)


def walk_batches(
    read: Callable[[int, int], bytes | memoryview],
    start: int,
    limit: int,
    *,
    path: str | None = None,
    max_batch_size: int | None = None,
) -> Iterator[FileBatch]:
    """Kafka's batch iteration over bytes ``[start, limit)`` fetched through ``read(position, size)``.

    ``read`` is called for windows that start at 64 KiB and double up to 1 MiB, so a lookup reads little and a
    long walk reads the file in windows that stay in a core's second-level cache. Raises
    :class:`CorruptRecordError` for a size below the minimum overhead and :class:`RecordTooLargeError` for a
    declared size above ``max_batch_size`` when one is given. O(bytes), one compiled step per batch
    (:class:`segments._native.batches.BatchWalk`).
    """
    return BatchWalk(read, start, limit, path=path, max_batch_size=max_batch_size)


class FileRecords(FileAppendState):
    """An open ``.log`` (or KRaft ``.checkpoint``) file.

    ``size_in_bytes`` starts as the file length (Kafka's rule for an existing file: a crashed preallocated file
    includes its zero tail, which recovery later cuts).

    Given ``size`` (the length a directory listing's stat found), nothing is opened until the first read, append,
    truncation or fsync (Kafka's lazy index, extended to the ``.log``): a clean startup opens no segment file.
    :meth:`release` returns an opened file to that state.

    Appends (``append``) and the descriptor and size they move are compiled
    (:class:`segments._native.append.FileAppendState`), which also holds the state below as C fields (slots).
    """

    _path: Path
    _path_name: str
    _writable: bool
    _fd: int | None
    _size: int
    _reserved_end: int
    _reserve_at: int

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        writable: bool = False,
        create: bool = False,
        preallocate_bytes: int = 0,
        size: int | None = None,
    ) -> None:
        self._path = Path(path)
        self._path_name = str(self._path)
        """The path as text, kept for every fetch result (converting it per read costs as much as the index search)."""
        self._writable = writable
        # None: not opened yet (opened by _descriptor on first use); _CLOSED: closed for good.
        self._fd = None
        if size is not None:
            self._size = size
            return
        flags = os.O_RDWR if writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        # Kafka never links segment files: a link in a log dir is refused (ELOOP) rather than followed, so recovery
        # cannot truncate, nor an append extend, a file outside the dir.
        fd = open_no_follow(self._path, flags)
        self._fd = fd
        self._size = os.fstat(fd).st_size
        if writable and self._size == 0 and preallocate_bytes > 0:
            # log.preallocate: reserve the whole segment up front; the log's size stays 0 and close() trims the
            # file back to the bytes written. A crash leaves the zero tail, which recovery cuts.
            try:
                allocate(fd, preallocate_bytes, self._path)
            except OSError:
                os.close(fd)
                raise

    def _descriptor(self) -> int:
        """The descriptor, opening the file on first use (thread-safe; a closed file gives ``-1``, so the call
        fails with ``EBADF`` as on any closed descriptor). O(1)."""
        fd = self._fd
        if fd is None:
            with _OPENING:
                fd = self._fd
                if fd is None:
                    fd = open_no_follow(self._path, os.O_RDWR if self._writable else os.O_RDONLY)
                    self._fd = fd
        return fd

    def ensure_open(self) -> None:
        """Open an unopened file now (a closed one stays closed). O(1)."""
        self._descriptor()

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is held now (not for an unopened or a closed file). O(1)."""
        fd = self._fd
        return fd is not None and fd >= 0

    @property
    def path(self) -> Path:
        return self._path

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the file that belong to the log. O(1)."""
        return self._size

    @property
    def closed(self) -> bool:
        return self._fd == _CLOSED

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (short at the end). O(size)."""
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        if position < 0:
            raise ValueError(f"{self._path}: read at negative position {position}")
        return read_at(self._descriptor(), self._path, position, size)

    def batches(self, start: int = 0, end: int | None = None, *, max_batch_size: int | None = None) -> Iterator[FileBatch]:
        """Iterate batches from byte ``start`` up to ``end`` (default: the current size); see
        :func:`walk_batches` for the rule and errors. O(bytes read)."""
        limit = self._size if end is None else min(end, self._size)
        return walk_batches(self.read, start, limit, path=str(self._path), max_batch_size=max_batch_size)

    def locate_batch(self, start: int, target: int, *, by_timestamp: bool = False) -> tuple[int, int, int] | None:
        """``(last offset, position, size)`` of the first batch from byte ``start`` whose last offset (with
        ``by_timestamp``: max timestamp) is >= ``target``, or None past the end. Reads batch headers only (Kafka's
        ``searchForOffsetWithSize``); the walk's rule and errors, see :func:`walk_batches`. O(batches skipped)."""
        if start < 0:
            raise ValueError(f"{self._path}: read at negative position {start}")
        # Headers hold int64 fields: a target beyond them compares like the nearest bound.
        target = min(max(target, _INT64_MIN), _INT64_MAX)
        return locate_batch(self._descriptor(), start, self._size, target, by_timestamp, str(self._path))

    def checked_batches(self, start: int = 0, end: int | None = None) -> Iterator[FileBatch]:
        """:meth:`batches` with each batch's CRC (and legacy wrapper) verified: the first failing one raises its
        :class:`CorruptRecordError` located at this file and the batch's position. O(bytes read), one batch in
        memory."""
        for found in self.batches(start, end):
            found.ensure_valid()
            yield found

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes (never grows it); return the bytes removed. O(1)."""
        self._require_writable()
        if size < 0 or size > self._size:
            raise ValueError(f"cannot truncate {self._path} of {self._size} bytes to {size}")
        removed = self._size - size
        try:
            os.ftruncate(self._descriptor(), size)
        except OSError as err:
            raise self._located(err, f"truncation to {size} bytes") from err
        self._size = size
        # The cut gave back every block past it, the reserved ones too: the next append reserves again.
        self._reserved_end = min(self._reserved_end, size)
        self._reserve_at = min(self._reserve_at, size)
        return removed

    def trim(self) -> None:
        """Kafka's ``FileRecords.trim`` (a segment's ``.log`` when it stops being active): cut the file to
        :attr:`size_in_bytes`, giving back a preallocated tail (``preallocate``) and the disk reserved ahead of
        the appends (``logmgr.append.reserve.bytes``, also what a crashed process's appends left reserved: an
        unopened file is opened to look); nothing to do for a closed or read-only file or one already fitting.
        O(1)."""
        if self._fd == _CLOSED or not self._writable:
            return
        try:
            self._trim(self._descriptor(), count_blocks=True)
        except OSError as err:
            raise self._located(err, f"trim to {self._size} bytes") from err

    def _trim(self, fd: int, *, count_blocks: bool = False) -> None:
        """Cut the file to its size when blocks lie past it: a preallocated tail, the disk this object's appends
        reserved ahead, and with ``count_blocks`` (once per segment, at its roll) what the appends of a process
        a crash stopped left reserved, seen in the file's block count (at least one step more than the size
        needs; a file's own metadata blocks, ext4's extent tree, are far fewer). O(1)."""
        info = os.fstat(fd)
        if (
            self._reserved_end > self._size
            or info.st_size != self._size
            # st_blocks counts 512-byte units.
            or (count_blocks and info.st_blocks * 512 >= _whole_blocks(self._size, info) + RESERVE_LEAST_BYTES)
        ):
            os.ftruncate(fd, self._size)
        self._reserved_end = self._size
        self._reserve_at = min(self._reserve_at, self._size)

    def flush(self) -> None:
        """fsync the file (nothing to do for an unopened or closed one: nothing was written through it); an
        ``OSError`` names it. O(dirty pages)."""
        fd = self._fd
        if fd is None or fd < 0:
            return
        try:
            os.fsync(fd)
        except OSError as err:
            raise self._located(err, "fsync") from err

    def close(self) -> None:
        """Close the descriptor for good (an unopened file just becomes closed); a writable file is cut to
        :attr:`size_in_bytes` (a preallocated tail, the bytes of a failed append, the disk reserved ahead). O(1)."""
        self._close(_CLOSED)

    def release(self) -> None:
        """Close the descriptor as :meth:`close` does but return to the unopened state: the next use reopens the
        file. Only for a file no reader is using (a segment a log load just recovered). O(1)."""
        self._close(None)

    def _close(self, state: int | None) -> None:
        with _OPENING:
            fd = self._fd
            if fd is None or fd < 0:
                if fd is None:
                    self._fd = state
                return
            try:
                if self._writable:
                    self._trim(fd)
            except OSError as err:
                raise self._located(err, f"trim to {self._size} bytes at close") from err
            finally:
                os.close(fd)
                self._fd = state

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file, keeping it open (or unopened). O(1)."""
        os.replace(self._path, path)
        self._path = Path(path)
        self._path_name = str(self._path)

    def _located(self, err: OSError, action: str) -> OSError:
        return located_error(err, self._path, action)

    def _require_writable(self) -> None:
        if not self._writable:
            raise PermissionError(f"{self._path} is open read-only")

    def __enter__(self) -> FileRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

