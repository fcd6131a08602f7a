"""``logmgr export``: Kafka log dirs to Parquet, ORC or JSON files with Spark, resumable through a manifest.

A thin shell over :func:`logmgr.spark.export.export_log_dirs`. PySpark is imported only when the command runs,
so ``logmgr --help`` and every other command work without it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cli.common import Failure, one_line_errors
from cli.config_options import ConfigOptions, topic_config_options, topic_decode_limits
from cli.read_cmd import parse_time

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logmgr.spark.export import ExportResult


def _time_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is neither epoch milliseconds nor ISO 8601 ({err})") from None


def _partitions_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        numbers = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected comma-separated partition numbers like 0,1") from None
    if not numbers or min(numbers) < 0:
        raise click.BadParameter(f"{value!r}: expected partition numbers >= 0 like 0,1")
    return numbers


def _topics_option(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    topics = tuple(part.strip() for part in value.split(",") if part.strip())
    if not topics:
        raise click.BadParameter(f"{value!r} names no topic")
    return topics


@contextlib.contextmanager
def spark_session(master: str) -> Iterator[SparkSession]:
    """The process's active SparkSession if there is one (used as is and left running), else a new quiet one
    on ``master`` (:func:`logmgr.spark.session.local_session`), stopped on exit. O(Spark startup)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    from logmgr.spark.session import local_session

    session = local_session(master, "logmgr-export")
    try:
        yield session
    finally:
        session.stop()


@contextlib.contextmanager
def spark_errors_as_failures() -> Iterator[None]:
    """Turn a failed Spark job into a one-line :class:`Failure` (unless ``--debug``): for an error raised in a
    Python worker, its last line (``module.Error: message``, e.g. a corrupt batch with its file and position);
    otherwise Spark's first line."""
    from pyspark.errors import PySparkException
    from pyspark.errors.exceptions.base import PythonException

    try:
        yield
    except PySparkException as err:
        if click.get_current_context().find_root().params.get("debug"):
            raise
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise Failure(
            (lines[-1] if isinstance(err, PythonException) else lines[0]) if lines else repr(err)
        ) from None


def _summary(result: ExportResult) -> list[str]:
    """The human-readable report: partitions with new offsets, then totals."""
    run = result.run
    lines = [
        f"  {p.label}: offsets [{p.start_offset}, {p.end_offset}) -> {p.rows} rows"
        for p in run.partitions
        if p.end_offset > p.start_offset
    ]
    idle = sum(1 for p in run.partitions if p.end_offset <= p.start_offset)
    if idle:
        lines.append(f"  {idle} partition(s) with nothing new")
    manifest = result.manifest
    partitioned = ",".join(manifest.partition_by) or "nothing"
    lines.append(
        f"{run.rows} rows to {result.out} ({manifest.output_format}, partitioned by {partitioned}) in "
        f"{result.seconds:.1f} s ({result.rows_per_second:.0f} rows/s); run {len(manifest.runs)} recorded in "
        f"{result.manifest_path.name}"
    )
    return lines


def _max_message_bytes(paths: tuple[Path, ...], options: ConfigOptions) -> dict[str, int]:
    """Every topic with a partition in ``paths`` (log or partition dirs) -> its ``max.message.bytes`` (the
    largest where the dirs disagree). O(partitions) plus each log dir's configs."""
    from logmgr.spark.scan import find_partition_dirs

    limits = topic_decode_limits(options)
    found: dict[str, int] = {}
    for tp, directory in find_partition_dirs(tuple(map(str, paths))):
        size = limits.max_message_bytes(Path(directory).parent, tp.topic)
        found[tp.topic] = max(size, found.get(tp.topic, 0))
    return found


