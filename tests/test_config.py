"""Tests of logmgr.config: Kafka's topic/broker log configuration, server.properties loading, RocketMQ extras."""

from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from logmgr.config import (
    BrokerConfig,
    ConfigProperties,
    ConfigValue,
    LogConfig,
    load_server_properties,
)
from logmgr.errors import ConfigError
from segments.java_numbers import INT32_MAX, INT64_MAX, INT64_MIN

LONG_MAX = 9223372036854775807

# kafka-format.md §7 "Config defaults", topic key -> default.
DOC_TOPIC_DEFAULTS = {
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "file.delete.delay.ms": 60000,
    "cleanup.policy": ("delete",),
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": LONG_MAX,
    "delete.retention.ms": 86400000,
    "message.timestamp.type": "CreateTime",
    # Timestamp validation (issue 14): Kafka 3.6+'s LogConfig defaults, every window open.
    "message.timestamp.difference.max.ms": LONG_MAX,
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": LONG_MAX,
    "max.message.bytes": 1048588,
    "preallocate": False,
    "min.cleanable.dirty.ratio": 0.5,  # Kafka's TopicConfig default (the log cleaner, issue 12)
    "logmgr.key.index.enable": False,  # logmgr's key index (issue 14), off as in RocketMQ without messageIndexEnable
    "logmgr.append.reserve.bytes": 4194304,  # disk reserved ahead of the appends (issue 13), 4 MiB steps at most
}

# The §7 table's broker synonyms.
DOC_SYNONYMS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "cleanup.policy": "log.cleanup.policy",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "max.message.bytes": "message.max.bytes",
    "preallocate": "log.preallocate",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
}

BROKER_ONLY_DEFAULTS = {
    "log_dirs": ("/tmp/kafka-logs",),
    "log_retention_check_interval_ms": 300000,
    "log_flush_scheduler_interval_ms": LONG_MAX,
    "log_flush_offset_checkpoint_interval_ms": 60000,
    "log_flush_start_offset_checkpoint_interval_ms": 60000,
    "log_initial_task_delay_ms": 30000,
    "num_recovery_threads_per_data_dir": 1,
    "producer_id_expiration_ms": 86400000,
    "producer_id_expiration_check_interval_ms": 600000,
    "log_cleaner_enable": True,
    "log_cleaner_threads": 1,
    "log_cleaner_dedupe_buffer_size": 134217728,
    "log_cleaner_io_buffer_load_factor": 0.9,
    "log_cleaner_io_max_bytes_per_second": 1.7976931348623157e308,
    "log_cleaner_backoff_ms": 15000,
    # RocketMQ's seed defaults (diskMaxUsedSpaceRatio 75, diskSpaceCleanForciblyRatio 0.85, WarningLevel 0.90).
    "disk_max_used_ratio": 0.75,
    "disk_usage_clean_ratio": 0.85,
    "disk_usage_warn_ratio": 0.90,
    "delete_when": None,
    "delete_interval_ms": 0,
    "delete_force_after_ms": 120000,
}


def _key_of(attribute: str) -> str:
    return attribute.replace("_", ".")


def _error(call: object, *args: object) -> ConfigError:
    assert callable(call)
    with pytest.raises(ConfigError) as info:
        call(*args)
    return info.value


# -- defaults ----------------------------------------------------------------------------------------------------


def test_log_config_defaults_equal_the_doc_table() -> None:
    config = LogConfig()
    assert {_key_of(field.name): getattr(config, field.name) for field in dataclasses.fields(LogConfig)} == (
        DOC_TOPIC_DEFAULTS
    )
    assert config.delete and not config.compact


def test_to_properties_uses_kafka_keys_and_text() -> None:
    properties = LogConfig().to_properties()
    assert properties["cleanup.policy"] == "delete"
    assert properties["preallocate"] == "false"
    assert properties["flush.ms"] == str(LONG_MAX)
    assert set(properties) == set(DOC_TOPIC_DEFAULTS)


