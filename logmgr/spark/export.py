"""Export Kafka log dirs to Parquet, ORC or JSON files with Spark, resumably.

An export is its source log dirs, an output dir, a format, the partition columns and the read options. Each
run of :func:`export_log_dirs`:

1. resolves every selected partition's offset range on the driver with :func:`logmgr.spark.scan.plan_scan`
   (on resume, a partition already exported starts where the previous run ended);
2. reads exactly those ranges through ``format("kafka-log")`` with explicit ``assign`` / ``startingOffsets`` /
   ``endingOffsets``, so records appended while the job runs are left for the next run and the files written
   agree with the manifest;
3. appends the rows to the output dir, counting rows per partition in the same pass with one
   :class:`pyspark.sql.Observation` (one conditional count per planned partition);
4. after Spark committed the files, replaces ``<out>/_logmgr_manifest.json`` atomically with one more run.

Spark ignores files whose names start with ``_`` when reading the output back, so the manifest never shows up
as data. If the process dies after Spark's commit and before step 4, the files of that run exist but the
manifest does not list them: a resume then writes those rows again (at-least-once delivery).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from checkpoints.atomic import atomic_write_bytes
from logmgr.errors import ConfigError
from logmgr.spark.options import parse_options
from logmgr.spark.scan import plan_scan
from logmgr.spark.source import SOURCE_NAME
from segments.errors import CorruptCheckpointError

log = logging.getLogger(__name__)

MANIFEST_NAME = "_logmgr_manifest.json"
MANIFEST_FORMAT = "logmgr-spark-export"
MANIFEST_VERSION = 1
FORMATS = ("parquet", "orc", "json")
PARTITION_COLUMNS = ("topic", "partition", "date")
DEFAULT_PARTITION_BY = ("topic", "partition")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

_MICROS_PER_DAY = 86_400_000_000

T = TypeVar("T")


# -- the manifest --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportOptions:
    """What selects the exported rows and shapes their columns; a resumed export must use the same.

    ``from_time_ms`` / ``to_time_ms`` act as Spark's ``startingTimestamp`` / ``endingTimestamp``: a
    partition's range starts at its first offset whose timestamp is ``>= from_time_ms`` and ends before the
    first offset whose timestamp is ``>= to_time_ms``; records inside the range are not filtered one by one.
    """

    topics: tuple[str, ...] | None = None
    topic_pattern: str | None = None
    partitions: tuple[int, ...] | None = None
    from_time_ms: int | None = None
    to_time_ms: int | None = None
    read_committed: bool = False
    include_headers: bool = False

    @property
    def isolation_level(self) -> str:
        """Kafka's name of the isolation level. O(1)."""
        return ISOLATION_LEVELS[self.read_committed]

    def to_json(self) -> dict[str, Any]:
        """The manifest's ``options`` object. O(topics + partitions)."""
        return {
            "topics": None if self.topics is None else list(self.topics),
            "topicPattern": self.topic_pattern,
            "partitions": None if self.partitions is None else list(self.partitions),
            "fromTimeMs": self.from_time_ms,
            "toTimeMs": self.to_time_ms,
            "isolationLevel": self.isolation_level,
            "includeHeaders": self.include_headers,
        }

    @classmethod
    def from_json(cls, value: object, path: str | None) -> ExportOptions:
        """Parse the manifest's ``options`` object; raises :class:`CorruptCheckpointError` naming ``path``.
        O(topics + partitions)."""
        obj = _expect(value, dict, "options", path)
        topics = _optional(obj, "topics", list, "options", path)
        partitions = _optional(obj, "partitions", list, "options", path)
        isolation = _field(obj, "isolationLevel", str, "options", path)
        if isolation not in ISOLATION_LEVELS:
            raise CorruptCheckpointError(f"options.isolationLevel: unknown level {isolation!r}", path=path)
        return cls(
            topics=None
            if topics is None
            else tuple(_expect(t, str, "options.topics[]", path) for t in topics),
            topic_pattern=_optional(obj, "topicPattern", str, "options", path),
            partitions=None
            if partitions is None
            else tuple(_expect(p, int, "options.partitions[]", path) for p in partitions),
            from_time_ms=_optional(obj, "fromTimeMs", int, "options", path),
            to_time_ms=_optional(obj, "toTimeMs", int, "options", path),
            read_committed=isolation == "read_committed",
            include_headers=_field(obj, "includeHeaders", bool, "options", path),
        )

    def source_options(self, source_dirs: Sequence[str]) -> dict[str, str]:
        """The ``kafka-log`` options that select the rows of a fresh export (before any resume). O(topics)."""
        options = {
            "paths": json.dumps(list(source_dirs)),
            "isolationLevel": self.isolation_level,
            "includeHeaders": str(self.include_headers).lower(),
        }
        if self.topics is not None:
            options["topics"] = ",".join(self.topics)
        if self.topic_pattern is not None:
            options["topicPattern"] = self.topic_pattern
        if self.partitions is not None:
            options["partitions"] = ",".join(map(str, self.partitions))
        if self.from_time_ms is not None:
            options["startingTimestamp"] = str(self.from_time_ms)
        if self.to_time_ms is not None:
            options["endingTimestamp"] = str(self.to_time_ms)
        return options