@click.command()
@click.argument(
    "log_dirs",
    metavar="LOGDIR...",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--to",
    "fmt",
    type=click.Choice(["parquet", "orc", "json"]),
    required=True,
    help="Output file format.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=True, file_okay=False, path_type=Path),
    required=True,
    help="Output dir: new or empty, or the dir of the export to continue with --resume.",
)
@click.option("--topics", callback=_topics_option, help="Only these topics (comma-separated).")
@click.option("--topic-pattern", help="Only topics fully matching this regular expression.")
@click.option(
    "--partitions", callback=_partitions_option, help="Only these partition numbers (comma-separated)."
)
@click.option(
    "--from-time",
    callback=_time_option,
    help="Start each partition at its first record with this timestamp or later (epoch ms or ISO 8601, UTC "
    "when no zone is given).",
)
@click.option(
    "--to-time",
    callback=_time_option,
    help="End each partition before its first record with this timestamp or later (epoch ms or ISO 8601).",
)
@click.option(
    "--isolation",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
    help="read_committed drops aborted transactions and stops at the last stable offset.",
)
@click.option("--include-headers", is_flag=True, help="Add the headers column.")
@click.option(
    "--partition-by",
    default="topic,partition",
    show_default=True,
    help="Comma-separated output partition columns from topic, partition, date (UTC date of the timestamp); "
    "empty for one flat dir.",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--resume", is_flag=True, help="Continue the export in --out: only offsets after its last run.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the run.")
@topic_config_options
@one_line_errors
def export(
    log_dirs: tuple[Path, ...],
    fmt: str,
    out: Path,
    topics: tuple[str, ...] | None,
    topic_pattern: str | None,
    partitions: tuple[int, ...] | None,
    from_time: int | None,
    to_time: int | None,
    isolation: str,
    include_headers: bool,
    partition_by: str,
    master: str,
    resume: bool,
    as_json: bool,
    config_options: ConfigOptions,
) -> None:
    """Export the records of Kafka log dirs (or partition dirs) to Parquet, ORC or JSON files with Spark
    (needs the spark extra: pip install 'logmgr[spark]'). Rows have the schema of Spark's Kafka source. Each
    partition's offset range is fixed before reading, so records appended meanwhile wait for the next run;
    <out>/_logmgr_manifest.json records every run's ranges and row counts, and --resume exports only what came
    after the last run. Read-only on the log dirs: no lock is taken. Each topic's records are decoded within the
    larger of its max.message.bytes (from the KRaft metadata, --config, --topic-config or --topic-configs) and
    64 MiB per record, 256 MiB per batch.

    \b
    Examples:
        logmgr export /var/lib/kafka/data --to parquet --out /tmp/kafka-parquet
        logmgr export /var/lib/kafka/data --to parquet --out /tmp/kafka-parquet --resume
        logmgr export /var/lib/kafka/data --to json --out /tmp/orders --topics orders \\
            --from-time 2024-05-01T00:00:00Z --isolation read_committed --partition-by date
    """
    try:
        from logmgr.spark import register
        from logmgr.spark.export import parse_partition_by, plan_export, run_export
    except ImportError as err:
        raise Failure(f"logmgr export needs PySpark: pip install 'logmgr[spark]' ({err})") from None
    try:
        columns = parse_partition_by(partition_by)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--partition-by") from None
    # Planned before Spark starts: a refused --out or a bad manifest fails at once, and a resume with nothing
    # new never starts Spark at all.
    plan = plan_export(
        log_dirs,
        fmt=fmt,
        out=out,
        topics=topics,
        topic_pattern=topic_pattern,
        partitions=partitions,
        from_time_ms=from_time,
        to_time_ms=to_time,
        read_committed=isolation == "read_committed",
        include_headers=include_headers,
        partition_by=columns,
        resume=resume,
        max_message_bytes=_max_message_bytes(log_dirs, config_options),
    )
    if plan.to_read:
        with spark_errors_as_failures(), spark_session(master) as spark:
            register(spark)
            result = run_export(spark, plan)
    else:
        result = run_export(None, plan)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        for line in _summary(result):
            click.echo(line)