def test_broker_defaults_match_kafka() -> None:
    broker = BrokerConfig()
    assert broker.log_config() == LogConfig()
    for attribute, expected in BROKER_ONLY_DEFAULTS.items():
        assert getattr(broker, attribute) == expected, attribute
    assert BrokerConfig.from_properties({}) == broker


def test_every_topic_config_has_its_documented_broker_synonym() -> None:
    for topic_key, broker_key in DOC_SYNONYMS.items():
        value: float = 12345 if topic_key != "max.compaction.lag.ms" else 99999
        if topic_key == "min.cleanable.dirty.ratio":
            value = 0.25
        if topic_key in ("cleanup.policy", "message.timestamp.type", "preallocate"):
            continue
        config = BrokerConfig.from_properties({broker_key: str(value)}).log_config()
        assert getattr(config, topic_key.replace(".", "_")) == value, broker_key
    broker = BrokerConfig.from_properties(
        {
            "log.cleanup.policy": "compact",
            "log.message.timestamp.type": "LogAppendTime",
            "log.preallocate": "true",
        }
    )
    assert broker.log_config() == LogConfig(
        cleanup_policy=("compact",), message_timestamp_type="LogAppendTime", preallocate=True
    )


# -- precedence and unit conversion -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 604800000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000),
        ({"log.retention.ms": "1234", "log.retention.minutes": "5", "log.retention.hours": "1"}, 1234),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.minutes": "-7"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.hours": str(INT32_MAX)}, INT32_MAX * 3_600_000),
    ],
)
def test_retention_ms_over_minutes_over_hours(props: dict[str, str], expected: int) -> None:
    broker = BrokerConfig.from_properties(props)
    assert broker.log_retention_ms == expected
    assert broker.log_config().retention_ms == expected


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"log.retention.ms": "0"}, "log.retention.ms"),
        ({"log.retention.minutes": "0", "log.retention.hours": "5"}, "log.retention.minutes"),
        ({"log.retention.hours": "0"}, "log.retention.hours"),
        ({"log.retention.hours": "x"}, "log.retention.hours"),
        ({"log.retention.minutes": str(INT32_MAX + 1)}, "log.retention.minutes"),
    ],
)
def test_zero_retention_is_rejected_naming_the_key_that_set_it(props: dict[str, str], key: str) -> None:
    err = _error(BrokerConfig.from_properties, props)
    assert err.key == key
    assert key in str(err)


def test_roll_and_jitter_ms_over_hours() -> None:
    assert BrokerConfig.from_properties({"log.roll.hours": "2"}).log_roll_ms == 7_200_000
    assert BrokerConfig.from_properties({"log.roll.ms": "10", "log.roll.hours": "2"}).log_roll_ms == 10
    assert BrokerConfig.from_properties({"log.roll.jitter.hours": "1"}).log_roll_jitter_ms == 3_600_000
    jittered = BrokerConfig.from_properties({"log.roll.jitter.ms": "7", "log.roll.jitter.hours": "1"})
    assert jittered.log_config().segment_jitter_ms == 7
    assert _error(BrokerConfig.from_properties, {"log.roll.hours": "0"}).key == "log.roll.hours"
    assert (
        _error(BrokerConfig.from_properties, {"log.roll.ms": "0", "log.roll.hours": "1"}).key == "log.roll.ms"
    )
    assert (
        _error(BrokerConfig.from_properties, {"log.roll.jitter.hours": "-1"}).key == "log.roll.jitter.hours"
    )
    assert _error(BrokerConfig.from_properties, {"log.roll.jitter.ms": "-1"}).key == "log.roll.jitter.ms"


