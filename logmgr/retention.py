"""Pure retention policy: which segments the LogManager deletes, and why.

Nothing here touches files or clocks. A :class:`LogSnapshot` describes one log (its segments oldest first, log end
offset, log start offset, high watermark), ``now_ms`` is a parameter, and the functions return plans that the
:class:`~logmgr.log.Log` executes (roll if asked, raise the log start offset, remove the segments, rename their
files ``.deleted``). Everything follows Kafka's ``UnifiedLog`` (format doc §7):

* :func:`deletable_segments` is Kafka's ``deletableSegments``: walk oldest to newest, a segment is a candidate
  only if the high watermark has reached its upper bound (next segment's base, or the log end offset for the
  last one), the rule accepts it, and it is not the last segment while empty; the walk stops at the first refusal.
* :func:`plan_retention` is ``deleteOldSegments``: start-offset rule, then ``retention.bytes``, then
  ``retention.ms``, each applied to what the previous one left; only the start-offset rule when
  ``cleanup.policy`` lacks ``delete``. When every segment goes the active one is replaced by a freshly rolled
  empty segment first (``deleteSegments``).

Beyond Kafka, from RocketMQ: :func:`in_delete_window` (the daily hour window for time-based deletion),
:func:`disk_usage_state` (the three disk tiers), :func:`plan_disk_pressure` (delete the dir's globally oldest
eligible segments while disk usage is above the clean ratio) and :func:`plan_manual_cleanup`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from itertools import islice
from typing import TYPE_CHECKING, Literal, TypeVar

from segments.naming import filename_prefix_from_offset

if TYPE_CHECKING:
    from segments.log_segment import LogSegment

DeletionReason = Literal["log-start-offset", "retention.bytes", "retention.ms", "disk-usage", "manual"]
DiskUsageState = Literal["ok", "expired", "clean", "full"]
DISK_TIER_OFF = 1.0
"""A disk-tier ratio usage can never pass (it is never above the whole file system): the tier is off."""

K = TypeVar("K")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A snapshot of one segment as retention sees it."""

    base_offset: int
    size: int
    """Bytes of its ``.log``."""
    largest_timestamp: int
    """``LogSegment.largest_timestamp()``: the max record timestamp, else the ``.log`` mtime (ms)."""
    is_empty: bool
    """``size == 0``."""

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        assert self.base_offset >= 0, f"negative base offset {self.base_offset}"
        assert self.size >= 0, f"negative size {self.size}"
        assert self.is_empty == (self.size == 0), f"is_empty={self.is_empty} with size {self.size}"

    @classmethod
    def of(cls, segment: LogSegment) -> SegmentInfo:
        """The snapshot of an open segment. O(1) (one ``stat`` when it holds no timestamp)."""
        size = segment.size
        return cls(segment.base_offset, size, segment.largest_timestamp(), size == 0)


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """What a policy sees of one log."""

    segments: tuple[SegmentInfo, ...]
    """Oldest first; the last is the active segment."""
    log_end_offset: int
    log_start_offset: int
    high_watermark: int

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        assert self.segments, "a log always has at least one segment"
        for older, newer in zip(self.segments, self.segments[1:], strict=False):
            assert older.base_offset < newer.base_offset, (
                f"segment bases not increasing: {older.base_offset} then {newer.base_offset}"
            )
        active = self.segments[-1]
        # A non-empty segment holds at least one offset at or above its base, so the LEO is past it; this is
        # why a roll at the LEO never collides with a segment retention deletes.
        assert active.base_offset < self.log_end_offset or (
            active.is_empty and active.base_offset == self.log_end_offset
        ), f"active segment {active.base_offset} (size {active.size}) does not fit LEO {self.log_end_offset}"
        # Kafka bounds the high watermark by [log start offset, LEO]; retention relies on it.
        assert self.log_start_offset <= self.high_watermark <= self.log_end_offset, (
            f"need log start {self.log_start_offset} <= HW {self.high_watermark} <= LEO {self.log_end_offset}"
        )

    @property
    def total_size(self) -> int:
        """Kafka's ``UnifiedLog.size``: bytes of every segment. O(segments)."""
        return sum(segment.size for segment in self.segments)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """The topic settings retention reads."""

    retention_ms: int
    retention_bytes: int
    delete_enabled: bool
    """``cleanup.policy`` contains ``delete``."""