@dataclass(frozen=True)
class PartitionExport:
    """One partition in one run: offsets ``[start_offset, end_offset)`` were exported as ``rows`` rows (fewer
    than the offsets when control records, aborted transactions or compaction leave gaps)."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    rows: int

    @property
    def key(self) -> tuple[str, int]:
        """``(topic, partition)``. O(1)."""
        return self.topic, self.partition

    @property
    def label(self) -> str:
        """``topic-partition``, Kafka's spelling. O(1)."""
        return f"{self.topic}-{self.partition}"

    def problem(self) -> str | None:
        """What breaks this entry's invariants (``partition >= 0``, ``0 <= start <= end``,
        ``0 <= rows <= end - start``), or None. O(1)."""
        if self.partition < 0:
            return f"{self.label}: negative partition number"
        if not 0 <= self.start_offset <= self.end_offset:
            return f"{self.label}: offsets [{self.start_offset}, {self.end_offset}) are not a range"
        if not 0 <= self.rows <= self.end_offset - self.start_offset:
            return (
                f"{self.label}: {self.rows} rows do not fit offsets [{self.start_offset}, {self.end_offset})"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        """The manifest's per-partition object. O(1)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, value: object, path: str | None) -> PartitionExport:
        """Parse one per-partition object; raises :class:`CorruptCheckpointError`. O(1)."""
        obj = _expect(value, dict, "runs[].partitions[]", path)
        where = "runs[].partitions[]"
        entry = cls(
            _field(obj, "topic", str, where, path),
            _field(obj, "partition", int, where, path),
            _field(obj, "startOffset", int, where, path),
            _field(obj, "endOffset", int, where, path),
            _field(obj, "rows", int, where, path),
        )
        problem = entry.problem()
        if problem is not None:
            raise CorruptCheckpointError(problem, path=path)
        return entry


@dataclass(frozen=True)
class ExportRun:
    """One run of an export: UTC ISO-8601 start and finish times and every planned partition."""

    started: str
    finished: str
    partitions: tuple[PartitionExport, ...]

    @property
    def rows(self) -> int:
        """Rows written by the run. O(partitions)."""
        return sum(p.rows for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        """The manifest's run object. O(partitions)."""
        return {
            "started": self.started,
            "finished": self.finished,
            "rows": self.rows,
            "partitions": [p.to_json() for p in self.partitions],
        }

    @classmethod
    def from_json(cls, value: object, path: str | None) -> ExportRun:
        """Parse one run object; raises :class:`CorruptCheckpointError`. O(partitions)."""
        obj = _expect(value, dict, "runs[]", path)
        partitions = tuple(
            PartitionExport.from_json(p, path) for p in _field(obj, "partitions", list, "runs[]", path)
        )
        run = cls(
            _field(obj, "started", str, "runs[]", path),
            _field(obj, "finished", str, "runs[]", path),
            partitions,
        )
        rows = _field(obj, "rows", int, "runs[]", path)
        if rows != run.rows:
            raise CorruptCheckpointError(
                f"run started {run.started}: total rows {rows} but its partitions sum to {run.rows}",
                path=path,
            )
        return run


@dataclass(frozen=True)
class Manifest:
    """The contents of ``_logmgr_manifest.json``: what the export is and every run made so far."""

    source_dirs: tuple[str, ...]
    output_format: str
    partition_by: tuple[str, ...]
    options: ExportOptions
    runs: tuple[ExportRun, ...] = ()

    def _check(self) -> None:
        """Assert the invariants a parsed or built manifest keeps. O(runs x partitions)."""
        assert self.source_dirs and all(Path(d).is_absolute() for d in self.source_dirs)
        assert self.output_format in FORMATS
        assert _partition_by_problem(self.partition_by) is None
        for run in self.runs:
            assert all(p.problem() is None for p in run.partitions)
            assert len({p.key for p in run.partitions}) == len(run.partitions)

    @property
    def identity(self) -> dict[str, Any]:
        """The fields a resumed run must match: source dirs, format, partition columns and options. O(1)."""
        return {
            "sourceDirs": list(self.source_dirs),
            "outputFormat": self.output_format,
            "partitionBy": list(self.partition_by),
            **self.options.to_json(),
        }

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Per partition ever exported, the offset its next run starts at (its latest end offset).
        O(runs x partitions)."""
        return {p.key: p.end_offset for run in self.runs for p in run.partitions}

    def to_bytes(self) -> bytes:
        """The manifest as indented UTF-8 JSON. O(size)."""
        document = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "sourceDirs": list(self.source_dirs),
            "outputFormat": self.output_format,
            "partitionBy": list(self.partition_by),
            "options": self.options.to_json(),
            "runs": [run.to_json() for run in self.runs],
        }
        return (json.dumps(document, indent=2) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes, path: str | PathLike[str] | None = None) -> Manifest:
        """Parse manifest bytes. Raises :class:`CorruptCheckpointError` naming ``path`` (and the line, for
        invalid JSON) for anything that is not a version-1 logmgr export manifest. O(size)."""
        where = None if path is None else str(path)
        try:
            document = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise CorruptCheckpointError(
                f"not UTF-8 ({err.reason})", path=where, position=err.start
            ) from None
        except json.JSONDecodeError as err:
            raise CorruptCheckpointError(f"invalid JSON: {err.msg}", path=where, line=err.lineno) from None
        except (ValueError, RecursionError) as err:
            # An integer past Python's digit limit, or nesting past the recursion limit.
            raise CorruptCheckpointError(f"invalid JSON: {err}", path=where) from None
        obj = _expect(document, dict, "manifest", where)
        kind = obj.get("format")
        if kind != MANIFEST_FORMAT:
            raise CorruptCheckpointError(
                f"not a logmgr export manifest (format {kind!r}, expected {MANIFEST_FORMAT!r})", path=where
            )
        version = obj.get("version")
        if type(version) is not int or version != MANIFEST_VERSION:
            raise CorruptCheckpointError(
                f"unsupported manifest version {version!r} (this logmgr reads version {MANIFEST_VERSION})",
                path=where,
            )
        source_dirs = tuple(
            _expect(d, str, "sourceDirs[]", where) for d in _field(obj, "sourceDirs", list, "", where)
        )
        if not source_dirs or not all(Path(d).is_absolute() for d in source_dirs):
            raise CorruptCheckpointError(
                f"sourceDirs must be absolute paths, got {list(source_dirs)}", path=where
            )
        output_format = _field(obj, "outputFormat", str, "", where)
        if output_format not in FORMATS:
            raise CorruptCheckpointError(
                f"outputFormat {output_format!r} is not one of {', '.join(FORMATS)}", path=where
            )
        partition_by = tuple(
            _expect(c, str, "partitionBy[]", where) for c in _field(obj, "partitionBy", list, "", where)
        )
        problem = _partition_by_problem(partition_by)
        if problem is not None:
            raise CorruptCheckpointError(f"partitionBy: {problem}", path=where)
        runs = tuple(ExportRun.from_json(run, where) for run in _field(obj, "runs", list, "", where))
        for run in runs:
            if len({p.key for p in run.partitions}) != len(run.partitions):
                raise CorruptCheckpointError(f"run started {run.started} lists a partition twice", path=where)
        return cls(
            source_dirs, output_format, partition_by, ExportOptions.from_json(obj.get("options"), where), runs
        )


def read_manifest(path: Path) -> Manifest:
    """Read ``path``. Raises :class:`ConfigError` when it is missing and :class:`CorruptCheckpointError` when
    it is not a valid manifest. O(size)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            "resume", f"{path}: no export manifest here; export without resume first (into an empty dir)"
        ) from None
    return Manifest.parse(data, path)


