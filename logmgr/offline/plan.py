"""Plan, then apply: the one way an offline command changes a log dir.

A command that writes (``cleanup``, ``recover``, ``compact``, ``reindex`` in place with or without ``--key-index``,
``flush``, ``checkpoints set``) first builds a :class:`LogDirPlan` by reading only: every file it will create,
truncate, split, rebuild, rename or delete and every checkpoint entry it will change, each with the reason and the bytes involved. ``--dry-run`` prints the plan;
the real run hands the same object to :func:`apply_plan`, which executes exactly its actions in order and reports
each one as it completes. Nothing else is written (the dir's ``.lock``, taken around the run, is the only file the
command itself may create).

Every action records what it expects to find (a file's size, a checkpoint's bytes, that a new file is absent)
and checks it again right before acting: if another process changed the dir after planning, :class:`PlanStaleError`
stops the run before that action. Actions are crash-safe on their own: new files are created exclusively, with
``O_NOFOLLOW`` and fsynced; deletions rename to ``.deleted`` (Kafka's loader removes leftovers) before unlinking;
file rewrites go through a temporary, fsync, rename, fsync of the dir (:func:`checkpoints.atomic.atomic_write_bytes`).
No action follows a symbolic link: a link where a file is expected is a stale plan.

:meth:`LogDirPlan.predict` applies the plan to a model of the tree (relative path -> bytes), which the tests compare
with the tree a real run leaves. Files whose content is derived from a ``.log`` by Kafka's index rule (rebuilt
indexes) are predicted as :data:`DERIVED`.
"""

from __future__ import annotations

import errno
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from checkpoints.atomic import atomic_write_bytes, fsync_dir
from logmgr.errors import KafkaStorageError, PlanStaleError
from segments.key_index import KEY_INDEX_SUFFIX
from segments.naming import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    filename_prefix_from_offset,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)

DERIVED = b"\x00<derived from the .log by Kafka's index rule>"
"""Predicted content of a file the plan rebuilds from a ``.log`` (compared separately by the tests)."""

UNKNOWN_SIZE = -1
"""The planned size of a file that an earlier action of the plan rebuilds."""

Tree = dict[str, bytes]
"""A log dir's files: path relative to the log dir (``/``-separated) -> content."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DELETED_SUFFIX = ".deleted"


def _stale(path: Path, what: str) -> PlanStaleError:
    return PlanStaleError(f"{path}: {what} since the plan was made; nothing more was applied (re-run to re-plan)")


def _regular_size(path: Path) -> int | None:
    """Size of the regular file at ``path`` (not following a link); None when absent. A link or anything else
    than a regular file is refused."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise _stale(path, "is not a regular file (a link or a directory appeared)")
    return info.st_size


def _storage_error(path: Path, action: str, err: OSError) -> KafkaStorageError:
    return KafkaStorageError(f"{path}: {action} failed: {err.strerror or err}")


def _require_size(path: Path, size: int | None) -> None:
    """Raise PlanStaleError unless ``path`` is still as planned: absent for ``size`` None, a regular file of any
    size for :data:`UNKNOWN_SIZE` (a file an earlier action of the same plan rebuilds), else a regular file of
    ``size`` bytes. O(1) (one lstat)."""
    found = _regular_size(path)
    if size is None:
        if found is not None:
            raise _stale(path, "is no longer absent")
    elif found is None or (size != UNKNOWN_SIZE and found != size):
        raise _stale(path, f"is no longer a file of {size} bytes")


def _require_absent(path: Path) -> None:
    """Raise PlanStaleError when something appeared at ``path``, planned to be created or renamed onto. O(1)."""
    if _regular_size(path) is not None:
        raise _stale(path, "exists")


def _fsync_and_close(fd: int, path: Path) -> None:
    """fsync then close ``fd`` (open on ``path``), whatever happens; a failed fsync raises KafkaStorageError.
    O(dirty pages of the file)."""
    try:
        os.fsync(fd)
    except OSError as err:
        raise _storage_error(path, "fsync", err) from err
    finally:
        os.close(fd)