@dataclass(frozen=True, slots=True)
class PlannedDeletion:
    """One segment to delete and the human explanation of why."""

    base_offset: int
    size: int
    reason: DeletionReason
    detail: str

    def describe(self) -> str:
        """One line for ``cleanup --dry-run``. O(1)."""
        return (
            f"delete segment {filename_prefix_from_offset(self.base_offset)} ({self.size} B): "
            f"{self.reason}: {self.detail}"
        )


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """The deletions of one log, in deletion order (oldest first), and what the log looks like afterwards."""

    deletions: tuple[PlannedDeletion, ...]
    roll_first: bool
    """Every segment including the active one goes: roll a new empty segment (at the LEO) first."""
    new_log_start_offset: int | None
    """The log start offset after the deletions: the larger of the current one and the base of the segment
    after the last deleted one (the LEO after a roll); ``None`` when nothing is deleted."""
    bytes_freed: int

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        bases = [deletion.base_offset for deletion in self.deletions]
        assert bases == sorted(set(bases)), f"deletions not oldest first: {bases}"
        assert self.bytes_freed == sum(deletion.size for deletion in self.deletions), "bytes_freed mismatch"
        assert (self.new_log_start_offset is None) == (not self.deletions), "start offset iff deletions"
        assert not self.roll_first or self.deletions, "roll_first without deletions"
        if self.new_log_start_offset is not None:
            assert self.new_log_start_offset > bases[-1], "log start offset must move past the last deletion"

    def describe(self) -> list[str]:
        """The lines ``cleanup --dry-run`` prints for one log: roll, each segment with reason and bytes, and the
        resulting log start offset. O(deletions)."""
        if not self.deletions:
            return ["nothing to delete"]
        lines = []
        if self.roll_first:
            lines.append(
                "roll a new empty active segment first: every segment, the active one too, is deletable"
            )
        lines.extend(deletion.describe() for deletion in self.deletions)
        lines.append(
            f"log start offset -> {self.new_log_start_offset}; "
            f"{len(self.deletions)} segment(s), {self.bytes_freed} B freed"
        )
        return lines


NO_DELETIONS = RetentionPlan((), roll_first=False, new_log_start_offset=None, bytes_freed=0)

SegmentRule = Callable[[SegmentInfo, SegmentInfo | None], str | None]
"""Kafka's retention predicate ``(segment, next segment or None)``, returning the explanation when the segment may
go and ``None`` when it must stay. Rules may be stateful (the size rule counts down its excess), so a rule object
serves exactly one walk."""


# -- formatting ------------------------------------------------------------------------------------------------


def _format_timestamp(timestamp_ms: int) -> str:
    try:
        moment = _EPOCH + timedelta(milliseconds=timestamp_ms)
    except OverflowError:
        # Beyond datetime's years 1..9999: a corrupt or synthetic timestamp, shown as the raw number.
        return f"{timestamp_ms} ms since the epoch"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _format_duration(ms: int) -> str:
    parts = []
    rest = ms
    for unit, unit_ms in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, rest = divmod(rest, unit_ms)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) if parts else "0ms"


def _usage(used_bytes: int, total_bytes: int) -> str:
    return f"{used_bytes / total_bytes:.1%} ({used_bytes}/{total_bytes} B)"


# -- Kafka's walk ----------------------------------------------------------------------------------------------