def test_flush_interval_ms_falls_back_to_the_scheduler_interval() -> None:
    assert BrokerConfig().log_config().flush_ms == LONG_MAX
    scheduled = BrokerConfig.from_properties({"log.flush.scheduler.interval.ms": "5000"})
    assert scheduled.log_flush_scheduler_interval_ms == 5000
    assert scheduled.log_flush_interval_ms == 5000
    assert scheduled.log_config().flush_ms == 5000
    both = BrokerConfig.from_properties(
        {"log.flush.interval.ms": "100", "log.flush.scheduler.interval.ms": "5000"}
    )
    assert (both.log_flush_interval_ms, both.log_flush_scheduler_interval_ms) == (100, 5000)
    # A negative scheduler period is fine for the scheduler but not as the topic default flush.ms.
    err = _error(BrokerConfig.from_properties, {"log.flush.scheduler.interval.ms": "-1"})
    assert err.key == "log.flush.scheduler.interval.ms"
    both_negative = {"log.flush.interval.ms": "10", "log.flush.scheduler.interval.ms": "-1"}
    assert BrokerConfig.from_properties(both_negative).log_flush_interval_ms == 10
    assert (
        _error(BrokerConfig.from_properties, {"log.flush.interval.ms": "-1"}).key == "log.flush.interval.ms"
    )


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"log.dir": "/x"}, ("/x",)),
        ({"log.dirs": "/a, /b", "log.dir": "/x"}, ("/a", "/b")),
        ({"log.dirs": " /a,,/b , "}, ("/a", "/b")),
    ],
)
def test_log_dirs_over_log_dir(props: dict[str, str], expected: tuple[str, ...]) -> None:
    assert BrokerConfig.from_properties(props).log_dirs == expected


@pytest.mark.parametrize(("key", "value"), [("log.dirs", " , "), ("log.dir", ""), ("log.dirs", "/a,/b,/a")])
def test_invalid_log_dirs(key: str, value: str) -> None:
    assert _error(BrokerConfig.from_properties, {key: value}).key == key


# -- value forms ----------------------------------------------------------------------------------------------------


def test_values_accept_kafka_text_forms_and_typed_values() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "  1000\t",
            "retention.ms": "+5",
            "preallocate": " TRUE ",
            "cleanup.policy": "compact ,  delete",
            "message.timestamp.type": " LogAppendTime ",
            "retention.bytes": str(INT64_MIN),
            "flush.messages": 7,
        }
    )
    assert config.segment_bytes == 1000
    assert config.retention_ms == 5
    assert config.preallocate is True
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.retention_bytes == INT64_MIN
    assert config.flush_messages == 7
    assert LogConfig.from_properties({"preallocate": False, "segment.ms": 1}).segment_ms == 1


def test_empty_cleanup_policy_is_neither_delete_nor_compact() -> None:
    config = LogConfig.from_properties({"cleanup.policy": "  "})
    assert config.cleanup_policy == ()
    assert not config.delete and not config.compact


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("segment.bytes", "13", "at least 14"),
        ("segment.bytes", str(INT32_MAX + 1), "not a number of type int"),
        ("segment.bytes", "1_000", "not a number"),
        ("segment.bytes", "", "not a number"),
        ("segment.bytes", 1.5, "not a number"),
        ("segment.bytes", True, "not a number"),
        ("segment.ms", "0", "at least 1"),
        ("segment.jitter.ms", "-1", "at least 0"),
        ("segment.index.bytes", "3", "at least 4"),
        ("index.interval.bytes", "-1", "at least 0"),
        ("max.message.bytes", "-1", "at least 0"),
        ("retention.ms", "-2", "at least -1"),
        ("retention.bytes", "x", "not a number of type long"),
        ("retention.bytes", str(INT64_MAX + 1), "not a number of type long"),
        ("retention.bytes", INT64_MAX + 1, "not a number of type long"),
        ("flush.messages", "0", "at least 1"),
        ("flush.ms", "-1", "at least 0"),
        ("file.delete.delay.ms", "-1", "at least 0"),
        ("delete.retention.ms", "-1", "at least 0"),
        ("min.compaction.lag.ms", "-1", "at least 0"),
        ("max.compaction.lag.ms", "0", "at least 1"),
        ("cleanup.policy", "delete,", "one of: compact, delete"),
        ("cleanup.policy", "Delete", "one of: compact, delete"),
        ("cleanup.policy", 1, "comma-separated list"),
        ("message.timestamp.type", "createtime", "one of: CreateTime, LogAppendTime"),
        ("message.timestamp.before.max.ms", "-1", "at least 0"),
        ("message.timestamp.after.max.ms", "-1", "at least 0"),
        ("message.timestamp.difference.max.ms", "-1", "at least 0"),
        ("preallocate", "yes", "true or false"),
        ("preallocate", 1, "true or false"),
    ],
)
def test_invalid_topic_values_name_the_key_and_value(key: str, value: object, fragment: str) -> None:
    err = _error(LogConfig.from_properties, {key: value})
    assert err.key == key
    assert str(err).startswith(f"{key}: invalid value ")
    assert fragment in str(err)
    if isinstance(value, str) and value:
        assert repr(value) in str(err) or value.strip() in str(err)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "14"),
        ("segment.index.bytes", "4"),
        ("retention.ms", "-1"),
        ("retention.ms", "0"),
        ("retention.bytes", "-5"),
        ("index.interval.bytes", "0"),
        ("max.message.bytes", "0"),
        ("flush.ms", "0"),
        ("flush.messages", "1"),
        ("segment.ms", "1"),
        ("max.compaction.lag.ms", "1"),
        ("message.timestamp.before.max.ms", "0"),
        ("message.timestamp.after.max.ms", "0"),
    ],
)
def test_boundary_values_are_accepted(key: str, value: str) -> None:
    assert LogConfig.from_properties({key: value}).to_properties()[key] == value


