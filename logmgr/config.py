"""Kafka's log configuration: per-log topic configs (:class:`LogConfig`) and broker ``log.*`` settings
(:class:`BrokerConfig`), loadable from a broker's ``server.properties``.

Keys are Kafka's property names verbatim; attributes are the same names in snake case (``retention.ms`` ->
``retention_ms``, ``log.roll.ms`` -> ``log_roll_ms``). Values are parsed as Kafka's ``ConfigDef`` parses them:
surrounding whitespace (``String.trim``) is ignored, integers follow ``Integer.parseInt``/``Long.parseLong``,
booleans are ``true``/``false`` in any case, lists are comma-separated (``\\s*,\\s*``, an empty value is an empty
list), enumerations are case-sensitive. Ranges are those of Kafka's validators; ``segment.bytes`` keeps the 3.x
minimum of 14 bytes (Kafka 4 raised it to 1 MiB and moved small test sizes to an internal key). Every invalid
value raises :class:`~logmgr.errors.ConfigError` naming the key and the value.

Topic configs are strict, as Kafka's topic validation is: a key that is not a supported topic config is an error.
Broker files hold many settings unrelated to logs, so the broker loader ignores unknown keys, except keys in
logmgr's own ``logmgr.`` namespace, where an unknown key is a typo.

Beyond Kafka, :class:`BrokerConfig` carries RocketMQ-style space management settings. The three disk tiers are
RocketMQ's ``diskMaxUsedSpaceRatio`` (75 %), ``diskSpaceCleanForciblyRatio`` (0.85) and
``diskSpaceWarningLevelRatio`` (0.90), with RocketMQ's defaults, so they are on in every LogManager that runs its jobs
(and in ``logmgr cleanup``). Usage is RocketMQ's ``getDiskPartitionSpaceUsedPercent``: used over used plus available
bytes of the dir's file system (blocks reserved for root count in neither). A tier is passed when usage is strictly
above its ratio; a ratio of ``1.0`` can never be passed, which switches that tier off. The tiers below 1.0 must not
decrease in this order (unlike RocketMQ, ratios are not clamped to its 10-95 %, 30-85 % and 35-90 % ranges: 1.0
must stay reachable as "off"):

``logmgr.disk.max.used.ratio``
    First tier (default 0.75): fraction of a log dir's file system (0 < r <= 1) above which ``retention.ms``
    deletion runs even outside ``logmgr.delete.when`` (RocketMQ's ``isSpaceToDelete``).
``logmgr.disk.usage.clean.ratio``
    Second tier (default 0.85): fraction above which the oldest eligible segments of that dir are deleted, ignoring
    ``retention.ms`` (never the high-watermark bound), until usage falls below it (RocketMQ's ``cleanImmediately``).
``logmgr.disk.usage.warn.ratio``
    Third tier (default 0.90): fraction above which the dir is marked full and appends to its logs are rejected
    until usage falls back to it or below (RocketMQ's ``isSpaceFull`` / ``runningFlags.makeDiskFull``); the
    second tier's cleaning runs too.
``logmgr.disk.check.interval.ms``
    Period of the disk-check job that measures each dir's real used space and acts on its tier (RocketMQ checks
    every 10 s), independently of ``log.retention.check.interval.ms``.
``logmgr.group.commit.enable``
    Appends that reach ``flush.messages`` wait for a shared flusher thread instead of fsyncing themselves, so
    concurrent appenders share fsyncs (RocketMQ's ``GroupCommitService``).
``logmgr.group.commit.timeout.ms``
    How long such an append waits for its fsync before :class:`~logmgr.errors.GroupCommitTimeoutError` (5000,
    RocketMQ's ``syncFlushTimeout``).
``logmgr.delete.when``
    Local hours in which time-based (``retention.ms``) deletion may run: ``04``, ``02-05`` (02:00 to 05:59),
    ``22-02`` (wraps past midnight) or several items separated by ``;`` or ``,``. Absent: any hour. Disk-usage
    and manual cleanups ignore the window.
``logmgr.delete.interval.ms``
    Pause between two physical file deletions, to spread the I/O (0: none).
``logmgr.delete.force.after.ms``
    How long a segment still held by a reader may delay the unlink of its files once it is due (default 120000).
``logmgr.append.reserve.bytes``
    Largest step of disk an active segment's appends reserve past its end (default 4194304; 0: none), also a
    topic config. Steps grow with the segment from 64 KiB; the file's size stays the bytes written, so Kafka and
    every reader see the same file, and a roll, a close or a truncation gives the rest back. A crash leaves one
    step at most past each active segment's end until that segment is truncated, rolled or deleted. Writing into
    reserved blocks skips the file system's per-block allocation on each write (ext4's delayed allocation).

Nothing here reads clocks; only :func:`load_server_properties` touches files.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, TypeVar

from checkpoints.meta_properties import JAVA_TRIMMED, logical_lines, split_entry
from logmgr.errors import ConfigError
from logmgr.retention import DISK_TIER_OFF, in_delete_window
from segments.java_numbers import INT32_MIN, INT64_MAX, check_java_int, parse_java_int

ConfigValue = str | int | float | bool
"""A property value: Kafka's text form, or an already typed Python value."""