def _expect(value: object, kind: type[T], what: str, path: str | None) -> T:
    # bool is an int to isinstance, never to the manifest.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        shown = (
            json.dumps(value) if isinstance(value, str | int | float | bool | None) else type(value).__name__
        )
        raise CorruptCheckpointError(f"{what}: expected {kind.__name__}, got {shown[:80]}", path=path)
    return value


def _field(obj: Mapping[str, Any], key: str, kind: type[T], where: str, path: str | None) -> T:
    if key not in obj:
        raise CorruptCheckpointError(f"{where + '.' if where else ''}{key}: missing", path=path)
    return _expect(obj[key], kind, f"{where + '.' if where else ''}{key}", path)


def _optional(obj: Mapping[str, Any], key: str, kind: type[T], where: str, path: str | None) -> T | None:
    value = obj.get(key)
    return None if value is None else _expect(value, kind, f"{where}.{key}", path)


# -- results -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    """What one call of :func:`export_log_dirs` did: the run it added and the manifest it wrote."""

    out: Path
    manifest: Manifest
    seconds: float

    @property
    def run(self) -> ExportRun:
        """The run this call added. O(1)."""
        return self.manifest.runs[-1]

    @property
    def rows(self) -> int:
        """Rows this run wrote. O(partitions)."""
        return self.run.rows

    @property
    def manifest_path(self) -> Path:
        """``<out>/_logmgr_manifest.json``. O(1)."""
        return self.out / MANIFEST_NAME

    @property
    def rows_per_second(self) -> float:
        """Rows written per second of wall time. O(partitions)."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The ``logmgr export --json`` object. O(partitions)."""
        return {
            "out": str(self.out),
            "manifest": str(self.manifest_path),
            "format": self.manifest.output_format,
            "partitionBy": list(self.manifest.partition_by),
            "runNumber": len(self.manifest.runs),
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "rowsPerSecond": round(self.rows_per_second, 1),
            "run": self.run.to_json(),
        }