def test_unknown_topic_keys_are_rejected() -> None:
    err = _error(LogConfig.from_properties, {"retention.hours": "1"})
    assert err.key == "retention.hours"
    assert "not a topic config" in str(err) and "retention.ms" in str(err)
    assert _error(LogConfig.from_properties, {"log.retention.ms": "1"}).key == "log.retention.ms"


def test_min_compaction_lag_may_not_exceed_max() -> None:
    err = _error(LogConfig.from_properties, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert err.key == "min.compaction.lag.ms"
    assert "max.compaction.lag.ms" in str(err)
    broker_err = _error(
        BrokerConfig.from_properties,
        {"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"},
    )
    assert broker_err.key == "log.cleaner.min.compaction.lag.ms"


def test_configs_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        LogConfig().retention_ms = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BrokerConfig().log_dirs = ("/x",)  # type: ignore[misc]


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"^segment\.bytes: invalid value 10: must be at least 14$"):
        LogConfig(segment_bytes=10)
    with pytest.raises(ConfigError, match=r"^preallocate: "):
        LogConfig(preallocate=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^log\.retention\.ms: .*-1 \(unlimited\) or at least 1"):
        BrokerConfig(log_retention_ms=0)
    with pytest.raises(ConfigError, match=r"^log\.dirs: "):
        BrokerConfig(log_dirs=())
    with pytest.raises(ConfigError, match=r"^logmgr\.delete\.when: "):
        BrokerConfig(delete_when=frozenset({24}))
    LogConfig(segment_bytes=14).validate()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.segment.bytes", "13"),
        ("log.index.size.max.bytes", "3"),
        ("log.index.interval.bytes", "-1"),
        ("log.flush.interval.messages", "0"),
        ("log.segment.delete.delay.ms", "-1"),
        ("log.retention.check.interval.ms", "0"),
        ("log.flush.offset.checkpoint.interval.ms", "-1"),
        ("log.flush.start.offset.checkpoint.interval.ms", str(INT32_MAX + 1)),
        ("num.recovery.threads.per.data.dir", "0"),
        ("producer.id.expiration.ms", "0"),
        ("producer.id.expiration.check.interval.ms", "0"),
        ("message.max.bytes", "-1"),
        ("log.initial.task.delay.ms", "-1"),
        ("log.cleaner.enable", "maybe"),
        ("log.cleanup.policy", "remove"),
        ("log.message.timestamp.type", "Now"),
        ("log.retention.bytes", "1e9"),
        ("logmgr.delete.interval.ms", "-1"),
        ("logmgr.delete.force.after.ms", "soon"),
    ],
)
def test_invalid_broker_values_name_the_key(key: str, value: str) -> None:
    err = _error(BrokerConfig.from_properties, {key: value})
    assert err.key == key
    assert str(err).startswith(f"{key}: invalid value ")