ConfigProperties = Mapping[str, ConfigValue]

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
DEFAULT_LOG_DIR = "/tmp/kafka-logs"
LOGMGR_PREFIX = "logmgr."

_MS_PER_MINUTE = 60_000
_MS_PER_HOUR = 3_600_000
# Java's \s (ASCII only), as in ConfigDef's COMMA_WITH_WHITESPACE.
_JAVA_SPACE = "[ \t\n\x0b\f\r]"
_LIST_SEPARATOR = re.compile(f"{_JAVA_SPACE}*,{_JAVA_SPACE}*")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HOUR_ITEM = re.compile(r"([0-9]{1,2})(?:[ \t]*-[ \t]*([0-9]{1,2}))?")
_HOUR_SEPARATOR = re.compile("[;,]")
_SPEC = "logmgr.config.spec"

_Kind = Literal["int", "long", "boolean", "list", "string", "ratio", "double", "dirs", "hours"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class _Spec:
    """How one property is parsed and validated (Kafka's ConfigDef type plus validator)."""

    key: str
    kind: _Kind
    at_least: int | None = None
    choices: tuple[str, ...] = ()
    # -1 is accepted besides ``at_least`` (Kafka's broker rule for log.retention.ms: unlimited or >= 1).
    unlimited: bool = False
    # None is accepted: the feature is off.
    optional: bool = False
    # The LogConfig attribute whose default this broker setting provides.
    synonym: str | None = None

    def parse(self, raw: object) -> Any:
        """Convert a text or typed value, then validate it; raises ConfigError naming the key. O(len(raw))."""
        value = self._convert(raw)
        self.check(value)
        return value

    def check(self, value: object, key: str | None = None) -> None:
        """Validate a typed value, naming ``key`` (default: this spec's key) on failure. O(len(value))."""
        problem = self._problem(value)
        if problem is not None:
            raise ConfigError(key or self.key, f"invalid value {_show(value)}: {problem}")

    def _convert(self, raw: object) -> object:
        if not isinstance(raw, str):
            # Typed values are taken as they are (ints become floats for ratios); check() judges them.
            if self.kind in ("ratio", "double") and isinstance(raw, int) and not isinstance(raw, bool):
                return float(raw)
            return raw
        trimmed = raw.strip(JAVA_TRIMMED)
        if self.kind in ("int", "long"):
            try:
                return parse_java_int(trimmed, 32 if self.kind == "int" else 64)
            except ValueError:
                raise ConfigError(
                    self.key, f"invalid value {raw!r}: not a number of type {self.kind}"
                ) from None
        if self.kind == "boolean":
            if trimmed.lower() not in ("true", "false"):
                raise ConfigError(self.key, f"invalid value {raw!r}: expected true or false")
            return trimmed.lower() == "true"
        if self.kind in ("ratio", "double"):
            if _DECIMAL.fullmatch(trimmed) is None:
                raise ConfigError(self.key, f"invalid value {raw!r}: not a decimal number")
            return float(trimmed)
        if self.kind == "list":
            return () if not trimmed else tuple(_LIST_SEPARATOR.split(trimmed))
        if self.kind == "dirs":
            # Kafka's parseCsvList drops empty entries ("a,,b" is two dirs).
            return tuple(entry for entry in _LIST_SEPARATOR.split(trimmed) if entry)
        if self.kind == "hours":
            return _parse_hours(self.key, raw)
        return trimmed

    def _problem(self, value: object) -> str | None:
        if value is None and self.optional:
            return None
        if self.kind in ("int", "long"):
            try:
                check_java_int(value, 32 if self.kind == "int" else 64, self.key)
            except ValueError:
                return f"not a number of type {self.kind}"
            assert isinstance(value, int)
            if self.unlimited and value == -1:
                return None
            if self.at_least is None or value >= self.at_least:
                return None
            return f"must be {'-1 (unlimited) or ' if self.unlimited else ''}at least {self.at_least}"
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "expected true or false"
        if self.kind == "ratio":
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 < value <= 1.0:
                return "must be a ratio greater than 0 and at most 1"
            return None
        if self.kind == "double":
            # Kafka's ConfigDef DOUBLE; the only double logmgr reads (log.cleaner.io.max.bytes.per.second) is a rate.
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0.0:
                return "must be a number greater than 0"
            return None
        if self.kind == "string":
            if not isinstance(value, str) or value not in self.choices:
                return f"must be one of: {', '.join(self.choices)}"
            return None
        if self.kind == "hours":
            if (
                not isinstance(value, frozenset)
                or not value
                or not all(
                    isinstance(hour, int) and not isinstance(hour, bool) and 0 <= hour <= 23 for hour in value
                )
            ):
                return "expected a non-empty set of hours 0-23"
            return None
        if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
            return "expected a comma-separated list"
        if self.kind == "dirs":
            if not value:
                return "at least one log directory must be defined via log.dirs or log.dir"
            if "" in value or len(set(value)) != len(value):
                return "directories must be non-empty and distinct"
            return None
        bad = [item for item in value if item not in self.choices]
        return f"each item must be one of: {', '.join(self.choices)}" if bad else None


def _config(
    key: str,
    kind: _Kind,
    default: _T,
    *,
    at_least: int | None = None,
    choices: tuple[str, ...] = (),
    unlimited: bool = False,
    synonym: str | None = None,
) -> _T:
    spec = _Spec(key, kind, at_least, choices, unlimited, default is None, synonym)
    result: _T = field(default=default, metadata={_SPEC: spec})
    return result


def _specs(cls: type[Any]) -> dict[str, _Spec]:
    """``attribute -> spec`` for every configurable field of a config dataclass, in declaration order."""
    return {item.name: item.metadata[_SPEC] for item in dataclasses.fields(cls) if _SPEC in item.metadata}


def _to_text(value: object) -> str:
    """Kafka's text form of a valid value: what parsing reads back as ``value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _show(value: object) -> str:
    """A value as an error message quotes it."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, frozenset):
        return "{" + ", ".join(map(str, sorted(value))) + "}"
    return _to_text(value) if isinstance(value, bool | tuple) else repr(value)


def _parse_hours(key: str, raw: str) -> frozenset[int]:
    """``04``, ``02-05`` (inclusive), ``22-02`` (wrapping) and ``;``/``,``-separated lists of those."""
    hours: set[int] = set()
    for item in _HOUR_SEPARATOR.split(raw):
        match = _HOUR_ITEM.fullmatch(item.strip(JAVA_TRIMMED))
        if match is None or not all(0 <= int(part) <= 23 for part in match.groups() if part is not None):
            raise ConfigError(key, f"invalid value {raw!r}: expected hours 0-23 like 04, 02-05 or 01;13")
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2))
        hours.update(hour % 24 for hour in range(first, first + (last - first) % 24 + 1))
    return frozenset(hours)


