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