def test_broker_ignores_unrelated_keys_but_not_unknown_logmgr_keys() -> None:
    broker = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://:9092", "retention.ms": "x", "node.id": "1"}
    )
    assert broker == BrokerConfig()
    err = _error(BrokerConfig.from_properties, {"logmgr.disk.usage.clean.ratoi": "0.8"})
    assert err.key == "logmgr.disk.usage.clean.ratoi"


# -- overrides -------------------------------------------------------------------------------------------------------


def test_with_overrides_and_defaults() -> None:
    base = LogConfig(retention_ms=1000, segment_bytes=4096)
    changed = base.with_overrides({"retention.ms": "-1"})
    assert changed == dataclasses.replace(base, retention_ms=-1)
    assert LogConfig.from_properties({"segment.ms": "60000"}, defaults=base).segment_bytes == 4096
    assert base.with_overrides({}) == base


def test_effective_log_config_per_topic() -> None:
    broker = BrokerConfig.from_properties({"log.retention.hours": "1", "log.segment.bytes": "1048576"})
    overrides: dict[str, ConfigProperties] = {
        "compacted": {"cleanup.policy": "compact", "segment.bytes": "4096"},
        "forever": {"retention.ms": -1},
    }
    compacted = broker.effective_log_config("compacted", overrides)
    assert compacted.compact and not compacted.delete
    assert (compacted.segment_bytes, compacted.retention_ms) == (4096, 3_600_000)
    assert broker.effective_log_config("forever", overrides).retention_ms == -1
    assert broker.effective_log_config("other", overrides) == broker.log_config()
    assert broker.effective_log_config("other") == broker.log_config()
    err = _error(broker.effective_log_config, "bad", {"bad": {"segment.bytes": "1"}})
    assert err.key == "segment.bytes" and "'bad'" in str(err)
    assert (
        _error(broker.effective_log_config, "bad", {"bad": {"log.retention.ms": "1"}}).key
        == "log.retention.ms"
    )


# -- jitter ------------------------------------------------------------------------------------------------------


class _FixedBits(random.Random):
    def __init__(self, bits: int) -> None:
        super().__init__(0)
        self.bits = bits

    def getrandbits(self, k: int, /) -> int:
        assert k == 32
        return self.bits


def test_random_segment_jitter_follows_kafka() -> None:
    assert LogConfig().random_segment_jitter(_FixedBits(12345)) == 0
    config = LogConfig(segment_ms=500, segment_jitter_ms=1000)
    assert config.random_segment_jitter(_FixedBits(1234)) == 1234 % 500
    # -1 as a signed int: abs -> 1.
    assert config.random_segment_jitter(_FixedBits(0xFFFFFFFF)) == 1
    # Integer.MIN_VALUE: Kafka's Utils.abs gives 0.
    assert config.random_segment_jitter(_FixedBits(0x80000000)) == 0
    rng = random.Random(7)
    draws = [config.random_segment_jitter(rng) for _ in range(1000)]
    assert all(0 <= draw < 500 for draw in draws)
    assert len(set(draws)) > 100
    wide = LogConfig(segment_ms=INT64_MAX, segment_jitter_ms=INT64_MAX)
    assert all(0 <= wide.random_segment_jitter(rng) <= INT32_MAX for _ in range(100))


# -- RocketMQ-style extras --------------------------------------------------------------------------------------------


def test_disk_usage_ratios() -> None:
    broker = BrokerConfig.from_properties(
        {"logmgr.disk.usage.clean.ratio": "0.85", "logmgr.disk.usage.warn.ratio": " .90 "}
    )
    assert (broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio) == (0.85, 0.90)
    assert BrokerConfig.from_properties({"logmgr.disk.usage.warn.ratio": 1}).disk_usage_warn_ratio == 1.0
    for bad in ("85%", "0", "1.5", "nan", "inf", "", "0x1p-1"):
        err = _error(BrokerConfig.from_properties, {"logmgr.disk.usage.clean.ratio": bad})
        assert err.key == "logmgr.disk.usage.clean.ratio", bad
    err = _error(
        BrokerConfig.from_properties,
        {"logmgr.disk.usage.clean.ratio": "0.95", "logmgr.disk.usage.warn.ratio": "0.9"},
    )
    assert err.key == "logmgr.disk.usage.clean.ratio"
    assert "logmgr.disk.usage.warn.ratio" in str(err)


