"""Streaming reads: ``spark.readStream.format("kafka-log").load(LOGDIR)`` follows live log dirs by offsets.

The semantics are those of Spark's Kafka source for streams:

* An offset is ``{"topic": {"partition": next offset}}`` (partition numbers as strings, as Spark's Kafka
  source writes them); topics and partitions are always in sorted order, so "no new data" is the very same
  JSON.
* The first micro-batch starts at ``startingOffsets`` (``latest`` when no starting option is given, Spark's
  default for streams; ``earliest``, per-partition JSON, ``startingTimestamp`` and
  ``startingOffsetsByTimestamp`` are resolved exactly as a batch read resolves them). A restarted query goes
  on from its checkpoint instead. Spark asks for the initial offset both to plan and to run the first
  micro-batch, so it is resolved once per query run; a query that stops before its first micro-batch is
  committed resolves it afresh when restarted (Spark's own Kafka source keeps it in the checkpoint, which a
  Python source cannot see), so ``latest`` may then have moved on.
* A micro-batch ends at each partition's log end offset, or its last stable offset under ``read_committed``,
  read from the files without writing anything. A partition that appears later is read from its log start.
* ``maxOffsetsPerTrigger`` caps the offsets of one micro-batch, shared across the partitions in proportion to
  their backlog (:func:`apportion`). ``trigger(availableNow=True)`` reads up to the ends seen when the query
  starts, in as many micro-batches as that cap needs, then stops.
* ``failOnDataLoss`` (default ``true``): offsets that retention deleted before they were read, a partition
  that disappeared, or a log end that moved backwards fail the query; with ``false`` they are logged and
  skipped.
* ``endingOffsets``, ``endingTimestamp`` and ``endingOffsetsByTimestamp`` are refused, as Spark refuses them
  for streams.

Each micro-batch ``[start, end)`` is planned by :func:`logmgr.spark.scan.plan_scan` with the two offset maps
as per-partition starting and ending offsets, so segment pruning, byte-range splitting and the
``read_committed`` rules are those of batch reads; tasks decode slices with the batch reader's ``read``.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

# A module import, its names looked up when used: source.py may import this module while it is still loading.
import logmgr.spark.source as batch_source
from logmgr.errors import ConfigError, OffsetOutOfRangeError
from logmgr.spark.options import EARLIEST, LATEST, OffsetSpec, RangeSpec, ReadOptions, parse_bool_option
from logmgr.spark.scan import PartitionRange, ScanPlan, plan_scan

log = logging.getLogger(__name__)

#: A topic-partition as the offset maps key it.
PartitionKey = tuple[str, int]
#: Next offset to read per topic-partition.
PartitionOffsets = dict[PartitionKey, int]
#: An offset as Spark checkpoints it: ``{"topic": {"partition": offset}}``.
OffsetsJson = dict[str, dict[str, int]]

_STARTING_OPTIONS = ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
_ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
# As an ending bound it resolves to the log start: nothing is read.
_NOTHING = RangeSpec(OffsetSpec(EARLIEST))


@dataclass(frozen=True)
class StreamOptions:
    """The options only streaming reads have (all other options are :class:`ReadOptions`)."""

    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    #: Whether a starting option was given; without one a stream starts at ``latest``.
    starting_given: bool = False


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Parse ``maxOffsetsPerTrigger`` and ``failOnDataLoss``, note whether a starting option was given, and
    refuse the ending options (keys compared case-insensitively). Raises :class:`ConfigError` naming the
    option. O(len(options))."""
    lowered = {key.lower(): value for key, value in options.items()}
    for name in _ENDING_OPTIONS:
        if name.lower() in lowered:
            raise ConfigError(name, "not valid in streaming queries (a stream has no end)")
    limit_text = lowered.get("maxoffsetspertrigger")
    limit = None
    if limit_text is not None:
        try:
            limit = int(limit_text.strip())
        except ValueError:
            raise ConfigError("maxOffsetsPerTrigger", f"must be an integer, not {limit_text!r}") from None
        if limit <= 0:
            raise ConfigError("maxOffsetsPerTrigger", f"must be positive, not {limit}")
    return StreamOptions(
        max_offsets_per_trigger=limit,
        fail_on_data_loss=parse_bool_option(options, "failOnDataLoss", True),
        starting_given=any(name.lower() in lowered for name in _STARTING_OPTIONS),
    )


