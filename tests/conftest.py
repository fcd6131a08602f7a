"""Shared test helpers: where the reference fixtures live (and a skip when they are absent), the environment of
child processes, and the synchronisation tools concurrency tests use instead of sleeps (tests/README.md)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
FIXTURES = SHARED / "fixtures"
KAFKA_REAL = FIXTURES / "kafka-real"
CLIENTS_GENERATED = FIXTURES / "kafka-clients-generated"

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


def require_fixtures(path: Path) -> Path:
    """Return ``path``, or skip the calling test when the shared fixtures are not checked out beside the repo."""
    if not path.exists():
        pytest.skip(f"reference fixtures not found at {path} (clone ../shared beside this repository to run)")
    return path


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child Python, with the repository put first on ``PYTHONPATH`` (the
    inherited entries kept: pytest may live in another venv than the project) and ``extra`` variables set."""
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), inherited])), **extra}


def calm_disk(path: Path) -> tuple[int, int]:
    """A LogManager usage probe (``disk_usage=``) that finds every dir's file system 1 GiB used of 1 TiB, below
    every disk tier and with room for any test's data: the disk tiers are on by default (RocketMQ's
    0.75/0.85/0.90), and a test that runs a manager's jobs must not depend on how full the host's disk is."""
    return 1 << 30, 1 << 40


@pytest.fixture(autouse=True)
def _calm_disk_for_cli_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    """``logmgr cleanup`` and ``move-log`` measure a dir's usage (disk tiers, room): run in-process by a test, they get
    :func:`calm_disk` (a test that means a disk tier to act replaces it again), never the host's usage."""
    monkeypatch.setattr("cli.cleanup_cmd.measure_disk_usage", calm_disk)
    monkeypatch.setattr("cli.move_log_cmd.measure_disk_usage", calm_disk)


FAILURE_DEADLINE_S = 60.0
"""How long :func:`wait_until` polls: reached only when the awaited condition never comes (the test fails), so it
is generous enough for a loaded machine and says nothing about speed."""


@contextlib.contextmanager
def lock_held_elsewhere(lock_file: Path) -> Iterator[None]:
    """``lock_file`` locked by a child process (``fcntl.lockf``, as a broker holds its dir's ``.lock``) while the
    block runs."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\n"
            "f = open(sys.argv[1], 'a')\n"
            "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
            str(lock_file),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=FAILURE_DEADLINE_S)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = FAILURE_DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it still does not after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.001)


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class ContendedLock:
    """A lock (``threading.Lock`` or ``RLock``) that sets :attr:`contended` when an acquire finds it held by
    another thread, then blocks as the wrapped lock does. Put in place of a lock of the code under test, it lets a
    test know that a thread has reached the lock and is waiting for it, with no sleep."""

    def __init__(self, inner: _Lock) -> None:
        self._inner = inner
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._inner.acquire(False):
            return True
        if not blocking:
            return False
        self.contended.set()
        return self._inner.acquire(True, timeout)

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()


@pytest.fixture
def kafka_real() -> Path:
    return require_fixtures(KAFKA_REAL)


@pytest.fixture
def clients_generated() -> Path:
    return require_fixtures(CLIENTS_GENERATED)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real SparkSession for the whole run: ``local[2]``, UI off, bound to 127.0.0.1, workers on this venv's
    Python (:func:`logmgr.spark.session.local_session`), Python filter pushdown enabled, ``kafka-log``
    registered with pushdown on, a 2 GiB driver heap."""
    pytest.importorskip("pyspark.sql", reason="pyspark not installed (pip install -e '.[spark]')")
    from logmgr.spark.session import local_session

    session = local_session(
        "local[2]",
        "logmgr-tests",
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.python.filterPushdown.enabled": "true",
            # The export of a 65 MiB record (test_topic_decode_limits) holds several copies of it at once (the Arrow
            # batch, the row, Parquet's page and compression buffers) next to what the run's other tests left in
            # the heap: with Spark's default 1 GiB it failed now and then with OutOfMemoryError, which killed the
            # JVM and every later Spark test with it. The JVM reads this at launch (this fixture starts it).
            "spark.driver.memory": "2g",
        },
    )
    yield session
    session.stop()
