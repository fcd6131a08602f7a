"""LogDirLock: exclusive POSIX record lock on <log_dir>/.lock, seen across processes (and by a JVM)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from logmgr.dir_lock import LOCK_FILE_NAME, LogDirLock, is_locked_by_another_process
from logmgr.errors import LogDirLockedError, LogmgrError
from tests.conftest import FAILURE_DEADLINE_S, child_env

# A second process that takes orders on stdin, so the kernel's view is checked from outside this process.
_PEER_SOURCE = textwrap.dedent(
    """
    import sys
    from logmgr.dir_lock import LogDirLock, is_locked_by_another_process
    from logmgr.errors import LogDirLockedError
    held = {}
    for line in sys.stdin:
        op, path = line.split(" ", 1)
        path = path.rstrip("\\n")
        if op == "probe":
            print(is_locked_by_another_process(path), flush=True)
        elif op == "lock":
            try:
                held[path] = LogDirLock(path)
                print("ok", flush=True)
            except LogDirLockedError as e:
                print("locked: " + str(e), flush=True)
        elif op == "release":
            held.pop(path).release()
            print("released", flush=True)
    """
)


class Peer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PEER_SOURCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env()
        )

    def ask(self, op: str, path: Path) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {path}\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(FAILURE_DEADLINE_S) == 0


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    yield p
    p.close()


def test_lock_creates_an_empty_lock_file_and_leaves_it_on_release(tmp_path: Path) -> None:
    lock = LogDirLock(tmp_path)
    assert lock.locked
    assert lock.log_dir == str(tmp_path)
    assert lock.lock_path == str(tmp_path / LOCK_FILE_NAME)
    assert (tmp_path / ".lock").read_bytes() == b""
    lock._check()
    lock.release()
    lock.release()  # idempotent
    assert not lock.locked
    assert (tmp_path / ".lock").exists()
    assert "locked=False" in repr(lock)
    lock._check()


def test_another_process_cannot_lock_while_held_and_can_after_release(tmp_path: Path, peer: Peer) -> None:
    with LogDirLock(tmp_path) as lock:
        assert lock.locked
        answer = peer.ask("lock", tmp_path)
        assert answer.startswith("locked: another process (a Kafka broker or logmgr")
        assert f"pid {os.getpid()}" in answer
        assert str(tmp_path) in answer
        assert peer.ask("probe", tmp_path) == "True"
    assert not lock.locked
    assert peer.ask("probe", tmp_path) == "False"
    assert peer.ask("lock", tmp_path) == "ok"
    # ...and now this process is the one refused
    assert is_locked_by_another_process(tmp_path)
    with pytest.raises(LogDirLockedError, match="another process") as info:
        LogDirLock(tmp_path)
    assert isinstance(info.value, LogmgrError)
    assert peer.ask("release", tmp_path) == "released"
    LogDirLock(tmp_path).release()


def test_the_same_process_cannot_lock_twice_even_through_an_alias(tmp_path: Path, peer: Peer) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(log_dir)
    lock = LogDirLock(log_dir)
    for path in (log_dir, alias, Path(str(log_dir) + "/")):
        with pytest.raises(LogDirLockedError, match="this process already holds the lock"):
            LogDirLock(path)
    # The refused attempts must not have dropped the real lock (closing any fd of .lock would).
    assert peer.ask("lock", log_dir).startswith("locked: ")
    lock.release()
    assert peer.ask("lock", alias) == "ok"
    assert peer.ask("release", alias) == "released"


def test_probe_of_a_dir_this_process_holds_keeps_the_lock(tmp_path: Path, peer: Peer) -> None:
    lock = LogDirLock(tmp_path)
    for _ in range(3):
        assert not is_locked_by_another_process(tmp_path)
    assert peer.ask("probe", tmp_path) == "True"
    lock.release()


def test_probe_without_a_lock_file_or_holder(tmp_path: Path) -> None:
    assert not is_locked_by_another_process(tmp_path)
    assert not (tmp_path / ".lock").exists()  # the probe creates nothing
    (tmp_path / ".lock").write_bytes(b"")
    assert not is_locked_by_another_process(tmp_path)


def test_a_stale_lock_file_does_not_block(tmp_path: Path) -> None:
    # A process takes the lock and dies without releasing it (os._exit skips every cleanup).
    code = f"import os; from logmgr.dir_lock import LogDirLock; LogDirLock({str(tmp_path)!r}); os._exit(0)"
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env())
    assert (tmp_path / ".lock").exists()
    assert not is_locked_by_another_process(tmp_path)
    (tmp_path / ".lock").write_bytes(b"left over by someone")
    with LogDirLock(tmp_path):
        pass
    assert (tmp_path / ".lock").read_bytes() == b"left over by someone"


def test_missing_dir_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LogDirLock(tmp_path / "absent")


def test_garbage_collected_lock_is_released(tmp_path: Path, peer: Peer) -> None:
    lock = LogDirLock(tmp_path)
    assert peer.ask("probe", tmp_path) == "True"
    del lock
    gc.collect()
    assert peer.ask("probe", tmp_path) == "False"
    LogDirLock(tmp_path).release()


def _child_tries(path: str, queue: multiprocessing.Queue[str]) -> None:
    try:
        LogDirLock(path)
        queue.put("ok")
    except LogDirLockedError as e:
        queue.put(str(e))


def test_a_forked_child_is_refused_by_the_kernel_not_by_an_inherited_registry(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[str] = ctx.Queue()
    with LogDirLock(tmp_path):
        child = ctx.Process(target=_child_tries, args=(str(tmp_path), queue))
        child.start()
        answer = queue.get(timeout=FAILURE_DEADLINE_S)
        child.join(FAILURE_DEADLINE_S)
    assert answer.startswith("another process")
    child = ctx.Process(target=_child_tries, args=(str(tmp_path), queue))
    child.start()
    assert queue.get(timeout=FAILURE_DEADLINE_S) == "ok"
    child.join(FAILURE_DEADLINE_S)


def test_threads_racing_for_one_dir_exactly_one_wins(tmp_path: Path) -> None:
    winners: list[LogDirLock] = []
    losers: list[LogDirLockedError] = []
    barrier = threading.Barrier(8)
    guard = threading.Lock()

    def attempt() -> None:
        barrier.wait()
        try:
            lock = LogDirLock(tmp_path)
            with guard:
                winners.append(lock)
        except LogDirLockedError as e:
            with guard:
                losers.append(e)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(winners), len(losers)) == (1, 7)
    assert is_locked_by_another_process(tmp_path) is False
    winners[0].release()


def test_random_lock_release_probe_sequence_matches_the_kernel(tmp_path: Path, peer: Peer) -> None:
    """Seeded stress: random operations from this process; after each, a peer process checks the kernel's view."""
    rng = random.Random(1234)
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    held: dict[Path, LogDirLock] = {}
    for _ in range(150):
        d = rng.choice(dirs)
        op = rng.random()
        if op < 0.4:
            if d in held:
                with pytest.raises(LogDirLockedError):
                    LogDirLock(d)
            else:
                held[d] = LogDirLock(d)
        elif op < 0.7:
            if d in held:
                held.pop(d).release()
        else:
            assert not is_locked_by_another_process(d)
        for lock in held.values():
            lock._check()
        for probe_dir in dirs:
            assert peer.ask("probe", probe_dir) == str(probe_dir in held), probe_dir
    for lock in held.values():
        lock.release()


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH for the JVM interoperability test")
def test_a_jvm_file_channel_try_lock_and_ours_exclude_each_other(tmp_path: Path) -> None:
    """Kafka's broker locks with FileChannel.tryLock(); run the same call in a JVM (single-file launcher)."""
    source = tmp_path / "TryLock.java"
    source.write_text(
        textwrap.dedent(
            """
            import java.io.*;
            import java.nio.channels.*;
            import java.nio.file.*;
            public class TryLock {
                public static void main(String[] args) throws Exception {
                    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                    FileChannel channel = FileChannel.open(Paths.get(args[0]),
                        StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
                    FileLock lock = channel.tryLock();
                    System.out.println(lock == null ? "busy" : "locked");
                    in.readLine();
                    lock.release();
                    System.out.println("released");
                    in.readLine();
                    System.out.println(channel.tryLock() == null ? "busy" : "locked");
                }
            }
            """
        )
    )
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    jvm = subprocess.Popen(
        ["java", str(source), str(log_dir / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert jvm.stdin is not None and jvm.stdout is not None
    try:
        assert jvm.stdout.readline().strip() == "locked"
        assert is_locked_by_another_process(log_dir)
        with pytest.raises(LogDirLockedError, match="another process"):
            LogDirLock(log_dir)
        jvm.stdin.write("\n")
        jvm.stdin.flush()
        assert jvm.stdout.readline().strip() == "released"
        with LogDirLock(log_dir):
            jvm.stdin.write("\n")
            jvm.stdin.flush()
            assert jvm.stdout.readline().strip() == "busy"
        assert jvm.wait(FAILURE_DEADLINE_S) == 0
    finally:
        if jvm.poll() is None:
            jvm.kill()
            jvm.wait()