class Action(ABC):
    """One change to a log dir: what, why, how many bytes; checked and applied on its own. Subclasses are frozen
    dataclasses whose ``path``-like fields are relative to the log dir."""

    kind: ClassVar[str]
    reason: str

    @abstractmethod
    def describe(self) -> str:
        """One line for the printed plan (and, past tense, the report). O(1)."""

    @abstractmethod
    def fields(self) -> dict[str, Any]:
        """The action's JSON fields besides ``action`` and ``reason``. O(1)."""

    @abstractmethod
    def predict(self, tree: Tree) -> None:
        """Apply the action to a tree model. O(files touched)."""

    @abstractmethod
    def apply(self, log_dir: Path) -> None:
        """Check the expected state, then change the files; raises :class:`PlanStaleError` or
        :class:`KafkaStorageError` naming the file. O(bytes written)."""

    @property
    def bytes_freed(self) -> int:
        """Bytes of files removed or cut off. O(1)."""
        return 0

    @property
    def bytes_written(self) -> int:
        """Bytes of files created or rewritten. O(1)."""
        return 0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: ``action`` (the kind), ``reason``, the kind's fields. O(1)."""
        return {"action": self.kind, **self.fields(), "reason": self.reason}


@dataclass(frozen=True)
class CreateEmptySegment(Action):
    """Roll: a new empty segment (``.log``, ``.index``, ``.timeindex`` of 0 bytes, as Kafka leaves a trimmed empty
    segment) at ``base_offset``, which becomes the active segment."""

    kind: ClassVar[str] = "roll"
    partition: str
    base_offset: int
    reason: str

    def _paths(self, log_dir: Path) -> list[Path]:
        directory = log_dir / self.partition
        return [
            log_file(directory, self.base_offset),
            offset_index_file(directory, self.base_offset),
            time_index_file(directory, self.base_offset),
        ]

    def describe(self) -> str:
        return f"roll a new empty active segment {filename_prefix_from_offset(self.base_offset)}: {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "baseOffset": self.base_offset}

    def predict(self, tree: Tree) -> None:
        for path in self._paths(Path()):
            tree[path.as_posix()] = b""

    def apply(self, log_dir: Path) -> None:
        for path in self._paths(log_dir):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
            except FileExistsError:
                raise _stale(path, "exists") from None
            except OSError as err:
                raise _storage_error(path, "creating the segment file", err) from err
            _fsync_and_close(fd, path)
        _fsync_dir(log_dir / self.partition)


@dataclass(frozen=True)
class DeleteFiles(Action):
    """Delete files of one partition dir (a segment with its indexes and producer snapshot, or leftovers): each is
    renamed to ``.deleted`` first, so a crash leaves only names Kafka's loader removes, then unlinked."""

    kind: ClassVar[str] = "delete"
    partition: str
    """The partition dir's name; empty for a file of the log dir itself (the clean-shutdown marker)."""
    files: tuple[tuple[str, int], ...]
    """``(name, size)`` of each file, as planned; size :data:`UNKNOWN_SIZE` for a file an earlier action of the
    same plan rebuilds (its size is known only then)."""
    reason: str
    what: str = "files"
    """What the files are, for the printed line: ``segment 00000000000000000042``, ``leftover``."""

    def describe(self) -> str:
        names = ", ".join(name for name, _ in self.files)
        return f"delete {self.what} ({self.bytes_freed} B: {names}): {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "what": self.what,
            "files": [{"name": name, "size": size} for name, size in self.files],
            "bytes": self.bytes_freed,
        }

    @property
    def bytes_freed(self) -> int:
        return sum(max(size, 0) for _, size in self.files)

    def predict(self, tree: Tree) -> None:
        for name, _ in self.files:
            tree.pop(f"{self.partition}/{name}" if self.partition else name, None)

    def apply(self, log_dir: Path) -> None:
        directory = log_dir / self.partition
        renamed: list[Path] = []
        for name, size in self.files:
            _require_size(directory / name, size)
        for name, _ in self.files:
            path = directory / name
            target = directory / (name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
            except OSError as err:
                raise _storage_error(path, "rename to .deleted", err) from err
            renamed.append(target)
        _fsync_dir(directory)
        for path in renamed:
            try:
                path.unlink()
            except OSError as err:
                raise _storage_error(path, "unlink", err) from err
        _fsync_dir(directory)


@dataclass(frozen=True)
class TruncateFile(Action):
    """Cut a file (a ``.log`` with invalid bytes at its end) to ``size_after`` bytes, then fsync it."""

    kind: ClassVar[str] = "truncate"
    path: str
    size_before: int
    size_after: int
    reason: str

    def describe(self) -> str:
        return (
            f"truncate {self.path} from {self.size_before} to {self.size_after} B "
            f"({self.bytes_freed} B removed): {self.reason}"
        )

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "sizeBefore": self.size_before, "sizeAfter": self.size_after}

    @property
    def bytes_freed(self) -> int:
        return self.size_before - self.size_after

    def predict(self, tree: Tree) -> None:
        tree[self.path] = tree[self.path][: self.size_after]

    def apply(self, log_dir: Path) -> None:
        path = log_dir / self.path
        try:
            fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _CLOEXEC)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise _stale(path, "became a symbolic link") from None
            raise _storage_error(path, "open for truncation", err) from err
        try:
            if os.fstat(fd).st_size != self.size_before:
                raise _stale(path, f"is no longer {self.size_before} bytes")
            os.ftruncate(fd, self.size_after)
            os.fsync(fd)
        except OSError as err:
            raise _storage_error(path, f"truncation to {self.size_after} bytes", err) from err
        finally:
            os.close(fd)


