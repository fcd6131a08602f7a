"""Group commit: appenders share fsyncs (RocketMQ's ``CommitLog.GroupCommitService``).

With ``logmgr.group.commit.enable=true``, an append whose log is due for a flush (``flush.messages``; with
``flush.messages=1`` every append is) does not fsync under the log's writer lock. It queues a request "durable up
to offset N" here and, after releasing the lock, waits for it. One flusher thread per :class:`GroupCommitService`
(the LogManager runs one for all its logs) swaps the queue out (RocketMQ's ``requestsWrite``/``requestsRead``
swap), flushes each log once up to the highest offset queued for it, and wakes every request that flush covered.
So N threads appending concurrently cost about one fsync per round instead of N, and each append still returns
only once its records are durable.

A request not served within ``logmgr.group.commit.timeout.ms`` raises :class:`GroupCommitTimeoutError` (RocketMQ's
``FLUSH_DISK_TIMEOUT``): the records are in the log, only their durability is unknown; a later flush still
covers them. A failed flush hands its error (a :class:`~logmgr.errors.KafkaStorageError`) to every request it
covered.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Protocol

from logmgr.errors import GroupCommitTimeoutError, KafkaStorageError

logger = logging.getLogger("logmgr.group_commit")


class Flushable(Protocol):
    """What the flusher needs of a log: :meth:`logmgr.log.Log.flush`."""

    def flush(self, up_to_offset: int | None = None) -> None: ...


@dataclass(eq=False, slots=True)
class _Request:
    log: Flushable
    offset: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class GroupCommitService:
    """One flusher thread serving the durability requests of any number of logs. Thread-safe.

    :meth:`start` launches the thread, :meth:`stop` drains what is queued and joins it. ``flushes`` and
    ``requests`` count the flushes run and the requests served (what tests and the benchmark compare).
    """

    def __init__(self, timeout_ms: int, *, name: str = "group-commit") -> None:
        if timeout_ms < 1:
            raise ValueError(f"group commit timeout must be >= 1 ms, got {timeout_ms}")
        self.timeout_ms = timeout_ms
        self.name = name
        self.flushes = 0
        self.requests = 0
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def pending(self) -> int:
        """Requests queued and not yet taken by the flusher. O(1)."""
        with self._cond:
            return len(self._queue)

    def start(self) -> None:
        """Start the flusher thread (idempotent). O(1)."""
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Serve everything queued, then stop the thread and wait for it. O(queued flushes)."""
        with self._cond:
            thread = self._thread
            self._stopping = True
            self._cond.notify_all()
        if thread is not None:
            thread.join()
        with self._cond:
            self._thread = None

    def wait_durable(self, log: Flushable, offset: int) -> None:
        """Block until ``log`` is flushed up to ``offset`` (exclusive, as :meth:`Log.flush` takes it). Raises
        :class:`GroupCommitTimeoutError` after ``timeout_ms``, or the flush's own error. O(1) plus the wait.

        Call it without holding the log's lock: the flusher needs that lock to flush.
        """
        request = _Request(log, offset)
        with self._cond:
            self._queue.append(request)
            self._cond.notify_all()
        if not request.done.wait(self.timeout_ms / 1000):
            raise GroupCommitTimeoutError(
                f"{log}: fsync up to offset {offset} not done within logmgr.group.commit.timeout.ms "
                f"({self.timeout_ms} ms); the records are appended but not known to be durable"
            )
        if request.error is not None:
            raise request.error

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            self._serve(batch)

    def _serve(self, batch: list[_Request]) -> None:
        """One flush per log, up to the highest offset queued for it, then wake every request it covered."""
        targets: dict[int, tuple[Flushable, int]] = {}
        for request in batch:
            log, offset = targets.get(id(request.log), (request.log, -1))
            targets[id(request.log)] = (log, max(offset, request.offset))
        errors: dict[int, BaseException] = {}
        for key, (log, offset) in targets.items():
            try:
                log.flush(offset)
            except KafkaStorageError as err:
                # The log is offline now; its appenders learn it from their own request.
                errors[key] = err
            except Exception as err:
                # Any other failure is a bug, but the thread serves every log: it reports and goes on.
                logger.exception("group commit flush of %s failed", log)
                errors[key] = err
            self.flushes += 1
        for request in batch:
            request.error = errors.get(id(request.log))
            self.requests += 1
            request.done.set()
