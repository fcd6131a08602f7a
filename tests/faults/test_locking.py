"""Locking across processes: a log dir is used by one LogManager (or broker, or writing command) at a time.

A child process runs a real LogManager (``startup`` locks every dir, as a broker does) and takes orders on stdin.
Checked from this process:

* a second LogManager on the same dir is refused with ``LogDirLockedError`` and changes nothing; every writing
  command exits 3 and changes nothing;
* after the holder is killed with SIGKILL, its ``.lock`` file is still there but holds no lock: the next
  LogManager starts (recovering, since the holder never wrote its clean-shutdown marker) and so do the commands;
* a LogManager over two dirs whose second one is held elsewhere touches nothing in the first: no marker removed,
  no checkpoint written, and the first dir's lock is released again.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints.clean_shutdown import CleanShutdownMarker
from cli.main import main
from logmgr.config import BrokerConfig
from logmgr.dir_lock import LOCK_FILE_NAME, LogDirLock, is_locked_by_another_process
from logmgr.errors import LogDirLockedError
from logmgr.log_manager import LogManager
from segments.naming import TopicPartition
from segments.records import SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S, REPO, child_env
from tests.faults.test_hostile_input import FaultReport

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks and SIGKILL")

REPORT = FaultReport(__file__)
NO_JOBS = str(10**15)
EXIT_LOCKED = 3


@pytest.fixture(scope="module", autouse=True)
def _fault_report() -> Iterator[None]:
    yield
    REPORT.write()


# A LogManager in its own process: "ready" once started, then "append N" and "stop" on stdin.
_HOLDER = textwrap.dedent(
    """
    import sys
    from logmgr.config import BrokerConfig
    from logmgr.log_manager import LogManager
    from segments.records import SimpleRecord
    manager = LogManager(BrokerConfig.from_properties(
        {"log.dirs": sys.argv[1], "log.initial.task.delay.ms": sys.argv[2]}))
    manager.startup()
    print("ready", flush=True)
    for line in sys.stdin:
        op, *args = line.split()
        if op == "append":
            log = manager.get_or_create_log("t", 0)
            log.append_records([SimpleRecord(b"from-holder")] * int(args[0]))
            log.flush()
            print("appended", flush=True)
        elif op == "stop":
            manager.shutdown()
            print("stopped", flush=True)
            break
    """
)


class Holder:
    """A child process running a LogManager over ``dirs``."""

    def __init__(self, *dirs: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, ",".join(str(d) for d in dirs), NO_JOBS],
            cwd=REPO,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._answer() == "ready"

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def ask(self, order: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(order + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(FAILURE_DEADLINE_S) == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.ask("stop") == "stopped"
            assert self.proc.wait(FAILURE_DEADLINE_S) == 0


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        if holder.proc.poll() is None:
            holder.proc.kill()
            holder.proc.wait(FAILURE_DEADLINE_S)


def _broker(*dirs: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"log.dirs": ",".join(str(d) for d in dirs), "log.initial.task.delay.ms": NO_JOBS}
    )


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def _log_dir(path: Path, records: int = 5) -> Path:
    """A log dir holding partition ``t-0`` with ``records`` records, shut down cleanly."""
    with LogManager(_broker(path)) as manager:
        manager.get_or_create_log("t", 0).append_records([SimpleRecord(b"v%d" % i) for i in range(records)])
    assert CleanShutdownMarker.exists(path)
    return path


def _writing_commands(logdir: Path) -> dict[str, list[str]]:
    return {
        "append": ["append", str(logdir), "t-0"],
        "flush": ["flush", str(logdir)],
        "cleanup": ["cleanup", str(logdir), "--retention-bytes", "0"],
        "recover": ["recover", str(logdir)],
        "reindex": ["reindex", str(logdir / "t-0")],
        "checkpoints-set": ["checkpoints", "set", str(logdir / "recovery-point-offset-checkpoint"), "t-0", "1"],
    }


def test_second_log_manager_in_another_process_is_refused(tmp_path: Path, holders: list[Holder]) -> None:
    logdir = _log_dir(tmp_path / "logdir")
    holders.append(holder := Holder(logdir))
    assert is_locked_by_another_process(logdir)
    before = _tree(logdir)
    second = LogManager(_broker(logdir))
    with pytest.raises(LogDirLockedError, match="another process"):
        second.startup()
    assert _tree(logdir) == before, "the refused manager changed the dir"
    REPORT.add("second-manager")
    for name, args in _writing_commands(logdir).items():
        result = CliRunner().invoke(main, args, input='{"value": "x"}\n')
        assert result.exit_code == EXIT_LOCKED, (name, result.output)
        assert "another process" in result.output, name
        assert _tree(logdir) == before, f"{name} changed the locked dir"
        REPORT.add("cli-exit-3")
    # The holder keeps working while refused peers come and go (their probes and failed locks drop nothing).
    assert holder.ask("append 3") == "appended"
    holder.stop()
    with LogManager(_broker(logdir)) as manager:
        log = manager.get_log(TopicPartition("t", 0))
        assert log is not None and log.log_end_offset == 8


def test_stale_lock_of_a_killed_holder_does_not_block(tmp_path: Path, holders: list[Holder]) -> None:
    logdir = _log_dir(tmp_path / "logdir")
    holders.append(holder := Holder(logdir))
    assert holder.ask("append 4") == "appended"
    assert not CleanShutdownMarker.exists(logdir), "a running manager has removed the marker"
    holder.kill()
    assert (logdir / LOCK_FILE_NAME).exists(), "the .lock file stays behind"
    assert not is_locked_by_another_process(logdir)
    with LogManager(_broker(logdir)) as manager:
        log = manager.get_log(TopicPartition("t", 0))
        assert log is not None and log.log_end_offset == 9, "the killed holder's flushed records survive"
    assert CleanShutdownMarker.exists(logdir)
    REPORT.add("stale-lock")
    result = CliRunner().invoke(main, ["flush", str(logdir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["partitions"][0]["notes"] == ["recovery point 9 -> 9 (log end offset 9)"]
    REPORT.add("stale-lock")


def test_second_dir_locked_elsewhere_leaves_the_first_untouched(tmp_path: Path, holders: list[Holder]) -> None:
    first = _log_dir(tmp_path / "first")
    second = _log_dir(tmp_path / "second")
    # An unclean first dir too: startup would remove a marker and rewrite checkpoints while recovering.
    unclean = tmp_path / "unclean"
    _log_dir(unclean)
    CleanShutdownMarker.remove(unclean)
    holders.append(holder := Holder(second))
    for dirs in ((first, second), (unclean, second)):
        before = _tree(dirs[0])
        manager = LogManager(_broker(*dirs))
        with pytest.raises(LogDirLockedError):
            manager.startup()
        assert _tree(dirs[0]) == before, f"{dirs[0].name}: touched although the start failed"
        assert manager.all_logs() == []
        # Its lock was released: this process can take it again at once.
        LogDirLock(dirs[0]).release()
        REPORT.add("multi-dir")
    assert CleanShutdownMarker.exists(first) and not CleanShutdownMarker.exists(unclean)
    holder.stop()
    with LogManager(_broker(first, second)) as manager:
        assert len(manager.all_logs()) == 2
    REPORT.add("multi-dir")