def offsets_to_json(offsets: Mapping[PartitionKey, int]) -> OffsetsJson:
    """The checkpointed form of ``offsets``, topics and partitions sorted. O(n log n)."""
    out: OffsetsJson = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def offsets_from_json(value: Mapping[str, Any]) -> PartitionOffsets:
    """Parse a checkpointed offset. Raises :class:`ConfigError` for anything but ``{"topic": {"0": 12}}`` with
    non-negative offsets (e.g. a checkpoint written by another source). O(n)."""
    out: PartitionOffsets = {}
    for topic, parts in value.items():
        if not isinstance(parts, Mapping):
            raise ConfigError("stream offset", f'expected {{"{topic}": {{"0": 12}}}}, got {dict(value)!r}')
        for partition, offset in parts.items():
            try:
                number = int(partition)
            except ValueError:
                raise ConfigError("stream offset", f"partition {partition!r} of {topic!r} is not a number") \
                    from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise ConfigError("stream offset", f"{topic}-{partition} has offset {offset!r}")
            out[(topic, number)] = offset
    return out


def apportion(limit: int, backlog: Mapping[PartitionKey, int]) -> PartitionOffsets:
    """How many offsets each partition with a positive backlog may advance so that together they advance
    exactly ``min(limit, total backlog)``.

    Each share is the proportional share ``limit * backlog / total`` rounded down or up; the offsets left over
    after rounding down go first to partitions that would otherwise get none (so small partitions are not
    starved behind big ones), then by largest remainder, then in partition order. Integer arithmetic only, so
    no share overflows or drifts (unlike floating-point proration). O(n log n).
    """
    positive = {key: size for key, size in backlog.items() if size > 0}
    total = sum(positive.values())
    if total <= limit:
        return positive
    # limit < total, so every rounded-down share is below its backlog and may take one more.
    shares = {key: limit * size // total for key, size in positive.items()}
    left = limit - sum(shares.values())
    order = sorted(positive, key=lambda key: (shares[key] > 0, -(limit * positive[key] % total), key))
    for key in order[:left]:
        shares[key] += 1
    return shares


def resolve_offsets(options: ReadOptions, starting: RangeSpec) -> dict[PartitionKey, PartitionRange]:
    """Every selected partition with ``starting`` resolved as a batch read resolves it (``start_offset``),
    and its log start offset. Opens no segment beyond what resolving needs. O(partitions x log(segments)),
    plus one tail read per partition for ``latest`` (and the LSO replay under ``read_committed``)."""
    plan = plan_scan(replace(options, starting=starting, ending=_NOTHING))
    return {(r.topic, r.partition): r for r in plan.ranges}


def plan_offset_range(
    options: ReadOptions, start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int]
) -> ScanPlan:
    """Slices covering exactly ``[start, end)`` of every selected partition in ``end``; a partition missing
    from ``start`` starts at its log start, a start below the log start is raised to it. Costs one
    :func:`plan_scan`."""
    starting = RangeSpec(OffsetSpec(EARLIEST), {key: OffsetSpec(offset) for key, offset in start.items()})
    ending = replace(_NOTHING, per_partition={key: OffsetSpec(offset) for key, offset in end.items()})
    return plan_scan(replace(options, starting=starting, ending=ending))