@dataclass(frozen=True)
class LogConfig:
    """The configuration of one partition log (Kafka's topic-level ``LogConfig``), validated on construction.

    Build one with keyword arguments, :meth:`from_properties` (Kafka keys) or
    :meth:`BrokerConfig.effective_log_config` (broker defaults plus a topic's overrides).
    """

    retention_ms: int = _config("retention.ms", "long", 604_800_000, at_least=-1)
    """Age (now − a segment's largest timestamp) past which a segment is deleted; -1: no time limit."""
    retention_bytes: int = _config("retention.bytes", "long", -1)
    """Size the log may keep; oldest segments go while the excess covers them. Negative: no size limit."""
    segment_bytes: int = _config("segment.bytes", "int", 1_073_741_824, at_least=14)
    """Maximum size of a segment's ``.log`` file; an append that would exceed it rolls a new segment."""
    segment_ms: int = _config("segment.ms", "long", 604_800_000, at_least=1)
    """Roll a segment once its records (or, without timestamps, its age) span this many ms."""
    segment_jitter_ms: int = _config("segment.jitter.ms", "long", 0, at_least=0)
    """Maximum random amount subtracted from ``segment.ms`` per segment, so logs do not roll together."""
    segment_index_bytes: int = _config("segment.index.bytes", "int", 10_485_760, at_least=4)
    """Size of the offset and time index files of a new segment (a full index rolls the segment)."""
    index_interval_bytes: int = _config("index.interval.bytes", "int", 4096, at_least=0)
    """Bytes appended between two offset/time index entries."""
    flush_messages: int = _config("flush.messages", "long", INT64_MAX, at_least=1)
    """Flush when this many messages are past the recovery point."""
    flush_ms: int = _config("flush.ms", "long", INT64_MAX, at_least=0)
    """The flusher job flushes a log whose last flush is older than this."""
    file_delete_delay_ms: int = _config("file.delete.delay.ms", "long", 60_000, at_least=0)
    """Delay between renaming a deleted segment's files to ``.deleted`` and removing them."""
    cleanup_policy: tuple[str, ...] = _config(
        "cleanup.policy",
        "list",
        (CLEANUP_POLICY_DELETE,),
        choices=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
    )
    """``delete`` and/or ``compact`` (possibly neither: then only the log-start-offset rule deletes)."""
    message_timestamp_type: str = _config(
        "message.timestamp.type", "string", CREATE_TIME, choices=(CREATE_TIME, LOG_APPEND_TIME)
    )
    """``CreateTime`` (keep the producer's timestamps) or ``LogAppendTime`` (stamp batches on append)."""
    message_timestamp_difference_max_ms: int = _config(
        "message.timestamp.difference.max.ms", "long", INT64_MAX, at_least=0
    )
    """Deprecated by Kafka 3.6 (KIP-937): the bound of both windows below while they keep their default."""
    message_timestamp_before_max_ms: int = _config("message.timestamp.before.max.ms", "long", INT64_MAX, at_least=0)
    """How far in the past (ms before the broker's clock) a CreateTime record may be; see :attr:`timestamp_bounds`."""
    message_timestamp_after_max_ms: int = _config("message.timestamp.after.max.ms", "long", INT64_MAX, at_least=0)
    """How far in the future (ms past the broker's clock) a CreateTime record may be; see :attr:`timestamp_bounds`."""
    max_message_bytes: int = _config("max.message.bytes", "int", 1_048_588, at_least=0)
    """Largest record batch accepted, in bytes (1 MiB + the 12-byte log overhead)."""
    preallocate: bool = _config("preallocate", "boolean", False)
    """Create a new segment's ``.log`` at ``segment.bytes`` (trimmed when it stops being active)."""
    min_compaction_lag_ms: int = _config("min.compaction.lag.ms", "long", 0, at_least=0)
    """Minimum age before a message may be compacted."""
    max_compaction_lag_ms: int = _config("max.compaction.lag.ms", "long", INT64_MAX, at_least=1)
    """Maximum age of an uncompacted message; also caps the roll time of compacted logs."""
    delete_retention_ms: int = _config("delete.retention.ms", "long", 86_400_000, at_least=0)
    """How long compaction keeps tombstones."""
    min_cleanable_dirty_ratio: float = _config("min.cleanable.dirty.ratio", "ratio", 0.5)
    """The cleaner cleans a compacted log once its dirty bytes exceed this share of its cleanable bytes."""
    logmgr_key_index_enable: bool = _config("logmgr.key.index.enable", "boolean", False)
    """Build the partition's key index (RocketMQ's IndexFile: one ``.keyindex`` per segment) off the append path."""
    logmgr_append_reserve_bytes: int = _config("logmgr.append.reserve.bytes", "int", 4_194_304, at_least=0)
    """Largest step of disk blocks an active segment's appends reserve ahead of its end (0: none). The steps grow
    with the segment, from 64 KiB to this; the ``.log``'s size stays the bytes written (see
    :class:`segments._native.append.FileAppendState`), and a roll, a close or a truncation gives the rest back."""

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def from_properties(cls, props: ConfigProperties, defaults: LogConfig | None = None) -> LogConfig:
        """``defaults`` (Kafka's defaults when ``None``) with the topic configs in ``props`` applied. O(len(props)).

        Raises :class:`ConfigError` for a key that is not a supported topic config and for an invalid value.
        """
        specs = _TOPIC_SPECS_BY_KEY
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            if key not in specs:
                raise ConfigError(
                    key, f"not a topic config logmgr supports (supported: {', '.join(sorted(specs))})"
                )
            attribute, spec = specs[key]
            changes[attribute] = spec.parse(raw)
        return dataclasses.replace(cls() if defaults is None else defaults, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting as Kafka's ``key -> text`` (what :meth:`from_properties` reads back). O(1)."""
        return {spec.key: _to_text(getattr(self, name)) for name, spec in _LOG_SPECS.items()}

    def with_overrides(self, props: ConfigProperties) -> LogConfig:
        """This config with the topic configs in ``props`` applied (see :meth:`from_properties`). O(len(props))."""
        return LogConfig.from_properties(props, self)

    def validate(self) -> None:
        """Raise :class:`ConfigError` unless every value has its Kafka type and range. O(1).

        Construction calls it, so a ``LogConfig`` that exists is valid.
        """
        for name, spec in _LOG_SPECS.items():
            spec.check(getattr(self, name))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                "min.compaction.lag.ms",
                f"invalid value {self.min_compaction_lag_ms}: greater than max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})",
            )

    @property
    def timestamp_bounds(self) -> tuple[int, int]:
        """``(before, after)``: how many ms before and after the broker's clock a CreateTime record's timestamp may
        lie (Kafka's LogConfig: a window left at its default, Long.MAX, takes
        ``message.timestamp.difference.max.ms``). O(1)."""
        before, after = self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms
        legacy = self.message_timestamp_difference_max_ms
        return (legacy if before == INT64_MAX else before, legacy if after == INT64_MAX else after)

    @property
    def compact(self) -> bool:
        """Whether ``cleanup.policy`` contains ``compact``. O(1)."""
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether ``cleanup.policy`` contains ``delete``. O(1)."""
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    def random_segment_jitter(self, rng: random.Random) -> int:
        """A roll jitter for a new segment: ``abs(nextInt) % min(segment.jitter.ms, segment.ms)``, 0 if no jitter. O(1).

        Draws a signed 32-bit integer as Kafka does, so the jitter never exceeds ``Int.MAX``.
        """
        if self.segment_jitter_ms == 0:
            return 0
        drawn = rng.getrandbits(32)
        signed = drawn - (1 << 32) if drawn >= 1 << 31 else drawn
        # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
        magnitude = 0 if signed == INT32_MIN else abs(signed)
        return magnitude % min(self.segment_jitter_ms, self.segment_ms)

    def random_segment_jitters(self, rng: random.Random, count: int) -> list[int]:
        """:meth:`random_segment_jitter` for ``count`` new segments in turn (a log load's), with no draw and no call
        per segment when there is no jitter. O(count)."""
        if self.segment_jitter_ms == 0:
            return [0] * count
        return [self.random_segment_jitter(rng) for _ in range(count)]


_LOG_SPECS = _specs(LogConfig)
_TOPIC_SPECS_BY_KEY = {spec.key: (name, spec) for name, spec in _LOG_SPECS.items()}


@dataclass(frozen=True)
class BrokerConfig:
    """Broker-level log settings (Kafka's ``log.*`` keys and related), validated on construction.

    Fields hold resolved values: ``log_retention_ms`` from ``log.retention.ms`` > ``log.retention.minutes`` >
    ``log.retention.hours``; ``log_roll_ms`` from ``log.roll.ms`` > ``log.roll.hours``; ``log_roll_jitter_ms``
    from ``log.roll.jitter.ms`` > ``log.roll.jitter.hours``; ``log_flush_interval_ms`` from
    ``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms``; ``log_dirs`` from ``log.dirs``, else
    ``log.dir``. The settings that are defaults of topic configs map to :class:`LogConfig` via :meth:`log_config`.
    """

    log_dirs: tuple[str, ...] = _config("log.dirs", "dirs", (DEFAULT_LOG_DIR,))
    """The log directories."""
    log_retention_ms: int = _config(
        "log.retention.ms", "long", 604_800_000, at_least=1, unlimited=True, synonym="retention_ms"
    )
    log_retention_bytes: int = _config("log.retention.bytes", "long", -1, synonym="retention_bytes")
    log_segment_bytes: int = _config(
        "log.segment.bytes", "int", 1_073_741_824, at_least=14, synonym="segment_bytes"
    )
    log_roll_ms: int = _config("log.roll.ms", "long", 604_800_000, at_least=1, synonym="segment_ms")
    log_roll_jitter_ms: int = _config(
        "log.roll.jitter.ms", "long", 0, at_least=0, synonym="segment_jitter_ms"
    )
    log_index_size_max_bytes: int = _config(
        "log.index.size.max.bytes", "int", 10_485_760, at_least=4, synonym="segment_index_bytes"
    )
    log_index_interval_bytes: int = _config(
        "log.index.interval.bytes", "int", 4096, at_least=0, synonym="index_interval_bytes"
    )
    log_flush_interval_messages: int = _config(
        "log.flush.interval.messages", "long", INT64_MAX, at_least=1, synonym="flush_messages"
    )
    log_flush_interval_ms: int = _config(
        "log.flush.interval.ms", "long", INT64_MAX, at_least=0, synonym="flush_ms"
    )
    log_flush_scheduler_interval_ms: int = _config("log.flush.scheduler.interval.ms", "long", INT64_MAX)
    """Period of the flusher job (Long.MAX: it runs once, after the initial delay)."""
    log_flush_offset_checkpoint_interval_ms: int = _config(
        "log.flush.offset.checkpoint.interval.ms", "int", 60_000, at_least=0
    )
    """Period of the recovery-point checkpoint job."""
    log_flush_start_offset_checkpoint_interval_ms: int = _config(
        "log.flush.start.offset.checkpoint.interval.ms", "int", 60_000, at_least=0
    )
    """Period of the log-start-offset checkpoint job."""
    log_retention_check_interval_ms: int = _config(
        "log.retention.check.interval.ms", "long", 300_000, at_least=1
    )
    """Period of the retention (cleanup) job."""
    log_segment_delete_delay_ms: int = _config(
        "log.segment.delete.delay.ms", "long", 60_000, at_least=0, synonym="file_delete_delay_ms"
    )
    log_cleanup_policy: tuple[str, ...] = _config(
        "log.cleanup.policy",
        "list",
        (CLEANUP_POLICY_DELETE,),
        choices=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
        synonym="cleanup_policy",
    )
    log_message_timestamp_type: str = _config(
        "log.message.timestamp.type",
        "string",
        CREATE_TIME,
        choices=(CREATE_TIME, LOG_APPEND_TIME),
        synonym="message_timestamp_type",
    )
    message_max_bytes: int = _config(
        "message.max.bytes", "int", 1_048_588, at_least=0, synonym="max_message_bytes"
    )
    log_message_timestamp_difference_max_ms: int = _config(
        "log.message.timestamp.difference.max.ms",
        "long",
        INT64_MAX,
        at_least=0,
        synonym="message_timestamp_difference_max_ms",
    )
    log_message_timestamp_before_max_ms: int = _config(
        "log.message.timestamp.before.max.ms", "long", INT64_MAX, at_least=0, synonym="message_timestamp_before_max_ms"
    )
    log_message_timestamp_after_max_ms: int = _config(
        "log.message.timestamp.after.max.ms", "long", INT64_MAX, at_least=0, synonym="message_timestamp_after_max_ms"
    )
    log_preallocate: bool = _config("log.preallocate", "boolean", False, synonym="preallocate")
    log_initial_task_delay_ms: int = _config("log.initial.task.delay.ms", "long", 30_000, at_least=0)
    """Delay before the first run of each scheduled LogManager job."""
    num_recovery_threads_per_data_dir: int = _config(
        "num.recovery.threads.per.data.dir", "int", 1, at_least=1
    )
    """Threads per log dir that load/recover logs at startup and flush them at shutdown."""
    producer_id_expiration_ms: int = _config("producer.id.expiration.ms", "int", 86_400_000, at_least=1)
    """Idle time after which a producer id's state is dropped."""
    producer_id_expiration_check_interval_ms: int = _config(
        "producer.id.expiration.check.interval.ms", "int", 600_000, at_least=1
    )
    """Period (and initial delay) of each log's producer-expiration job."""
    log_cleaner_enable: bool = _config("log.cleaner.enable", "boolean", True)
    """Whether the ``kafka-log-cleaner`` job runs (compacted logs keep the log-start-offset rule either way)."""
    log_cleaner_delete_retention_ms: int = _config(
        "log.cleaner.delete.retention.ms", "long", 86_400_000, at_least=0, synonym="delete_retention_ms"
    )
    log_cleaner_min_compaction_lag_ms: int = _config(
        "log.cleaner.min.compaction.lag.ms", "long", 0, at_least=0, synonym="min_compaction_lag_ms"
    )
    log_cleaner_max_compaction_lag_ms: int = _config(
        "log.cleaner.max.compaction.lag.ms", "long", INT64_MAX, at_least=1, synonym="max_compaction_lag_ms"
    )
    log_cleaner_min_cleanable_ratio: float = _config(
        "log.cleaner.min.cleanable.ratio", "ratio", 0.5, synonym="min_cleanable_dirty_ratio"
    )
    log_cleaner_threads: int = _config("log.cleaner.threads", "int", 1, at_least=0)
    """Cleaner threads; the dedupe buffer is shared between them (each gets its share)."""
    log_cleaner_dedupe_buffer_size: int = _config("log.cleaner.dedupe.buffer.size", "long", 134_217_728, at_least=0)
    """Memory of the cleaners' offset maps, all threads together (Kafka's SkimpyOffsetMap: 24 bytes a key)."""
    log_cleaner_io_buffer_load_factor: float = _config("log.cleaner.io.buffer.load.factor", "ratio", 0.9)
    """How full an offset map may get before a pass stops reading the dirty section."""
    log_cleaner_io_max_bytes_per_second: float = _config(
        "log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308
    )
    """Read plus write rate the cleaners are throttled to (Kafka's default: Double.MaxValue, unthrottled)."""
    log_cleaner_backoff_ms: int = _config("log.cleaner.backoff.ms", "long", 15_000, at_least=0)
    """Pause of the ``kafka-log-cleaner`` job after a step that cleaned nothing (a step that cleaned a log is
    followed by the next at once, as Kafka's cleaner threads)."""
    disk_max_used_ratio: float = _config("logmgr.disk.max.used.ratio", "ratio", 0.75)
    """Disk usage above which expired segments are deleted even outside the delete window (1.0: off)."""
    key_index_enable: bool = _config("logmgr.key.index.enable", "boolean", False, synonym="logmgr_key_index_enable")
    """Default of the topic config ``logmgr.key.index.enable``."""
    append_reserve_bytes: int = _config(
        "logmgr.append.reserve.bytes", "int", 4_194_304, at_least=0, synonym="logmgr_append_reserve_bytes"
    )
    """Default of the topic config ``logmgr.append.reserve.bytes``."""
    disk_usage_clean_ratio: float = _config("logmgr.disk.usage.clean.ratio", "ratio", 0.85)
    """Disk usage above which a dir's oldest eligible segments are deleted regardless of age (1.0: off)."""
    disk_usage_warn_ratio: float = _config("logmgr.disk.usage.warn.ratio", "ratio", 0.90)
    """Disk usage above which a dir is marked full and rejects appends (1.0: off)."""
    delete_when: frozenset[int] | None = _config("logmgr.delete.when", "hours", None)
    """Local hours (0-23) in which time-based deletion may run (None: any hour)."""
    delete_interval_ms: int = _config("logmgr.delete.interval.ms", "long", 0, at_least=0)
    """Pause between two physical file deletions (0: none)."""
    delete_force_after_ms: int = _config("logmgr.delete.force.after.ms", "long", 120_000, at_least=0)
    """How long a reader's reference may delay the unlink of a due segment's files."""
    disk_check_interval_ms: int = _config("logmgr.disk.check.interval.ms", "long", 10_000, at_least=1)
    """Period of the disk-check job (RocketMQ's 10 s)."""
    group_commit_enable: bool = _config("logmgr.group.commit.enable", "boolean", False)
    """Appends due for a flush share the fsyncs of one flusher thread."""
    group_commit_timeout_ms: int = _config("logmgr.group.commit.timeout.ms", "long", 5_000, at_least=1)
    """How long a group-committed append waits for durability before it fails."""

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def from_properties(cls, props: ConfigProperties) -> BrokerConfig:
        """Broker settings from ``props`` (e.g. a parsed ``server.properties``), Kafka's defaults elsewhere. O(len(props)).

        Keys that are not log settings are ignored, except unknown ``logmgr.*`` keys, which raise
        :class:`ConfigError` like invalid values do.
        """
        specs = _BROKER_SPECS
        for key in props:
            if key.startswith(LOGMGR_PREFIX) and key not in _BROKER_INPUT_KEYS:
                raise ConfigError(key, "unknown logmgr setting")
        values: dict[str, Any] = {}
        for name, chain in _RESOLVED.items():
            present = [(spec, factor) for spec, factor in chain if spec.key in props]
            if not present:
                continue
            source, factor = present[0]
            value = source.parse(props[source.key])
            if factor != 1:
                value *= factor
            if name == "log_retention_ms" and value < 0:
                # KafkaConfig.logRetentionTimeMillis: any negative setting means unlimited.
                value = -1
            specs[name].check(value, source.key)
            values[name] = value
        for name, spec in specs.items():
            if name not in _RESOLVED and spec.key in props:
                values[name] = spec.parse(props[spec.key])
        return cls(**values)

    def validate(self) -> None:
        """Raise :class:`ConfigError` unless every value has its Kafka type and range. O(1).

        Also checks that the topic defaults form a valid :class:`LogConfig` (errors name the broker key) and
        that the disk tiers switched on (``logmgr.disk.max.used.ratio``, ``logmgr.disk.usage.clean.ratio``,
        ``logmgr.disk.usage.warn.ratio`` below 1.0) do not decrease in that order: each tier must start before the
        next.
        Construction calls it, so a ``BrokerConfig`` that exists is valid.
        """
        specs = _BROKER_SPECS
        for name, spec in specs.items():
            spec.check(getattr(self, name))
        tiers = [
            (name, getattr(self, name))
            for name in ("disk_max_used_ratio", "disk_usage_clean_ratio", "disk_usage_warn_ratio")
            if getattr(self, name) < DISK_TIER_OFF
        ]
        defaults = {name: f.default for name, f in self.__dataclass_fields__.items()}
        for (lower, low), (upper, high) in itertools.pairwise(tiers):
            if low > high:
                # The error names a setting that was given: a tier left at its default is not the one to change.
                if low == defaults[lower] and high != defaults[upper]:
                    raise ConfigError(
                        specs[upper].key,
                        f"invalid value {high!r}: less than {specs[lower].key} ({low!r}, its default)",
                    )
                raise ConfigError(
                    specs[lower].key, f"invalid value {low!r}: greater than {specs[upper].key} ({high!r})"
                )
        try:
            self.log_config()
        except ConfigError as err:
            raise ConfigError(_BROKER_KEY_OF_TOPIC_KEY[err.key], err.message) from None

    def log_config(self) -> LogConfig:
        """The topic defaults these broker settings define (Kafka's ``extractLogConfigMap``). O(1)."""
        return LogConfig(
            **{spec.synonym: getattr(self, name) for name, spec in _BROKER_SPECS.items() if spec.synonym}
        )

    def effective_log_config(
        self, topic: str, overrides: Mapping[str, ConfigProperties] | None = None
    ) -> LogConfig:
        """The config of ``topic``'s logs: :meth:`log_config` with ``overrides[topic]`` applied. O(len(overrides[topic])).

        ``overrides`` maps topic names to topic configs (Kafka keys); a topic absent from it uses the broker
        defaults. An invalid override raises :class:`ConfigError` naming the key and the topic.
        """
        base = self.log_config()
        topic_props = None if overrides is None else overrides.get(topic)
        if not topic_props:
            return base
        try:
            return base.with_overrides(topic_props)
        except ConfigError as err:
            raise ConfigError(err.key, f"{err.message} (topic {topic!r})") from None

    @property
    def disk_tiers_enabled(self) -> bool:
        """Whether any disk tier is on (a ratio below 1.0): only then is a dir's usage measured. O(1)."""
        return min(self.disk_max_used_ratio, self.disk_usage_clean_ratio, self.disk_usage_warn_ratio) < DISK_TIER_OFF

    def disk_tier(self, state: str) -> tuple[str, float]:
        """The setting (key, ratio) of the disk tier ``state`` (``"expired"``, ``"clean"`` or ``"full"``) names. O(1)."""
        name = {"expired": "disk_max_used_ratio", "clean": "disk_usage_clean_ratio", "full": "disk_usage_warn_ratio"}[state]
        ratio: float = getattr(self, name)
        return _BROKER_SPECS[name].key, ratio

    def delete_window_open(self, epoch_ms: int) -> bool:
        """Whether time-based deletion may run at ``epoch_ms``: its local hour is in ``logmgr.delete.when``. O(1).

        Always true when no window is configured. Local time is the process's time zone, as RocketMQ's
        ``deleteWhen`` uses.
        """
        return in_delete_window(epoch_ms, self.delete_when, None)


# Settings resolved from the first key present, in precedence order, times a unit factor (KafkaConfig's
# logRetentionTimeMillis, logRollTimeMillis, logRollTimeJitterMillis, logFlushIntervalMs, logDirs).
_RESOLVED: dict[str, tuple[tuple[_Spec, int], ...]] = {
    "log_dirs": ((_Spec("log.dirs", "dirs"), 1), (_Spec("log.dir", "dirs"), 1)),
    "log_retention_ms": (
        (_Spec("log.retention.ms", "long"), 1),
        (_Spec("log.retention.minutes", "int"), _MS_PER_MINUTE),
        (_Spec("log.retention.hours", "int"), _MS_PER_HOUR),
    ),
    "log_roll_ms": (
        (_Spec("log.roll.ms", "long"), 1),
        (_Spec("log.roll.hours", "int", at_least=1), _MS_PER_HOUR),
    ),
    "log_roll_jitter_ms": (
        (_Spec("log.roll.jitter.ms", "long"), 1),
        (_Spec("log.roll.jitter.hours", "int", at_least=0), _MS_PER_HOUR),
    ),
    "log_flush_interval_ms": (
        (_Spec("log.flush.interval.ms", "long"), 1),
        (_Spec("log.flush.scheduler.interval.ms", "long"), 1),
    ),
}
_BROKER_SPECS = _specs(BrokerConfig)
_BROKER_INPUT_KEYS = {spec.key for spec in _BROKER_SPECS.values()} | {
    spec.key for chain in _RESOLVED.values() for spec, _ in chain
}
_BROKER_KEY_OF_TOPIC_KEY = {
    _LOG_SPECS[spec.synonym].key: spec.key for spec in _BROKER_SPECS.values() if spec.synonym is not None
}


def load_server_properties(path: str | PathLike[str]) -> BrokerConfig:
    """Read a broker's ``server.properties`` and return its :class:`BrokerConfig`. O(file size).

    The file is read as ``java.util.Properties.load`` reads it (ISO-8859-1; ``#``/``!`` comments; ``key=value``,
    ``key:value`` or ``key value``; trailing-backslash continuations; ``\\uXXXX`` escapes; the last of repeated
    keys wins). Invalid values raise :class:`ConfigError` naming the key, the file and the line; a malformed
    escape raises one whose key is the file. ``OSError`` if the file cannot be read.
    """
    props, line_of = read_properties(path)
    try:
        return BrokerConfig.from_properties(props)
    except ConfigError as err:
        where = f"{path}, line {line_of[err.key]}" if err.key in line_of else str(path)
        raise ConfigError(err.key, f"{err.message} ({where})") from None


def read_properties(path: str | PathLike[str]) -> tuple[dict[str, str], dict[str, int]]:
    """``(key -> value, key -> line number)`` of a Java properties file, read as ``Properties.load`` reads it (see
    :func:`load_server_properties`; the last of repeated keys wins, and its line is the one kept). O(file size).

    A malformed escape raises :class:`ConfigError` whose key is the file; ``OSError`` if it cannot be read.
    """
    with open(path, "rb") as source:
        text = source.read().decode("latin-1")
    props: dict[str, str] = {}
    line_of: dict[str, int] = {}
    for number, line, is_comment in logical_lines(text):
        if is_comment:
            continue
        try:
            key, value = split_entry(line)
        except ValueError as err:
            raise ConfigError(str(path), f"line {number}: {err}") from None
        props[key] = value
        line_of[key] = number
    return props, line_of


# Every topic-level config name Kafka defines (TopicConfig, LogConfig's ConfigDef, the replication throttles of
# QuotaConfig), including the ones later versions removed: a cluster upgraded from them may still store them.
# logmgr uses the LogConfig keys; the rest are valid Kafka topic configs it has no use for.
KAFKA_TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)

LOG_CONFIG_KEYS: tuple[str, ...] = tuple(spec.key for spec in _LOG_SPECS.values())
"""The topic configs logmgr applies (:class:`LogConfig`'s keys), in declaration order."""

BROKER_CONFIG_KEYS: tuple[str, ...] = tuple(spec.key for spec in _BROKER_SPECS.values())
"""The broker settings :class:`BrokerConfig` holds (the first key of each synonym chain), in declaration order."""

TOPIC_KEY_OF_BROKER_KEY: Mapping[str, str] = {value: key for key, value in _BROKER_KEY_OF_TOPIC_KEY.items()}
"""Broker key -> the topic config it is the default of (``log.retention.ms`` -> ``retention.ms``)."""

DYNAMIC_BROKER_LOG_KEYS: frozenset[str] = frozenset(TOPIC_KEY_OF_BROKER_KEY)
"""The broker log settings Kafka lets a dynamic broker config change (DynamicLogConfig.ReconfigurableConfigs: the
first synonym of each topic config; ``log.retention.hours`` and the other fallbacks are static only)."""


def broker_setting_keys(props: ConfigProperties) -> dict[str, str]:
    """``broker key -> the key of props that sets it`` for every :class:`BrokerConfig` setting ``props`` sets, as
    :meth:`BrokerConfig.from_properties` picks it (``log.retention.ms`` -> ``log.retention.hours`` when only the
    hours are given). O(number of settings)."""
    keys: dict[str, str] = {}
    for name, spec in _BROKER_SPECS.items():
        chain = [chained.key for chained, _ in _RESOLVED[name]] if name in _RESOLVED else [spec.key]
        present = next((key for key in chain if key in props), None)
        if present is not None:
            keys[spec.key] = present
    return keys


def config_values(config: LogConfig | BrokerConfig) -> dict[str, Any]:
    """``Kafka key -> typed value`` of every setting (lists as lists, hours sorted, unset optional ones as None),
    for JSON output. O(number of settings)."""
    specs = _LOG_SPECS if isinstance(config, LogConfig) else _BROKER_SPECS
    values: dict[str, Any] = {}
    for name, spec in specs.items():
        value = getattr(config, name)
        values[spec.key] = sorted(value) if isinstance(value, frozenset) else (
            list(value) if isinstance(value, tuple) else value
        )
    return values