# -- the export ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportPlan:
    """A run resolved on the driver, before any Spark work: the export so far (``manifest``, without this run)
    and this run's range of every selected partition, sorted by topic and partition."""

    out: Path
    manifest: Manifest
    partitions: tuple[PartitionExport, ...]
    started: str
    clock_start: float
    max_message_bytes: Mapping[str, int] = field(default_factory=dict)
    """The topics' ``max.message.bytes``: the source's ``maxMessageBytes`` (not part of the export's identity,
    since it changes which records can be read, not which are selected)."""

    @property
    def to_read(self) -> list[PartitionExport]:
        """The partitions with new offsets. O(partitions)."""
        return [p for p in self.partitions if p.end_offset > p.start_offset]


def export_log_dirs(
    spark: SparkSession,
    paths: Iterable[str | PathLike[str]],
    *,
    fmt: str,
    out: str | PathLike[str],
    topics: Iterable[str] | None = None,
    topic_pattern: str | None = None,
    partitions: Iterable[int] | None = None,
    from_time_ms: int | None = None,
    to_time_ms: int | None = None,
    read_committed: bool = False,
    include_headers: bool = False,
    partition_by: Sequence[str] = DEFAULT_PARTITION_BY,
    resume: bool = False,
    max_message_bytes: Mapping[str, int] | None = None,
) -> ExportResult:
    """Export the records of the log dirs (or partition dirs) ``paths`` to ``out`` as ``fmt`` files (see the
    module docstring for the steps, :func:`plan_export` for the arguments and errors) and return what this run
    did: :func:`plan_export` then :func:`run_export`.

    O(partitions x log(segments)) to plan, plus one Spark job over the new records (each row is compared
    against the planned partitions once, O(rows x partitions) cheap comparisons) and O(manifest) to record it.
    """
    plan = plan_export(
        paths,
        fmt=fmt,
        out=out,
        topics=topics,
        topic_pattern=topic_pattern,
        partitions=partitions,
        from_time_ms=from_time_ms,
        to_time_ms=to_time_ms,
        read_committed=read_committed,
        include_headers=include_headers,
        partition_by=partition_by,
        resume=resume,
        max_message_bytes=max_message_bytes,
    )
    return run_export(spark, plan)


