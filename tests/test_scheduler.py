"""Clock, the deterministic ManualScheduler, and a real APScheduler-backed ApsScheduler (short intervals)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

import pytest

from logmgr import scheduler as scheduler_module
from logmgr.clock import Clock, ManualClock, SystemClock
from logmgr.scheduler import ApsScheduler, JobStats, ManualScheduler, Scheduler
from tests.conftest import FAILURE_DEADLINE_S, ContendedLock, wait_until

LONG_MAX = 9_223_372_036_854_775_807


# ---------------------------------------------------------------------------------------------------- clock


def test_system_clock_is_a_clock_and_moves() -> None:
    clock = SystemClock()
    assert isinstance(clock, Clock)
    before = time.time_ns() // 1_000_000
    now = clock.time_ms()
    assert before <= now <= time.time_ns() // 1_000_000
    first = clock.monotonic_ms()
    wait_until(lambda: clock.monotonic_ms() > first, "the monotonic clock to move")


def test_manual_clock_advance_and_set() -> None:
    clock = ManualClock(1_000)
    assert isinstance(clock, Clock)
    assert (clock.time_ms(), clock.monotonic_ms()) == (1_000, 1_000)
    assert clock.advance(250) == 1_250
    assert (clock.time_ms(), clock.monotonic_ms()) == (1_250, 1_250)
    clock.set(500)  # a wall-clock step backwards leaves monotonic time alone
    assert (clock.time_ms(), clock.monotonic_ms()) == (500, 1_250)
    clock.advance(10)
    assert (clock.time_ms(), clock.monotonic_ms()) == (510, 1_260)
    clock.set(610)  # forward steps move both
    assert (clock.time_ms(), clock.monotonic_ms()) == (610, 1_360)
    with pytest.raises(ValueError, match="ms must be >= 0"):
        clock.advance(-1)
    clock._check()


def test_manual_clock_is_thread_safe() -> None:
    clock = ManualClock(0)

    def bump() -> None:
        for _ in range(2_000):
            clock.advance(1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.time_ms() == clock.monotonic_ms() == 8_000


def test_manual_clock_random_steps_keep_monotonic_view() -> None:
    rng = random.Random(7)
    clock = ManualClock(rng.randrange(10**12))
    last_mono = clock.monotonic_ms()
    for _ in range(1_000):
        if rng.random() < 0.5:
            clock.advance(rng.randrange(1_000))
        else:
            clock.set(rng.randrange(10**12))
        assert clock.monotonic_ms() >= last_mono
        last_mono = clock.monotonic_ms()
        clock._check()


# ---------------------------------------------------------------------------------------------------- ManualScheduler


def manual(start_ms: int = 0) -> tuple[ManualClock, ManualScheduler]:
    clock = ManualClock(start_ms)
    sched = ManualScheduler(clock)
    sched.startup()
    return clock, sched


def recorder(clock: ManualClock, into: list[int]) -> Callable[[], None]:
    return lambda: into.append(clock.monotonic_ms())


def test_manual_fixed_rate_runs_on_the_grid() -> None:
    clock, sched = manual(1_000)
    seen: list[int] = []
    sched.schedule("tick", recorder(clock, seen), delay_ms=100, period_ms=50)
    assert sched.advance(99) == 0
    assert seen == []
    assert sched.advance(1) == 1
    assert seen == [1_100]
    assert sched.advance(200) == 4
    assert seen == [1_100, 1_150, 1_200, 1_250, 1_300]
    assert clock.monotonic_ms() == 1_300
    assert sched.next_due_ms() == 1_350
    assert sched.jobs() == ["tick"]
    assert sched.job_stats("tick").runs == 5
    sched._check()


def test_manual_one_shot_and_non_positive_periods() -> None:
    clock, sched = manual()
    seen: dict[str, list[int]] = {"once": [], "zero": [], "negative": [], "long-max": []}
    sched.schedule_once("once", recorder(clock, seen["once"]), 10)
    sched.schedule("zero", recorder(clock, seen["zero"]), delay_ms=20, period_ms=0)
    sched.schedule("negative", recorder(clock, seen["negative"]), delay_ms=30, period_ms=-1)
    # Kafka's log.flush.scheduler.interval.ms default: in practice the job runs once.
    sched.schedule("long-max", recorder(clock, seen["long-max"]), delay_ms=40, period_ms=LONG_MAX)
    assert sched.advance(10_000) == 4
    assert seen == {"once": [10], "zero": [20], "negative": [30], "long-max": [40]}
    assert sched.jobs() == []
    assert sched.job_stats("once") == JobStats(1, 0, 10, 0, None)
    assert sched.next_due_ms() is None
    sched._check()


def test_manual_negative_delay_runs_at_once_and_huge_delay_never() -> None:
    clock, sched = manual(500)
    seen: list[int] = []
    sched.schedule_once("late", recorder(clock, seen), -100)
    sched.schedule_once("never", recorder(clock, seen), LONG_MAX)
    assert sched.advance(0) == 1
    assert seen == [500]
    assert sched.jobs() == ["never"]
    assert sched.advance(10**9) == 0


def test_manual_due_jobs_run_in_time_then_schedule_order() -> None:
    _, sched = manual()
    order: list[str] = []
    for name, delay in [("c", 20), ("a", 10), ("b", 10), ("d", 5)]:
        sched.schedule_once(name, lambda name=name: order.append(name), delay)  # type: ignore[misc]
    sched.advance(100)
    assert order == ["d", "a", "b", "c"]


def test_manual_coalesces_runs_missed_by_an_external_clock_jump() -> None:
    clock, sched = manual()
    seen: list[int] = []
    sched.schedule("tick", recorder(clock, seen), delay_ms=0, period_ms=100)
    sched.advance(0)
    assert seen == [0]
    clock.advance(1_050)  # ten runs missed behind the scheduler's back
    assert sched.advance(0) == 1
    assert seen == [0, 1_050]
    assert sched.next_due_ms() == 1_100  # the grid is kept
    sched.advance(100)
    assert seen == [0, 1_050, 1_100]


def test_manual_coalesces_runs_missed_by_a_slow_job() -> None:
    clock, sched = manual()
    seen: list[int] = []

    def slow() -> None:
        seen.append(clock.monotonic_ms())
        clock.advance(120)  # takes 2.4 periods

    sched.schedule("slow", slow, delay_ms=0, period_ms=50)
    sched.advance(400)
    # Runs start at 0, 150, 300: each time the first grid point after the previous run ended.
    assert seen == [0, 150, 300]
    assert sched.next_due_ms() == 450
    assert clock.monotonic_ms() == 420


def test_manual_exception_is_logged_recorded_and_job_keeps_running(caplog: pytest.LogCaptureFixture) -> None:
    clock, sched = manual()
    calls: list[int] = []

    def flaky() -> None:
        calls.append(clock.monotonic_ms())
        if len(calls) % 2 == 1:
            raise OSError(f"disk hiccup {len(calls)}")

    sched.schedule("flaky", flaky, delay_ms=10, period_ms=10)
    with caplog.at_level(logging.ERROR, logger="logmgr.scheduler"):
        assert sched.advance(40) == 4
    assert calls == [10, 20, 30, 40]
    stats = sched.job_stats("flaky")
    assert (stats.runs, stats.failures, stats.last_error) == (4, 2, "OSError: disk hiccup 3")
    errors = [r for r in caplog.records if r.name == "logmgr.scheduler" and r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert "'flaky'" in errors[0].getMessage()
    assert errors[0].exc_info is not None
    assert sched.jobs() == ["flaky"]


def test_manual_run_job_now_runs_synchronously_and_keeps_the_schedule() -> None:
    clock, sched = manual()
    seen: list[int] = []
    sched.schedule("tick", recorder(clock, seen), delay_ms=100, period_ms=100)
    sched.run_job_now("tick")
    assert seen == [0]
    assert sched.job_stats("tick").runs == 1
    sched.advance(200)
    assert seen == [0, 100, 200]
    with pytest.raises(KeyError):
        sched.run_job_now("missing")


def test_manual_run_job_now_propagates_and_records_the_error(caplog: pytest.LogCaptureFixture) -> None:
    _, sched = manual()

    def boom() -> None:
        raise ValueError("no")

    sched.schedule("boom", boom, delay_ms=1_000, period_ms=1_000)
    with caplog.at_level(logging.ERROR, logger="logmgr.scheduler"), pytest.raises(ValueError, match="no"):
        sched.run_job_now("boom")
    assert sched.job_stats("boom").failures == 1
    assert sched.job_stats("boom").last_error == "ValueError: no"
    assert not [r for r in caplog.records if r.name == "logmgr.scheduler"]  # the caller got it instead


def test_manual_run_job_now_never_overlaps_a_scheduled_run() -> None:
    _, sched = manual()
    inside = threading.Event()
    release = threading.Event()
    concurrent = 0
    max_concurrent = 0
    guard = threading.Lock()

    def job() -> None:
        nonlocal concurrent, max_concurrent
        with guard:
            concurrent += 1
            max_concurrent = max(max_concurrent, concurrent)
        if not inside.is_set():
            inside.set()
            assert release.wait(FAILURE_DEADLINE_S)
        with guard:
            concurrent -= 1

    sched.schedule("job", job, delay_ms=10, period_ms=10)
    run_lock = sched._jobs["job"].run_lock = ContendedLock(sched._jobs["job"].run_lock)
    advancer = threading.Thread(target=sched.advance, args=(10,))
    advancer.start()
    assert inside.wait(FAILURE_DEADLINE_S)
    on_demand = threading.Thread(target=sched.run_job_now, args=("job",))
    on_demand.start()
    wait_until(lambda: run_lock.contended.is_set() or not on_demand.is_alive(), "the on-demand run to wait or end")
    assert on_demand.is_alive()  # waiting for the scheduled run to finish
    assert sched.job_stats("job").runs == 0
    release.set()
    advancer.join(FAILURE_DEADLINE_S)
    on_demand.join(FAILURE_DEADLINE_S)
    assert max_concurrent == 1
    assert sched.job_stats("job").runs == 2
    sched._check()


def test_manual_jobs_scheduled_by_jobs_run_within_the_same_advance() -> None:
    clock, sched = manual()
    seen: list[tuple[str, int]] = []

    def delete_logs() -> None:
        # Kafka's kafka-delete-logs: a one-shot that reschedules itself.
        seen.append(("delete", clock.monotonic_ms()))
        rounds = sum(1 for kind, _ in seen if kind == "delete")
        if rounds < 3:
            sched.schedule_once("delete", delete_logs, 25)
        sched.schedule_once(f"delete-file-{rounds}", lambda: seen.append(("file", clock.monotonic_ms())), 5)

    sched.schedule_once("delete", delete_logs, 0)
    sched.advance(1_000)
    assert seen == [("delete", 0), ("file", 5), ("delete", 25), ("file", 30), ("delete", 50), ("file", 55)]
    assert sched.job_stats("delete").runs == 3
    assert sched.jobs() == []
    sched._check()


def test_manual_reschedule_replaces_and_keeps_stats_unschedule_drops() -> None:
    _, sched = manual()
    seen: list[str] = []
    sched.schedule("job", lambda: seen.append("old"), delay_ms=10, period_ms=10)
    sched.advance(10)
    sched.schedule("job", lambda: seen.append("new"), delay_ms=5, period_ms=100)
    sched.advance(105)  # runs at 15 and 115
    assert seen == ["old", "new", "new"]
    assert sched.job_stats("job").runs == 3
    assert sched.unschedule("job")
    assert not sched.unschedule("job")
    assert not sched.unschedule("never-scheduled")
    sched.advance(1_000)
    assert seen == ["old", "new", "new"]
    assert sched.jobs() == []
    assert sched.job_stats("job").runs == 3  # kept for inspection
    sched.run_job_now("job")  # still runnable on demand
    assert seen[-1] == "new"
    sched._check()


def test_manual_a_job_may_unschedule_itself() -> None:
    clock, sched = manual()
    seen: list[int] = []

    def job() -> None:
        seen.append(clock.monotonic_ms())
        if len(seen) == 2:
            sched.unschedule("job")

    sched.schedule("job", job, delay_ms=0, period_ms=10)
    sched.advance(100)
    assert seen == [0, 10]


def test_manual_before_startup_time_moves_but_nothing_runs() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    seen: list[int] = []
    sched.schedule("tick", recorder(clock, seen), delay_ms=10, period_ms=10)
    assert sched.advance(55) == 0
    assert clock.monotonic_ms() == 55
    sched.startup()
    assert sched.advance(0) == 1  # the missed runs, coalesced
    assert seen == [55]
    sched.advance(5)
    assert seen == [55, 60]
    with pytest.raises(RuntimeError, match="started only once"):
        sched.startup()


def test_manual_shutdown_stops_and_later_schedules_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    clock, sched = manual()
    seen: list[int] = []
    sched.schedule("tick", recorder(clock, seen), delay_ms=10, period_ms=10)
    sched.advance(20)
    sched.shutdown()
    sched.shutdown()  # idempotent
    assert sched.jobs() == []
    with caplog.at_level(logging.INFO, logger="logmgr.scheduler"):
        sched.schedule("late", recorder(clock, seen), delay_ms=0, period_ms=10)
    assert "not scheduled" in caplog.text
    assert sched.advance(100) == 0
    assert seen == [10, 20]
    with pytest.raises(RuntimeError, match="started only once"):
        sched.startup()
    sched._check()


def test_manual_shutdown_waits_for_a_run_in_progress() -> None:
    _, sched = manual()
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def job() -> None:
        inside.set()
        assert release.wait(FAILURE_DEADLINE_S)
        done.set()

    sched.schedule_once("job", job, 0)
    advancer = threading.Thread(target=sched.advance, args=(0,))
    advancer.start()
    assert inside.wait(FAILURE_DEADLINE_S)
    stopper = threading.Thread(target=sched.shutdown, kwargs={"wait": True})
    stopper.start()
    # The job ends only once shutdown is blocked waiting for it (or has returned without waiting: the bug).
    wait_until(lambda: sched.shutdown_waiting.is_set() or not stopper.is_alive(), "shutdown to wait or return")
    assert stopper.is_alive() and not done.is_set()
    release.set()
    stopper.join(FAILURE_DEADLINE_S)
    assert done.is_set()
    advancer.join(FAILURE_DEADLINE_S)


def test_manual_advance_from_a_job_is_refused() -> None:
    _, sched = manual()
    errors: list[BaseException] = []

    def job() -> None:
        try:
            sched.advance(1)
        except RuntimeError as e:
            errors.append(e)

    sched.schedule_once("job", job, 0)
    sched.advance(0)
    assert len(errors) == 1
    with pytest.raises(ValueError, match=">= 0"):
        sched.advance(-1)


def test_manual_idle_jobs_are_pruned_beyond_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "_MAX_IDLE_JOBS", 8)
    _, sched = manual()
    for i in range(20):
        sched.schedule_once(f"delete-file-{i}", lambda: None, i)
    sched.advance(100)
    with pytest.raises(KeyError):
        sched.job_stats("delete-file-0")
    for i in range(12, 20):
        assert sched.job_stats(f"delete-file-{i}").runs == 1
    sched._check()


def test_manual_random_operations_match_a_model() -> None:
    """Seeded stress: random schedule/unschedule/advance/run_job_now against a model of the ideal runs."""
    rng = random.Random(20240607)
    clock, sched = manual(rng.randrange(10**6))
    names = [f"job{i}" for i in range(6)]
    actual: dict[str, list[int]] = {name: [] for name in names}
    expected: dict[str, list[int]] = {name: [] for name in names}
    # name -> (next_due, period or None): the model's pending runs; jobs take no time, so nothing coalesces.
    model: dict[str, tuple[int, int | None]] = {}
    last_time = clock.monotonic_ms()
    timeline: list[int] = []

    def make(name: str) -> Callable[[], None]:
        def run() -> None:
            actual[name].append(clock.monotonic_ms())
            timeline.append(clock.monotonic_ms())

        return run

    for _ in range(600):
        op = rng.random()
        name = rng.choice(names)
        now = clock.monotonic_ms()
        if op < 0.35:
            delay = rng.randrange(0, 200)
            period = rng.choice([0, -5, rng.randrange(1, 120)])
            sched.schedule(name, make(name), delay_ms=delay, period_ms=period)
            model[name] = (now + delay, period if period > 0 else None)
        elif op < 0.45:
            assert sched.unschedule(name) == (name in model)
            model.pop(name, None)
        elif op < 0.55 and actual[name]:
            sched.run_job_now(name)
            expected[name].append(now)
        else:
            target = now + rng.randrange(0, 300)
            for job_name, (due, job_period) in list(model.items()):
                if job_period is None:
                    if due <= target:
                        expected[job_name].append(due)
                        del model[job_name]
                    continue
                while due <= target:
                    expected[job_name].append(due)
                    due += job_period
                model[job_name] = (due, job_period)
            timeline.clear()
            sched.advance(target - now)
            assert timeline == sorted(timeline)
            assert clock.monotonic_ms() == target
        assert clock.monotonic_ms() >= last_time
        last_time = clock.monotonic_ms()
        assert actual == expected
        assert sched.jobs() == sorted(model)
        sched._check()


# ---------------------------------------------------------------------------------------------------- both


@pytest.mark.parametrize("kind", ["manual", "aps"])
def test_both_implementations_satisfy_the_interface(kind: str) -> None:
    sched: Scheduler = ManualScheduler(ManualClock(0)) if kind == "manual" else ApsScheduler(max_workers=2)
    assert isinstance(sched, Scheduler)
    sched.startup()
    sched.schedule("x", lambda: None, delay_ms=60_000, period_ms=60_000)
    sched.run_job_now("x")
    assert sched.jobs() == ["x"]
    assert sched.job_stats("x").runs == 1
    sched.shutdown(wait=True)
    assert sched.jobs() == []


# ---------------------------------------------------------------------------------------------------- real APScheduler


def _pool_shutdown_signal(sched: ApsScheduler, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set when APScheduler's own shutdown, holding its job-store lock, starts waiting for the jobs
    running in its pool: the moment a run in progress sees shutdown wait for it."""
    started = threading.Event()
    executor = sched._aps._executors["default"]
    shutdown = executor.shutdown

    def signalling_shutdown(wait: bool = True) -> None:
        started.set()
        shutdown(wait)

    monkeypatch.setattr(executor, "shutdown", signalling_shutdown)
    return started