def upper_bound_offsets(log: LogSnapshot) -> list[int]:
    """Each segment's exclusive upper offset: the next segment's base, the LEO for the last. O(segments)."""
    bases = [segment.base_offset for segment in log.segments]
    return [*bases[1:], log.log_end_offset]


def _walk(log: LogSnapshot, rule: SegmentRule) -> list[tuple[int, str]]:
    """Kafka's ``deletableSegments`` with each candidate's explanation."""
    segments = log.segments
    picked: list[tuple[int, str]] = []
    for index, upper in enumerate(upper_bound_offsets(log)):
        segment = segments[index]
        following = segments[index + 1] if index + 1 < len(segments) else None
        # Never at or beyond the HW, so the log start offset (exposed to consumers) cannot pass it. The rule is
        # only consulted below the HW, as Kafka short-circuits, which keeps a stateful rule's count exact.
        if log.high_watermark < upper:
            break
        detail = rule(segment, following)
        if detail is None or (following is None and segment.is_empty):
            break
        picked.append((index, detail))
    return picked


def deletable_segments(log: LogSnapshot, predicate: SegmentRule) -> list[int]:
    """Kafka's ``deletableSegments``: indexes of the leading segments that may go. O(candidates + 1) rule calls.

    A segment is a candidate only if ``high_watermark >= upper bound`` and ``predicate(segment, next)`` accepts
    it and it is not the last segment while empty; the walk stops at the first segment that fails.
    """
    return [index for index, _ in _walk(log, predicate)]


# -- the three Kafka rules -------------------------------------------------------------------------------------


