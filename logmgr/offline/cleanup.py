"""The plan of ``logmgr cleanup``: one run of Kafka's retention job (``cleanupLogs``) over a log dir, offline.

:func:`plan_cleanup` is pure: it takes the read-only :class:`~logmgr.offline.scan.LogDirView`, each topic's
effective config (with where every value came from), the broker config, the time and the dir's disk usage, and
returns the :class:`~logmgr.offline.plan.LogDirPlan` the real run executes. What it decides is what a broker's
``LogManager`` would do in one retention pass (the policies of :mod:`logmgr.retention`):

* logs without ``delete`` (``compact`` ones included: Kafka's cleaner thread runs ``deleteOldSegments`` on them)
  get the log-start-offset rule only, ``compact,delete`` logs full retention; compaction itself is
  ``logmgr compact``;
* RocketMQ's disk tiers from the dir's measured usage (on by default: 0.75, 0.85, 0.90): above the second
  (``logmgr.disk.usage.clean.ratio``) the dir's oldest eligible segments first (reason ``disk-usage``, naming the
  tier), then each log's start-offset, size and time rules, the time rule only inside ``logmgr.delete.when`` or
  above the first tier (``logmgr.disk.max.used.ratio``; such deletions name the tier in their reason); never at or
  past the high watermark. The plan notes the usage and the tier; above the third it notes that a broker would
  refuse appends to the dir;
* when every segment goes, a new empty active segment is rolled at the log end offset first (planned as its own
  action: the dry run and the real run agree on it);
* per deleted segment: its ``.log``, indexes and producer snapshot; per log: ``leader-epoch-checkpoint``
  truncated at the new log start (Kafka's ``truncateFromStart``); per dir: the log-start-offset checkpoint entry
  (kept only while the start is above the first segment's base, as Kafka writes it) and a recovery-point entry
  raised to the new log start (Kafka's ``updateLogStartOffset``). Entries of other partitions stay byte for byte.
  No producer snapshot is written at the roll: a broker's loader deletes snapshots at or below the log start
  offset, which the roll's would be.

Nothing else of the dir changes: other checkpoints, the clean-shutdown marker, producer state, partitions with
nothing to delete. A partition whose data a broker's recovery would change (invalid bytes after an unclean
shutdown) makes planning fail with :class:`~logmgr.errors.PlanError` unless the caller planned recovery first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)
from checkpoints.offset_checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE
from logmgr.config import BrokerConfig
from logmgr.errors import PlanError
from logmgr.leader_epoch_cache import epochs_as_loaded, epochs_truncated_from_start
from logmgr.offline.checkpoint_edit import offset_checkpoint_rewrite
from logmgr.offline.plan import (
    Action,
    CreateEmptySegment,
    DeleteFiles,
    LogDirPlan,
    PartitionPlan,
    WriteFile,
)
from logmgr.offline.scan import LogDirView, PartitionView
from logmgr.retention import (
    DiskUsageState,
    LogSnapshot,
    RetentionPlan,
    RetentionSettings,
    apply_plan,
    disk_tier_note,
    disk_usage_state,
    plan_disk_pressure,
    plan_retention,
    plans_by_log,
    with_note,
)
from logmgr.topic_configs import EffectiveTopicConfig
from segments.naming import TopicPartition, filename_prefix_from_offset

RETENTION_KEYS = ("cleanup.policy", "retention.ms", "retention.bytes")
"""The topic configs a retention pass reads, shown with their sources in the plan."""


@dataclass(frozen=True)
class DiskUsage:
    """The file system of a log dir: bytes used and usable (:func:`~logmgr.log_manager.measure_disk_usage`)."""

    used: int
    total: int


def plan_cleanup(
    view: LogDirView,
    resolve: Callable[[str], EffectiveTopicConfig],
    broker: BrokerConfig,
    now_ms: int,
    *,
    disk_usage: DiskUsage | None = None,
    notes: tuple[str, ...] = (),
) -> LogDirPlan:
    """The retention pass a broker would run on ``view`` at ``now_ms`` (see the module doc). ``disk_usage`` is
    needed unless every disk tier is off (ratio 1.0). Raises :class:`PlanError` for a partition needing
    recovery. O(partitions x segments)."""
    damaged = [p for p in view.partitions if p.needs_recovery]
    if damaged:
        first = damaged[0]
        raise PlanError(
            f"{view.path / first.name}: {first.needs_recovery[0]} ({len(damaged)} damaged partition(s)); "
            "repair first: `logmgr recover` (--full for what a broker would not recover) or cleanup --recover-first"
        )
    configs = {p.topic_partition.topic: resolve(p.topic_partition.topic) for p in view.partitions}
    snapshots: dict[TopicPartition, LogSnapshot] = {}
    settings: dict[TopicPartition, RetentionSettings] = {}
    partition_notes: dict[TopicPartition, list[str]] = {}
    for partition in view.partitions:
        tp = partition.topic_partition
        config = configs[tp.topic].config
        if not partition.segments:
            partition_notes[tp] = ["no .log file: nothing to delete (a broker creates an empty segment on load)"]
            continue
        snapshots[tp] = partition.retention_snapshot()
        settings[tp] = RetentionSettings(config.retention_ms, config.retention_bytes, config.delete)
    plans: dict[TopicPartition, RetentionPlan] = {}
    state: DiskUsageState = "ok"
    tier_notes: tuple[str, ...] = ()
    note = ""
    window_open = broker.delete_window_open(now_ms)
    if broker.disk_tiers_enabled:
        if disk_usage is None:
            raise ValueError("a disk tier is on (logmgr.disk.*.ratio below 1.0): the dir's disk usage is needed")
        used, total = disk_usage.used, disk_usage.total
        state = disk_usage_state(
            used, total, broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio, broker.disk_max_used_ratio
        )
        tier_notes = (_disk_note(broker, state, disk_usage),)
        if state in ("clean", "full"):
            deletable = {tp: s for tp, s in snapshots.items() if settings[tp].delete_enabled}
            plans.update(
                plans_by_log(deletable, plan_disk_pressure(deletable, used, total, broker.disk_usage_clean_ratio))
            )
        if state != "ok" and not window_open:
            note = disk_tier_note(used, total, *broker.disk_tier(state))
    time_rule_allowed = window_open or state != "ok"
    for tp, snapshot in snapshots.items():
        pressure = plans.get(tp)
        current = snapshot if pressure is None else apply_plan(snapshot, pressure, now_ms)
        plan = plan_retention(current, settings[tp], now_ms, time_rule_allowed=time_rule_allowed)
        if note:
            plan = dataclasses.replace(plan, deletions=tuple(with_note(plan.deletions, "retention.ms", note)))
        if pressure is not None:
            plan = RetentionPlan(
                pressure.deletions + plan.deletions,
                roll_first=pressure.roll_first or plan.roll_first,
                new_log_start_offset=plan.new_log_start_offset if plan.deletions else pressure.new_log_start_offset,
                bytes_freed=pressure.bytes_freed + plan.bytes_freed,
            )
        if plan.deletions:
            plans[tp] = plan
    partitions: list[PartitionPlan] = []
    new_starts: dict[TopicPartition, tuple[int, int]] = {}
    warnings: list[str] = []
    for partition in view.partitions:
        tp = partition.topic_partition
        effective = configs[tp.topic]
        chosen = plans.get(tp)
        actions: list[Action] = []
        if chosen is not None:
            actions = _partition_actions(partition, chosen)
            assert chosen.new_log_start_offset is not None
            first_base = partition.log_end_offset if chosen.roll_first else _first_kept_base(partition, chosen)
            new_starts[tp] = (chosen.new_log_start_offset, first_base)
            if not effective.known:
                warnings.append(
                    f"{partition.name}: "
                    + unknown_config_warning(effective, f"{len(chosen.deletions)} segment(s) would be deleted")
                )
        partitions.append(PartitionPlan(partition.name, tuple(actions), tuple(partition_notes.get(tp, ()))))
    topic_notes = [_topic_note(configs[topic]) for topic in sorted(configs)]
    return LogDirPlan(
        "cleanup",
        view.path,
        tuple(partitions),
        _checkpoint_actions(view, new_starts),
        tuple(warnings),
        (*notes, *tier_notes, *topic_notes),
    )


def _disk_note(broker: BrokerConfig, state: DiskUsageState, usage: DiskUsage) -> str:
    """The plan's note of the dir's usage and the disk tier it is in (what a broker's disk check would do). O(1)."""
    ratios = (
        f"logmgr.disk.max.used.ratio {broker.disk_max_used_ratio:.0%}, logmgr.disk.usage.clean.ratio "
        f"{broker.disk_usage_clean_ratio:.0%}, logmgr.disk.usage.warn.ratio {broker.disk_usage_warn_ratio:.0%}"
    )
    share = f"disk usage {usage.used / usage.total:.1%} ({usage.used}/{usage.total} B; tiers: {ratios})"
    if state == "ok":
        return f"{share}: below every disk tier"
    key, ratio = broker.disk_tier(state)
    effect = {
        "expired": "expired segments go even outside logmgr.delete.when",
        "clean": "the oldest eligible segments go regardless of age, expired ones at any hour",
        "full": "a broker marks the dir full and refuses appends; the oldest eligible segments go regardless of age",
    }[state]
    return f"{share}: above {key} {ratio:.0%}: {effect}"


def unknown_config_warning(effective: EffectiveTopicConfig, consequence: str) -> str:
    """Why a topic whose config nothing names (a ZooKeeper-era dir without flags) is at risk: ``consequence``
    (``"3 segment(s) would be deleted"``) under the retention settings that apply, and the flag that fixes it. O(1)."""
    topic = effective.topic
    return (
        f"the config of topic {topic!r} is unknown (no KRaft metadata or flag names it) and {consequence} under "
        + ", ".join(_setting(effective, key) for key in RETENTION_KEYS)
        + f"; if it is compacted, pass --topic-config {topic}:cleanup.policy=compact"
    )


def _topic_note(effective: EffectiveTopicConfig) -> str:
    config = effective.config
    if config.compact and not config.delete:
        return (
            f"topic {effective.topic}: {_setting(effective, 'cleanup.policy')}: compacted (by `logmgr compact`); "
            "only the log-start-offset rule deletes its segments"
        )
    return f"topic {effective.topic}: " + ", ".join(_setting(effective, key) for key in RETENTION_KEYS)


def _setting(effective: EffectiveTopicConfig, key: str) -> str:
    value = effective.config.to_properties()[key]
    return f"{key}={value} ({effective.sources[key]})"


def _first_kept_base(partition: PartitionView, plan: RetentionPlan) -> int:
    return partition.segments[len(plan.deletions)].base_offset


def _partition_actions(partition: PartitionView, plan: RetentionPlan) -> list[Action]:
    """Roll (if every segment goes), the segments' deletions oldest first, the leader-epoch truncation."""
    actions: list[Action] = []
    if plan.roll_first:
        actions.append(
            CreateEmptySegment(
                partition.name,
                partition.log_end_offset,
                "every segment, the active one too, is to be deleted: a log keeps one segment",
            )
        )
    by_base = {segment.base_offset: segment for segment in partition.segments}
    for deletion in plan.deletions:
        segment = by_base[deletion.base_offset]
        actions.append(
            DeleteFiles(
                partition.name,
                segment.files,
                f"{deletion.reason}: {deletion.detail}",
                what=f"segment {filename_prefix_from_offset(segment.base_offset)}",
            )
        )
    assert plan.new_log_start_offset is not None
    epochs = _epoch_truncation(partition, plan.new_log_start_offset)
    if epochs is not None:
        actions.append(epochs)
    return actions


def _epoch_truncation(partition: PartitionView, new_start: int) -> WriteFile | None:
    raw = partition.leader_epoch_checkpoint
    if raw is None:
        return None
    path = f"{partition.name}/{LEADER_EPOCH_CHECKPOINT_FILE}"
    loaded = epochs_as_loaded(parse_leader_epoch_checkpoint(raw, path), path)
    truncated = epochs_truncated_from_start(loaded, new_start)
    if truncated is None:
        return None
    after = format_leader_epoch_checkpoint(truncated)
    if after == raw:
        return None
    kept = " ".join(f"{e.epoch}@{e.start_offset}" for e in truncated)
    return WriteFile(
        path,
        raw,
        after,
        f"epochs below the new log start offset {new_start} are forgotten (Kafka's truncateFromStart)",
        (f"entries now: {kept or 'none'}",),
    )


def _checkpoint_actions(view: LogDirView, new_starts: Mapping[TopicPartition, tuple[int, int]]) -> tuple[Action, ...]:
    """The log-start-offset and recovery-point checkpoint entries of the partitions whose log start moves."""
    if not new_starts:
        return ()
    starts = view.checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE]
    start_entries = dict(starts.entries)
    for tp, (start, first_base) in new_starts.items():
        if start > first_base:
            start_entries[tp] = start
        else:
            start_entries.pop(tp, None)
    points = view.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE]
    point_entries = dict(points.entries)
    for tp, (start, _) in new_starts.items():
        if tp in point_entries and point_entries[tp] < start:
            point_entries[tp] = start
    actions = [
        offset_checkpoint_rewrite(starts, start_entries, "the log start offset moves past the deleted segments"),
        offset_checkpoint_rewrite(points, point_entries, "a recovery point is never below the log start offset (Kafka's updateLogStartOffset)"),
    ]
    return tuple(action for action in actions if action is not None)

