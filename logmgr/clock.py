"""Injectable time sources: every time-dependent piece of logmgr takes a `Clock` so tests drive time."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock and monotonic time, both in integer milliseconds."""

    def time_ms(self) -> int:
        """Wall-clock time in ms since the Unix epoch. O(1)."""
        ...

    def monotonic_ms(self) -> int:
        """A never-decreasing time in ms with an arbitrary origin, for measuring intervals. O(1)."""
        ...


class SystemClock:
    """The real clocks of the operating system."""

    def time_ms(self) -> int:
        """Wall-clock time in ms since the Unix epoch (`time.time_ns`). O(1)."""
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        """`time.monotonic_ns` in ms. O(1)."""
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that only moves when told to; thread-safe.

    Both views start at `start_ms` and `advance` moves both. `set` may move the wall clock backwards (as an NTP
    step would); the monotonic view then stays put, and only forward steps of `set` move it, so interval
    arithmetic in callers stays sound when a test rewinds the wall clock.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._lock = threading.Lock()
        self._start_ms = start_ms
        self._now_ms = start_ms
        self._monotonic_ms = start_ms

    def time_ms(self) -> int:
        """The current manual time in ms. O(1)."""
        with self._lock:
            return self._now_ms

    def monotonic_ms(self) -> int:
        """`start_ms` plus every forward movement so far, in ms. O(1)."""
        with self._lock:
            return self._monotonic_ms

    def advance(self, ms: int) -> int:
        """Move time forward by `ms` (>= 0) and return the new time. O(1)."""
        if ms < 0:
            raise ValueError(f"ManualClock.advance: ms must be >= 0, got {ms}")
        with self._lock:
            self._now_ms += ms
            self._monotonic_ms += ms
            return self._now_ms

    def set(self, ms: int) -> None:
        """Set the wall-clock time to `ms` (may go backwards; the monotonic view does not). O(1)."""
        with self._lock:
            self._monotonic_ms += max(0, ms - self._now_ms)
            self._now_ms = ms

    def _check(self) -> None:
        """Assert the invariant: the monotonic view never falls below where it started. O(1)."""
        with self._lock:
            assert self._monotonic_ms >= self._start_ms, (self._monotonic_ms, self._start_ms)

    def __repr__(self) -> str:
        return f"ManualClock({self.time_ms()})"