def _stopped_for_good(sched: ApsScheduler) -> bool:
    """Nothing can run any more: no schedule is left, APScheduler is stopped and holds no job."""
    return sched.jobs() == [] and not sched._aps.running and sched._aps.get_jobs() == []


def test_aps_jobs_run_never_overlap_log_errors_and_stop_at_shutdown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(42_000)  # stats come from the injected clock, scheduling from APScheduler's wall time
    sched = ApsScheduler(clock=clock, max_workers=4)
    pool_shutdown = _pool_shutdown_signal(sched, monkeypatch)
    guard = threading.Lock()
    concurrent = 0
    max_concurrent = 0
    # The first run of "slow" lasts until a second run of it is waiting for it (the run lock refuses the overlap);
    # once `held` is set, the next run lasts until shutdown waits for it.
    overlap, held, held_in_progress = threading.Event(), threading.Event(), threading.Event()
    overlap.set()
    counts = {"fast": 0, "slow": 0, "bad": 0}

    def fast() -> None:
        with guard:
            counts["fast"] += 1

    def slow() -> None:
        nonlocal concurrent, max_concurrent
        with guard:
            concurrent += 1
            max_concurrent = max(max_concurrent, concurrent)
        if overlap.is_set():
            overlap.clear()
            wait_until(run_lock.contended.is_set, "a second run of 'slow' to wait for the first")
        elif held.is_set():
            held_in_progress.set()
            wait_until(pool_shutdown.is_set, "shutdown to wait for the run in progress")
        with guard:
            concurrent -= 1
            counts["slow"] += 1

    def bad() -> None:
        with guard:
            counts["bad"] += 1
        raise RuntimeError("job failure")

    with caplog.at_level(logging.ERROR, logger="logmgr.scheduler"):
        sched.schedule("fast", fast, delay_ms=0, period_ms=50)
        sched.schedule("slow", slow, delay_ms=0, period_ms=50)
        run_lock = sched._jobs["slow"].run_lock = ContendedLock(sched._jobs["slow"].run_lock)
        sched.schedule("bad", bad, delay_ms=10, period_ms=50)
        # Started only now: a run of "slow" started before the lock above was in place would use the bare lock
        # (and find `run_lock` unbound) whenever the machine is slow enough for APScheduler to get there first.
        sched.startup()
        sched.run_job_now("slow")  # on demand, racing the scheduled runs
        assert run_lock.contended.is_set() and not overlap.is_set()
        wait_until(
            lambda: counts["fast"] >= 5 and counts["slow"] >= 3 and counts["bad"] >= 3, f"more runs than {counts}"
        )
        sched.run_job_now("slow")
        held.set()
        wait_until(held_in_progress.is_set, "a scheduled run of 'slow' to start")
        sched.shutdown(wait=True)
        # shutdown waited for the slow run that was in progress
        assert concurrent == 0
    assert _stopped_for_good(sched)
    assert max_concurrent == 1
    bad_stats = sched.job_stats("bad")
    assert bad_stats.failures == bad_stats.runs == counts["bad"]
    assert bad_stats.last_error == "RuntimeError: job failure"
    assert bad_stats.last_start_ms == 42_000
    failures = [r for r in caplog.records if r.name == "logmgr.scheduler" and "'bad'" in r.getMessage()]
    assert len(failures) == counts["bad"]
    assert sched.job_stats("slow").runs == counts["slow"]
    sched._check()