@pytest.mark.parametrize(
    ("value", "hours"),
    [
        ("04", {4}),
        ("4", {4}),
        ("02-05", {2, 3, 4, 5}),
        ("22-02", {22, 23, 0, 1, 2}),
        ("05-05", {5}),
        ("01;13", {1, 13}),
        (" 1 , 13-14 ", {1, 13, 14}),
    ],
)
def test_delete_when_hours(value: str, hours: set[int]) -> None:
    assert BrokerConfig.from_properties({"logmgr.delete.when": value}).delete_when == frozenset(hours)


@pytest.mark.parametrize("value", ["24", "ab", "", "02-", "1;;2", "-3", "2-25", "123"])
def test_invalid_delete_when(value: str) -> None:
    assert _error(BrokerConfig.from_properties, {"logmgr.delete.when": value}).key == "logmgr.delete.when"


def test_delete_window_uses_local_hours() -> None:
    def local_ms(hour: int, minute: int) -> int:
        return int(time.mktime((2024, 3, 5, hour, minute, 0, 0, 0, -1))) * 1000

    assert BrokerConfig().delete_window_open(local_ms(13, 0))
    night = BrokerConfig.from_properties({"logmgr.delete.when": "23-01"})
    assert night.delete_window_open(local_ms(23, 0))
    assert night.delete_window_open(local_ms(1, 59))
    assert not night.delete_window_open(local_ms(2, 0))
    assert not night.delete_window_open(local_ms(22, 59))


def test_deletion_pacing_settings() -> None:
    broker = BrokerConfig.from_properties(
        {"logmgr.delete.interval.ms": "100", "logmgr.delete.force.after.ms": "0"}
    )
    assert (broker.delete_interval_ms, broker.delete_force_after_ms) == (100, 0)


# -- server.properties -----------------------------------------------------------------------------------------------

SERVER_PROPERTIES = r"""# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
num.network.threads=3
socket.send.buffer.bytes=102400

############################# Log Basics #############################
   # an indented comment
! a bang comment
log.dirs=/var/lib/kafka/data-1,\
         /var/lib/kafka/data-2
num.partitions=1
num.recovery.threads.per.data.dir   4

############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
log.flush.interval.ms : 1000

############################# Log Retention Policy #############################
log.retention.hours=168
log.retention.minutes=90
log.retention.bytes=1073741824
log.segment.bytes=536870912
log.retention.check.interval.ms=300000
log.cleanup.policy=compact\u002c delete
log.message.timestamp.type=Log\
  AppendTime
log.preallocate=TRUE
log.roll.jitter.hours=1
logmgr.disk.usage.clean.ratio=0.85
logmgr.disk.usage.warn.ratio=0.90
logmgr.delete.when=04
log.initial.task.delay.ms=1000
log.initial.task.delay.ms=2000
"""


def test_load_a_real_looking_server_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES, encoding="latin-1")
    broker = load_server_properties(path)
    assert broker.log_dirs == ("/var/lib/kafka/data-1", "/var/lib/kafka/data-2")
    assert broker.num_recovery_threads_per_data_dir == 4
    assert broker.log_flush_interval_ms == 1000
    assert broker.log_flush_interval_messages == LONG_MAX
    assert broker.log_retention_ms == 90 * 60_000
    assert broker.log_retention_bytes == 1073741824
    assert broker.log_segment_bytes == 536870912
    assert broker.log_cleanup_policy == ("compact", "delete")
    assert broker.log_message_timestamp_type == "LogAppendTime"
    assert broker.log_preallocate is True
    assert broker.log_roll_jitter_ms == 3_600_000
    assert broker.log_initial_task_delay_ms == 2000
    assert (broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio, broker.delete_when) == (
        0.85,
        0.90,
        frozenset({4}),
    )
    topic = broker.log_config()
    assert (topic.retention_ms, topic.segment_bytes, topic.flush_ms, topic.segment_jitter_ms) == (
        5_400_000,
        536870912,
        1000,
        3_600_000,
    )
    assert topic.compact and topic.delete and topic.preallocate


