"""The log's writer lock (``segments._native.append.WriterLock``): threading.RLock's contract, its handoff to
queued threads, timeouts and signals, and mutual exclusion under a seeded random stress."""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Iterator

import pytest

from segments._native.append import WriterLock
from tests.conftest import FAILURE_DEADLINE_S, wait_until


class _Holder:
    """A thread that takes the lock, holds it until told, then releases it."""

    def __init__(self, lock: WriterLock) -> None:
        self.taken = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(lock,))
        self.thread.start()
        self.taken.wait()

    def _run(self, lock: WriterLock) -> None:
        with lock:
            self.taken.set()
            self.release.wait()

    def finish(self) -> None:
        self.release.set()
        self.thread.join()


@pytest.fixture
def held() -> Iterator[tuple[WriterLock, _Holder]]:
    lock = WriterLock()
    holder = _Holder(lock)
    yield lock, holder
    holder.finish()


def test_it_is_re_entrant_and_released_as_often_as_taken() -> None:
    lock = WriterLock()
    assert lock.acquire() and lock.acquire(timeout=1) and lock._is_owned()
    with lock:
        assert "held 3 deep" in repr(lock)
    lock.release()
    lock.release()
    assert not lock._is_owned() and "free" in repr(lock)
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()


def test_other_threads_are_refused_while_it_is_held(held: tuple[WriterLock, _Holder]) -> None:
    lock, _ = held
    assert not lock._is_owned()
    assert lock.acquire(False) is False
    assert lock.acquire(timeout=0.001) is False
    assert lock.queued == 0
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()  # not the owner


def test_arguments_are_checked_as_threading_checks_them() -> None:
    lock = WriterLock()
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(False, 1)
    with pytest.raises(ValueError, match="non-negative"):
        lock.acquire(timeout=-2)
    with pytest.raises(OverflowError):
        lock.acquire(timeout=1e13)


def test_a_release_hands_the_lock_to_a_queued_thread(held: tuple[WriterLock, _Holder]) -> None:
    lock, holder = held
    got: list[bool] = []

    def wait_for_it() -> None:
        got.append(lock.acquire() and lock._is_owned())
        lock.release()

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    wait_until(lambda: lock.queued == 1, "the waiter to queue")
    assert lock.acquire(False) is False  # the waiter is first
    holder.finish()
    waiter.join()
    assert got == [True]
    assert lock.queued == 0 and lock.acquire(False)
    lock.release()


class _Interrupted(Exception):
    pass


def test_a_signal_whose_handler_raises_ends_the_wait(held: tuple[WriterLock, _Holder]) -> None:
    lock, holder = held
    calls: list[int] = []

    def handler(signum: int, frame: object) -> None:
        calls.append(signum)
        if len(calls) == 2:
            raise _Interrupted

    previous = signal.signal(signal.SIGUSR1, handler)
    main = threading.get_ident()

    def interrupt_twice() -> None:
        for handled in (0, 1):
            wait_until(lambda: lock.queued == 1 and len(calls) == handled, "the main thread to wait")  # noqa: B023
            signal.pthread_kill(main, signal.SIGUSR1)

    sender = threading.Thread(target=interrupt_twice)
    sender.start()
    try:
        with pytest.raises(_Interrupted):
            lock.acquire(timeout=FAILURE_DEADLINE_S)  # the first handler returns: the wait goes on; the second raises
    finally:
        sender.join()
        signal.signal(signal.SIGUSR1, previous)
    assert calls == [signal.SIGUSR1, signal.SIGUSR1]
    assert lock.queued == 0 and not lock._is_owned()
    holder.finish()
    assert lock.acquire(False)
    lock.release()


def test_mutual_exclusion_under_a_seeded_random_stress() -> None:
    # Threads take the lock blocking, with short timeouts and non-blocking, nest it, and do a read-modify-write
    # of a shared counter inside: every counted step happens under the lock, and the lock ends free.
    lock = WriterLock()
    counter = [0]
    counted = [0] * 4
    inside = [0]

    def worker(number: int) -> None:
        rng = random.Random(number)
        for _ in range(3000):
            mode = rng.randrange(3)
            taken = lock.acquire() if mode == 0 else lock.acquire(timeout=rng.random() / 1e4) if mode == 1 else (
                lock.acquire(False))
            if not taken:
                continue
            inside[0] += 1
            assert inside[0] == 1
            depth = rng.randrange(3)
            for _ in range(depth):
                assert lock.acquire(False)
            value = counter[0]
            if rng.random() < 0.05:
                os.sched_yield()
            counter[0] = value + 1
            counted[number] += 1
            for _ in range(depth):
                lock.release()
            inside[0] -= 1
            lock.release()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter[0] == sum(counted) > 0
    assert lock.queued == 0 and lock.acquire(False)
    lock.release()