@dataclass(frozen=True)
class RenameFile(Action):
    """Rename a file within its dir (finishing a ``.swap``), replacing nothing."""

    kind: ClassVar[str] = "rename"
    path: str
    target: str
    size: int
    reason: str

    def describe(self) -> str:
        return f"rename {self.path} to {Path(self.target).name}: {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "target": self.target, "bytes": self.size}

    def predict(self, tree: Tree) -> None:
        tree[self.target] = tree.pop(self.path)

    def apply(self, log_dir: Path) -> None:
        source, target = log_dir / self.path, log_dir / self.target
        _require_size(source, self.size)
        _require_absent(target)
        try:
            os.rename(source, target)
        except OSError as err:
            raise _storage_error(source, f"rename to {target.name}", err) from err
        _fsync_dir(target.parent)


CORRUPT_SUFFIX = ".corrupt"
"""What a quarantined file is renamed to end with: no broker or logmgr reads it, an operator can."""


@dataclass(frozen=True)
class QuarantineFile(RenameFile):
    """Set aside a file that cannot be rebuilt from the log (``partition.metadata``, ``meta.properties``): renamed
    to ``<name>.corrupt``, so a broker no longer refuses the dir and the bytes stay for an operator."""

    kind: ClassVar[str] = "quarantine"

    def describe(self) -> str:
        return f"quarantine {self.path} as {Path(self.target).name} ({self.size} B): {self.reason}"


@dataclass(frozen=True)
class WriteFile(Action):
    """Replace (or create) a small file atomically: a checkpoint, ``leader-epoch-checkpoint``, the clean-shutdown
    marker. ``before`` is the content the plan read (None: absent); ``changes`` says entry by entry what differs."""

    kind: ClassVar[str] = "write"
    path: str
    before: bytes | None
    after: bytes
    reason: str
    changes: tuple[str, ...] = ()

    def describe(self) -> str:
        verb = "create" if self.before is None else "rewrite"
        detail = f" [{'; '.join(self.changes)}]" if self.changes else ""
        return f"{verb} {self.path} ({len(self.after)} B){detail}: {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": len(self.after), "changes": list(self.changes)}

    @property
    def bytes_written(self) -> int:
        return len(self.after)

    def predict(self, tree: Tree) -> None:
        tree[self.path] = self.after

    def apply(self, log_dir: Path) -> None:
        path = log_dir / self.path
        if _read_regular(path) != self.before:
            raise _stale(path, "changed")
        try:
            atomic_write_bytes(path, self.after)
        except OSError as err:
            raise _storage_error(path, "write", err) from err


