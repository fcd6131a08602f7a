"""SegmentReaders' native hold counts: holds pair up, a held segment's close waits for its last reader, and a
segment being closed cannot be taken until its close is over."""

from __future__ import annotations

import pytest

from segments._native.holds import HoldCounts


class Closable:
    def __init__(self) -> None:
        self.closed = False


def test_close_waits_for_the_last_reader() -> None:
    closed: list[Closable] = []
    counts: HoldCounts[Closable] = HoldCounts(closed.append)
    segment = Closable()
    assert counts.acquire(segment) and counts.acquire(segment)
    assert counts.readers(segment) == 2
    assert counts.close_when_released(segment) is True and closed == []
    counts.release(segment)
    assert closed == [] and counts.readers(segment) == 1
    counts.release(segment)
    assert closed == [segment] and counts.readers(segment) == 0


def test_unheld_segment_is_closed_at_once() -> None:
    closed: list[Closable] = []
    counts: HoldCounts[Closable] = HoldCounts(closed.append)
    segment = Closable()
    assert counts.close_when_released(segment) is False and closed == [segment]
    # After its close a late reader takes it again (and finds it closed): nothing is left marked.
    assert counts.acquire(segment) and counts.readers(segment) == 1


def test_segment_cannot_be_taken_while_it_is_being_closed() -> None:
    """A reader that looked the segment up before its deletion asks for it while the close runs (the close calls
    back here, as another thread would run at that point): refused, so it never reads half-closed files."""
    segment = Closable()
    during: list[tuple[bool, int]] = []

    def close(target: Closable) -> None:
        during.append((counts.acquire(target), counts.readers(target)))
        target.closed = True

    counts: HoldCounts[Closable] = HoldCounts(close)
    counts.close_when_released(segment)
    assert during == [(False, 0)] and segment.closed
    # Deferred to the last release: the same while the releasing reader closes it.
    other = Closable()
    assert counts.acquire(other)
    assert counts.close_when_released(other)
    counts.release(other)
    assert during == [(False, 0), (False, 0)] and other.closed
    assert counts.acquire(other)


def test_a_failing_close_leaves_no_mark() -> None:
    def close(target: Closable) -> None:
        raise OSError("EIO")

    counts: HoldCounts[Closable] = HoldCounts(close)
    segment = Closable()
    with pytest.raises(OSError, match="EIO"):
        counts.close_when_released(segment)
    assert counts.acquire(segment) and counts.readers(segment) == 1


def test_a_release_without_a_hold_is_refused() -> None:
    """The count lives in the object: an unpaired release must not take it below zero (the closing mark)."""
    counts: HoldCounts[Closable] = HoldCounts(lambda target: None)
    segment = Closable()
    with pytest.raises(ValueError, match="not held"):
        counts.release(segment)
    assert counts.acquire(segment) and counts.readers(segment) == 1