def test_load_reads_latin1_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"log.dir=/data/k\xe4fka\r\nlog.segment.bytes=\\\r\n  4096\r\n")
    broker = load_server_properties(path)
    assert broker.log_dirs == ("/data/k\u00e4fka",)
    assert broker.log_segment_bytes == 4096


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("# c\nnode.id=1\nlog.segment.bytes=12\n", "log.segment.bytes", 3),
        ("log.retention.hours=5\n\n  log.retention.minutes = 0\n", "log.retention.minutes", 3),
        ("log.preallocate=maybe\n", "log.preallocate", 1),
        ("log.roll.ms=5\nlog.roll.ms=0\n", "log.roll.ms", 2),
        ("log.dirs=/a,\\\n /a\nx=y\n", "log.dirs", 1),
        ("logmgr.deletewhen=04\n", "logmgr.deletewhen", 1),
        (
            "logmgr.disk.max.used.ratio=0.5\nlogmgr.disk.usage.warn.ratio=0.5\n\nlogmgr.disk.usage.clean.ratio=0.6\n",
            "logmgr.disk.usage.clean.ratio",
            4,
        ),
    ],
)
def test_load_errors_name_key_file_and_line(tmp_path: Path, text: str, key: str, line: int) -> None:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="latin-1")
    err = _error(load_server_properties, path)
    assert err.key == key
    assert str(err).startswith(f"{key}: ")
    assert str(err).endswith(f"({path}, line {line})")


def test_load_error_for_a_derived_default_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "log.cleaner.min.compaction.lag.ms=5\nlog.cleaner.max.compaction.lag.ms=3\n", encoding="latin-1"
    )
    err = _error(load_server_properties, path)
    assert err.key == "log.cleaner.min.compaction.lag.ms"
    assert str(err).endswith(f"({path}, line 1)")


def test_malformed_unicode_escape_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=1\nlog.dir=/tmp/\\u12G4\n", encoding="latin-1")
    err = _error(load_server_properties, path)
    assert err.key == str(path)
    assert str(err).startswith(f"{path}: line 2: ")


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_server_properties(tmp_path / "absent.properties")


# -- property-based ----------------------------------------------------------------------------------------------

_longs = st.integers(INT64_MIN, INT64_MAX)


@st.composite
def log_configs(draw: st.DrawFn) -> LogConfig:
    min_lag = draw(st.integers(0, INT64_MAX))
    return LogConfig(
        retention_ms=draw(st.integers(-1, INT64_MAX)),
        retention_bytes=draw(_longs),
        segment_bytes=draw(st.integers(14, INT32_MAX)),
        segment_ms=draw(st.integers(1, INT64_MAX)),
        segment_jitter_ms=draw(st.integers(0, INT64_MAX)),
        segment_index_bytes=draw(st.integers(4, INT32_MAX)),
        index_interval_bytes=draw(st.integers(0, INT32_MAX)),
        flush_messages=draw(st.integers(1, INT64_MAX)),
        flush_ms=draw(st.integers(0, INT64_MAX)),
        file_delete_delay_ms=draw(st.integers(0, INT64_MAX)),
        cleanup_policy=tuple(draw(st.lists(st.sampled_from(["compact", "delete"]), max_size=3))),
        message_timestamp_type=draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        max_message_bytes=draw(st.integers(0, INT32_MAX)),
        preallocate=draw(st.booleans()),
        min_compaction_lag_ms=min_lag,
        max_compaction_lag_ms=draw(st.integers(max(min_lag, 1), INT64_MAX)),
        delete_retention_ms=draw(st.integers(0, INT64_MAX)),
    )


