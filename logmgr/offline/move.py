"""The plan of ``logmgr move-log``: an intra-broker move (Kafka's ``alterReplicaLogDirs``) or its cancellation,
decided by reading only.

:func:`plan_move` finds the partition's current dir among the log dirs, any ``-future`` copy of it already on
disk, and checks what Kafka's ``alterReplicaLogDirs`` and the disk tiers would refuse: a target that is not one of
the log dirs, the partition already in the target, a future copy pending in another dir, a target without room
for the bytes still to copy (free space, and RocketMQ's third tier: the copy must not push the target's usage
above ``logmgr.disk.usage.warn.ratio``, where the dir would refuse appends). A future copy in the target is a
resume: only the bytes it lacks count. :func:`plan_abort` names the future copy a cancellation deletes. The
:class:`~logmgr.log_manager.LogManager` then executes the plan (``move_log`` / ``abort_move``), validating again
under the dirs' locks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logmgr.config import BrokerConfig
from logmgr.errors import PlanError
from segments.errors import StorageFormatError
from segments.naming import PartitionDirName, TopicPartition

UsageProbe = Callable[[Path], tuple[int, int]]
"""Bytes used and usable on a dir's file system (:func:`~logmgr.log_manager.measure_disk_usage`)."""


@dataclass(frozen=True, slots=True)
class PartitionCopy:
    """One directory of the partition: its path, bytes of its files and ``.log`` segments."""

    path: Path
    bytes: int
    segments: int

    @classmethod
    def of(cls, path: Path) -> PartitionCopy:
        """Sizes of ``path``'s files (one ``stat`` each). O(files)."""
        files = [p for p in path.iterdir() if p.is_file()]
        return cls(path, sum(p.stat().st_size for p in files), sum(1 for p in files if p.suffix == ".log"))

    def to_json(self) -> dict[str, Any]:
        return {"dir": str(self.path), "bytes": self.bytes, "segments": self.segments}


@dataclass(frozen=True, slots=True)
class MovePlan:
    """A move (``abort`` False) of ``current`` into ``target``, resuming ``future`` when one is there; or the
    cancellation (``abort`` True) of the pending ``future`` copy."""

    topic_partition: TopicPartition
    abort: bool
    current: PartitionCopy | None
    future: PartitionCopy | None
    target: Path
    bytes_to_copy: int

    @property
    def resume(self) -> bool:
        return not self.abort and self.future is not None

    def describe(self) -> list[str]:
        """The lines the dry run prints. O(1)."""
        tp = self.topic_partition
        if self.abort:
            assert self.future is not None
            assert self.current is not None
            return [
                f"abort the move of {tp}: delete the future copy {self.future.path} ({self.future.bytes} B, "
                f"{self.future.segments} segment(s)); the current log stays in {self.current.path.parent}"
            ]
        assert self.current is not None
        source = self.current.path.parent
        lines = [
            f"move {tp} from {source} to {self.target}: {self.current.bytes} B in {self.current.segments} "
            f"segment(s)"
        ]
        if self.future is not None:
            lines.append(
                f"resume the future copy {self.future.path.name} ({self.future.bytes} B, {self.future.segments} "
                f"segment(s) already copied)"
            )
        lines.append(f"about {self.bytes_to_copy} B to copy, then the swap (Kafka's replaceCurrentWithFutureLog)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "action": "abort" if self.abort else "resume" if self.resume else "move",
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "sourceDir": None if self.current is None else str(self.current.path.parent),
            "targetDir": str(self.target),
            "current": None if self.current is None else self.current.to_json(),
            "future": None if self.future is None else self.future.to_json(),
            "bytesToCopy": self.bytes_to_copy,
        }


def _copies(log_dirs: Sequence[Path], tp: TopicPartition) -> tuple[list[Path], list[Path]]:
    """The live and ``-future`` dirs of ``tp`` in ``log_dirs``. O(entries of the dirs)."""
    live: list[Path] = []
    futures: list[Path] = []
    for log_dir in log_dirs:
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir() or child.is_symlink():
                continue
            try:
                parsed = PartitionDirName.parse(child.name)
            except StorageFormatError:
                continue
            if parsed.topic_partition != tp:
                continue
            if parsed.kind == "live":
                live.append(child)
            elif parsed.kind == "future":
                futures.append(child)
    return live, futures


def plan_move(
    log_dirs: Sequence[Path], tp: TopicPartition, target: Path, broker: BrokerConfig, usage: UsageProbe
) -> MovePlan:
    """The move of ``tp`` into ``target`` (see the module doc); raises :class:`PlanError` naming what refuses it.
    O(entries of the dirs + files of the partition)."""
    dirs = [d.resolve() for d in log_dirs]
    target = target.resolve()
    if target not in dirs:
        raise PlanError(f"{target} is not one of the log dirs ({', '.join(map(str, dirs))})")
    live, futures = _copies(dirs, tp)
    if not live:
        raise PlanError(f"no log of {tp} in {', '.join(map(str, dirs))}")
    if len(live) > 1:
        raise PlanError(f"{tp} has a log in several dirs: {', '.join(map(str, live))}")
    if len(futures) > 1:
        raise PlanError(f"{tp} has several future copies: {', '.join(map(str, futures))}")
    current = PartitionCopy.of(live[0])
    if current.path.parent == target:
        raise PlanError(f"{tp} is already in {target}")
    future = PartitionCopy.of(futures[0]) if futures else None
    if future is not None and future.path.parent != target:
        raise PlanError(
            f"a future copy of {tp} is pending in {future.path.parent} ({future.path.name}): resume it with "
            f"--to {future.path.parent}, or drop it with --abort"
        )
    needed = max(0, current.bytes - (future.bytes if future is not None else 0))
    used, usable = usage(target)
    if needed > usable - used:
        raise PlanError(f"{target} has no room for {tp}: {needed} B to copy, {usable - used} B free")
    warn = broker.disk_usage_warn_ratio
    if broker.disk_tiers_enabled and used + needed > warn * usable:
        raise PlanError(
            f"{target} has no room for {tp}: {needed} B more would take its usage to "
            f"{(used + needed) / usable:.1%}, above logmgr.disk.usage.warn.ratio {warn:.0%} (the dir would refuse "
            "appends)"
        )
    return MovePlan(tp, False, current, future, target, needed)


def plan_abort(log_dirs: Sequence[Path], tp: TopicPartition) -> MovePlan:
    """The cancellation of ``tp``'s pending move: its ``-future`` copy goes. Raises :class:`PlanError` when there
    is none. O(entries of the dirs + files of the copy)."""
    dirs = [d.resolve() for d in log_dirs]
    live, futures = _copies(dirs, tp)
    if not futures:
        raise PlanError(f"no future copy of {tp} in {', '.join(map(str, dirs))}: no move to abort")
    if len(futures) > 1:
        raise PlanError(f"{tp} has several future copies: {', '.join(map(str, futures))}")
    future = PartitionCopy.of(futures[0])
    if len(live) != 1:
        # A move renames the current log away only once its future holds every record: the next start swaps the
        # future in, and deleting it would delete the partition.
        raise PlanError(f"{future.path} is the only log of {tp} (its move was swapping it in): nothing to abort")
    return MovePlan(tp, True, PartitionCopy.of(live[0]), future, future.path.parent, 0)