def plan_export(
    paths: Iterable[str | PathLike[str]],
    *,
    fmt: str,
    out: str | PathLike[str],
    topics: Iterable[str] | None = None,
    topic_pattern: str | None = None,
    partitions: Iterable[int] | None = None,
    from_time_ms: int | None = None,
    to_time_ms: int | None = None,
    read_committed: bool = False,
    include_headers: bool = False,
    partition_by: Sequence[str] = DEFAULT_PARTITION_BY,
    resume: bool = False,
    max_message_bytes: Mapping[str, int] | None = None,
) -> ExportPlan:
    """Check the arguments and ``out`` and resolve this run's offset ranges, without Spark and without
    writing.

    The rows will have the ``kafka-log`` schema (``headers`` with ``include_headers``) plus, when
    ``partition_by`` names it, ``date``: the UTC calendar date of ``timestamp``. A partition starts at the
    previous run's end when ``resume`` and it was exported before (at the log start offset if retention has
    deleted past that), else where the options say; it ends at the log end (last stable offset with
    ``read_committed``) or before ``to_time_ms``. Without ``resume`` a non-empty ``out`` is refused; with it,
    ``out`` must hold the manifest of an export of the same dirs with the same settings. Raises
    :class:`ConfigError` for bad arguments, a refused ``out``, a missing manifest, a mismatched resume, a
    partition found in two of the dirs or no partition at all in the dirs (or none matching the topic and
    partition filters: an export of nothing is a mistaken path or filter, not an empty success), and
    :class:`CorruptCheckpointError` for an unreadable manifest.

    O(partitions x log(segments)) index lookups plus O(manifest).
    """
    clock_start = time.monotonic()
    started = _utc_now()
    wanted = Manifest(
        source_dirs=_source_dirs(paths),
        output_format=_check_format(fmt),
        partition_by=parse_partition_by(partition_by),
        options=_export_options(
            topics, topic_pattern, partitions, from_time_ms, to_time_ms, read_committed, include_headers
        ),
    )
    target = Path(out).absolute()
    if resume:
        manifest_path = target / MANIFEST_NAME
        previous = read_manifest(manifest_path)
        _check_same_export(previous, wanted, manifest_path)
    else:
        _check_fresh(target)
        previous = wanted
    ranges = _plan_ranges(previous)
    if not ranges:
        raise ConfigError("paths", _no_partitions(previous))
    return ExportPlan(target, previous, ranges, started, clock_start, dict(max_message_bytes or {}))


def _no_partitions(manifest: Manifest) -> str:
    """Why an export found nothing to export. O(dirs)."""
    dirs = ", ".join(manifest.source_dirs)
    options = manifest.options
    if options.topics is None and options.topic_pattern is None and options.partitions is None:
        return f"no Kafka partition in {dirs} (give log dirs holding partition dirs such as orders-0, or partition dirs)"
    return f"no partition in {dirs} matches the topic and partition filters"