@given(log_configs(), log_configs())
def test_to_properties_round_trips(config: LogConfig, defaults: LogConfig) -> None:
    properties = config.to_properties()
    assert LogConfig.from_properties(properties) == config
    assert LogConfig.from_properties(properties, defaults=defaults) == config
    assert defaults.with_overrides(properties) == config


@given(log_configs(), st.data())
def test_partial_properties_override_only_their_keys(config: LogConfig, data: st.DataObject) -> None:
    properties = config.to_properties()
    chosen = data.draw(st.sets(st.sampled_from(sorted(properties))))
    subset = {key: properties[key] for key in chosen}
    try:
        result = LogConfig.from_properties(subset)
    except ConfigError as err:
        # Only the cross-key rule can fail on a subset of a valid config.
        assert err.key == "min.compaction.lag.ms"
        return
    for key, text in result.to_properties().items():
        assert text == (properties[key] if key in chosen else LogConfig().to_properties()[key])


_TOPIC_KEYS = sorted(DOC_TOPIC_DEFAULTS)
_BROKER_KEYS = sorted(
    {*DOC_SYNONYMS.values(), "log.dir", "log.retention.minutes", "log.retention.hours", "log.roll.hours"}
    | {"log.roll.jitter.hours", "log.flush.scheduler.interval.ms", "logmgr.delete.when"}
    | {"logmgr.disk.usage.clean.ratio", "logmgr.disk.usage.warn.ratio", "log.cleaner.enable", "logmgr.x"}
)
_values = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"[ ]?[+-]?[0-9]{1,20}[ ]?", fullmatch=True),
    st.sampled_from(["true", "false", "compact,delete", "CreateTime", "0.5", "02-05", ""]),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=True),
)


@given(st.dictionaries(st.one_of(st.sampled_from(_TOPIC_KEYS), st.text(max_size=8)), _values, max_size=6))
def test_arbitrary_topic_properties_give_a_config_or_config_error(props: dict[str, ConfigValue]) -> None:
    try:
        config = LogConfig.from_properties(props)
    except ConfigError as err:
        assert err.key in props
        return
    config.validate()
    assert LogConfig.from_properties(config.to_properties()) == config


@given(st.dictionaries(st.one_of(st.sampled_from(_BROKER_KEYS), st.text(max_size=8)), _values, max_size=8))
# Bug: a disk tier set below a tier left at its default was blamed on the default's key, which the file lacks.
@example({"logmgr.disk.usage.clean.ratio": ".1"})
def test_arbitrary_broker_properties_give_a_config_or_config_error(props: dict[str, ConfigValue]) -> None:
    try:
        broker = BrokerConfig.from_properties(props)
    except ConfigError as err:
        assert err.key in props
        return
    broker.validate()
    broker.log_config().validate()


@given(st.binary(max_size=300))
def test_arbitrary_server_properties_bytes_give_a_config_or_config_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "server.properties"
        path.write_bytes(data)
        try:
            load_server_properties(path)
        except ConfigError as err:
            assert str(path) in str(err)


def _utf16_escapes(char: str) -> str:
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["log.segment.bytes", "log.retention.ms", "log.dirs", "junk.key"]), st.text()
        ),
        max_size=5,
    )
)
def test_server_properties_written_with_escapes_read_back(entries: list[tuple[str, str]]) -> None:
    lines = []
    for key, value in entries:
        # Every character but ASCII letters and digits as \\uXXXX UTF-16 units, as native2ascii writes them.
        escaped = "".join(
            char if char.isascii() and char.isalnum() else _utf16_escapes(char) for char in value
        )
        lines.append(f"{key}={escaped}")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "server.properties"
        path.write_text("\n".join(lines) + "\n", encoding="latin-1", errors="strict")
        expected_props = dict(entries)
        try:
            expected: BrokerConfig | ConfigError = BrokerConfig.from_properties(expected_props)
        except ConfigError as err:
            expected = err
        try:
            assert load_server_properties(path) == expected
        except ConfigError as err:
            assert isinstance(expected, ConfigError)
            assert err.key == expected.key