@dataclass(frozen=True)
class _Ends:
    """What ``latest`` is at one moment: the end (LEO, or LSO under ``read_committed``) and the log start of
    every partition."""

    end: PartitionOffsets
    log_start: PartitionOffsets


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The micro-batch reader of ``readStream.format("kafka-log")`` (see the module docstring).

    The instance Spark keeps on the driver for the query's run remembers the initial offset, the
    ``availableNow`` target and the last ends it saw; the copies pickled to executors only run :meth:`read`.
    """

    def __init__(self, read_options: ReadOptions, stream_options: StreamOptions) -> None:
        self.options = read_options
        self.stream_options = stream_options
        self._slices = batch_source.KafkaLogReader(read_options)
        self._initial: OffsetsJson | None = None
        self._target: _Ends | None = None
        self._seen: PartitionOffsets | None = None

    def initialOffset(self) -> OffsetsJson:
        """Offsets from the starting options (``latest`` when none was given), resolved on the first call and
        the same afterwards: Spark asks again when it runs the first micro-batch, and a ``latest`` resolved
        anew would start that batch past the end it planned. O(one planning pass), then O(1)."""
        if self._initial is None:
            given = self.stream_options.starting_given
            starting = self.options.starting if given else RangeSpec(OffsetSpec(LATEST))
            resolved = resolve_offsets(self.options, starting)
            self._initial = offsets_to_json({key: r.start_offset for key, r in resolved.items()})
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, or everything available. O(1)."""
        limit = self.stream_options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the ends the ``availableNow`` query stops at: the current ones. O(one planning pass)."""
        self._target = self._current_ends()

    def latestOffset(self, start: Mapping[str, Any], limit: ReadLimit) -> OffsetsJson:
        """The end of the next micro-batch: the current ends (or the ``availableNow`` target), advanced from
        ``start`` by at most ``limit.max_rows`` offsets in all when ``limit`` is :class:`ReadMaxRows` (any
        other limit reads everything). Equals ``start`` when there is nothing new. O(one planning pass +
        n log n)."""
        ends = self._target if self._target is not None else self._current_ends()
        self._seen = ends.end
        if not isinstance(limit, ReadMaxRows):
            return offsets_to_json(ends.end)
        begin = offsets_from_json(start)
        origin = {key: begin.get(key, ends.log_start[key]) for key in ends.end}
        shares = apportion(limit.max_rows, {key: end - origin[key] for key, end in ends.end.items()})
        return offsets_to_json(
            {key: origin[key] + shares[key] if key in shares else end for key, end in ends.end.items()}
        )

    def reportLatestOffset(self) -> OffsetsJson | None:
        """The ends the last :meth:`latestOffset` saw, before any limit (for the query progress).
        O(n log n)."""
        return None if self._seen is None else offsets_to_json(self._seen)

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> Sequence[InputPartition]:
        """Slices covering ``[start, end)`` per partition, after reporting data loss (see the module
        docstring). O(one planning pass)."""
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        for key in sorted(begin.keys() - finish.keys()):
            self._data_loss(f"partition {key[0]}-{key[1]} disappeared at offset {begin[key]}")
        plan = plan_offset_range(self.options, begin, finish)
        for r in plan.ranges:
            key = (r.topic, r.partition)
            if key not in finish or key not in begin:
                continue
            name = f"partition {r.topic}-{r.partition}"
            if finish[key] < begin[key]:
                self._data_loss(f"{name}: its end moved back from {begin[key]} to {finish[key]}")
            elif begin[key] < (lost_until := min(finish[key], r.log_start_offset)):
                self._data_loss(
                    f"{name}: offsets {begin[key]} to {lost_until - 1} were deleted before they were read "
                    "(the log start offset moved past them)"
                )
        log.info(
            "kafka-log stream: %d slices over %d partitions; planning opened %d of %d segments",
            len(plan.slices), len(finish), plan.segments_opened, plan.segments_total,
        )
        return [batch_source.SliceInputPartition(piece) for piece in plan.slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of one slice, as a batch read decodes them. O(bytes of the slice)."""
        return self._slices.read(partition)

    def _current_ends(self) -> _Ends:
        resolved = resolve_offsets(self.options, RangeSpec(OffsetSpec(LATEST)))
        return _Ends(
            {key: r.start_offset for key, r in resolved.items()},
            {key: r.log_start_offset for key, r in resolved.items()},
        )

    def _data_loss(self, what: str) -> None:
        if self.stream_options.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"kafka-log stream: {what}; some data may have been lost. Set the option failOnDataLoss to "
                "false to skip it and go on"
            )
        log.warning("kafka-log stream: %s; skipped (failOnDataLoss=false)", what)