@dataclass(frozen=True)
class RebuildIndexes(Action):
    """Rebuild a segment's ``.index``, ``.timeindex`` and ``.txnindex`` from its ``.log`` (Kafka's recovery rule,
    files trimmed as after a clean shutdown; no ``.txnindex`` when it holds no aborted transaction). Transactions
    open at the segment's start are found by walking the partition's earlier segments."""

    kind: ClassVar[str] = "rebuild-indexes"
    partition: str
    base_offset: int
    index_files: tuple[tuple[str, int], ...]
    """The index files present now, ``(name, size)``: replaced (or removed, for a ``.txnindex`` no longer needed)."""
    index_interval_bytes: int
    reason: str

    def describe(self) -> str:
        return (
            f"rebuild the indexes of segment {filename_prefix_from_offset(self.base_offset)} "
            f"(index.interval.bytes {self.index_interval_bytes}): {self.reason}"
        )

    def fields(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "baseOffset": self.base_offset,
            "replaces": [{"name": name, "size": size} for name, size in self.index_files],
        }

    def predict(self, tree: Tree) -> None:
        prefix = f"{self.partition}/{filename_prefix_from_offset(self.base_offset)}"
        for suffix in (".index", ".timeindex", ".txnindex"):
            tree.pop(prefix + suffix, None)
        tree[prefix + ".index"] = DERIVED
        tree[prefix + ".timeindex"] = DERIVED
        # Present only when the segment holds an aborted transaction: the tests compare it with a rebuild.
        tree[prefix + ".txnindex?"] = DERIVED

    def apply(self, log_dir: Path) -> None:
        # Imported here: reindex builds on the segment layer, and plan stays importable without it for pure planning.
        from logmgr.reindex import rebuild_segment_indexes

        directory = log_dir / self.partition
        for name, size in self.index_files:
            _require_size(directory / name, size)
        try:
            rebuild_segment_indexes(directory, self.base_offset, index_interval_bytes=self.index_interval_bytes)
        except OSError as err:
            raise _storage_error(directory, f"index rebuild of segment {self.base_offset}", err) from err


@dataclass(frozen=True)
class SplitSegment(Action):
    """Split a legacy segment whose offsets overflow 32 bits relative to its base (Kafka's
    ``splitOverflowedSegment``): its bytes before ``position`` stay the segment, the rest become a segment at
    ``new_base_offset``, both keeping the ``.log``'s modification time; its index files are deleted (a later
    action rebuilds them). Applied through the loader's own steps (:class:`logmgr.log_loader.OverflowSplit`:
    ``.cleaned``, ``.swap``, old files deleted, renames), so a crash at any point leaves files a broker's load
    completes or rolls back."""

    kind: ClassVar[str] = "split"
    partition: str
    base_offset: int
    position: int
    new_base_offset: int
    size: int
    """The ``.log``'s size, checked before acting."""
    mtime_ns: int
    reason: str

    def _pieces(self) -> list[tuple[int, int]]:
        return [(self.base_offset, self.position), (self.new_base_offset, self.size - self.position)]

    def describe(self) -> str:
        pieces = ", ".join(f"{filename_prefix_from_offset(base)} ({size} B)" for base, size in self._pieces())
        return (
            f"split segment {filename_prefix_from_offset(self.base_offset)} ({self.size} B) at position "
            f"{self.position} into {pieces}: {self.reason}"
        )

    def fields(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "baseOffset": self.base_offset,
            "bytes": self.size,
            "position": self.position,
            "pieces": [{"baseOffset": base, "bytes": size} for base, size in self._pieces()],
        }

    def predict(self, tree: Tree) -> None:
        directory = Path(self.partition)
        data = tree[log_file(directory, self.base_offset).as_posix()]
        for make in (offset_index_file, time_index_file, transaction_index_file):
            tree.pop(make(directory, self.base_offset).as_posix(), None)
        tree[log_file(directory, self.base_offset).as_posix()] = data[: self.position]
        tree[log_file(directory, self.new_base_offset).as_posix()] = data[self.position :]

    def apply(self, log_dir: Path) -> None:
        # Imported here, as for RebuildIndexes: the loader's split is the one implementation of the steps.
        from logmgr.log_loader import OverflowSplit

        directory = log_dir / self.partition
        source = log_file(directory, self.base_offset)
        _require_size(source, self.size)
        split = OverflowSplit(directory, self.base_offset, self.position, self.new_base_offset, self.size, self.mtime_ns)
        for base in (self.base_offset, self.new_base_offset):
            for path in (log_file(directory, base, CLEANED_SUFFIX), log_file(directory, base, SWAP_SUFFIX)):
                _require_absent(path)
        _require_absent(log_file(directory, self.new_base_offset))
        try:
            split.apply()
        except OSError as err:
            raise _storage_error(source, f"split at position {self.position}", err) from err


