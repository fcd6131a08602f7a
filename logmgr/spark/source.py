"""The ``kafka-log`` data source on PySpark's Python Data Source API (PySpark >= 4.1).

``spark.read.format("kafka-log").load(LOGDIR)`` reads Kafka log dirs (written by a broker or by logmgr) with
the schema of Spark's own Kafka source. Planning happens on the driver (:func:`logmgr.spark.scan.plan_scan`);
every input partition is one segment or one byte range of a large segment, decoded on an executor into Arrow
batches (:mod:`logmgr.spark.columnar`).

Filter pushdown: with ``spark.sql.python.filterPushdown.enabled=true``, filters on ``topic``, ``partition``,
``offset`` and ``timestamp`` prune partitions, segments and batches, and ``key = ...`` / ``key IN (...)`` prune
the segments a key index covers down to the batches holding those keys; every filter is still handed back to Spark,
which re-applies it to the rows, so pruning only ever needs to be conservative. Spark refuses a reader that
implements ``pushFilters`` while that setting is off, and a data source cannot read the setting, so pushdown is
chosen by the option ``filterPushdown`` (default ``false``); :func:`register` makes it default to the session's
setting at registration time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from logmgr.spark.options import ReadOptions, parse_bool_option, parse_options
from logmgr.spark.scan import PushedBounds, SegmentSlice, SliceStats, plan_scan, read_slice
from logmgr.spark.schema import spark_ddl

log = logging.getLogger(__name__)

SOURCE_NAME = "kafka-log"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class SliceInputPartition(InputPartition):
    """An input partition carrying one :class:`SegmentSlice` (picklable)."""

    def __init__(self, piece: SegmentSlice) -> None:
        super().__init__(piece)
        self.piece = piece


class KafkaLogDataSource(DataSource):
    """``format("kafka-log")``: Kafka log dirs as a DataFrame with Spark's Kafka source schema.

    Options (see the README): ``path``, ``topics``/``subscribe``, ``topicPattern``/``subscribePattern``,
    ``assign``, ``partitions``, ``startingOffsets``, ``endingOffsets``, ``startingTimestamp``,
    ``endingTimestamp``, ``startingOffsetsByTimestamp``, ``endingOffsetsByTimestamp``, ``isolationLevel``,
    ``includeHeaders``, ``extraColumns``, ``maxBytesPerPartition``, ``failOnCorruption``.
    """

    #: Whether readers push filters down when the ``filterPushdown`` option is absent.
    filter_pushdown_default = False

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Parsed here so a bad option fails the query at analysis time with the option's name.
        self.read_options = parse_options(dict(options))
        self.filter_pushdown = parse_bool_option(options, "filterPushdown", self.filter_pushdown_default)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return spark_ddl(self.read_options.columns)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """``readStream.format("kafka-log")``: follows live log dirs by offsets (:mod:`logmgr.spark.stream`)."""
        from logmgr.spark.stream import KafkaLogStreamReader, parse_stream_options

        return KafkaLogStreamReader(self.read_options, parse_stream_options(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        if self.filter_pushdown:
            return FilterPushdownReader(self.read_options)
        return KafkaLogReader(self.read_options)


class PushdownKafkaLogDataSource(KafkaLogDataSource):
    """The source as :func:`register` installs it in a session whose filter pushdown setting is on."""

    filter_pushdown_default = True


class KafkaLogReader(DataSourceReader):
    """Plans slices on the driver and decodes one slice per task."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.bounds = PushedBounds()

    def partitions(self) -> Sequence[InputPartition]:
        plan = plan_scan(self.options, self.bounds)
        log.info(
            "kafka-log: %d slices over %d partitions; planning opened %d of %d segments",
            len(plan.slices), len(plan.ranges), plan.segments_opened, plan.segments_total,
        )
        return [SliceInputPartition(piece) for piece in plan.slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SliceInputPartition):
            # Spark runs one task with a placeholder partition when planning found nothing to read.
            return
        stats = SliceStats()
        yield from read_slice(
            partition.piece, self.options.columns, fail_on_corruption=self.options.fail_on_corruption, stats=stats
        )
        if stats.corrupt_batches:
            log.warning(
                "kafka-log: skipped %d corrupt batch(es) in %s (failOnCorruption=false)",
                stats.corrupt_batches, partition.piece.log_path,
            )