def test_aps_one_shots_self_rescheduling_and_long_max_period() -> None:
    sched = ApsScheduler(max_workers=2)
    sched.startup()
    runs: list[str] = []

    def delete_logs() -> None:
        runs.append("delete")
        if runs.count("delete") < 3:
            sched.schedule_once("delete", delete_logs, 10)  # replaces itself while running

    sched.schedule_once("delete", delete_logs, 0)
    sched.schedule("flusher", lambda: runs.append("flush"), delay_ms=0, period_ms=LONG_MAX)
    # Both are one-shots: once each has run, nothing is scheduled, so no later run can come.
    wait_until(
        lambda: sched.jobs() == [] and sched.job_stats("delete").runs == 3 and sched.job_stats("flusher").runs == 1,
        "three deletes and one flush",
    )
    assert runs.count("delete") == 3
    assert runs.count("flush") == 1
    sched.shutdown()
    sched._check()


def test_aps_a_job_scheduling_during_shutdown_does_not_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    sched = ApsScheduler(max_workers=2)
    pool_shutdown = _pool_shutdown_signal(sched, monkeypatch)
    sched.startup()
    inside = threading.Event()

    def job() -> None:
        inside.set()
        # Arrives exactly while APScheduler's shutdown holds its job-store lock and waits for this run.
        wait_until(pool_shutdown.is_set, "shutdown to wait for the run")
        sched.schedule_once("follow-up", lambda: None, 0)

    sched.schedule_once("job", job, 0)
    assert inside.wait(FAILURE_DEADLINE_S)
    stopper = threading.Thread(target=sched.shutdown, kwargs={"wait": True}, daemon=True)
    stopper.start()
    stopper.join(FAILURE_DEADLINE_S)
    assert not stopper.is_alive(), "shutdown deadlocked with a job scheduling another"
    assert sched.jobs() == []
    assert sched.job_stats("job").runs == 1


def test_aps_rejects_a_bad_pool_size() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        ApsScheduler(max_workers=0)