@dataclass(frozen=True)
class RebuildKeyIndex(Action):
    """(Re)build a segment's key index (``.keyindex``) from its ``.log`` (the valid prefix): written beside it
    under a temporary name, fsynced, renamed over the old file, the dir fsynced. The partition need not enable the
    key index."""

    kind: ClassVar[str] = "rebuild-key-index"
    partition: str
    base_offset: int
    log_size: int
    """The ``.log``'s size, checked before acting."""
    key_index_size: int | None
    """The ``.keyindex``'s size now (None: absent), checked before acting."""
    reason: str

    def _name(self) -> str:
        return filename_prefix_from_offset(self.base_offset) + KEY_INDEX_SUFFIX

    def describe(self) -> str:
        if self.key_index_size is None:
            return f"build the key index {self._name()}: {self.reason}"
        return f"rebuild the key index {self._name()} ({self.key_index_size} B): {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "baseOffset": self.base_offset, "file": self._name(), "bytesBefore": self.key_index_size}

    def predict(self, tree: Tree) -> None:
        tree[f"{self.partition}/{self._name()}"] = DERIVED

    def apply(self, log_dir: Path) -> None:
        # Imported here, as for RebuildIndexes.
        from logmgr.reindex import rebuild_segment_key_index

        directory = log_dir / self.partition
        for path, size in ((log_file(directory, self.base_offset), self.log_size), (directory / self._name(), self.key_index_size)):
            _require_size(path, size)
        try:
            rebuild_segment_key_index(directory, self.base_offset)
        except OSError as err:
            raise _storage_error(directory / self._name(), "key index rebuild", err) from err


@dataclass(frozen=True)
class FsyncFile(Action):
    """fsync a file whose content stays as it is (``flush``)."""

    kind: ClassVar[str] = "fsync"
    path: str
    size: int
    reason: str

    def describe(self) -> str:
        return f"fsync {self.path} ({self.size} B): {self.reason}"

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.size}

    def predict(self, tree: Tree) -> None:
        return None

    def apply(self, log_dir: Path) -> None:
        path = log_dir / self.path
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except OSError as err:
            raise _storage_error(path, "open for fsync", err) from err
        _fsync_and_close(fd, path)


def _read_regular(path: Path) -> bytes | None:
    if _regular_size(path) is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise _storage_error(path, "read", err) from err
    with os.fdopen(fd, "rb") as source:
        return source.read()


def _fsync_dir(directory: Path) -> None:
    try:
        fsync_dir(directory)
    except OSError as err:
        raise _storage_error(directory, "fsync of the directory", err) from err


@dataclass(frozen=True)
class PartitionPlan:
    """What a plan does to one partition dir, and what the operator should know about it."""

    partition: str
    """The partition dir's name (``orders-0``)."""
    actions: tuple[Action, ...] = ()
    notes: tuple[str, ...] = ()
    """Facts that explain the plan (the config in force and where each value came from, why nothing happens)."""

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "actions": [a.to_json() for a in self.actions], "notes": list(self.notes)}


