"""The options of the ``kafka-log`` source, parsed and checked once on the driver.

Names follow Spark's Kafka source where one exists (``startingOffsets``, ``endingOffsets``,
``startingTimestamp``, ``endingTimestamp``, ``startingOffsetsByTimestamp``, ``endingOffsetsByTimestamp``,
``includeHeaders``, ``kafka.isolation.level``, and ``subscribe`` / ``subscribePattern`` / ``assign`` as
synonyms of the topic selection), so a job written against ``format("kafka")`` keeps its options. Pure: no
Spark, no files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from logmgr.errors import ConfigError
from logmgr.spark.schema import EXTRA_COLUMNS, OutputColumns
from segments.records import DecodeLimits

EARLIEST = -2
LATEST = -1

DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class OffsetSpec:
    """Where a partition's range starts or ends: ``offset`` (-2 earliest, -1 latest, or an offset) or, when
    ``timestamp`` is set, the first offset whose record timestamp is ``>= timestamp`` (Kafka's
    ``offsetsForTimes``)."""

    offset: int = EARLIEST
    timestamp: int | None = None


@dataclass(frozen=True)
class RangeSpec:
    """A starting or ending bound: a default for every partition plus per-partition overrides."""

    default: OffsetSpec
    per_partition: Mapping[tuple[str, int], OffsetSpec] = field(default_factory=dict)

    def for_partition(self, topic: str, partition: int) -> OffsetSpec:
        """The bound of one partition. O(1)."""
        return self.per_partition.get((topic, partition), self.default)


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read needs, resolved from the option strings."""

    paths: tuple[str, ...]
    topics: frozenset[str] | None = None
    topic_pattern: str | None = None
    partitions: frozenset[int] | None = None
    assigned: frozenset[tuple[str, int]] | None = None
    starting: RangeSpec = RangeSpec(OffsetSpec(EARLIEST))
    ending: RangeSpec = RangeSpec(OffsetSpec(LATEST))
    read_committed: bool = False
    columns: OutputColumns = field(default_factory=OutputColumns)
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    fail_on_corruption: bool = True
    max_message_bytes: Mapping[str, int] = field(default_factory=dict)
    """``maxMessageBytes`` per topic; :attr:`default_max_message_bytes` for the others."""
    default_max_message_bytes: int = 0

    def decode_limits(self, topic: str) -> DecodeLimits:
        """The limits ``topic``'s records are decoded within: the larger of its ``maxMessageBytes`` (its
        ``max.message.bytes``) and the defaults, so a record the topic accepted is always read. O(1)."""
        size = self.max_message_bytes.get(topic, self.default_max_message_bytes)
        return DecodeLimits.for_max_message_bytes(size)

    def selects_topic(self, topic: str) -> bool:
        """Whether the topic options admit ``topic``. O(1) plus the pattern match.

        KRaft's ``__cluster_metadata`` log is not a topic a consumer can read: it is included only when named
        in ``topics``."""
        if self.topics is not None and topic not in self.topics:
            return False
        if topic == CLUSTER_METADATA_TOPIC and self.topics is None:
            return False
        if self.topic_pattern is not None and re.fullmatch(self.topic_pattern, topic) is None:
            return False
        return self.assigned is None or any(t == topic for t, _ in self.assigned)

    def selects_partition(self, topic: str, partition: int) -> bool:
        """Whether the options admit this topic-partition. O(1)."""
        if not self.selects_topic(topic):
            return False
        if self.partitions is not None and partition not in self.partitions:
            return False
        return self.assigned is None or (topic, partition) in self.assigned


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    """Parse the option map Spark hands a data source (keys compared case-insensitively).

    Raises :class:`ConfigError` naming the option for anything malformed or contradictory. O(len(options)).
    """
    lowered = {key.lower(): value for key, value in options.items()}

    def get(name: str) -> str | None:
        return lowered.get(name.lower())

    paths = _paths(get("path"), get("paths"))
    topics = _topic_list("topics", get("topics"), "subscribe", get("subscribe"))
    pattern = get("topicPattern") or get("subscribePattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as err:
            raise ConfigError("topicPattern", f"invalid regular expression {pattern!r}: {err}") from None
    assigned = _assign(get("assign"))
    partitions = _int_list("partitions", get("partitions"))
    isolation = (get("isolationLevel") or get("kafka.isolation.level") or "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError("isolationLevel", f"must be read_uncommitted or read_committed, not {isolation!r}")
    extra = tuple(name.strip() for name in (get("extraColumns") or "").split(",") if name.strip())
    unknown = [name for name in extra if name not in EXTRA_COLUMNS]
    if unknown:
        raise ConfigError(
            "extraColumns", f"unknown column(s) {', '.join(unknown)}; known: {', '.join(EXTRA_COLUMNS)}"
        )
    max_bytes = _positive_int("maxBytesPerPartition", get("maxBytesPerPartition"), DEFAULT_MAX_BYTES_PER_PARTITION)
    default_max_message_bytes, max_message_bytes = _max_message_bytes(get("maxMessageBytes"))
    return ReadOptions(
        paths=paths,
        topics=topics,
        topic_pattern=pattern,
        partitions=partitions,
        assigned=assigned,
        starting=_range(
            "startingOffsets", get("startingOffsets"), "startingTimestamp", get("startingTimestamp"),
            "startingOffsetsByTimestamp", get("startingOffsetsByTimestamp"), EARLIEST,
        ),
        ending=_range(
            "endingOffsets", get("endingOffsets"), "endingTimestamp", get("endingTimestamp"),
            "endingOffsetsByTimestamp", get("endingOffsetsByTimestamp"), LATEST,
        ),
        read_committed=isolation == "read_committed",
        columns=OutputColumns.of(_bool("includeHeaders", get("includeHeaders"), False), extra),
        max_bytes_per_partition=max_bytes,
        fail_on_corruption=_bool("failOnCorruption", get("failOnCorruption"), True),
        max_message_bytes=max_message_bytes,
        default_max_message_bytes=default_max_message_bytes,
    )


def _max_message_bytes(value: str | None) -> tuple[int, dict[str, int]]:
    """``maxMessageBytes``: the topics' ``max.message.bytes``, one number for every topic or a JSON object
    ``{"orders": 104857600}`` per topic (the others get the defaults). O(len(value))."""
    if value is None:
        return 0, {}
    if not value.strip().startswith("{"):
        return _positive_int("maxMessageBytes", value, 0), {}
    per_topic: dict[str, int] = {}
    for topic, size in _json_object("maxMessageBytes", value).items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ConfigError("maxMessageBytes", f"{topic}: must be a non-negative integer, got {size!r}")
        per_topic[topic] = size
    return 0, per_topic


def _paths(path: str | None, paths: str | None) -> tuple[str, ...]:
    found: list[str] = []
    if paths:
        # DataFrameReader.load([...]) passes a JSON array.
        try:
            decoded = json.loads(paths)
        except json.JSONDecodeError:
            decoded = paths.split(",")
        found.extend(str(item) for item in (decoded if isinstance(decoded, list) else [decoded]))
    if path:
        found.extend(part for part in path.split(",") if part)
    if not found:
        raise ConfigError("path", "give one or more log dirs, e.g. .load('/var/lib/kafka/data')")
    return tuple(dict.fromkeys(p.strip() for p in found))


def _topic_list(name: str, value: str | None, synonym: str, synonym_value: str | None) -> frozenset[str] | None:
    if value is not None and synonym_value is not None:
        raise ConfigError(synonym, f"{name} and {synonym} both given; use one")
    text = value if value is not None else synonym_value
    if text is None:
        return None
    topics = frozenset(part.strip() for part in text.split(",") if part.strip())
    if not topics:
        raise ConfigError(name if value is not None else synonym, "names no topic")
    return topics


def _int_list(name: str, value: str | None) -> frozenset[int] | None:
    if value is None:
        return None
    try:
        return frozenset(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise ConfigError(name, f"must be comma-separated partition numbers, not {value!r}") from None


def _assign(value: str | None) -> frozenset[tuple[str, int]] | None:
    if value is None:
        return None
    decoded = _json_object("assign", value)
    try:
        if not all(isinstance(parts, list) for parts in decoded.values()):
            raise TypeError
        return frozenset((topic, int(p)) for topic, parts in decoded.items() for p in parts)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ConfigError("assign", f'must look like {{"topic":[0,1]}}, not {value!r}') from None


def _json_object(name: str, value: str) -> dict[str, object]:
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError as err:
        raise ConfigError(name, f"not valid JSON ({err.msg} at character {err.pos}): {value!r}") from None
    if not isinstance(decoded, dict):
        raise ConfigError(name, f"expected a JSON object, got {value!r}")
    return decoded


def _per_partition(name: str, value: str, as_timestamp: bool) -> dict[tuple[str, int], OffsetSpec]:
    decoded = _json_object(name, value)
    result: dict[tuple[str, int], OffsetSpec] = {}
    for topic, parts in decoded.items():
        if not isinstance(parts, dict):
            raise ConfigError(name, f'expected {{"{topic}": {{"0": ...}}}}, got {parts!r}')
        for partition, bound in parts.items():
            try:
                number = int(partition)
            except ValueError:
                raise ConfigError(name, f"partition {partition!r} of {topic!r} is not a number") from None
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise ConfigError(name, f"{topic}-{partition} must be an integer, got {bound!r}")
            if as_timestamp:
                result[(topic, number)] = OffsetSpec(LATEST, bound)
            elif bound < EARLIEST:
                raise ConfigError(name, f"{topic}-{partition} offset {bound} (use -2 earliest, -1 latest)")
            else:
                result[(topic, number)] = OffsetSpec(bound)
    return result


def _range(
    offsets_name: str,
    offsets: str | None,
    timestamp_name: str,
    timestamp: str | None,
    by_timestamp_name: str,
    by_timestamp: str | None,
    default: int,
) -> RangeSpec:
    given = [name for name, value in ((offsets_name, offsets), (timestamp_name, timestamp),
                                      (by_timestamp_name, by_timestamp)) if value is not None]
    if len(given) > 1:
        raise ConfigError(given[-1], f"{' and '.join(given)} both given; use one")
    if timestamp is not None:
        millis = _int(timestamp_name, timestamp)
        return RangeSpec(OffsetSpec(LATEST, millis))
    if by_timestamp is not None:
        return RangeSpec(OffsetSpec(default), _per_partition(by_timestamp_name, by_timestamp, True))
    if offsets is None:
        return RangeSpec(OffsetSpec(default))
    keyword = offsets.strip().lower()
    if keyword == "earliest":
        return RangeSpec(OffsetSpec(EARLIEST))
    if keyword == "latest":
        return RangeSpec(OffsetSpec(LATEST))
    return RangeSpec(OffsetSpec(default), _per_partition(offsets_name, offsets, False))


def _int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(name, f"must be an integer, not {value!r}") from None


def _positive_int(name: str, value: str | None, default: int) -> int:
    if value is None:
        return default
    number = _int(name, value)
    if number <= 0:
        raise ConfigError(name, f"must be positive, not {number}")
    return number


def parse_bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    """Option ``name`` (case-insensitive key) as a boolean. Raises :class:`ConfigError` unless true/false."""
    lowered = {key.lower(): value for key, value in options.items()}
    return _bool(name, lowered.get(name.lower()), default)


def _bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(name, f"must be true or false, not {value!r}")
