"""Shared pieces of the ``logmgr`` commands: one-line errors with the documented exit codes, progress output.

Exit codes: 0 success, 1 problems found / operation failed, 2 usage error (click's own), 3 log dir locked by
another process (a running broker or another logmgr).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from logmgr.errors import LogDirLockedError, LogmgrError
from segments.errors import StorageFormatError

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
