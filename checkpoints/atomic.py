"""Crash-safe replacement of small files, the way Kafka writes its checkpoints.

The new content goes to ``<path>.tmp``, is flushed and fsynced, renamed over ``path`` (an atomic replace on
POSIX) and the parent directory is fsynced so the rename itself survives a crash. A reader therefore sees either
the old file or the complete new one, never a torn write.

Failures (a full disk, a file-size limit, an I/O error) raise an ``OSError`` that names the file, since a bare
``write``/``fsync`` on a descriptor reports none; the temporary file is removed and the old content stays.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Callable
from os import PathLike

TMP_SUFFIX = ".tmp"
"""What :func:`atomic_write_bytes` appends to the target's name for the file it writes first."""


def _named(err: OSError, path: str) -> OSError:
    """An ``OSError`` of ``err``'s errno (and so of its class) naming ``path``: calls on a descriptor name no file."""
    return OSError(err.errno, err.strerror, path)


_READ_CHUNK = 1 << 16


def read_file_bytes(path: str | PathLike[str]) -> bytes:
    """The whole content of the file at ``path`` through descriptor calls (open, read to the end, close): a few
    microseconds less than a buffered ``open(path, "rb").read()`` for each of the small files a log load reads by
    the thousand (checkpoints, producer snapshots). Raises what that raises, an ``OSError`` naming ``path``
    (``FileNotFoundError``, ``IsADirectoryError`` ...). O(size)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    except OSError as err:
        raise _named(err, os.fspath(path)) from err
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def fsync_dir(path: str | PathLike[str]) -> None:
    """Fsync the directory ``path`` so entries created, renamed or removed in it are durable. O(1).

    An ``OSError`` names the directory."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as err:
        raise _named(err, os.fspath(path)) from err
    finally:
        os.close(fd)


def _libc_syncfs() -> Callable[[int], int] | None:
    """The C library's ``syncfs`` (Linux), or None where it has none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_SYNCFS = _libc_syncfs()


def sync_filesystem(path: str | PathLike[str]) -> None:
    """Make everything written to the file system holding ``path`` durable: Linux ``syncfs(2)``, one call for any
    number of files (``sync(2)`` where the C library has no ``syncfs``). O(dirty data of that file system).

    For many small files written without fsync (a log load's producer snapshots), where one fsync each would cost
    a journal commit each. An ``OSError`` (a writeback error, which ``syncfs`` reports since Linux 5.8) names
    ``path``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if _SYNCFS is None:
            os.sync()
        elif _SYNCFS(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fspath(path))
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace the content of ``path`` with ``data`` atomically. O(len(data)).

    With ``sync=False`` the file and directory fsyncs are skipped (the rename stays atomic, only durability
    is deferred), as Kafka does for snapshots taken at segment roll. On any failure the temporary file is
    removed and the exception re-raised (an ``OSError`` naming the file it failed on); the previous content of
    ``path`` is untouched. A failure of the final directory fsync comes after the rename: ``path`` then holds
    the new content, whose durability is unknown.
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    # A leftover ``tmp`` (a crash mid-write) is ours to replace, but never to write through: a symbolic link
    # there is removed, not followed, and the new file is created exclusively (O_EXCL fails on any link).
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        if os.path.islink(tmp) or os.path.isfile(tmp):
            os.unlink(tmp)
    # Opened outside the try: if the open itself fails we created nothing, and whatever sits at ``tmp``
    # (say, a directory) is not ours to remove.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:
        if os.path.isdir(tmp):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), tmp) from None
        raise
    out = os.fdopen(fd, "wb")
    try:
        with out:
            out.write(data)
            out.flush()
            if sync:
                os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename is None:
            raise _named(err, tmp) from err
        raise
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(target)))


def remove_temporaries(directory: str | PathLike[str], is_target: Callable[[str], bool]) -> list[str]:
    """Remove every ``<name>.tmp`` in ``directory`` whose ``name`` passes ``is_target``: the half-written file a
    crash inside :func:`atomic_write_bytes` leaves, which the next write would replace anyway but which nothing
    else ever removes. Return the removed names, sorted. O(entries of ``directory``).

    A link at such a name is removed, never followed; a directory is left alone. An ``OSError`` (a read-only
    filesystem, an I/O error) names the file."""
    removed = []
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if not name.endswith(TMP_SUFFIX) or not is_target(name[: -len(TMP_SUFFIX)]):
                continue
            if entry.is_dir(follow_symlinks=False):
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(name)
    return sorted(removed)
