"""Shared pieces of the ``logmgr`` commands: one-line errors with the documented exit codes, the process-level
handling of Ctrl-C and of a closed stdout, time formatting, progress output.

Exit codes: 0 success, 1 problems found / operation failed, 2 usage error (click's own), 3 log dir locked by
another process (a running broker or another logmgr), 130 interrupted (SIGINT), 141 stdout closed by its reader
(``logmgr read ... | head``; the status a shell reports for a process ended by SIGPIPE).
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from logmgr.errors import LogDirLockedError, LogmgrError
from segments.errors import InvalidPartitionDirError, StorageFormatError
from segments.naming import PartitionDirName, TopicPartition, parse_topic_partition

F = TypeVar("F", bound=Callable[..., Any])

EXIT_PROBLEMS = 1
EXIT_LOCKED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
        except BrokenPipeError:
            # Usually stdout closed by its reader: the group's handler (LogmgrGroup) ends the process quietly.
            raise
        except (StorageFormatError, LogmgrError, OSError, ValueError) as err:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            if isinstance(err, LogDirLockedError):
                raise Locked(str(err)) from None
            raise Failure(str(err)) from None

    return wrapper  # type: ignore[return-value]


class LogmgrGroup(click.Group):
    """The ``logmgr`` group: every command runs inside one handler for what ends a process from outside.

    Ctrl-C (SIGINT, ``KeyboardInterrupt`` in the main thread, wherever the command was) prints ``interrupted``
    on stderr and exits 130, never a traceback nor click's ``Aborted!`` with exit 1 (which means "problems
    found" here). A stdout closed by its reader (``logmgr read ... | head -1``) ends the command quietly with
    exit 141: nothing on stderr, the unread output dropped. Commands that hold a lock release it on the way out
    (their ``with`` blocks unwind as for any exception). Both parsing (``--help``, ``--version`` print there)
    and the command itself are covered.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        """Parse the group's options under :func:`process_exits`. O(args)."""
        with process_exits():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command under :func:`process_exits`, then flush stdout so a closed pipe shows here and not
        in the interpreter's final flush (which would print "Exception ignored"). O(1) beyond the command."""
        with process_exits():
            result = super().invoke(ctx)
            sys.stdout.flush()
            return result


@contextlib.contextmanager
def process_exits() -> Iterator[None]:
    """Turn ``KeyboardInterrupt`` into "interrupted" and exit 130, and a ``BrokenPipeError`` of a closed stdout
    into a quiet exit 141 (one of another pipe is an error: exit 1, one line). O(1)."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError as err:
        if not stdout_closed():
            # A pipe of the command's own (a subprocess, a socket), not stdout: a real failure.
            raise Failure(str(err)) from None
        silence_stdout()
        raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None


def stdout_closed() -> bool:
    """Whether the reader of stdout has gone: ``poll`` reports an error (a pipe whose read end is closed) or a
    hang-up (a socket or terminal) on its descriptor. False when stdout has no descriptor (tests). O(1)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poller.poll(0))


def silence_stdout() -> None:
    """Point stdout's descriptor at ``/dev/null``, so output still buffered is dropped at exit instead of failing
    again with EPIPE (the recipe of Python's ``signal`` documentation). O(1)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def format_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC with millisecond precision (``2024-05-01T12:00:00.123Z``); a value
    outside the years 1-9999 (a hostile or garbled timestamp) as its integer. O(1)."""
    try:
        # Integer arithmetic: ms / 1000 as a float can land a hair below the millisecond and print the one before.
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def topic_partition_argument(text: str) -> TopicPartition:
    """A TOPIC-P argument as every command reads it (:func:`parse_topic_partition`: a topic Kafka accepts, a
    partition in ``0..2**31-1``), so it names one entry of the log dir; :class:`Failure` otherwise. O(len)."""
    try:
        return parse_topic_partition(text)
    except StorageFormatError as err:
        raise Failure(f"{text[:300]!r} is not a valid TOPIC-P: {err.message}") from None


def partitions_option(what: str) -> Callable[[F], F]:
    """``--partition TOPIC-P`` (repeatable, each checked by :func:`topic_partition_argument`, a bad one is a usage
    error) into ``partitions: list[TopicPartition]``; ``what`` completes the help ("Flush only this partition"). O(1)."""

    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[TopicPartition]:
        try:
            return [topic_partition_argument(value) for value in values]
        except Failure as err:
            raise click.BadParameter(err.message) from None

    return click.option(
        "--partition",
        "partitions",
        multiple=True,
        metavar="TOPIC-P",
        callback=parse,
        help=f"{what} only this partition (repeatable); default: every partition of LOGDIR.",
    )


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