class FilterPushdownReader(KafkaLogReader):
    """A reader that also prunes by the filters Spark pushes (needs ``spark.sql.python.filterPushdown.enabled``)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.bounds = bounds_from_filters(filters)
        # Pruning is conservative (whole segments and batches): Spark must still apply every filter.
        return list(filters)


def register(spark: SparkSession) -> None:
    """Register ``format("kafka-log")`` in ``spark``, pushing filters down by default when the session's
    ``spark.sql.python.filterPushdown.enabled`` is true now. O(1)."""
    enabled = str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    spark.dataSource.register(PushdownKafkaLogDataSource if enabled else KafkaLogDataSource)


# -- filter pushdown ----------------------------------------------------------------------------------------


def bounds_from_filters(filters: Iterable[Filter]) -> PushedBounds:
    """The conjunction of the filters Spark pushed, as :class:`PushedBounds`; filters on other columns or of
    other shapes are ignored (Spark applies them anyway). O(len(filters))."""
    bounds = PushedBounds()
    for item in filters:
        column: tuple[str, ...] = getattr(item, "attribute", ())
        if len(column) != 1:
            continue
        name = column[0]
        if name == "topic":
            bounds = _narrow_topics(bounds, item)
        elif name == "partition":
            bounds = _narrow_partitions(bounds, item)
        elif name == "offset":
            bounds = _narrow_offsets(bounds, item)
        elif name == "timestamp":
            bounds = _narrow_timestamp(bounds, item)
        elif name == "key":
            bounds = _narrow_keys(bounds, item)
    if bounds.min_offset >= bounds.max_offset or any(
        values is not None and not values for values in (bounds.topics, bounds.partitions, bounds.keys)
    ):
        bounds = replace(bounds, empty=True)
    return bounds


def _values(item: Filter) -> tuple[Any, ...] | None:
    if isinstance(item, EqualTo):
        return (item.value,)
    if isinstance(item, In):
        return tuple(item.value)
    return None


def _intersect(current: frozenset[Any] | None, values: Iterable[Any]) -> frozenset[Any]:
    new = frozenset(values)
    return new if current is None else current & new


def _narrow_topics(bounds: PushedBounds, item: Filter) -> PushedBounds:
    values = _values(item)
    if values is None or not all(isinstance(v, str) for v in values):
        return bounds
    return replace(bounds, topics=_intersect(bounds.topics, values))


def _narrow_keys(bounds: PushedBounds, item: Filter) -> PushedBounds:
    values = _values(item)
    # A null key matches no ``key = ...`` (SQL's three-valued logic); null-keyed records are not indexed anyway.
    if values is None or not all(isinstance(v, bytes | bytearray | None) for v in values):
        return bounds
    return replace(bounds, keys=_intersect(bounds.keys, (bytes(v) for v in values if v is not None)))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _narrow_partitions(bounds: PushedBounds, item: Filter) -> PushedBounds:
    values = _values(item)
    if values is None or not all(_is_int(v) for v in values):
        return bounds
    return replace(bounds, partitions=_intersect(bounds.partitions, values))


def _narrow_offsets(bounds: PushedBounds, item: Filter) -> PushedBounds:
    low, high = bounds.min_offset, bounds.max_offset
    values = _values(item)
    if values is not None:
        if not values or not all(_is_int(v) for v in values):
            return bounds if values else replace(bounds, empty=True)
        low, high = max(low, min(values)), min(high, max(values) + 1)
    else:
        value = getattr(item, "value", None)
        if not isinstance(value, int) or isinstance(value, bool):
            return bounds
        if isinstance(item, GreaterThan):
            low = max(low, value + 1)
        elif isinstance(item, GreaterThanOrEqual):
            low = max(low, value)
        elif isinstance(item, LessThan):
            high = min(high, value)
        elif isinstance(item, LessThanOrEqual):
            high = min(high, value + 1)
    return replace(bounds, min_offset=low, max_offset=high)


def _narrow_timestamp(bounds: PushedBounds, item: Filter) -> PushedBounds:
    if isinstance(item, GreaterThan | GreaterThanOrEqual | EqualTo):
        candidates: tuple[Any, ...] = (item.value,)
    elif isinstance(item, In):
        candidates = tuple(item.value)
    else:
        return bounds
    if not candidates or not all(isinstance(v, datetime) for v in candidates):
        return bounds
    # Record timestamps are whole milliseconds: flooring keeps the bound conservative. A naive datetime is in
    # the session's local time, as PySpark converts TimestampType values.
    millis = math.floor(min(v.timestamp() for v in candidates) * 1000)
    current = bounds.min_timestamp
    return replace(bounds, min_timestamp=millis if current is None else max(current, millis))
