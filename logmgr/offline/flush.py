"""The plan of ``logmgr flush``: make partitions durable to their log end and checkpoint that.

For each selected partition: fsync every file of the segments from the one holding its checkpointed recovery point
on (all of them when none is checkpointed): ``.log`` and its indexes, as Kafka's ``LocalLog.flush`` does, then set
its ``recovery-point-offset-checkpoint`` entry to the log end offset. Nothing else changes (the clean-shutdown
marker stays as found: it speaks for the whole dir). A partition holding invalid bytes (after an unclean shutdown)
is refused: moving its recovery point past them would tell a broker not to recover them.
"""

from __future__ import annotations

from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE
from logmgr.errors import PlanError
from logmgr.offline.checkpoint_edit import offset_checkpoint_rewrite
from logmgr.offline.plan import Action, FsyncFile, LogDirPlan, PartitionPlan
from logmgr.offline.scan import LogDirView
from segments.naming import SNAPSHOT_SUFFIX


def plan_flush(view: LogDirView) -> LogDirPlan:
    """Flush every partition of ``view`` (scan it with ``only=`` to select). Raises :class:`PlanError` for a
    partition needing recovery. O(segment files)."""
    partitions: list[PartitionPlan] = []
    points = view.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE]
    entries = dict(points.entries)
    for partition in view.partitions:
        if partition.needs_recovery:
            raise PlanError(
                f"{view.path / partition.name}: {partition.needs_recovery[0]}; run `logmgr recover` before flushing"
            )
        point = partition.recovery_point
        bases = [s.base_offset for s in partition.segments]
        first = max((b for b in bases if point is not None and b <= point), default=bases[0] if bases else 0)
        actions: list[Action] = [
            FsyncFile(f"{partition.name}/{name}", size, "make the log durable up to its end")
            for segment in partition.segments
            if segment.base_offset >= first
            for name, size in segment.files
            if not name.endswith(SNAPSHOT_SUFFIX)
        ]
        end = partition.log_end_offset
        entries[partition.topic_partition] = end
        note = f"recovery point {'none' if point is None else point} -> {end} (log end offset {end})"
        partitions.append(PartitionPlan(partition.name, tuple(actions), (note,)))
    write = offset_checkpoint_rewrite(points, entries, "the flushed partitions are durable to their log end")
    return LogDirPlan("flush", view.path, tuple(partitions), () if write is None else (write,))
