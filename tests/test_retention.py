"""Retention policy (logmgr.retention): Kafka's deletableSegments walk and rules, deleteOldSegments' rule order,
the active-segment roll, and the RocketMQ delete window, disk-pressure and manual cleanup plans."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logmgr.config import BrokerConfig
from logmgr.retention import (
    NO_DELETIONS,
    LogSnapshot,
    PlannedDeletion,
    RetentionPlan,
    RetentionSettings,
    SegmentInfo,
    apply_plan,
    deletable_segments,
    disk_usage_state,
    in_delete_window,
    log_start_offset_rule,
    plan_disk_pressure,
    plan_manual_cleanup,
    plan_retention,
    plans_by_log,
    retention_size_rule,
    retention_time_rule,
    upper_bound_offsets,
)
from segments.log_segment import LogSegment
from segments.records import SimpleRecord, build_batch

DAY = 86_400_000
NOW = 1_700_000_000_000
RANK = {"log-start-offset": 0, "retention.bytes": 1, "retention.ms": 2}


def seg(base: int, size: int = 100, ts: int = 0) -> SegmentInfo:
    return SegmentInfo(base, size, ts, size == 0)


def snap(
    segments: list[SegmentInfo], leo: int, *, lso: int | None = None, hw: int | None = None
) -> LogSnapshot:
    start = segments[0].base_offset if lso is None else lso
    return LogSnapshot(tuple(segments), leo, start, leo if hw is None else hw)


def always(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
    return "yes"


def bases(plan: RetentionPlan) -> list[int]:
    return [deletion.base_offset for deletion in plan.deletions]


def settings(ms: int = -1, size: int = -1, delete: bool = True) -> RetentionSettings:
    return RetentionSettings(retention_ms=ms, retention_bytes=size, delete_enabled=delete)


# -- the walk: HW bound, last empty segment, stop at first failure ---------------------------------------------


def test_upper_bounds_are_next_base_then_leo() -> None:
    log = snap([seg(0), seg(10), seg(25)], 31)
    assert upper_bound_offsets(log) == [10, 25, 31]


@pytest.mark.parametrize(
    ("hw", "expected"), [(9, []), (10, [0]), (24, [0]), (25, [0, 1]), (30, [0, 1]), (31, [0, 1, 2])]
)
def test_high_watermark_must_reach_the_upper_bound(hw: int, expected: list[int]) -> None:
    log = snap([seg(0), seg(10), seg(25)], 31, hw=hw)
    assert deletable_segments(log, always) == expected


def test_last_empty_segment_is_never_deletable() -> None:
    log = snap([seg(0), seg(10), seg(20, size=0)], 20)
    assert deletable_segments(log, always) == [0, 1]
    plan = plan_retention(log, settings(ms=0), NOW)
    assert bases(plan) == [0, 10]
    assert not plan.roll_first
    assert plan.new_log_start_offset == 20


def test_empty_segment_in_the_middle_is_deletable() -> None:
    log = snap([seg(0), seg(10, size=0), seg(11)], 30)
    assert deletable_segments(log, always) == [0, 1, 2]


def test_walk_stops_at_first_refusal_and_does_not_consult_rule_above_hw() -> None:
    calls: list[int] = []

    def rule(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
        calls.append(segment.base_offset)
        return None if segment.base_offset == 10 else "ok"

    log = snap([seg(0), seg(10), seg(20), seg(30)], 40)
    assert deletable_segments(log, rule) == [0]
    assert calls == [0, 10]
    calls.clear()
    assert deletable_segments(snap([seg(0), seg(20), seg(30)], 40, hw=19), rule) == []
    assert calls == []


def test_active_segment_is_deleted_by_rolling_first() -> None:
    log = snap([seg(0, ts=NOW - 9 * DAY), seg(10, ts=NOW - 8 * DAY)], 17)
    plan = plan_retention(log, settings(ms=7 * DAY), NOW)
    assert bases(plan) == [0, 10]
    assert plan.roll_first
    assert plan.new_log_start_offset == 17
    assert plan.bytes_freed == 200
    after = apply_plan(log, plan, NOW)
    assert after.segments == (SegmentInfo(17, 0, NOW, True),)
    assert after.log_start_offset == 17
    assert plan_retention(after, settings(ms=0), NOW + DAY) == NO_DELETIONS


def test_active_segment_stays_while_hw_is_below_leo() -> None:
    log = snap([seg(0, ts=0), seg(10, ts=0)], 17, hw=16)
    plan = plan_retention(log, settings(ms=7 * DAY), NOW)
    assert bases(plan) == [0]
    assert not plan.roll_first


def test_a_roll_never_reuses_a_candidate_base() -> None:
    # Kafka drops the last candidate when the roll reuses its base. That needs a non-empty segment at the LEO,
    # which cannot exist (it would hold an offset >= LEO), and an empty one at the LEO is never a candidate.
    with pytest.raises(AssertionError):
        snap([seg(0), seg(10)], 10)
    log = snap([seg(0), seg(10, size=0)], 10)
    assert deletable_segments(log, always) == [0]


def test_snapshot_invariants() -> None:
    with pytest.raises(AssertionError):
        LogSnapshot((), 0, 0, 0)
    with pytest.raises(AssertionError):
        snap([seg(10), seg(10)], 20)
    with pytest.raises(AssertionError):
        snap([seg(0)], 10, lso=5, hw=4)
    with pytest.raises(AssertionError):
        snap([seg(0)], 10, hw=11)
    with pytest.raises(AssertionError):
        SegmentInfo(0, 0, 0, False)


# -- the rules -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retention_bytes", "expected"),
    [
        (-1, []),
        (0, [0, 100, 200, 300]),
        (199, [0, 100]),
        (200, [0, 100]),
        (201, [0]),
        (300, [0]),
        (301, []),
        (400, []),
        (401, []),
    ],
)
def test_size_rule_arithmetic(retention_bytes: int, expected: list[int]) -> None:
    log = snap([seg(0), seg(100), seg(200), seg(300)], 400)
    plan = plan_retention(log, settings(size=retention_bytes), NOW)
    assert bases(plan) == expected
    assert all(d.reason == "retention.bytes" for d in plan.deletions)
    if plan.deletions:
        assert log.total_size - plan.bytes_freed >= retention_bytes


def test_size_rule_at_exact_limit_still_deletes_leading_empty_segments() -> None:
    log = snap([seg(0, size=0), seg(10), seg(20)], 30)
    assert bases(plan_retention(log, settings(size=200), NOW)) == [0]


def test_size_rule_stops_at_the_first_segment_that_does_not_fit() -> None:
    log = snap([seg(0, size=50), seg(10, size=300), seg(20, size=50), seg(30, size=10)], 40)
    rule = retention_size_rule(310, log.total_size)  # excess 100: 50 fits, 300 does not, 50 would
    assert deletable_segments(log, rule) == [0]


def test_size_rule_detail_explains_the_excess() -> None:
    log = snap([seg(0), seg(100), seg(200)], 300)
    plan = plan_retention(log, settings(size=150), NOW)
    assert [d.detail for d in plan.deletions] == [
        "log size 300 B exceeds retention.bytes 150 B; 150 B of excess left, 50 B after this segment"
    ]


def test_time_rule_boundary_and_disabled() -> None:
    retention = 7 * DAY
    log = snap([seg(0, ts=NOW - retention - 1), seg(10, ts=NOW - retention), seg(20, ts=0)], 30)
    assert deletable_segments(log, retention_time_rule(retention, NOW)) == [0]
    assert deletable_segments(log, retention_time_rule(-1, NOW)) == []
    assert deletable_segments(log, retention_time_rule(retention - 1, NOW)) == [0, 1, 2]


def test_time_rule_stops_at_a_young_segment_before_older_ones() -> None:
    log = snap([seg(0, ts=0), seg(10, ts=NOW), seg(20, ts=0), seg(30, ts=0)], 40)
    assert bases(plan_retention(log, settings(ms=DAY), NOW)) == [0]


def test_time_rule_detail() -> None:
    log = snap([seg(0, ts=NOW - 8 * DAY - 3_600_000), seg(10, ts=NOW)], 20)
    (deletion,) = plan_retention(log, settings(ms=7 * DAY), NOW).deletions
    assert deletion.detail == (
        "largest timestamp 2023-11-06T21:13:20.000Z is 8d 1h old > retention.ms 7d (604800000 ms)"
    )


def test_start_offset_rule() -> None:
    log = snap([seg(0), seg(10), seg(20), seg(30)], 40, lso=20)
    assert deletable_segments(log, log_start_offset_rule(20)) == [0, 1]
    assert deletable_segments(log, log_start_offset_rule(19)) == [0]
    # The active segment has no next segment: the start-offset rule never deletes it, even at LEO.
    assert deletable_segments(snap([seg(0)], 10, lso=10), log_start_offset_rule(10)) == []


def test_start_offset_inside_a_segment_is_kept_as_log_start() -> None:
    log = snap([seg(0), seg(100), seg(200)], 300, lso=150)
    plan = plan_retention(log, settings(), NOW)
    assert bases(plan) == [0]
    assert plan.new_log_start_offset == 150


def test_delete_disabled_runs_only_the_start_offset_rule() -> None:
    log = snap([seg(0, ts=0), seg(10, ts=0), seg(20, ts=0)], 30, lso=12)
    plan = plan_retention(log, settings(ms=0, size=0, delete=False), NOW)
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [(0, "log-start-offset")]


def test_rule_order_each_rule_sees_what_the_previous_left() -> None:
    old = NOW - 30 * DAY
    log = snap(
        [seg(0, ts=old), seg(10, ts=old), seg(20, ts=old), seg(30, ts=NOW), seg(40, ts=old)], 50, lso=25
    )
    # Start offset deletes 0 and 10 (200 B). The size rule then sees 300 B: excess 150 fits only 20's 100 B
    # (on the original 500 B it would have taken three more). The time rule stops at the young segment 30.
    plan = plan_retention(log, settings(ms=DAY, size=150), NOW)
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [
        (0, "log-start-offset"),
        (10, "log-start-offset"),
        (20, "retention.bytes"),
    ]
    assert plan.new_log_start_offset == 30


def test_time_rule_after_size_rule_and_delete_window() -> None:
    old = NOW - 30 * DAY
    log = snap([seg(0, ts=old), seg(10, ts=old), seg(20, ts=old), seg(30, ts=NOW)], 40)
    plan = plan_retention(log, settings(ms=DAY, size=300), NOW)
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [
        (0, "retention.bytes"),
        (10, "retention.ms"),
        (20, "retention.ms"),
    ]
    outside = plan_retention(log, settings(ms=DAY, size=300), NOW, time_rule_allowed=False)
    assert [(d.base_offset, d.reason) for d in outside.deletions] == [(0, "retention.bytes")]


def test_describe_lines() -> None:
    log = snap([seg(0, ts=0), seg(10, ts=0)], 20)
    lines = plan_retention(log, settings(ms=DAY), NOW).describe()
    assert lines[0].startswith("roll a new empty active segment first")
    assert lines[1].startswith(
        "delete segment 00000000000000000000 (100 B): retention.ms: largest timestamp "
    )
    assert lines[-1] == "log start offset -> 20; 2 segment(s), 200 B freed"
    assert NO_DELETIONS.describe() == ["nothing to delete"]


# -- delete window ---------------------------------------------------------------------------------------------


def at(hour: int, minute: int = 0, tz: timezone = UTC) -> int:
    return int(datetime(2024, 3, 5, hour, minute, tzinfo=tz).timestamp() * 1000)


NIGHT = frozenset({22, 23, 0, 1})  # logmgr.delete.when=22-01, as BrokerConfig parses it


@pytest.mark.parametrize(
    ("hours", "hour", "minute", "inside"),
    [
        (frozenset({2, 3, 4, 5}), 1, 59, False),
        (frozenset({2, 3, 4, 5}), 2, 0, True),
        (frozenset({2, 3, 4, 5}), 5, 59, True),
        (frozenset({2, 3, 4, 5}), 6, 0, False),
        (NIGHT, 21, 59, False),
        (NIGHT, 22, 0, True),
        (NIGHT, 0, 30, True),
        (NIGHT, 1, 59, True),
        (NIGHT, 2, 0, False),
        (frozenset({4}), 4, 30, True),
        (frozenset({4}), 5, 0, False),
        (None, 13, 0, True),
    ],
)
def test_delete_window(hours: frozenset[int] | None, hour: int, minute: int, inside: bool) -> None:
    assert in_delete_window(at(hour, minute), hours, UTC) is inside


def test_delete_window_uses_the_given_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert in_delete_window(at(3, 0, tokyo), frozenset({3}), tokyo)
    assert not in_delete_window(at(3, 0, tokyo), frozenset({3}), UTC)  # 18:00 UTC


def test_delete_window_follows_the_parsed_config() -> None:
    config = BrokerConfig.from_properties({"logmgr.delete.when": "22-01"})
    assert config.delete_when == NIGHT
    assert in_delete_window(at(23), config.delete_when, UTC)
    assert not in_delete_window(at(12), config.delete_when, UTC)
    assert in_delete_window(at(12), BrokerConfig().delete_when, UTC)


# -- disk usage ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "state"), [(0, "ok"), (85, "ok"), (86, "clean"), (90, "clean"), (91, "full"), (100, "full")]
)
def test_disk_usage_state(used: int, state: str) -> None:
    assert disk_usage_state(used, 100, 0.85, 0.90) == state


def test_disk_usage_state_with_switched_off_checks() -> None:
    assert disk_usage_state(99, 100, 1.0, 0.9) == "full"
    assert disk_usage_state(99, 100, 0.85, 1.0) == "clean"
    assert disk_usage_state(99, 100, 1.0, 1.0) == "ok"
    with pytest.raises(ValueError, match="total_bytes"):
        disk_usage_state(1, 0, 0.85, 0.9)
    with pytest.raises(ValueError, match="total_bytes"):
        plan_disk_pressure({}, 1, 0, 0.85)


def dir_logs() -> dict[str, LogSnapshot]:
    return {
        # a's second segment is the dir's oldest, but only eligible after a's first.
        "a": snap([seg(0, ts=100), seg(10, ts=50), seg(20, ts=300)], 30),
        "b": snap([seg(0, ts=200), seg(10, ts=250), seg(20, ts=260, size=0)], 20),
        # c's HW stops at its first segment's upper bound.
        "c": snap([seg(0, ts=10), seg(10, ts=20), seg(20, ts=30)], 30, hw=10),
    }


def picks(chosen: list[tuple[str, PlannedDeletion]]) -> list[tuple[str, int]]:
    return [(key, deletion.base_offset) for key, deletion in chosen]


def test_disk_pressure_picks_globally_oldest_per_log_in_order_within_hw() -> None:
    logs = dir_logs()
    # 1000 B disk, 900 used, ratio 0.5: 400 B must go, four 100 B segments.
    chosen = plan_disk_pressure(logs, 900, 1000, 0.5)
    assert picks(chosen) == [("c", 0), ("a", 0), ("a", 10), ("b", 0)]
    assert all(d.reason == "disk-usage" for _, d in chosen)
    assert chosen[0][1].detail.startswith(
        "second disk tier: usage 90.0% (900/1000 B) > logmgr.disk.usage.clean.ratio 50.0%; oldest eligible"
    )
    assert chosen[-1][1].detail.endswith("projected usage after it 50.0% (500/1000 B)")
    # Needing 150 B stops after two segments.
    assert picks(plan_disk_pressure(logs, 650, 1000, 0.5)) == [("c", 0), ("a", 0)]
    # Exactly at the ratio is fine.
    assert plan_disk_pressure(logs, 500, 1000, 0.5) == []


def test_disk_pressure_takes_the_active_segment_last_and_rolls() -> None:
    logs = dir_logs()
    chosen = plan_disk_pressure(logs, 10_000, 10_000, 0.01)
    assert picks(chosen) == [("c", 0), ("a", 0), ("a", 10), ("b", 0), ("b", 10), ("a", 20)]
    plans = plans_by_log(logs, chosen)
    assert plans["a"].roll_first and plans["a"].new_log_start_offset == 30
    assert not plans["b"].roll_first and plans["b"].new_log_start_offset == 20
    assert plans["c"].new_log_start_offset == 10 and bases(plans["c"]) == [0]


def test_disk_pressure_ties_follow_mapping_order() -> None:
    logs = {
        "y": snap([seg(0, ts=5), seg(10, ts=9)], 20, hw=10),
        "x": snap([seg(0, ts=5), seg(10)], 20, hw=10),
    }
    assert picks(plan_disk_pressure(logs, 200, 200, 0.01)) == [("y", 0), ("x", 0)]


def test_disk_pressure_with_nothing_eligible() -> None:
    logs = {"a": snap([seg(0, size=0)], 0), "b": snap([seg(0), seg(10)], 20, hw=9)}
    assert plan_disk_pressure(logs, 100, 100, 0.5) == []


def test_manual_cleanup() -> None:
    logs = dir_logs()
    chosen = plan_manual_cleanup(logs, 3)
    assert picks(chosen) == [("c", 0), ("a", 0), ("a", 10)]
    assert [d.reason for _, d in chosen] == ["manual"] * 3
    assert chosen[0][1].detail.startswith("manual cleanup request 1/3: oldest eligible segment")
    assert plan_manual_cleanup(logs, 0) == []
    assert len(plan_manual_cleanup(logs, 100)) == 6
    with pytest.raises(ValueError, match=">= 0"):
        plan_manual_cleanup(logs, -1)


# -- against real segment files --------------------------------------------------------------------------------


def append_batch(segment: LogSegment, base: int, timestamps: list[int]) -> None:
    records = [SimpleRecord(b"v" * 50, None, ts) for ts in timestamps]
    segment.append(build_batch(records, base_offset=base))


def test_real_segments_largest_timestamp_and_mtime(tmp_path: Path) -> None:
    old = LogSegment.open(tmp_path, 0, create=True)
    append_batch(old, 0, [NOW - 9 * DAY, NOW - 8 * DAY])
    young = LogSegment.open(tmp_path, 2, create=True)
    append_batch(young, 2, [NOW - DAY])
    active = LogSegment.open(tmp_path, 3, create=True)
    # An empty segment has no record timestamp: retention falls back to the .log mtime.
    os.utime(active.log.path, ns=(0, (NOW - 10 * DAY) * 1_000_000))
    infos = [SegmentInfo.of(s) for s in (old, young, active)]
    assert [i.largest_timestamp for i in infos] == [NOW - 8 * DAY, NOW - DAY, NOW - 10 * DAY]
    assert [i.is_empty for i in infos] == [False, False, True]
    assert infos[0].size == old.size > 0
    log = LogSnapshot(tuple(infos), 3, 0, 3)
    assert bases(plan_retention(log, settings(ms=7 * DAY), NOW)) == [0]
    # With retention.ms=0 every segment is old enough, yet the last, empty one stays.
    assert bases(plan_retention(log, settings(ms=0), NOW)) == [0, 2]
    for segment in (old, young, active):
        segment.close()


# -- properties ------------------------------------------------------------------------------------------------


@st.composite
def log_snapshots(draw: st.DrawFn) -> LogSnapshot:
    count = draw(st.integers(1, 7))
    base = draw(st.integers(0, 50))
    segments = []
    for index in range(count):
        size = draw(st.sampled_from([0, 0, 1, 50, 100, 100, 250]))
        segments.append(SegmentInfo(base, size, draw(st.integers(0, 2000)), size == 0))
        if index + 1 < count:
            base += draw(st.integers(1, 30))
    last = segments[-1]
    leo = last.base_offset + (draw(st.integers(0, 30)) if last.is_empty else draw(st.integers(1, 30)))
    hw = draw(st.one_of(st.just(leo), st.integers(0, leo)))  # HW = LEO (standalone default) half the time
    lso = draw(st.integers(0, hw))
    return LogSnapshot(tuple(segments), leo, lso, hw)


retention_settings = st.builds(
    RetentionSettings,
    retention_ms=st.one_of(st.just(-1), st.integers(0, 2000)),
    retention_bytes=st.one_of(st.just(-1), st.integers(0, 1500)),
    delete_enabled=st.booleans(),
)


def assert_prefix_within_bounds(log: LogSnapshot, deleted: list[int]) -> None:
    segments = log.segments
    assert deleted == [s.base_offset for s in segments[: len(deleted)]]
    uppers = upper_bound_offsets(log)
    for index in range(len(deleted)):
        assert uppers[index] <= log.high_watermark
        assert not (index == len(segments) - 1 and segments[index].is_empty)


@given(log_snapshots(), retention_settings, st.integers(0, 4000), st.booleans())
def test_plan_retention_properties(
    log: LogSnapshot, config: RetentionSettings, now: int, window: bool
) -> None:
    plan = plan_retention(log, config, now, time_rule_allowed=window)
    deleted = bases(plan)
    assert_prefix_within_bounds(log, deleted)
    ranks = [RANK[d.reason] for d in plan.deletions]
    assert ranks == sorted(ranks)
    assert plan.roll_first == (len(deleted) == len(log.segments))
    sizes = {s.base_offset: s for s in log.segments}
    assert plan.bytes_freed == sum(sizes[b].size for b in deleted)
    if not config.delete_enabled:
        assert set(ranks) <= {0}
    if not window:
        assert 2 not in ranks
    freed = 0
    for deletion in plan.deletions:
        freed += deletion.size
        segment = sizes[deletion.base_offset]
        if deletion.reason == "retention.bytes":
            assert log.total_size - freed >= config.retention_bytes
        elif deletion.reason == "retention.ms":
            assert now - segment.largest_timestamp > config.retention_ms
        else:
            index = log.segments.index(segment)
            assert log.segments[index + 1].base_offset <= log.log_start_offset
    if plan.deletions:
        assert plan.new_log_start_offset is not None
        assert log.log_start_offset <= plan.new_log_start_offset <= log.high_watermark
    # Kafka's rules reach a fixed point: running retention again right away deletes nothing.
    after = apply_plan(log, plan, now)
    assert plan_retention(after, config, now, time_rule_allowed=window) == NO_DELETIONS


@given(
    st.lists(log_snapshots(), min_size=1, max_size=4),
    st.integers(0, 5000),
    st.integers(1, 5000),
    st.floats(0.05, 1.0),
)
def test_disk_pressure_properties(logs_list: list[LogSnapshot], used: int, total: int, ratio: float) -> None:
    logs = dict(enumerate(logs_list))
    chosen = plan_disk_pressure(logs, used, total, ratio)
    eligible = {key: deletable_segments(log, always) for key, log in logs.items()}
    taken = dict.fromkeys(logs, 0)
    projected = used
    for position, (key, deletion) in enumerate(chosen):
        assert projected > ratio * total  # it only continues while still above the ratio
        frontier = [
            (logs[k].segments[taken[k]].largest_timestamp, k) for k in logs if taken[k] < len(eligible[k])
        ]
        assert (logs[key].segments[taken[key]].largest_timestamp, key) == min(frontier), position
        assert deletion.base_offset == logs[key].segments[taken[key]].base_offset
        taken[key] += 1
        projected -= deletion.size
    if projected > ratio * total:
        assert taken == {key: len(indexes) for key, indexes in eligible.items()}
    for key, plan in plans_by_log(logs, chosen).items():
        assert_prefix_within_bounds(logs[key], bases(plan))


@given(st.lists(log_snapshots(), min_size=1, max_size=4), st.integers(0, 30))
def test_manual_cleanup_properties(logs_list: list[LogSnapshot], count: int) -> None:
    logs = dict(enumerate(logs_list))
    chosen = plan_manual_cleanup(logs, count)
    eligible = sum(len(deletable_segments(log, always)) for log in logs.values())
    assert len(chosen) == min(count, eligible)
    for key, plan in plans_by_log(logs, chosen).items():
        assert_prefix_within_bounds(logs[key], bases(plan))


def test_seeded_stress_of_an_evolving_log() -> None:
    rng = random.Random(20240305)
    now = NOW
    log = LogSnapshot((SegmentInfo(0, 0, now, True),), 0, 0, 0)
    config = settings(ms=20_000, size=3000)
    for step in range(2000):
        segments = list(log.segments)
        leo = log.log_end_offset
        action = rng.random()
        if action < 0.6:  # append to the active segment
            records = rng.randint(1, 5)
            active = segments[-1]
            size = active.size + rng.randint(50, 300)
            segments[-1] = SegmentInfo(active.base_offset, size, max(active.largest_timestamp, now), False)
            leo += records
        elif action < 0.75 and not segments[-1].is_empty:  # roll
            segments.append(SegmentInfo(leo, 0, now, True))
        elif action < 0.8 and log.high_watermark > log.log_start_offset:  # delete_records_before
            lso = rng.randint(log.log_start_offset, log.high_watermark)
            log = LogSnapshot(log.segments, leo, lso, log.high_watermark)
            continue
        now += rng.randint(0, 1000) if rng.random() < 0.95 else 30_000  # now and then a long idle period
        hw = leo if rng.random() < 0.5 else rng.randint(log.high_watermark, leo)
        log = LogSnapshot(tuple(segments), leo, log.log_start_offset, hw)
        log._check()
        allowed = rng.random() < 0.8
        plan = plan_retention(log, config, now, time_rule_allowed=allowed)
        plan._check()
        assert_prefix_within_bounds(log, bases(plan))
        log = apply_plan(log, plan, now)
        log._check()
        assert plan_retention(log, config, now, time_rule_allowed=allowed) == NO_DELETIONS, step
        if plan.deletions and any(d.reason == "retention.bytes" for d in plan.deletions):
            assert log.total_size + sum(d.size for d in plan.deletions if d.reason == "retention.ms") >= 3000
