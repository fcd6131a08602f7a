"""Planned edits of a log dir's offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``).

:func:`offset_checkpoint_rewrite` turns new entries into the :class:`~logmgr.offline.plan.WriteFile` that writes
them, naming each entry that changes; entries the edit does not touch keep their values and file order.
:func:`plan_checkpoint_set` is ``logmgr checkpoints set``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from checkpoints.offset_checkpoint import (
    OFFSET_CHECKPOINT_FILES,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from logmgr.errors import PlanError
from logmgr.offline.plan import LogDirPlan, WriteFile
from logmgr.offline.scan import CheckpointView, read_regular_file, require_log_dir
from segments.naming import TopicPartition


def offset_checkpoint_rewrite(
    checkpoint: CheckpointView, entries: Mapping[TopicPartition, int], reason: str
) -> WriteFile | None:
    """The write replacing ``checkpoint``'s entries by ``entries`` (None when they are equal), listing each change
    as ``tp: before -> after`` (``absent`` for a missing entry). O(entries)."""
    if dict(checkpoint.entries) == dict(entries):
        return None
    changes = []
    for tp in sorted(set(checkpoint.entries) | set(entries), key=str):
        before, after = checkpoint.entries.get(tp), entries.get(tp)
        if before != after:
            changes.append(f"{tp}: {'absent' if before is None else before} -> {'absent' if after is None else after}")
    return WriteFile(checkpoint.name, checkpoint.raw, format_offset_checkpoint(entries), reason, tuple(changes))


def plan_checkpoint_set(path: Path, tp: TopicPartition, offset: int, *, force: bool) -> LogDirPlan:
    """Set ``tp``'s entry of the offset checkpoint ``path`` to ``offset``. A partition neither in the file nor
    with a partition dir beside it is refused unless ``force``. Reads only. O(file size)."""
    if path.name not in OFFSET_CHECKPOINT_FILES:
        raise PlanError(f"{path}: not an offset checkpoint (expected one of {', '.join(OFFSET_CHECKPOINT_FILES)})")
    log_dir = path.parent
    require_log_dir(log_dir)
    raw = read_regular_file(path)
    if raw is None:
        raise PlanError(f"{path}: no such file")
    checkpoint = CheckpointView(path.name, raw, parse_offset_checkpoint(raw, path))
    partition_dir = log_dir / str(tp)
    if tp not in checkpoint.entries and not force and not (partition_dir.is_dir() and not partition_dir.is_symlink()):
        raise PlanError(f"{path}: unknown partition {tp} (not in the file, no partition dir); use --force to add it")
    entries = {**checkpoint.entries, tp: offset}
    write = offset_checkpoint_rewrite(checkpoint, entries, "set by the operator (logmgr checkpoints set)")
    return LogDirPlan("checkpoints set", log_dir, dir_actions=() if write is None else (write,))
