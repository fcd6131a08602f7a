"""``<logdir>/.kafka_cleanshutdown``: present when every log of the directory was closed cleanly.

Kafka up to 3.6 writes an empty file; 3.7+ writes ``{"version":0,"brokerEpoch":<long>}`` (``-1`` when the broker
had no epoch). Its presence alone means "clean": content Kafka cannot read only makes the epoch unknown, so
reading never fails on content.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from os import PathLike

from checkpoints.atomic import atomic_write_bytes, fsync_dir
from segments.java_numbers import INT64_MAX, INT64_MIN, check_java_int

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CLEAN_SHUTDOWN_VERSION = 0


@dataclass(frozen=True)
class CleanShutdownMarker:
    """The marker's content: ``broker_epoch`` None stands for the empty (≤ 3.6) form or unreadable content."""

    broker_epoch: int | None = None

    def __post_init__(self) -> None:
        if self.broker_epoch is not None:
            check_java_int(self.broker_epoch, 64, "broker epoch")

    @staticmethod
    def path_in(logdir: str | PathLike[str]) -> str:
        """The marker's path inside ``logdir``. O(1)."""
        return os.path.join(os.fspath(logdir), CLEAN_SHUTDOWN_FILE)

    @classmethod
    def exists(cls, logdir: str | PathLike[str]) -> bool:
        """Whether ``logdir`` holds a marker, i.e. its last shutdown was clean. O(1)."""
        return os.path.isfile(cls.path_in(logdir))

    @classmethod
    def read(cls, logdir: str | PathLike[str]) -> CleanShutdownMarker | None:
        """The marker of ``logdir``, or None when there is none (unclean shutdown). O(size)."""
        try:
            with open(cls.path_in(logdir), "rb") as source:
                return parse_clean_shutdown(source.read())
        except FileNotFoundError:
            return None

    def write(self, logdir: str | PathLike[str]) -> None:
        """Atomically create or replace the marker of ``logdir`` (tmp, fsync, rename, fsync dir). O(1)."""
        atomic_write_bytes(self.path_in(logdir), format_clean_shutdown(self))

    @classmethod
    def remove(cls, logdir: str | PathLike[str]) -> None:
        """Delete the marker if present and make the deletion durable, as Kafka does before loading logs. O(1)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cls.path_in(logdir))
        fsync_dir(logdir)


def parse_clean_shutdown(data: bytes) -> CleanShutdownMarker:
    """Interpret the marker's bytes; never raises. O(n).

    An integral ``brokerEpoch`` within int64 in a JSON object gives the epoch (other fields, ``version``
    included, are ignored as Kafka's Jackson mapping ignores them); anything else gives an unknown epoch.
    """
    try:
        content = json.loads(data)
    except (ValueError, RecursionError):
        # ValueError covers bad JSON, bad UTF-8 and over-long integer literals.
        return CleanShutdownMarker()
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    if isinstance(epoch, int) and not isinstance(epoch, bool) and INT64_MIN <= epoch <= INT64_MAX:
        return CleanShutdownMarker(epoch)
    return CleanShutdownMarker()


def format_clean_shutdown(marker: CleanShutdownMarker) -> bytes:
    """Kafka's bytes for ``marker``: empty without an epoch, else compact JSON as Jackson writes it. O(1)."""
    if marker.broker_epoch is None:
        return b""
    return f'{{"version":{CLEAN_SHUTDOWN_VERSION},"brokerEpoch":{marker.broker_epoch}}}'.encode("ascii")
