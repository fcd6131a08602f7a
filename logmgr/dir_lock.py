"""The ``.lock`` of a log dir: one process at a time, interoperable with a running Kafka broker.

Kafka's broker creates ``<log_dir>/.lock`` and takes ``FileChannel.tryLock()`` on it, which on Linux is an
exclusive POSIX record lock (``fcntl(F_SETLK, F_WRLCK)``) over the whole file. :class:`LogDirLock` takes the
same kind of lock with ``fcntl.lockf(fd, LOCK_EX | LOCK_NB)``, so each side sees the other's.

POSIX record locks belong to a process, not to a file descriptor, with two traps this module handles:

- A process never conflicts with itself, so a second lock attempt from the same process would "succeed".
  A process-wide registry of the dirs this process holds makes a second :class:`LogDirLock` raise instead.
- Closing ANY descriptor of the file drops the process's lock on it. So nothing here opens the ``.lock`` of a dir
  this process holds, every open/close of a ``.lock`` happens under one process-wide mutex, and the probe
  :func:`is_locked_by_another_process` asks the kernel with ``F_GETLK`` rather than taking the lock (taking it,
  even briefly, could make a broker starting at that moment fail). Code elsewhere in the process must not open
  and close a held ``.lock`` either.

A ``.lock`` file left behind by a dead process holds no lock and blocks nothing; the file is never deleted. A
``.lock`` that is a symbolic link is never followed (``O_NOFOLLOW``): creating or locking the file it names could
reach outside the log dir, so it raises ``OSError`` (``ELOOP``) instead.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
import threading
import weakref
from types import TracebackType

from logmgr.errors import LogDirLockedError

__all__ = ["LOCK_FILE_NAME", "LogDirLock", "is_locked_by_another_process"]

LOCK_FILE_NAME = ".lock"

# `struct flock` as F_GETLK reads and writes it: Linux (64-bit off_t) and the BSDs/macOS order the fields
# differently. The trailing pad covers the kernel's alignment of the struct.
if sys.platform.startswith("linux"):
    _FLOCK_FORMAT = "hhqqi4x"  # l_type, l_whence, l_start, l_len, l_pid
    _TYPE_FIELD, _PID_FIELD = 0, 4
else:
    _FLOCK_FORMAT = "qqihh"  # l_start, l_len, l_pid, l_type, l_whence
    _TYPE_FIELD, _PID_FIELD = 3, 2

_DirKey = tuple[int, int]


class _Registry:
    """The dirs this process holds, keyed by the directory's (st_dev, st_ino) so aliases of a path match."""

    def __init__(self) -> None:
        # Guards the map AND every open/close of a `.lock` file in this process (see the module docstring).
        self.mutex = threading.Lock()
        self.held: dict[_DirKey, str] = {}

    def reset_after_fork(self) -> None:
        # A forked child holds none of its parent's record locks, and another thread of the parent may have
        # held the mutex at fork time.
        self.mutex = threading.Lock()
        self.held = {}


_registry = _Registry()
os.register_at_fork(after_in_child=_registry.reset_after_fork)


def _dir_key(log_dir: str) -> _DirKey:
    st = os.stat(log_dir)
    return (st.st_dev, st.st_ino)


def _holder_pid(fd: int) -> int | None:
    """The pid holding a conflicting lock on ``fd``'s file (F_GETLK), or None when none is held.

    The pid may be 0 or meaningless when the holder lives in another pid namespace.
    """
    request = [0] * 5
    request[_TYPE_FIELD] = fcntl.F_WRLCK
    answer = struct.unpack(_FLOCK_FORMAT, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK_FORMAT, *request)))
    if answer[_TYPE_FIELD] == fcntl.F_UNLCK:
        return None
    pid: int = answer[_PID_FIELD]
    return pid


def _open_lock_file(path: str, flags: int) -> int:
    """Open ``path`` without following a symbolic link at it; an OSError naming the link otherwise."""
    try:
        return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "the lock file is a symbolic link, which is never followed", path) from None
        raise


def _locked_message(log_dir: str, pid: int | None) -> str:
    holder = f", pid {pid}" if pid else ""
    return (
        f"another process (a Kafka broker or logmgr{holder}) is using {log_dir}: "
        f"cannot lock {os.path.join(log_dir, LOCK_FILE_NAME)}"
    )


def _release(fd: int, key: _DirKey) -> None:
    """Unlock, close and unregister; shared by release() and the finalizer of a forgotten LogDirLock."""
    with _registry.mutex:
        try:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            _registry.held.pop(key, None)


def is_locked_by_another_process(log_dir: str | os.PathLike[str]) -> bool:
    """True if a process other than this one holds the lock of ``log_dir``. O(1) system calls.

    Dirs this process holds answer False without touching their ``.lock``; a missing ``.lock`` answers False.
    The probe takes no lock, so it never gets in the way of another process starting up.
    """
    path = os.fspath(log_dir)
    with _registry.mutex:
        if _dir_key(path) in _registry.held:
            return False
        try:
            fd = _open_lock_file(os.path.join(path, LOCK_FILE_NAME), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            return _holder_pid(fd) is not None
        finally:
            os.close(fd)


class LogDirLock:
    """Holds the exclusive lock of ``<log_dir>/.lock`` from construction until :meth:`release`.

    Creates the (empty) ``.lock`` file when missing; ``log_dir`` must exist. Raises
    :class:`~logmgr.errors.LogDirLockedError` when another process, or another ``LogDirLock`` of this process,
    holds it. If the object is garbage-collected unreleased, the lock is released then.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        """Take the lock without waiting. O(1) system calls."""
        self._log_dir = os.fspath(log_dir)
        self._lock_path = os.path.join(self._log_dir, LOCK_FILE_NAME)
        with _registry.mutex:
            key = _dir_key(self._log_dir)
            if key in _registry.held:
                raise LogDirLockedError(
                    f"this process already holds the lock of {_registry.held[key]}; "
                    f"cannot lock {self._log_dir} a second time"
                )
            fd = _open_lock_file(self._lock_path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                # Closing is safe: this process holds no lock on the file (the registry says so).
                try:
                    pid = _holder_pid(fd) if isinstance(e, BlockingIOError | PermissionError) else None
                finally:
                    os.close(fd)
                if isinstance(e, BlockingIOError | PermissionError):
                    raise LogDirLockedError(_locked_message(self._log_dir, pid)) from e
                raise
            _registry.held[key] = self._log_dir
        self._key = key
        self._finalizer = weakref.finalize(self, _release, fd, key)

    @property
    def log_dir(self) -> str:
        """The locked directory as given. O(1)."""
        return self._log_dir

    @property
    def lock_path(self) -> str:
        """``<log_dir>/.lock``. O(1)."""
        return self._lock_path

    @property
    def locked(self) -> bool:
        """True until :meth:`release`. O(1)."""
        return self._finalizer.alive

    def release(self) -> None:
        """Drop the lock and close the file, leaving ``.lock`` in place; idempotent. O(1) system calls."""
        self._finalizer()

    def _check(self) -> None:
        """Assert: a held lock is registered under this dir's key. O(1)."""
        with _registry.mutex:
            if self.locked:
                assert _registry.held.get(self._key) == self._log_dir, (_registry.held.get(self._key), self._key)

    def __enter__(self) -> LogDirLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LogDirLock({self._log_dir!r}, locked={self.locked})"
