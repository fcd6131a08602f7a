"""Named background jobs for the engine, mirroring Kafka's ``KafkaScheduler``.

A job is scheduled by name with an initial delay and a period: a period > 0 makes it fixed-rate (runs at
``start + k * period``), a period <= 0 makes it one-shot, as in Kafka (format doc §7). A period too long to ever
come round (Kafka's ``Long.MAX_VALUE`` for ``log.flush.scheduler.interval.ms``) runs the job once.

Guarantees shared by both implementations:

- One name, one job: scheduling an existing name replaces its schedule (pending runs of the old schedule are
  dropped; a run already executing completes) and keeps its statistics. A job may reschedule itself, which is
  how Kafka's ``kafka-delete-logs`` works.
- Runs of one name never overlap, whether scheduled or on demand (``run_job_now``): each name has a lock that
  every execution holds. Scheduled runs missed while a run is in progress are coalesced into one.
- A job's exception is logged on the ``logmgr.scheduler`` logger and recorded in its :class:`JobStats`; the job
  stays on its schedule.
- ``shutdown(wait=True)`` stops new runs and waits for executions in progress, on-demand ones included.
- A job must not call ``shutdown(wait=True)`` or ``run_job_now`` on its own name (it would wait for itself).

:class:`ApsScheduler` runs jobs on APScheduler 3.x's ``BackgroundScheduler`` (wall time, a thread pool);
:class:`ManualScheduler` runs them in the caller's thread when a test advances a :class:`ManualClock`.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]
from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]
from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]
from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]
from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

from logmgr.clock import Clock, ManualClock, SystemClock

__all__ = ["DEFAULT_MAX_WORKERS", "ApsScheduler", "JobStats", "ManualScheduler", "Scheduler"]

logger = logging.getLogger("logmgr.scheduler")

# Delays and periods at or beyond ~100 years are "never": datetime arithmetic would overflow on Kafka's
# Long.MAX_VALUE, and no process lives that long, so such a period means "run once" and such a delay "never run".
_HORIZON_MS = 100 * 365 * 24 * 3600 * 1000

# Finished one-shots and unscheduled jobs keep their statistics for inspection, but only this many of them:
# the engine schedules one uniquely named one-shot per deleted segment, which would otherwise grow without bound.
_MAX_IDLE_JOBS = 1024

# Kafka's broker default for `background.threads`, the size of its scheduler pool.
DEFAULT_MAX_WORKERS = 10


@dataclass(frozen=True, slots=True)
class JobStats:
    """What a job has done so far; times come from the scheduler's clock.

    ``runs`` counts completed executions (successful or not, scheduled or on demand); ``failures`` those that
    raised. ``last_duration_ms`` is None while a run is in progress. ``last_error`` is
    ``"ExceptionType: message"`` of the latest failure, kept after later successes.
    """

    runs: int
    failures: int
    last_start_ms: int | None
    last_duration_ms: int | None
    last_error: str | None


class Scheduler(ABC):
    """The scheduling interface the engine uses (Kafka's ``Scheduler``)."""

    @abstractmethod
    def startup(self) -> None:
        """Start running jobs; jobs scheduled before start up keep their delays from when they were scheduled.

        Raises ``RuntimeError`` when called twice or after ``shutdown``. O(n) in the number of pending jobs.
        """

    @abstractmethod
    def schedule(self, name: str, func: Callable[[], object], *, delay_ms: int, period_ms: int) -> None:
        """Run ``func`` after ``delay_ms``, then every ``period_ms`` if it is > 0 (fixed rate), else once.

        Replaces an existing job of the same name. After ``shutdown`` the call is ignored (logged), as in Kafka.
        A negative delay counts as 0; a delay of ~100 years or more (e.g. ``Long.MAX_VALUE``) never comes.
        O(log n) in the number of jobs.
        """

    @abstractmethod
    def schedule_once(self, name: str, func: Callable[[], object], delay_ms: int) -> None:
        """Run ``func`` once after ``delay_ms``; same as ``schedule(..., period_ms=0)``. O(log n)."""

    @abstractmethod
    def run_job_now(self, name: str) -> None:
        """Run the job ``name`` now in the caller's thread, after any running instance of it has finished.

        Its schedule is unchanged. The outcome is recorded in its stats; an exception of the job propagates to the
        caller. Raises ``KeyError`` for an unknown name. O(1) plus the wait and the job.
        """

    @abstractmethod
    def unschedule(self, name: str) -> bool:
        """Drop the pending runs of ``name``; a run already executing completes. True if it was scheduled.

        O(log n).
        """

    @abstractmethod
    def shutdown(self, wait: bool = True) -> None:
        """Stop starting runs and drop every schedule; with ``wait``, return only once every execution in
        progress has finished. Idempotent. O(n) plus the wait.
        """

    @abstractmethod
    def job_stats(self, name: str) -> JobStats:
        """Statistics of ``name`` (scheduled, or finished/unscheduled recently). Raises ``KeyError`` if unknown.

        O(1).
        """

    @abstractmethod
    def jobs(self) -> list[str]:
        """Names of the jobs with runs still to come, sorted. O(n log n)."""


class _State(Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class _Job:
    """One name's bookkeeping; every field but ``run_lock`` is guarded by the scheduler's mutex."""

    __slots__ = (
        "active",
        "failures",
        "func",
        "generation",
        "handle",
        "last_duration_ms",
        "last_error",
        "last_start_ms",
        "name",
        "period_ms",
        "run_lock",
        "runs",
        "scheduled",
    )

    def __init__(self, name: str, func: Callable[[], object]) -> None:
        self.name = name
        self.func = func
        # Serialises executions of this name; held for the whole run, outside the scheduler's mutex.
        self.run_lock = threading.Lock()
        # Bumped by every schedule/unschedule, so runs armed by an older schedule recognise they are stale.
        self.generation = 0
        self.period_ms: int | None = None
        self.scheduled = False
        # Implementation-specific reference to the armed run (the APScheduler job id); None when not armed.
        self.handle: str | None = None
        # Executions in progress or waiting for run_lock.
        self.active = 0
        self.runs = 0
        self.failures = 0
        self.last_start_ms: int | None = None
        self.last_duration_ms: int | None = None
        self.last_error: str | None = None

    def stats(self) -> JobStats:
        return JobStats(self.runs, self.failures, self.last_start_ms, self.last_duration_ms, self.last_error)


class _JobBook(Scheduler):
    """The implementation-independent part: registry, per-job locks, statistics, state, waiting on shutdown.

    Subclasses arm runs (``_arm``/``_disarm``, called under the mutex) and start/stop their machinery.
    Lock order: a job's ``run_lock`` before the mutex; the mutex before any lock of the underlying scheduler.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._mutex = threading.Lock()
        self._idle_cond = threading.Condition(self._mutex)
        self._state = _State.NEW
        self._jobs: dict[str, _Job] = {}
        # Names not scheduled, least recently idle first, pruned beyond _MAX_IDLE_JOBS.
        self._idle: OrderedDict[str, None] = OrderedDict()
        self._active_runs = 0
        # Test hook: set when shutdown(wait=True) finds executions in progress and blocks until they finish, so a
        # test can release a job exactly while shutdown waits for it (no sleep). Set under the mutex, which the
        # running executions need to finish: they cannot end between the set and the wait.
        self.shutdown_waiting = threading.Event()

    @property
    def clock(self) -> Clock:
        """The clock timing statistics (and, for ManualScheduler, the schedule). O(1)."""
        return self._clock

    def startup(self) -> None:
        """Start running jobs. O(n) in the number of pending jobs."""
        with self._mutex:
            if self._state is not _State.NEW:
                raise RuntimeError(f"scheduler already {self._state.value}; it can be started only once")
            self._state = _State.RUNNING
            self._start()

    def schedule(self, name: str, func: Callable[[], object], *, delay_ms: int, period_ms: int) -> None:
        """Schedule ``func`` under ``name`` (see :meth:`Scheduler.schedule`). O(log n)."""
        logger.debug("scheduling job %r with initial delay %d ms and period %d ms", name, delay_ms, period_ms)
        with self._mutex:
            if self._state is _State.STOPPED:
                logger.info("scheduler is shut down; job %r is not scheduled", name)
                return
            job = self._jobs.get(name)
            if job is None:
                job = self._jobs[name] = _Job(name, func)
            else:
                self._disarm(job)
                job.func = func
            self._idle.pop(name, None)
            job.generation += 1
            job.scheduled = True
            job.period_ms = period_ms if 0 < period_ms < _HORIZON_MS else None
            if delay_ms < _HORIZON_MS:
                self._arm(job, max(delay_ms, 0))

    def schedule_once(self, name: str, func: Callable[[], object], delay_ms: int) -> None:
        """Schedule ``func`` to run once after ``delay_ms``. O(log n)."""
        self.schedule(name, func, delay_ms=delay_ms, period_ms=0)

    def run_job_now(self, name: str) -> None:
        """Run ``name`` now in this thread, never concurrently with another run of it. O(1) plus the job."""
        with self._mutex:
            job = self._jobs[name]
            self._enter(job)
        self._execute(job, None)

    def unschedule(self, name: str) -> bool:
        """Drop the pending runs of ``name``. O(log n)."""
        with self._mutex:
            job = self._jobs.get(name)
            if job is None or not job.scheduled:
                return False
            self._disarm(job)
            job.generation += 1
            self._make_idle(job)
            return True

    def shutdown(self, wait: bool = True) -> None:
        """Stop starting runs and, with ``wait``, wait for executions in progress. O(n) plus the wait."""
        with self._mutex:
            if self._state is _State.STOPPED:
                previously_running = False
            else:
                previously_running = self._state is _State.RUNNING
                self._state = _State.STOPPED
                for job in [job for job in self._jobs.values() if job.scheduled]:
                    job.generation += 1
                    self._make_idle(job)
        # Outside the mutex: running jobs need it to finish (stats, rescheduling), and the stop waits for them.
        if previously_running:
            self._stop(wait)
        if wait:
            with self._idle_cond:
                self._idle_cond.wait_for(self._idle_or_signal_waiting)

    def _idle_or_signal_waiting(self) -> bool:
        """Under the mutex: True when no execution is in progress, else set :attr:`shutdown_waiting`."""
        if self._active_runs == 0:
            return True
        self.shutdown_waiting.set()
        return False

    def job_stats(self, name: str) -> JobStats:
        """A snapshot of the statistics of ``name``. O(1)."""
        with self._mutex:
            return self._jobs[name].stats()

    def jobs(self) -> list[str]:
        """Names of the scheduled jobs, sorted. O(n log n)."""
        with self._mutex:
            return sorted(name for name, job in self._jobs.items() if job.scheduled)

    def _check(self) -> None:
        """Assert the registry's invariants. O(n)."""
        with self._mutex:
            self._check_locked()

    def _check_locked(self) -> None:
        assert self._active_runs == sum(job.active for job in self._jobs.values()), self._active_runs
        assert self._active_runs >= 0
        for name, job in self._jobs.items():
            assert job.name == name, (job.name, name)
            assert (name in self._idle) == (not job.scheduled), name
            assert 0 <= job.failures <= job.runs, (name, job.failures, job.runs)
            assert job.active >= 0, (name, job.active)
            assert job.handle is None or job.scheduled, name
            assert (job.last_start_ms is None) == (job.last_duration_ms is None) or job.active > 0, name
        assert set(self._idle) <= set(self._jobs)

    def _make_idle(self, job: _Job) -> None:
        """Under the mutex: the job has no runs to come; keep its stats among the bounded idle set."""
        job.scheduled = False
        job.handle = None
        self._idle[job.name] = None
        self._idle.move_to_end(job.name)
        excess = len(self._idle) - _MAX_IDLE_JOBS
        if excess <= 0:
            return
        for name in list(self._idle)[:excess]:
            if self._jobs[name].active == 0:
                del self._idle[name]
                del self._jobs[name]

    def _enter(self, job: _Job) -> None:
        """Under the mutex: count an execution about to wait for the job's run lock."""
        job.active += 1
        self._active_runs += 1

    def _execute(self, job: _Job, generation: int | None) -> bool:
        """Run ``job`` under its run lock; ``generation`` is None for on-demand runs, else the schedule's.

        The caller has called ``_enter``. A scheduled run is skipped (returns False) when its schedule was
        replaced or dropped, or the scheduler stopped, while it waited. On-demand runs re-raise the job's error.
        """
        try:
            with job.run_lock:
                with self._mutex:
                    if generation is not None:
                        if job.generation != generation or self._state is not _State.RUNNING:
                            return False
                        if job.period_ms is None:
                            self._make_idle(job)
                    func = job.func
                    start_ms = self._clock.time_ms()
                    job.last_start_ms = start_ms
                    job.last_duration_ms = None
                start_mono = self._clock.monotonic_ms()
                error: Exception | None = None
                try:
                    func()
                except Exception as e:
                    error = e
                    if generation is not None:
                        logger.exception("uncaught exception in scheduled job %r", job.name)
                finally:
                    with self._mutex:
                        job.last_duration_ms = self._clock.monotonic_ms() - start_mono
                        job.runs += 1
                        if error is not None:
                            job.failures += 1
                            job.last_error = f"{type(error).__name__}: {error}"
                if error is not None and generation is None:
                    raise error
                return True
        finally:
            with self._idle_cond:
                job.active -= 1
                self._active_runs -= 1
                self._idle_cond.notify_all()

    @abstractmethod
    def _start(self) -> None:
        """Under the mutex: begin running armed jobs."""

    @abstractmethod
    def _stop(self, wait: bool) -> None:
        """Not under the mutex: stop the machinery; with ``wait``, until its runs have finished."""

    @abstractmethod
    def _arm(self, job: _Job, delay_ms: int) -> None:
        """Under the mutex: arrange the first run of ``job.generation`` after ``delay_ms`` (>= 0)."""

    @abstractmethod
    def _disarm(self, job: _Job) -> None:
        """Under the mutex: forget the armed run of the current generation, if any."""


class ApsScheduler(_JobBook):
    """Jobs on APScheduler 3.x's ``BackgroundScheduler`` with a thread pool of ``max_workers``.

    Every job is added with ``max_instances=1``, ``coalesce=True`` and no misfire limit (a late run still runs).
    APScheduler times runs by the wall clock; ``clock`` only times the statistics.
    """

    def __init__(self, clock: Clock | None = None, max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        super().__init__(clock if clock is not None else SystemClock())
        self._aps = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
            timezone=UTC,
            daemon=True,
        )

    def _start(self) -> None:
        self._aps.start()

    def _stop(self, wait: bool) -> None:
        # No schedule() can reach APScheduler any more (state is STOPPED), which matters: its shutdown holds the
        # job-store lock while it waits for running jobs, so a job adding a job then would deadlock.
        # Removing the jobs first (under the job-store lock, so never in the middle of APScheduler's dispatch
        # loop) cancels pending runs as Kafka's shutdown does, and avoids an APScheduler race: a one-shot fired
        # just before its state turns STOPPED is then looked up among pending jobs, and its thread dies with
        # JobLookupError.
        self._aps.remove_all_jobs()
        self._aps.shutdown(wait=wait)

    def _arm(self, job: _Job, delay_ms: int) -> None:
        first_run = datetime.now(UTC) + timedelta(milliseconds=delay_ms)
        trigger = (
            DateTrigger(run_date=first_run, timezone=UTC)
            if job.period_ms is None
            else IntervalTrigger(seconds=job.period_ms / 1000, start_date=first_run, timezone=UTC)
        )
        # A fresh id per generation: APScheduler removes a finished one-shot by id from its own thread, which
        # must not hit the replacement a self-rescheduling job has just added under the same name.
        handle = f"{job.name}#{job.generation}"
        generation = job.generation

        def run() -> None:
            with self._mutex:
                self._enter(job)
            self._execute(job, generation)

        # next_run_time pins the first run at the delay; left to the trigger, a start_date already a few
        # microseconds past when the job is added would push the first run a whole period later.
        self._aps.add_job(run, trigger, id=handle, name=job.name, next_run_time=first_run)
        job.handle = handle

    def _disarm(self, job: _Job) -> None:
        if job.handle is not None and self._state is not _State.STOPPED:
            # A one-shot that already fired has been removed by APScheduler itself.
            with contextlib.suppress(JobLookupError):
                self._aps.remove_job(job.handle)
        job.handle = None


class ManualScheduler(_JobBook):
    """A deterministic scheduler for tests: time moves only through :meth:`advance`, jobs run in its thread.

    The schedule runs on ``clock.monotonic_ms()``. Fixed-rate jobs keep their grid (``first + k * period``);
    when the clock was moved past several of their runs (by a job, or by someone calling the clock directly),
    those runs are coalesced into one and the next run is the first grid point after the run ends.
    Jobs due at the same time run in the order they were scheduled.
    """

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self._manual_clock = clock
        # (due_ms, sequence, generation, name); entries whose generation is no longer the job's are stale.
        self._heap: list[tuple[int, int, int, str]] = []
        self._sequence = 0
        self._advance_lock = threading.Lock()
        self._advancing_thread: int | None = None

    def advance(self, ms: int) -> int:
        """Move the clock forward ``ms`` (>= 0), running every job that falls due, in time order; return the
        number of runs. The clock stands at each run's due time while it runs. Before ``startup`` and after
        ``shutdown`` only the clock moves (runs missed before startup are coalesced once it starts).

        O((r + s) log n) for r runs and s stale heap entries among n jobs, plus the jobs themselves.
        """
        if ms < 0:
            raise ValueError(f"ManualScheduler.advance: ms must be >= 0, got {ms}")
        if self._advancing_thread == threading.get_ident():
            raise RuntimeError("ManualScheduler.advance called from a job it is running")
        runs = 0
        with self._advance_lock:
            self._advancing_thread = threading.get_ident()
            try:
                target = self._manual_clock.monotonic_ms() + ms
                while (due := self._pop_due(target)) is not None:
                    job, generation, due_ms = due
                    now = self._manual_clock.monotonic_ms()
                    if due_ms > now:
                        self._manual_clock.advance(due_ms - now)
                    if self._execute(job, generation):
                        runs += 1
                    self._rearm(job, generation, due_ms)
                now = self._manual_clock.monotonic_ms()
                if target > now:
                    self._manual_clock.advance(target - now)
            finally:
                self._advancing_thread = None
        return runs

    def next_due_ms(self) -> int | None:
        """Monotonic time of the earliest armed run, or None. O(s log n) for s stale heap entries."""
        with self._mutex:
            self._drop_stale()
            return self._heap[0][0] if self._heap else None

    def _pop_due(self, target: int) -> tuple[_Job, int, int] | None:
        """The earliest armed run due at or before ``target``, removed from the heap and entered."""
        with self._mutex:
            if self._state is not _State.RUNNING:
                return None
            self._drop_stale()
            if not self._heap or self._heap[0][0] > target:
                return None
            due_ms, _, generation, name = heapq.heappop(self._heap)
            job = self._jobs[name]
            job.handle = None
            self._enter(job)
            return job, generation, due_ms

    def _rearm(self, job: _Job, generation: int, due_ms: int) -> None:
        """After a run of a fixed-rate job: arm the first grid point after now, unless rescheduled meanwhile."""
        with self._mutex:
            if job.generation != generation or job.period_ms is None or not job.scheduled:
                return
            period = job.period_ms
            now = self._manual_clock.monotonic_ms()
            next_due = due_ms + period * ((max(now - due_ms, 0) // period) + 1)
            self._push(job, next_due)

    def _drop_stale(self) -> None:
        while self._heap:
            _, _, generation, name = self._heap[0]
            job = self._jobs.get(name)
            if job is not None and job.generation == generation and job.scheduled:
                return
            heapq.heappop(self._heap)

    def _push(self, job: _Job, due_ms: int) -> None:
        self._sequence += 1
        heapq.heappush(self._heap, (due_ms, self._sequence, job.generation, job.name))
        job.handle = f"{job.name}#{job.generation}"

    def _start(self) -> None:
        """Nothing to start: runs happen inside advance()."""

    def _stop(self, wait: bool) -> None:
        """Nothing to stop: advance() stops at the next run; shutdown() itself waits for executions."""

    def _arm(self, job: _Job, delay_ms: int) -> None:
        self._push(job, self._manual_clock.monotonic_ms() + delay_ms)

    def _disarm(self, job: _Job) -> None:
        # Heap entries of older generations are skipped lazily by _drop_stale.
        job.handle = None

    def _check_locked(self) -> None:
        super()._check_locked()
        live = [entry for entry in self._heap if (job := self._jobs.get(entry[3])) and entry[2] == job.generation]
        names = [entry[3] for entry in live]
        assert len(names) == len(set(names)), names
        for name in names:
            assert self._jobs[name].scheduled, name
