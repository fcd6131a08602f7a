"""Shared pieces of the ``logmgr`` commands: one-line errors with the documented exit codes, progress output.

Exit codes: 0 success, 1 problems found / operation failed, 2 usage error (click's own), 3 log dir locked by
another process (a running broker or another logmgr).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from logmgr.errors import LogDirLockedError, LogmgrError
from segments.errors import InvalidPartitionDirError, StorageFormatError
from segments.naming import PartitionDirName, TopicPartition, parse_topic_partition

F = TypeVar("F", bound=Callable[..., Any])

EXIT_PROBLEMS = 1
EXIT_LOCKED = 3


class Failure(click.ClickException):
    """A one-line error and exit code 1 (click prints ``Error: ...`` on stderr)."""

    exit_code = EXIT_PROBLEMS


class Locked(click.ClickException):
    """The log dir's ``.lock`` is held by another process: exit code 3."""

    exit_code = EXIT_LOCKED


def one_line_errors(func: F) -> F:
    """Turn library and OS errors into a one-line message (exit 1, or 3 for a locked dir), unless ``--debug``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (StorageFormatError, LogmgrError, OSError, ValueError) as err:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            if isinstance(err, LogDirLockedError):
                raise Locked(str(err)) from None
            raise Failure(str(err)) from None

    return wrapper  # type: ignore[return-value]


def topic_partition_argument(text: str) -> TopicPartition:
    """A TOPIC-P argument as every command reads it (:func:`parse_topic_partition`: a topic Kafka accepts, a
    partition in ``0..2**31-1``), so it names one entry of the log dir; :class:`Failure` otherwise. O(len)."""
    try:
        return parse_topic_partition(text)
    except StorageFormatError as err:
        raise Failure(f"{text[:300]!r} is not a valid TOPIC-P: {err.message}") from None


def refuse_links(log_dir: Path, partition_dirs: Iterable[Path] | None = None) -> None:
    """Raise :class:`Failure` when a command about to write into ``log_dir`` could follow a symbolic link. O(entries).

    Refused: a link at the top of ``log_dir`` other than a link to a directory (the ``.lock``, checkpoints, their
    ``.tmp`` files, the clean-shutdown marker are opened there and would be written through it); a link among
    ``partition_dirs`` or inside one of them (segments, indexes, snapshots, leader-epoch checkpoints are opened
    for writing in place). ``partition_dirs`` None means the dirs a LogManager loads: the real directories whose
    names are live partition dirs (links to directories are skipped by it, and so are not refused here). Kafka
    never creates links in a log dir, so none is told apart as harmless. The check runs before the dir is locked
    (locking opens ``.lock``); it guards against a dir left that way, not against a process racing the command.
    """
    children = sorted(log_dir.iterdir())
    for child in children:
        if child.is_symlink() and not child.is_dir():
            raise Failure(_link_refusal(child))
    if partition_dirs is None:
        partition_dirs = [child for child in children if not child.is_symlink() and _is_live_partition_dir(child)]
    for partition_dir in partition_dirs:
        if partition_dir.is_symlink():
            raise Failure(_link_refusal(partition_dir))
        if partition_dir.is_dir():
            for entry in sorted(partition_dir.iterdir()):
                if entry.is_symlink():
                    raise Failure(_link_refusal(entry))


def _is_live_partition_dir(path: Path) -> bool:
    try:
        return path.is_dir() and PartitionDirName.parse(path.name).kind == "live"
    except InvalidPartitionDirError:
        return False


def _link_refusal(path: Path) -> str:
    return (
        f"{path} is a symbolic link: logmgr does not write into a log dir holding links (writes could land "
        "outside it); replace the link with what it points to"
    )


def progress_enabled(as_json: bool) -> bool:
    """Progress goes to a terminal only: never when piped or with ``--json``."""
    return not as_json and sys.stderr.isatty()


class ProgressBar:
    """A one-line progress bar on stderr, drawn only when :func:`progress_enabled` says so.

    ``update(done, total, item)`` redraws ``[#####-----] done/total label item``; closing clears the line so the
    command's own output starts on a clean line.
    """

    WIDTH = 30

    def __init__(self, label: str, *, as_json: bool) -> None:
        self.label = label
        self.enabled = progress_enabled(as_json)

    def update(self, done: int, total: int, item: object) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * done // total if total > 0 else 0
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        click.echo(f"\r\x1b[K[{bar}] {done}/{total} {self.label} {item}", nl=False, err=True)

    def close(self) -> None:
        if self.enabled:
            click.echo("\r\x1b[K", nl=False, err=True)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