def _keep(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
    """The rule of a switched-off policy: every segment stays."""
    return None


def _eligible(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
    """The rule of the cross-log policies: only Kafka's HW and last-empty bounds apply."""
    return "eligible"


def log_start_offset_rule(log_start_offset: int) -> SegmentRule:
    """Kafka's ``deleteLogStartOffsetBreachedSegments`` predicate: the next segment exists and starts at or below
    the log start offset, so every offset of this one is below it. O(1) per call."""

    def rule(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
        if following is None or following.base_offset > log_start_offset:
            return None
        return f"next segment starts at {following.base_offset} <= log start offset {log_start_offset}"

    return rule


def retention_size_rule(retention_bytes: int, total_size: int) -> SegmentRule:
    """Kafka's ``deleteRetentionSizeBreachedSegments`` predicate for a log of ``total_size`` bytes. O(1) per call.

    Off when ``retention_bytes < 0`` or ``total_size < retention_bytes``. Otherwise the excess
    ``total_size - retention_bytes`` is counted down: a segment goes while it fits in what is left of the excess,
    so the log never shrinks below ``retention.bytes``. Stateful: one rule per walk.
    """
    if retention_bytes < 0 or total_size < retention_bytes:
        return _keep
    excess = total_size - retention_bytes

    def rule(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
        nonlocal excess
        if excess - segment.size < 0:
            return None
        detail = (
            f"log size {total_size} B exceeds retention.bytes {retention_bytes} B; {excess} B of excess left, "
            f"{excess - segment.size} B after this segment"
        )
        excess -= segment.size
        return detail

    return rule


def retention_time_rule(retention_ms: int, now_ms: int) -> SegmentRule:
    """Kafka's ``deleteRetentionMsBreachedSegments`` predicate: ``now - largest_timestamp > retention_ms``; off when
    ``retention_ms < 0``. O(1) per call."""
    if retention_ms < 0:
        return _keep

    def rule(segment: SegmentInfo, following: SegmentInfo | None) -> str | None:
        age = now_ms - segment.largest_timestamp
        if age <= retention_ms:
            return None
        return (
            f"largest timestamp {_format_timestamp(segment.largest_timestamp)} is {_format_duration(age)} old "
            f"> retention.ms {_format_duration(retention_ms)} ({retention_ms} ms)"
        )

    return rule


# -- plans -----------------------------------------------------------------------------------------------------


def _finish(log: LogSnapshot, deletions: list[PlannedDeletion]) -> RetentionPlan:
    """The plan deleting ``deletions`` (a prefix of ``log.segments``), as Kafka's ``deleteSegments`` runs it."""
    if not deletions:
        return NO_DELETIONS
    count = len(deletions)
    assert [d.base_offset for d in deletions] == [s.base_offset for s in log.segments[:count]], "not a prefix"
    # A log keeps at least one segment: when all go, a new empty one is rolled at the LEO first. Kafka drops the
    # last candidate when that roll reuses its base; only an empty active segment at the LEO could, and the walk
    # never picks the last empty segment, so the roll's base is always new (LogSnapshot._check).
    roll_first = count == len(log.segments)
    following_base = log.log_end_offset if roll_first else log.segments[count].base_offset
    return RetentionPlan(
        tuple(deletions),
        roll_first=roll_first,
        new_log_start_offset=max(log.log_start_offset, following_base),
        bytes_freed=sum(deletion.size for deletion in deletions),
    )


def _then(first: RetentionPlan, second: RetentionPlan) -> RetentionPlan:
    """``first`` followed by ``second`` (planned on the log ``first`` leaves) as one plan."""
    if not second.deletions:
        return first
    if not first.deletions:
        return second
    return RetentionPlan(
        first.deletions + second.deletions,
        roll_first=first.roll_first or second.roll_first,
        new_log_start_offset=second.new_log_start_offset,
        bytes_freed=first.bytes_freed + second.bytes_freed,
    )


def apply_plan(log: LogSnapshot, plan: RetentionPlan, now_ms: int) -> LogSnapshot:
    """The snapshot of ``log`` after executing ``plan`` (a rolled segment gets ``now_ms`` as its timestamp, the
    mtime of a new empty file). O(segments)."""
    if not plan.deletions:
        return log
    count = len(plan.deletions)
    assert [d.base_offset for d in plan.deletions] == [s.base_offset for s in log.segments[:count]], (
        "not a prefix"
    )
    assert plan.new_log_start_offset is not None
    remaining = log.segments[count:]
    if plan.roll_first:
        remaining = (SegmentInfo(log.log_end_offset, 0, now_ms, True),)
    return LogSnapshot(remaining, log.log_end_offset, plan.new_log_start_offset, log.high_watermark)


def _rule_plan(log: LogSnapshot, reason: DeletionReason, rule: SegmentRule) -> RetentionPlan:
    segments = log.segments
    return _finish(
        log,
        [
            PlannedDeletion(segments[i].base_offset, segments[i].size, reason, detail)
            for i, detail in _walk(log, rule)
        ],
    )


def plan_retention(
    log: LogSnapshot, settings: RetentionSettings, now_ms: int, *, time_rule_allowed: bool = True
) -> RetentionPlan:
    """Kafka's ``deleteOldSegments`` for one log. O(segments).

    With ``delete_enabled``: the start-offset rule, then ``retention.bytes``, then ``retention.ms``, each walking the
    segments the previous rule left (with the raised log start offset); without it only the start-offset rule.
    ``time_rule_allowed=False`` (outside the ``logmgr.delete.when`` window) skips the time rule only.
    """
    rules: list[tuple[DeletionReason, Callable[[LogSnapshot], SegmentRule]]] = [
        ("log-start-offset", lambda current: log_start_offset_rule(current.log_start_offset)),
    ]
    if settings.delete_enabled:
        rules.append(
            (
                "retention.bytes",
                lambda current: retention_size_rule(settings.retention_bytes, current.total_size),
            )
        )
        if time_rule_allowed:
            rules.append(("retention.ms", lambda _: retention_time_rule(settings.retention_ms, now_ms)))
    plan = NO_DELETIONS
    current = log
    for reason, make_rule in rules:
        step = _rule_plan(current, reason, make_rule(current))
        current = apply_plan(current, step, now_ms)
        plan = _then(plan, step)
    return plan


# -- RocketMQ-style space management ---------------------------------------------------------------------------


def in_delete_window(now_ms: int, hours: frozenset[int] | None, tz: tzinfo | None) -> bool:
    """Whether time-based deletion may run now under ``logmgr.delete.when``. O(1).

    ``hours`` is the set of local hours (0-23) in ``tz`` (``None``: the process's local zone) that
    :class:`~logmgr.config.BrokerConfig` parses from ``04``, ``02-05`` or the wrapping ``22-02``; ``None`` means
    any hour. Disk-usage and manual cleanups ignore the window.
    """
    return hours is None or datetime.fromtimestamp(now_ms // 1000, tz).hour in hours


def _checked_total(total_bytes: int) -> None:
    if total_bytes <= 0:
        raise ValueError(f"total_bytes of the log dir's file system must be positive, got {total_bytes}")


def disk_usage_state(
    used_bytes: int,
    total_bytes: int,
    clean_ratio: float,
    warn_ratio: float,
    max_used_ratio: float = DISK_TIER_OFF,
) -> DiskUsageState:
    """The tier of a log dir's file system, RocketMQ's three disk tiers (``CleanCommitLogService``). O(1).

    ``"full"`` above ``warn_ratio`` (``diskSpaceWarningLevelRatio``: the dir rejects appends), else ``"clean"``
    above ``clean_ratio`` (``diskSpaceCleanForciblyRatio``: delete the oldest eligible segments regardless of age),
    else ``"expired"`` above ``max_used_ratio`` (``diskMaxUsedSpaceRatio``: delete expired segments even outside
    the delete window), else ``"ok"``; "above" is strict, as RocketMQ's ``physicRatio > ratio``, and a ratio of
    :data:`DISK_TIER_OFF` (1.0) is a tier switched off. Each tier implies the work of the ones below it. The
    ratios come validated from :class:`~logmgr.config.BrokerConfig` (``0 < r <= 1``, the tiers on not decreasing
    in tier order). Raises ``ValueError`` for ``total_bytes <= 0``.
    """
    _checked_total(total_bytes)
    tiers: tuple[tuple[DiskUsageState, float], ...] = (
        ("full", warn_ratio),
        ("clean", clean_ratio),
        ("expired", max_used_ratio),
    )
    for state, ratio in tiers:
        if ratio < DISK_TIER_OFF and used_bytes > ratio * total_bytes:
            return state
    return "ok"


def disk_tier_note(used_bytes: int, total_bytes: int, key: str, ratio: float) -> str:
    """What a ``retention.ms`` deletion outside ``logmgr.delete.when`` adds to its reason: the disk tier (its
    setting ``key`` and ``ratio``) that let the time rule run (RocketMQ's ``isSpaceToDelete``). O(1)."""
    return f"; outside logmgr.delete.when, allowed by the disk tier {key} {ratio:.1%}: usage {_usage(used_bytes, total_bytes)}"


def with_note(deletions: Iterable[PlannedDeletion], reason: DeletionReason, note: str) -> list[PlannedDeletion]:
    """``deletions`` with ``note`` appended to the detail of those for ``reason``. O(len(deletions))."""
    return [
        PlannedDeletion(d.base_offset, d.size, d.reason, d.detail + note) if d.reason == reason else d
        for d in deletions
    ]


def _oldest_first(logs: Mapping[K, LogSnapshot]) -> Iterator[tuple[K, SegmentInfo]]:
    """The eligible segments of all logs, globally oldest (smallest largest timestamp) first.

    Eligible is Kafka's walk without a rule: below the HW, never the last empty segment, and within a log strictly
    oldest first, so a log offers only its oldest not-yet-taken segment. Ties go to the log that comes first in
    ``logs``. Lazy: O(log L) per segment taken after O(segments) to find each log's eligible prefix.
    """
    eligible: list[tuple[K, tuple[SegmentInfo, ...]]] = []
    heap: list[tuple[int, int, int]] = []
    for key, log in logs.items():
        count = len(_walk(log, _eligible))
        if count:
            heap.append((log.segments[0].largest_timestamp, len(eligible), 0))
            eligible.append((key, log.segments[:count]))
    heapq.heapify(heap)
    while heap:
        _, order, position = heapq.heappop(heap)
        key, segments = eligible[order]
        yield key, segments[position]
        if position + 1 < len(segments):
            heapq.heappush(heap, (segments[position + 1].largest_timestamp, order, position + 1))


def plan_disk_pressure(
    logs: Mapping[K, LogSnapshot], used_bytes: int, total_bytes: int, clean_ratio: float
) -> list[tuple[K, PlannedDeletion]]:
    """RocketMQ's forced cleaning for one log dir: when ``used/total > clean_ratio``, take the globally oldest
    eligible segments until the projected usage is ``<= clean_ratio`` or nothing eligible is left.
    O(segments + taken * log(logs)).

    Ignores ``retention.ms`` and ``retention.bytes`` but keeps Kafka's bounds: never at or beyond a log's high
    watermark, never a log's last empty segment, each log strictly oldest first (a segment is taken only after all
    older ones of its log). Order: smallest largest timestamp first; ties by the order of ``logs``. The caller
    passes the logs it lets this policy touch. Projection subtracts each segment's size from ``used_bytes``.
    Group the result per log with :func:`plans_by_log`.
    """
    _checked_total(total_bytes)
    limit = clean_ratio * total_bytes
    projected = used_bytes
    picked: list[tuple[K, PlannedDeletion]] = []
    if projected <= limit:
        return picked
    for key, segment in _oldest_first(logs):
        before = projected
        projected -= segment.size
        detail = (
            f"second disk tier: usage {_usage(before, total_bytes)} > logmgr.disk.usage.clean.ratio "
            f"{clean_ratio:.1%}; oldest eligible segment "
            f"of the dir (largest timestamp {_format_timestamp(segment.largest_timestamp)}); "
            f"projected usage after it {_usage(projected, total_bytes)}"
        )
        picked.append((key, PlannedDeletion(segment.base_offset, segment.size, "disk-usage", detail)))
        if projected <= limit:
            break
    return picked


def plan_manual_cleanup(logs: Mapping[K, LogSnapshot], count: int) -> list[tuple[K, PlannedDeletion]]:
    """``request_manual_cleanup(count)``: the ``count`` globally oldest eligible segments (same eligibility and
    order as :func:`plan_disk_pressure`), fewer when fewer are eligible. O(segments + count * log(logs)).
    Raises ``ValueError`` for ``count < 0``."""
    if count < 0:
        raise ValueError(f"manual cleanup count must be >= 0, got {count}")
    return [
        (
            key,
            PlannedDeletion(
                segment.base_offset,
                segment.size,
                "manual",
                f"manual cleanup request {number}/{count}: oldest eligible segment of the dir "
                f"(largest timestamp {_format_timestamp(segment.largest_timestamp)})",
            ),
        )
        for number, (key, segment) in enumerate(islice(_oldest_first(logs), count), start=1)
    ]


def plans_by_log(
    logs: Mapping[K, LogSnapshot], picked: Iterable[tuple[K, PlannedDeletion]]
) -> dict[K, RetentionPlan]:
    """Group cross-log deletions (:func:`plan_disk_pressure`, :func:`plan_manual_cleanup`) into one
    :class:`RetentionPlan` per log, with roll and new log start offset as :func:`plan_retention` sets them.
    Each log's deletions must be a prefix of its segments, oldest first. O(picked + segments of those logs)."""
    grouped: dict[K, list[PlannedDeletion]] = {}
    for key, deletion in picked:
        grouped.setdefault(key, []).append(deletion)
    return {key: _finish(logs[key], deletions) for key, deletions in grouped.items()}
