"""The compiled index appends (segments._native.index.IndexEntries) against a plain model of
Kafka's rules: random appends, segment appends, truncations and reopenings of an offset and a time index, with the
outcome (entry written, ignored, or the typed error) and every lookup compared after each step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.errors import IndexFullError, IndexOffsetOverflowError, InvalidOffsetError
from segments.offset_index import OffsetIndex
from segments.time_index import TimeIndex

BASE = 1_000
SLOTS = 6  # max index size in entries: fullness is reached within an example
INT32_MAX = 2**31 - 1


def segment_entries(
    offset_index: OffsetIndex, time_index: TimeIndex, offset: int, position: int, timestamp: int, time_offset: int
) -> None:
    """A segment append's entries past the index interval (``SegmentAppendState``'s step): the offset entry, then
    the time entry of the max timestamp so far."""
    offset_index.append(offset, position)
    time_index.maybe_append(timestamp, time_offset)


@dataclass
class Model:
    """Kafka's index append rules on lists of entries (absolute offsets)."""

    offsets: list[tuple[int, int]] = field(default_factory=list)
    times: list[tuple[int, int]] = field(default_factory=list)

    def append_offset(self, offset: int, position: int) -> type[Exception] | None:
        if len(self.offsets) >= SLOTS:
            return IndexFullError
        if self.offsets and offset <= self.offsets[-1][0]:
            return InvalidOffsetError
        if not 0 <= position <= INT32_MAX:
            return ValueError
        if not 0 <= offset - BASE <= INT32_MAX:
            return IndexOffsetOverflowError
        self.offsets.append((offset, position))
        return None

    def maybe_append_time(self, timestamp: int, offset: int, skip_full_check: bool) -> type[Exception] | None:
        if not skip_full_check and len(self.times) >= SLOTS - 1:
            return IndexFullError
        last_timestamp = -1
        if self.times:
            last_timestamp, last_offset = self.times[-1]
            if offset < last_offset or timestamp < last_timestamp:
                return InvalidOffsetError
        if timestamp <= last_timestamp:
            return None
        if len(self.times) >= SLOTS:
            return IndexFullError
        if not 0 <= offset - BASE <= INT32_MAX:
            return IndexOffsetOverflowError
        self.times.append((timestamp, offset))
        return None

    def truncate_to(self, offset: int) -> None:
        self.offsets = [e for e in self.offsets if e[0] < offset]
        self.times = [e for e in self.times if e[1] < offset]


def outcome(call: object, *args: object) -> type[Exception] | None:
    try:
        call(*args)  # type: ignore[operator]
    except (IndexFullError, InvalidOffsetError, ValueError) as err:
        return type(err)
    return None


offsets = st.one_of(st.integers(BASE - 3, BASE + 40), st.sampled_from([BASE + INT32_MAX, BASE + INT32_MAX + 1]))
positions = st.one_of(st.integers(0, 5_000), st.sampled_from([-1, INT32_MAX, INT32_MAX + 1]))
timestamps = st.integers(-2, 60)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("offset"), offsets, positions),
        st.tuples(st.just("time"), timestamps, offsets, st.booleans()),
        st.tuples(st.just("segment"), offsets, st.integers(0, 5_000), timestamps, offsets),
        st.tuples(st.just("truncate"), st.integers(BASE, BASE + 40)),
        st.tuples(st.just("reopen")),
    ),
    max_size=40,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150, deadline=None)
@given(steps=steps)
def test_native_index_appends_match_the_model(tmp_path: Path, steps: list[tuple[Any, ...]]) -> None:
    for name in ("a.index", "a.timeindex"):
        (tmp_path / name).unlink(missing_ok=True)
    size_offsets, size_times = SLOTS * 8, SLOTS * 12
    offset_index = OffsetIndex(tmp_path / "a.index", BASE, size_offsets)
    time_index = TimeIndex(tmp_path / "a.timeindex", BASE, size_times)
    model = Model()
    try:
        for step in steps:
            kind = step[0]
            if kind == "offset":
                _, offset, position = step
                assert outcome(offset_index.append, offset, position) is model.append_offset(offset, position)
            elif kind == "time":
                _, timestamp, offset, skip = step
                got = outcome(time_index.maybe_append, timestamp, offset, skip)
                assert got is model.maybe_append_time(timestamp, offset, skip)
            elif kind == "segment":
                _, offset, position, timestamp, time_offset = step
                expected = model.append_offset(offset, position)
                if expected is None:
                    expected = model.maybe_append_time(timestamp, time_offset, False)
                got = outcome(segment_entries, offset_index, time_index, offset, position, timestamp, time_offset)
                assert got is expected
            elif kind == "truncate":
                _, offset = step
                offset_index.truncate_to(offset)
                time_index.truncate_to(offset)
                model.truncate_to(offset)
            else:
                # Closing trims the files; reopening reads the last entries back (the cache is rebuilt from the map)
                # and the resize gives the free slots back.
                offset_index.close()
                time_index.close()
                offset_index = OffsetIndex(tmp_path / "a.index", BASE, size_offsets)
                time_index = TimeIndex(tmp_path / "a.timeindex", BASE, size_times)
                offset_index.resize(size_offsets)
                time_index.resize(size_times)
            assert [tuple(e) for e in offset_index] == model.offsets
            assert [tuple(e) for e in time_index] == model.times
            assert offset_index.is_full() == (len(model.offsets) >= SLOTS)
            assert time_index.is_full() == (len(model.times) >= SLOTS - 1)
            assert offset_index.last_offset == (model.offsets[-1][0] if model.offsets else BASE)
            assert tuple(time_index.last_entry) == (model.times[-1] if model.times else (-1, BASE))
            for target in range(BASE - 1, BASE + 42, 7):
                below = [e for e in model.offsets if e[0] <= target]
                assert tuple(offset_index.lookup(target)) == (below[-1] if below else (BASE, 0))
            offset_index._check()
            time_index._check()
    finally:
        offset_index.close()
        time_index.close()


def test_the_writer_holds_a_view_of_each_map_and_releases_it_before_the_map_goes(tmp_path: Path) -> None:
    # Stores write through a view the index holds on its current map: a resize replaces the map (the old one's view
    # released), a trim and a close release it before closing (a map is never closed while held), and a read-only
    # index holds none.
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 8 * 4)
    for slot in range(4):
        index.append(slot * 10, slot * 100)
    old_map = index._mm
    index.resize(8 * 64)
    assert index._mm is not old_map
    assert old_map is not None and old_map.closed is False
    old_map.close()  # nothing holds the replaced map any more
    for slot in range(4, 40):
        index.append(slot * 10, slot * 100)
    index.trim_to_valid_size()
    assert [index.entry(slot).offset for slot in (0, 3, 4, 39)] == [0, 30, 40, 390]
    index.close()
    reader = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 8 * 64, writable=False)
    try:
        assert reader.lookup(395).offset == 390
        reader._hold_map(reader._mm)  # read-only: nothing held, so the close below succeeds
    finally:
        reader.close()