def run_export(spark: SparkSession | None, plan: ExportPlan) -> ExportResult:
    """Read the planned ranges, append them to ``plan.out`` and record the run in the manifest (atomically,
    after Spark committed the files). ``spark`` may be None when ``plan.to_read`` is empty: the run then
    writes only the manifest, with 0 rows. One Spark job over the new records, plus O(manifest)."""
    to_read = plan.to_read
    rows: dict[tuple[str, int], int] = {}
    if to_read:
        if spark is None:
            raise ConfigError(
                "spark", f"{len(to_read)} partition(s) have new records: a SparkSession is needed"
            )
        rows = _write(spark, plan, to_read)
    plan.out.mkdir(parents=True, exist_ok=True)
    run = ExportRun(
        plan.started, _utc_now(), tuple(replace(p, rows=rows.get(p.key, 0)) for p in plan.partitions)
    )
    manifest = replace(plan.manifest, runs=(*plan.manifest.runs, run))
    atomic_write_bytes(plan.out / MANIFEST_NAME, manifest.to_bytes())
    return ExportResult(plan.out, manifest, time.monotonic() - plan.clock_start)


def parse_partition_by(columns: str | Sequence[str]) -> tuple[str, ...]:
    """Partition columns from a comma-separated string or a sequence: each of ``topic``, ``partition``,
    ``date`` at most once (none: one flat dir). Raises :class:`ConfigError`. O(len(columns))."""
    names = columns.split(",") if isinstance(columns, str) else list(columns)
    parsed = tuple(name.strip() for name in names if name.strip())
    problem = _partition_by_problem(parsed)
    if problem is not None:
        raise ConfigError("partition_by", problem)
    return parsed


def _partition_by_problem(columns: tuple[str, ...]) -> str | None:
    unknown = [c for c in columns if c not in PARTITION_COLUMNS]
    if unknown:
        return (
            f"unknown column(s) {', '.join(map(repr, unknown))}; choose from {', '.join(PARTITION_COLUMNS)}"
        )
    if len(set(columns)) != len(columns):
        return f"a column is named twice in {','.join(columns)}"
    return None


def _check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError("fmt", f"unknown output format {fmt!r}; choose from {', '.join(FORMATS)}")
    return fmt


def _source_dirs(paths: Iterable[str | PathLike[str]]) -> tuple[str, ...]:
    resolved: list[str] = []
    for given in paths:
        path = Path(given).resolve()
        if not path.is_dir():
            raise ConfigError("paths", f"{given}: not a directory (give Kafka log dirs or partition dirs)")
        resolved.append(str(path))
    if not resolved:
        raise ConfigError("paths", "give at least one log dir")
    # Order does not change what is read; sorted, the manifest compares equal however the dirs were listed.
    return tuple(sorted(set(resolved)))


def _export_options(
    topics: Iterable[str] | None,
    topic_pattern: str | None,
    partitions: Iterable[int] | None,
    from_time_ms: int | None,
    to_time_ms: int | None,
    read_committed: bool,
    include_headers: bool,
) -> ExportOptions:
    topic_list = None if topics is None else tuple(sorted(set(topics)))
    if topic_list is not None and (not topic_list or any(not t or "," in t for t in topic_list)):
        raise ConfigError("topics", f"give one or more topic names without commas, not {list(topic_list)}")
    if topic_pattern is not None:
        try:
            re.compile(topic_pattern)
        except re.error as err:
            raise ConfigError(
                "topic_pattern", f"invalid regular expression {topic_pattern!r}: {err}"
            ) from None
    partition_list = None if partitions is None else tuple(sorted(set(partitions)))
    if partition_list is not None and (not partition_list or partition_list[0] < 0):
        raise ConfigError(
            "partitions", f"give one or more partition numbers >= 0, not {list(partition_list)}"
        )
    if from_time_ms is not None and to_time_ms is not None and from_time_ms > to_time_ms:
        raise ConfigError("from_time_ms", f"{from_time_ms} is after to_time_ms {to_time_ms}")
    return ExportOptions(
        topic_list, topic_pattern, partition_list, from_time_ms, to_time_ms, read_committed, include_headers
    )


