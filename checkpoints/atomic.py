"""Crash-safe replacement of small files, the way Kafka writes its checkpoints.

The new content goes to ``<path>.tmp``, is flushed and fsynced, renamed over ``path`` (an atomic replace on
POSIX) and the parent directory is fsynced so the rename itself survives a crash. A reader therefore sees either
the old file or the complete new one, never a torn write.
"""

from __future__ import annotations

import contextlib
import os
from os import PathLike


def fsync_dir(path: str | PathLike[str]) -> None:
    """Fsync the directory ``path`` so entries created, renamed or removed in it are durable. O(1)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace the content of ``path`` with ``data`` atomically. O(len(data)).

    With ``sync=False`` the file and directory fsyncs are skipped (the rename stays atomic, only durability
    is deferred), as Kafka does for snapshots taken at segment roll. On any failure the temporary file is
    removed and the exception re-raised; the previous content of ``path`` is untouched.
    """
    target = os.fspath(path)
    tmp = target + ".tmp"
    # Opened outside the try: if the open itself fails we created nothing, and whatever sits at ``tmp``
    # (say, a directory) is not ours to remove.
    out = open(tmp, "wb")  # noqa: SIM115 - closed by the ``with`` below, inside the cleanup scope
    try:
        with out:
            out.write(data)
            out.flush()
            if sync:
                os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(target)))