@dataclass(frozen=True)
class LogDirPlan:
    """Everything one offline command will change in one log dir: per-partition actions first (in order), then
    the dir's own files (checkpoints, clean-shutdown marker)."""

    command: str
    log_dir: Path
    partitions: tuple[PartitionPlan, ...] = ()
    dir_actions: tuple[Action, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    previous: LogDirPlan | None = None
    """A plan executed whole before this one (``cleanup --recover-first``: the recovery), printed first."""

    def actions(self) -> Iterator[Action]:
        """Every action in execution order: the previous plan's, then each partition's, then the dir's. O(actions)."""
        if self.previous is not None:
            yield from self.previous.actions()
        for partition in self.partitions:
            yield from partition.actions
        yield from self.dir_actions

    @property
    def empty(self) -> bool:
        """True when the plan changes nothing. O(partitions)."""
        return next(self.actions(), None) is None

    @property
    def bytes_freed(self) -> int:
        return sum(action.bytes_freed for action in self.actions())

    @property
    def bytes_written(self) -> int:
        return sum(action.bytes_written for action in self.actions())

    def counts(self) -> dict[str, int]:
        """Number of actions of each kind. O(actions)."""
        counts: dict[str, int] = {}
        for action in self.actions():
            counts[action.kind] = counts.get(action.kind, 0) + 1
        return counts

    def predict(self, tree: Mapping[str, bytes]) -> Tree:
        """The tree after the plan, from the tree before it. O(actions + files)."""
        result = dict(tree)
        for action in self.actions():
            action.predict(result)
        return result

    def summary(self) -> str:
        """One line: the counts by kind and the bytes. O(actions)."""
        counts = self.counts()
        if not counts:
            return "nothing to change"
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
        return f"{kinds}; {self.bytes_freed} B freed, {self.bytes_written} B written"

    def describe(self) -> list[str]:
        """The printed plan: warnings, then each partition with notes and actions, then the dir's actions. O(actions)."""
        lines = [] if self.previous is None else [f"{self.previous.command}, first:", *self.previous.describe(), f"then {self.command}:"]
        lines.extend(f"warning: {warning}" for warning in self.warnings)
        lines.extend(self.notes)
        for partition in self.partitions:
            if not partition.actions and not partition.notes:
                continue
            lines.append(f"{partition.partition}:")
            lines.extend(f"  {note}" for note in partition.notes)
            lines.extend(f"  {action.describe()}" for action in partition.actions)
        if self.dir_actions:
            lines.append(f"{self.log_dir}:")
            lines.extend(f"  {action.describe()}" for action in self.dir_actions)
        return lines

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: command, log dir, warnings, partitions with actions, dir actions, totals. O(actions)."""
        return {
            "command": self.command,
            "logDir": str(self.log_dir),
            "previous": None if self.previous is None else self.previous.to_json(),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "partitions": [p.to_json() for p in self.partitions if p.actions or p.notes],
            "dirActions": [a.to_json() for a in self.dir_actions],
            "counts": self.counts(),
            "bytesFreed": self.bytes_freed,
            "bytesWritten": self.bytes_written,
        }


@dataclass
class ApplyReport:
    """The actions a run completed, in order."""

    done: list[Action] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return sum(action.bytes_freed for action in self.done)


def apply_plan(plan: LogDirPlan, *, on_action: Callable[[Action], None] | None = None) -> ApplyReport:
    """Execute ``plan``'s actions in order, calling ``on_action`` after each. The first failure stops the run and
    propagates (:class:`PlanStaleError`, :class:`KafkaStorageError` naming the file); the report passed so far says
    what was done. The caller holds the log dir's lock. O(bytes written + files)."""
    report = ApplyReport()
    for action in plan.actions():
        action.apply(plan.log_dir)
        report.done.append(action)
        if on_action is not None:
            on_action(action)
    return report


def read_tree(log_dir: Path, *, skip: Iterable[str] = (".lock",)) -> Tree:
    """Every regular file below ``log_dir`` (links not followed) as a :data:`Tree`. For tests and reports. O(bytes)."""
    skipped = set(skip)
    tree: Tree = {}
    for root, _dirs, names in os.walk(log_dir):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(log_dir).as_posix()
            if relative in skipped or path.is_symlink() or not path.is_file():
                continue
            tree[relative] = path.read_bytes()
    return tree