def _check_fresh(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError("out", f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(
            "out",
            f"{out}: not empty; export into a new or empty dir, or resume (--resume) the export whose "
            f"{MANIFEST_NAME} is there",
        )


def _check_same_export(previous: Manifest, wanted: Manifest, manifest_path: Path) -> None:
    before, now = previous.identity, wanted.identity
    differences = [
        f"{key} was {json.dumps(before[key])}, now {json.dumps(now[key])}"
        for key in now
        if before[key] != now[key]
    ]
    if differences:
        raise ConfigError(
            "resume",
            f"{manifest_path}: not the same export ({'; '.join(differences)}); resume with the same "
            "log dirs and options, or export into a new dir",
        )


def _plan_ranges(manifest: Manifest) -> tuple[PartitionExport, ...]:
    """This run's range of every selected partition (see :func:`plan_export`), sorted, with 0 rows."""
    plan = plan_scan(parse_options(manifest.options.source_options(manifest.source_dirs)))
    resume_from = manifest.next_offsets()
    seen: dict[tuple[str, int], str] = {}
    planned: list[PartitionExport] = []
    for resolved in plan.ranges:
        key = (resolved.topic, resolved.partition)
        if key in seen:
            raise ConfigError(
                "paths",
                f"partition {resolved.topic}-{resolved.partition} is both {seen[key]} and "
                f"{resolved.partition_dir}; give only one of these dirs",
            )
        seen[key] = resolved.partition_dir
        start = resolved.start_offset
        if key in resume_from:
            start = max(resume_from[key], resolved.log_start_offset)
            if start > resume_from[key]:
                log.warning(
                    "%s: offsets [%d, %d) were deleted before this export reached them",
                    resolved.partition_dir,
                    resume_from[key],
                    start,
                )
        planned.append(
            PartitionExport(resolved.topic, resolved.partition, start, max(start, resolved.end_offset), 0)
        )
    return tuple(sorted(planned, key=lambda p: p.key))


def _write(spark: SparkSession, plan: ExportPlan, to_read: list[PartitionExport]) -> dict[tuple[str, int], int]:
    """Read the planned ranges, append them to ``plan.out`` and return the rows written per partition, counted
    while writing. One Spark job."""
    manifest, out = plan.manifest, plan.out
    frame = _read_ranges(spark, manifest, to_read, plan.max_message_bytes)
    if "date" in manifest.partition_by:
        # Epoch arithmetic, not to_date(): that would use the session's time zone instead of UTC.
        micros = F.unix_micros(F.col("timestamp"))
        frame = frame.withColumn("date", F.date_from_unix_date(F.floor(micros / _MICROS_PER_DAY).cast("int")))
    observation = Observation()
    counts = [
        # The int comparison first: it rejects most rows before the string comparison runs.
        F.count_if((F.col("partition") == p.partition) & (F.col("topic") == p.topic)).alias(f"rows{i}")
        for i, p in enumerate(to_read)
    ]
    writer = frame.observe(observation, *counts).write.mode("append").format(manifest.output_format)
    if manifest.partition_by:
        writer = writer.partitionBy(*manifest.partition_by)
    writer.save(str(out))
    metrics = observation.get
    return {p.key: int(metrics[f"rows{i}"]) for i, p in enumerate(to_read)}


def _read_ranges(
    spark: SparkSession, manifest: Manifest, to_read: list[PartitionExport], max_message_bytes: Mapping[str, int]
) -> DataFrame:
    """A ``kafka-log`` DataFrame of exactly the planned offset ranges, each topic's records decoded within its
    ``max_message_bytes``. O(partitions)."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for p in to_read:
        assign.setdefault(p.topic, []).append(p.partition)
        starting.setdefault(p.topic, {})[str(p.partition)] = p.start_offset
        ending.setdefault(p.topic, {})[str(p.partition)] = p.end_offset
    options = manifest.options
    return (
        spark.read.format(SOURCE_NAME)
        .option("paths", json.dumps(list(manifest.source_dirs)))
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("isolationLevel", options.isolation_level)
        .option("includeHeaders", str(options.include_headers).lower())
        .option("maxMessageBytes", json.dumps(dict(max_message_bytes)))
        .load()
    )


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
