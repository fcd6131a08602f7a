"""Tests of logmgr.topic_configs: the precedence of every config layer (table and a hypothesis model), the
``--topic-config`` / ``--topic-configs`` parsers, and the resolver over real KRaft and ZooKeeper-era log dirs."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logmgr.config import (
    KAFKA_TOPIC_CONFIG_NAMES,
    LOG_CONFIG_KEYS,
    TOPIC_KEY_OF_BROKER_KEY,
    BrokerConfig,
    LogConfig,
)
from logmgr.errors import ConfigError
from logmgr.topic_configs import (
    KAFKA_DEFAULT,
    LOGMGR_DEFAULT,
    ConfigSource,
    TopicConfigResolver,
    TopicConfigSetting,
    load_resolver,
    parse_topic_config,
    parse_topic_configs_text,
    static_layer,
)
from tests.conftest import KAFKA_REAL, require_fixtures

FLAG = ConfigSource("flag", "--topic-config")
BROKER_KEY_OF = {topic_key: broker_key for broker_key, topic_key in TOPIC_KEY_OF_BROKER_KEY.items()}


# --- a stand-in of logmgr.cluster_metadata's image, built in memory ----------------------------------------------


@dataclass(frozen=True)
class Entry:
    value: str
    offset: int


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    partitions: frozenset[int] = frozenset({0})


@dataclass(frozen=True)
class Image:
    topics: Mapping[str, Topic] = field(default_factory=dict)
    topic_configs: Mapping[str, Mapping[str, Entry]] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, Entry]] = field(default_factory=dict)
    snapshot: Path | None = None
    end_offset: int = 0
    warnings: tuple[str, ...] = ()

    def describe_source(self, offset: int) -> str:
        return f"__cluster_metadata-0 offset {offset}"


def image(
    topics: Mapping[str, Mapping[str, tuple[str, int]]] | None = None,
    brokers: Mapping[str, Mapping[str, tuple[str, int]]] | None = None,
) -> Image:
    """An image listing ``topics`` with their configs ``key -> (value, offset)``, and broker configs."""
    topics = topics or {}
    return Image(
        topics={name: Topic(name) for name in topics},
        topic_configs={t: {k: Entry(*e) for k, e in c.items()} for t, c in topics.items() if c},
        broker_configs={b: {k: Entry(*e) for k, e in c.items()} for b, c in (brokers or {}).items()},
    )


def static(**props: str) -> dict[str, tuple[str, ConfigSource]]:
    """server.properties layer, keys written with ``_`` for ``.``, each on its own line (1, 2, ...)."""
    keyed = {key.replace("_", "."): value for key, value in props.items()}
    return static_layer(keyed, {key: n for n, key in enumerate(keyed, 1)}, "server.properties")


def setting(text: str, detail: str = "--topic-config") -> TopicConfigSetting:
    return parse_topic_config(text, ConfigSource("flag", detail))


# --- precedence table --------------------------------------------------------------------------------------------


def test_nothing_known_is_kafka_defaults() -> None:
    resolver = TopicConfigResolver(dir_topics=["orders"])
    effective = resolver.resolve("orders")
    assert effective.config == LogConfig()
    assert set(effective.sources) == set(LOG_CONFIG_KEYS)
    # logmgr's own topic configs (logmgr.key.index.enable) default to logmgr's value, the rest to Kafka's.
    assert all(
        source == (LOGMGR_DEFAULT if key.startswith("logmgr.") else KAFKA_DEFAULT)
        for key, source in effective.sources.items()
    )
    assert not effective.known
    assert effective.overrides() == {}
    assert resolver.broker() == BrokerConfig()


def test_server_properties_line_is_the_source() -> None:
    resolver = TopicConfigResolver(static=static(log_cleanup_policy="compact", log_retention_hours="2"))
    effective = resolver.resolve("orders")
    assert effective.config.cleanup_policy == ("compact",)
    assert effective.config.retention_ms == 2 * 3_600_000
    assert effective.sources["cleanup.policy"] == ConfigSource(
        "server.properties", "log.cleanup.policy at server.properties line 1"
    )
    # The synonym that set the value is named, not the key it resolves to.
    assert effective.sources["retention.ms"].detail == "log.retention.hours at server.properties line 2"
    assert resolver.broker_sources()["log.retention.ms"].kind == "server.properties"
    assert effective.overrides() == {}


def test_dynamic_cluster_default_beats_server_properties() -> None:
    metadata = image(brokers={"": {"log.retention.ms": ("1000", 42)}})
    resolver = TopicConfigResolver(static=static(log_retention_ms="5000"), metadata=metadata, node_id=1)
    assert resolver.broker().log_retention_ms == 1000
    source = resolver.resolve("orders").sources["retention.ms"]
    assert source == ConfigSource(
        "metadata", "log.retention.ms at __cluster_metadata-0 offset 42 (dynamic cluster default)"
    )


def test_dynamic_ms_beats_static_hours_synonym() -> None:
    # Kafka merges dynamic over static, then resolves ms > minutes > hours on the merged properties.
    metadata = image(brokers={"": {"log.retention.ms": ("1000", 7)}})
    resolver = TopicConfigResolver(static=static(log_retention_hours="5"), metadata=metadata)
    assert resolver.broker().log_retention_ms == 1000


def test_dynamic_per_broker_beats_cluster_default_and_other_brokers_do_not_apply() -> None:
    metadata = image(
        brokers={
            "": {"log.retention.bytes": ("100", 10)},
            "1": {"log.retention.bytes": ("200", 11)},
            "2": {"log.retention.bytes": ("300", 12)},
        }
    )
    assert TopicConfigResolver(metadata=metadata, node_id=1).broker().log_retention_bytes == 200
    assert TopicConfigResolver(metadata=metadata, node_id=3).broker().log_retention_bytes == 100
    source = TopicConfigResolver(metadata=metadata, node_id=1).resolve("t").sources["retention.bytes"]
    assert (
        source.detail == "log.retention.bytes at __cluster_metadata-0 offset 11 (dynamic config of broker 1)"
    )


def test_no_node_id_warns_about_per_broker_configs() -> None:
    metadata = image(brokers={"1": {"log.retention.bytes": ("200", 11)}})
    resolver = TopicConfigResolver(metadata=metadata, node_id=None)
    assert resolver.broker().log_retention_bytes == -1
    assert any("broker(s) 1" in warning for warning in resolver.metadata_warnings())


def test_dynamic_broker_keys_kafka_cannot_change_dynamically_are_ignored() -> None:
    # log.retention.hours is a static-only synonym; log.cleaner.threads is a cleaner setting logmgr has no use for.
    metadata = image(brokers={"": {"log.retention.hours": ("1", 3), "log.cleaner.threads": ("2", 4)}})
    resolver = TopicConfigResolver(metadata=metadata)
    assert resolver.broker().log_retention_ms == BrokerConfig().log_retention_ms
    assert resolver.broker_ignored() == {"log.retention.hours": "1", "log.cleaner.threads": "2"}


def test_topic_config_beats_dynamic_broker_config() -> None:
    metadata = image(
        topics={"orders": {"retention.ms": ("60000", 99)}},
        brokers={"": {"log.retention.ms": ("1000", 42)}, "1": {"log.retention.ms": ("2000", 43)}},
    )
    effective = TopicConfigResolver(metadata=metadata, node_id=1).resolve("orders")
    assert effective.config.retention_ms == 60000
    assert effective.sources["retention.ms"] == ConfigSource(
        "metadata", "__cluster_metadata-0 offset 99 (topic config)"
    )
    assert effective.known
    assert effective.overrides() == {"retention.ms": "60000"}


def test_file_beats_metadata_and_flag_beats_file() -> None:
    metadata = image(topics={"orders": {"retention.ms": ("60000", 99), "segment.ms": ("1000", 98)}})
    settings = [
        *parse_topic_configs_text("orders:retention.ms=70000\norders:segment.ms=2000\n", "topics.properties"),
        setting("orders:retention.ms=80000"),
    ]
    effective = TopicConfigResolver(metadata=metadata, settings=settings).resolve("orders")
    assert effective.config.retention_ms == 80000
    assert effective.sources["retention.ms"] == FLAG
    assert effective.config.segment_ms == 2000
    assert effective.sources["segment.ms"] == ConfigSource("flag", "topics.properties line 2")


def test_later_flag_wins() -> None:
    settings = [setting("t:retention.ms=1", "first"), setting("t:retention.ms=2", "second")]
    effective = TopicConfigResolver(settings=settings).resolve("t")
    assert effective.config.retention_ms == 2
    assert effective.sources["retention.ms"].detail == "second"


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
def test_internal_topic_is_compacted_over_broker_defaults(topic: str) -> None:
    resolver = TopicConfigResolver(static=static(log_cleanup_policy="delete"))
    effective = resolver.resolve(topic)
    assert effective.config.cleanup_policy == ("compact",)
    assert effective.sources["cleanup.policy"].kind == "internal-topic"
    assert effective.known
    assert effective.overrides() == {"cleanup.policy": "compact"}


def test_internal_topic_metadata_config_beats_the_internal_default() -> None:
    metadata = image(topics={"__consumer_offsets": {"cleanup.policy": ("compact,delete", 5)}})
    effective = TopicConfigResolver(metadata=metadata).resolve("__consumer_offsets")
    assert effective.config.cleanup_policy == ("compact", "delete")
    assert effective.sources["cleanup.policy"].kind == "metadata"


def test_topic_keys_logmgr_does_not_use_are_ignored_not_errors() -> None:
    metadata = image(
        topics={"t": {"min.insync.replicas": ("2", 1), "confluent.value.schema.validation": ("true", 2)}}
    )
    settings = [setting("t:compression.type=lz4")]
    effective = TopicConfigResolver(metadata=metadata, settings=settings).resolve("t")
    assert effective.ignored == {
        "min.insync.replicas": "2",
        "confluent.value.schema.validation": "true",
        "compression.type": "lz4",
    }
    assert effective.config == LogConfig()
    assert effective.overrides() == {}


def test_known_only_for_topics_something_names() -> None:
    metadata = image(topics={"listed": {}})
    resolver = TopicConfigResolver(
        metadata=metadata, dir_topics=["listed", "orphan"], settings=[setting("flagged:retention.ms=1")]
    )
    assert resolver.topics() == ["flagged", "listed", "orphan"]
    assert {t: resolver.resolve(t).known for t in resolver.topics()} == {
        "flagged": True,
        "listed": True,
        "orphan": False,
    }
    assert resolver.topic_overrides() == {"flagged": {"retention.ms": "1"}}


def test_resolve_is_cached() -> None:
    resolver = TopicConfigResolver()
    assert resolver.resolve("t") is resolver.resolve("t")


def test_invalid_metadata_topic_value_names_its_offset() -> None:
    metadata = image(topics={"t": {"retention.ms": ("soon", 1234)}})
    with pytest.raises(ConfigError) as caught:
        TopicConfigResolver(metadata=metadata).resolve("t")
    assert caught.value.key == "retention.ms"
    assert "topic 't'" in str(caught.value)
    assert "__cluster_metadata-0 offset 1234" in str(caught.value)


def test_invalid_dynamic_broker_value_names_its_offset() -> None:
    metadata = image(brokers={"": {"log.segment.bytes": ("1", 77)}})
    with pytest.raises(ConfigError, match="offset 77"):
        TopicConfigResolver(metadata=metadata)


def test_invalid_static_value_names_its_line() -> None:
    with pytest.raises(ConfigError, match=r"server\.properties line 2"):
        TopicConfigResolver(static=static(log_retention_ms="1", log_segment_bytes="x"))


def test_min_compaction_lag_over_max_across_layers_names_the_min_source() -> None:
    metadata = image(topics={"t": {"max.compaction.lag.ms": ("1000", 5)}})
    settings = [setting("t:min.compaction.lag.ms=5000")]
    with pytest.raises(ConfigError, match=r"greater than max\.compaction\.lag\.ms.*--topic-config"):
        TopicConfigResolver(metadata=metadata, settings=settings).resolve("t")


# --- the precedence model ----------------------------------------------------------------------------------------

# Two canonical values per topic key, every combination valid (min compaction lag never above max).
POOLS: dict[str, tuple[str, str]] = {
    "retention.ms": ("-1", "3600000"),
    "retention.bytes": ("-1", "1048576"),
    "segment.bytes": ("14", "1048576"),
    "segment.ms": ("1", "3600000"),
    "segment.jitter.ms": ("0", "1000"),
    "segment.index.bytes": ("4", "4096"),
    "index.interval.bytes": ("0", "100"),
    "flush.messages": ("1", "1000"),
    "flush.ms": ("0", "1000"),
    "file.delete.delay.ms": ("0", "5"),
    "cleanup.policy": ("compact", "compact,delete"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "message.timestamp.difference.max.ms": ("0", "60000"),
    "message.timestamp.before.max.ms": ("0", "3600000"),
    "message.timestamp.after.max.ms": ("1", "9223372036854775807"),
    "max.message.bytes": ("0", "100"),
    "preallocate": ("true", "false"),
    "logmgr.key.index.enable": ("true", "false"),
    "logmgr.append.reserve.bytes": ("0", "65536"),
    "min.compaction.lag.ms": ("0", "1000"),
    "max.compaction.lag.ms": ("1000", "5000"),
    "delete.retention.ms": ("0", "7"),
    "min.cleanable.dirty.ratio": ("0.5", "0.01"),
}
TOPICS = ("orders", "a.b.c", "__consumer_offsets")
NODE = 3


def layer(keys: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(keys, st.sampled_from((0, 1))).map(
        lambda chosen: {key: POOLS[TOPIC_KEY_OF_BROKER_KEY.get(key, key)][i] for key, i in chosen.items()}
    )


broker_layer = layer(st.sampled_from(sorted(TOPIC_KEY_OF_BROKER_KEY)))
topic_layer = layer(st.sampled_from(sorted(POOLS)))


@given(
    static_props=broker_layer,
    cluster_default=broker_layer,
    this_broker=broker_layer,
    other_broker=broker_layer,
    topic_configs=st.dictionaries(st.sampled_from(TOPICS), topic_layer),
    file_layers=st.dictionaries(st.sampled_from(TOPICS), topic_layer),
    flag_layers=st.dictionaries(st.sampled_from(TOPICS), topic_layer),
)
def test_precedence_matches_model(
    static_props: dict[str, str],
    cluster_default: dict[str, str],
    this_broker: dict[str, str],
    other_broker: dict[str, str],
    topic_configs: dict[str, dict[str, str]],
    file_layers: dict[str, dict[str, str]],
    flag_layers: dict[str, dict[str, str]],
) -> None:
    def entries(props: dict[str, str]) -> dict[str, tuple[str, int]]:
        return {key: (value, 100) for key, value in props.items()}

    metadata = image(
        topics={topic: entries(topic_configs.get(topic, {})) for topic in topic_configs},
        brokers={"": entries(cluster_default), str(NODE): entries(this_broker), "4": entries(other_broker)},
    )
    # The dotted form reads "topic.orders.delete.retention.ms" two ways (refused): that key goes in TOPIC:KEY form.
    file_text = "".join(
        f"{topic}:{key}={value}\n" if key == "delete.retention.ms" else f"topic.{topic}.{key}={value}\n"
        for topic, props in file_layers.items()
        for key, value in props.items()
    )
    settings = [
        *parse_topic_configs_text(file_text, "topics.properties"),
        *(
            setting(f"{topic}:{key}={value}")
            for topic, props in flag_layers.items()
            for key, value in props.items()
        ),
    ]
    resolver = TopicConfigResolver(
        static=static_layer(static_props, {}, "server.properties"),
        metadata=metadata,
        node_id=NODE,
        settings=settings,
    )
    defaults = LogConfig().to_properties()
    for topic in TOPICS:
        effective = resolver.resolve(topic)
        actual = effective.config.to_properties()
        for key in LOG_CONFIG_KEYS:
            broker_key = BROKER_KEY_OF[key]
            topic_layers = [
                ("metadata", topic_configs.get(topic, {})),
                ("flag", file_layers.get(topic, {})),
                ("flag", flag_layers.get(topic, {})),
            ]
            expected: tuple[str, str] | None = None
            for kind, props in topic_layers:
                if key in props:
                    expected = (kind, props[key])
            if expected is None and key == "cleanup.policy" and topic == "__consumer_offsets":
                expected = ("internal-topic", "compact")
            if expected is None:
                for kind, props in (
                    ("server.properties", static_props),
                    ("metadata", cluster_default),
                    ("metadata", this_broker),
                ):
                    if broker_key in props:
                        expected = (kind, props[broker_key])
            if expected is None:
                expected = ("default", defaults[key])
            assert (effective.sources[key].kind, actual[key]) == expected, (topic, key)
        assert effective.known == (
            topic == "__consumer_offsets"
            or topic in topic_configs
            or bool(file_layers.get(topic) or flag_layers.get(topic))
        )


# --- --topic-config / --topic-configs parsing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "topic", "key", "value"),
    [
        ("orders:retention.ms=1000", "orders", "retention.ms", "1000"),
        ("  orders : retention.ms =  1000 ", "orders", "retention.ms", "1000"),
        (
            "my.dotted.topic:cleanup.policy=compact,delete",
            "my.dotted.topic",
            "cleanup.policy",
            "compact,delete",
        ),
        ("topic.my.dotted.topic.cleanup.policy=compact", "my.dotted.topic", "cleanup.policy", "compact"),
        ("topic.topic.segment.ms=5", "topic", "segment.ms", "5"),
        ("topic.a.segment.jitter.ms=5", "a", "segment.jitter.ms", "5"),
        ("t:min.insync.replicas=2", "t", "min.insync.replicas", "2"),
        (
            "t:leader.replication.throttled.replicas=0:1,1:2",
            "t",
            "leader.replication.throttled.replicas",
            "0:1,1:2",
        ),
    ],
)
def test_parse_topic_config(text: str, topic: str, key: str, value: str) -> None:
    assert parse_topic_config(text, FLAG) == TopicConfigSetting(topic, key, value, FLAG)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("orders:retention.mss=1", "retention.mss: not a Kafka topic config .*did you mean 'retention.ms'"),
        ("orders:log.retention.ms=1", "not a Kafka topic config"),
        ("orders", "expected TOPIC:KEY=VALUE"),
        ("orders.retention.ms=1", "expected TOPIC:KEY=VALUE"),
        ("topic.orders.retention.mss=1", "does not end with a Kafka topic config"),
        ("topic.retention.ms=1", "does not end with a Kafka topic config"),
        ("bad/topic:retention.ms=1", "illegal"),
        (":retention.ms=1", "can't be empty"),
        ("orders:retention.ms=soon", "retention.ms: invalid value 'soon'"),
        ("orders:cleanup.policy=compacted", "cleanup.policy: invalid value"),
        ("orders:segment.bytes=1", "at least 14"),
        # Topic t with delete.retention.ms, or topic t.delete with retention.ms: refused, not guessed.
        ("topic.t.delete.retention.ms=1", "ambiguous"),
        ("topic.t.local.retention.bytes=1", "ambiguous"),
    ],
)
def test_parse_topic_config_errors_name_the_flag(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        parse_topic_config(text, ConfigSource("flag", "--topic-config X"))
    assert "--topic-config X" in str(caught.value)


def test_topic_configs_file_comments_continuations_and_line_numbers() -> None:
    text = (
        "# retention of the compacted topics\n"
        "\n"
        "! another comment style\n"
        "_schemas:cleanup.policy=compact\n"
        "   topic.my.app.v1.retention.ms = 86400000\n"
        "orders:cleanup.policy=\\\n"
        "    compact,delete\n"
        "orders:retention.ms=1\n"
    )
    settings = parse_topic_configs_text(text, "topics.properties")
    assert [(s.topic, s.key, s.value, s.source.detail) for s in settings] == [
        ("_schemas", "cleanup.policy", "compact", "topics.properties line 4"),
        ("my.app.v1", "retention.ms", "86400000", "topics.properties line 5"),
        ("orders", "cleanup.policy", "compact,delete", "topics.properties line 6"),
        ("orders", "retention.ms", "1", "topics.properties line 8"),
    ]


def test_topic_configs_file_bad_line_names_its_number() -> None:
    with pytest.raises(ConfigError, match=r"topics.properties line 3"):
        parse_topic_configs_text("# c\na:retention.ms=1\nb:retenion.ms=2\n", "topics.properties")


VALID_TOPIC = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=30).filter(
    lambda t: t not in (".", "..")
)


@given(topic=VALID_TOPIC, key=st.sampled_from(sorted(POOLS)), index=st.sampled_from((0, 1)))
def test_both_forms_round_trip(topic: str, key: str, index: int) -> None:
    value = POOLS[key][index]
    expected = TopicConfigSetting(topic, key, value, FLAG)
    assert parse_topic_config(f"{topic}:{key}={value}", FLAG) == expected
    try:
        dotted = parse_topic_config(f"topic.{topic}.{key}={value}", FLAG)
    except ConfigError as err:
        assert "ambiguous" in err.message
    else:
        assert dotted == expected


@given(st.text(max_size=200))
def test_parsers_raise_only_config_errors(text: str) -> None:
    with contextlib.suppress(ConfigError):
        parse_topic_config(text, FLAG)
    with contextlib.suppress(ConfigError):
        parse_topic_configs_text(text, "f")


@pytest.mark.parametrize(
    "text",
    [
        "t:" + "k" * 1_000_000 + "=1",
        "x" * 1_000_000 + ":retention.ms=1",
        "topic." + "x." * 500_000 + "=1",
        "y" * 10**6,
    ],
)
def test_huge_flag_gives_a_short_error(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_topic_config(text, FLAG)
    assert len(str(caught.value)) < 1000


def test_every_logmgr_key_is_a_kafka_topic_config() -> None:
    # Except logmgr's own topic configs (the logmgr. namespace: logmgr.key.index.enable).
    assert {k for k in LOG_CONFIG_KEYS if not k.startswith("logmgr.")} <= KAFKA_TOPIC_CONFIG_NAMES


# --- load_resolver over files ------------------------------------------------------------------------------------


def test_load_resolver_reads_files_in_order(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    (log_dir / "orders-0").mkdir(parents=True)
    (log_dir / "my.topic-3").mkdir()
    (log_dir / "gone-0.abc-delete").mkdir()
    (log_dir / "meta.properties").write_text("version=0\nbroker.id=7\n")
    server = tmp_path / "server.properties"
    server.write_text("# broker\nlog.retention.hours=1\nlog.dirs=/elsewhere\n")
    first = tmp_path / "a.properties"
    first.write_text("orders:retention.ms=10\n")
    second = tmp_path / "b.properties"
    second.write_text("topic.orders.retention.ms=20\n")
    resolver = load_resolver(
        [log_dir],
        server_properties=server,
        topic_config_flags=["my.topic:cleanup.policy=compact"],
        topic_configs_files=[first, second],
    )
    assert resolver.topics() == ["my.topic", "orders"]
    orders = resolver.resolve("orders")
    assert orders.config.retention_ms == 20
    assert orders.sources["retention.ms"].detail == f"{second} line 1"
    assert (
        resolver.resolve("my.topic").sources["retention.ms"].detail
        == f"log.retention.hours at {server} line 2"
    )
    assert resolver.resolve("my.topic").sources["cleanup.policy"].detail == (
        "--topic-config my.topic:cleanup.policy=compact"
    )
    assert any("no __cluster_metadata-0" in warning for warning in resolver.metadata_warnings())


def test_load_resolver_refuses_dirs_of_different_brokers(tmp_path: Path) -> None:
    for name, node in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.properties").write_text(f"version=0\nbroker.id={node}\n")
    with pytest.raises(ConfigError, match="different brokers"):
        load_resolver(
            [tmp_path / "a", tmp_path / "b"],
            server_properties=None,
            topic_config_flags=(),
            topic_configs_files=(),
        )


def test_load_resolver_corrupt_meta_properties_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=zero\n")
    resolver = load_resolver(
        [tmp_path], server_properties=None, topic_config_flags=(), topic_configs_files=()
    )
    assert any("node id is unknown" in warning for warning in resolver.metadata_warnings())


def test_load_resolver_bad_server_properties_line(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("a=b\n\nlog.retention.ms=forever\n")
    with pytest.raises(ConfigError, match=f"{server} line 3"):
        load_resolver([tmp_path], server_properties=server, topic_config_flags=(), topic_configs_files=())


# --- real broker dirs --------------------------------------------------------------------------------------------

KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"
KRAFT_42 = KAFKA_REAL / "kraft-4.2-clean" / "kafka-logs"
ZK_DIRS = [
    KAFKA_REAL / "zk-2.1-clean-multiseg" / "kafka-logs",
    KAFKA_REAL / "zk-3.6.2-running" / "kafka-logs",
    KAFKA_REAL / "zk-3.7.1-clean-multiseg" / "kafka-logs",
    KAFKA_REAL / "zk-cp5.2.2-lz4-subset" / "kafka" / "data",
]


def _load(log_dir: Path, *flags: str) -> TopicConfigResolver:
    return load_resolver(
        [require_fixtures(log_dir)], server_properties=None, topic_config_flags=flags, topic_configs_files=()
    )


def test_regression_confluent_compacted_topics_come_from_the_metadata_snapshot() -> None:
    # logmgr cleanup deleted _schemas and the Connect topics under the 7-day default: their cleanup.policy=compact
    # lives only in __cluster_metadata.
    resolver = _load(KRAFT_37)
    compacted = {topic for topic in resolver.topics() if resolver.resolve(topic).config.compact}
    assert compacted == {
        "__consumer_offsets",
        "__transaction_state",
        "_schemas",
        "docker-connect-configs",
        "docker-connect-offsets",
        "docker-connect-status",
    }
    snapshot = "snapshot 00000000000000060500-0000000025.checkpoint (topic config)"
    for topic in compacted:
        effective = resolver.resolve(topic)
        assert effective.known
        assert effective.sources["cleanup.policy"] == ConfigSource("metadata", snapshot), topic
    offsets = resolver.resolve("__consumer_offsets")
    assert offsets.config.segment_bytes == 104857600
    assert offsets.ignored == {"compression.type": "producer"}
    ksql = resolver.resolve("_confluent-ksql-default__command_topic")
    assert (ksql.config.cleanup_policy, ksql.config.retention_ms) == (("delete",), -1)
    assert ksql.ignored == {"min.insync.replicas": "1", "unclean.leader.election.enable": "false"}
    plain = resolver.resolve("patient_admissions")
    assert plain.known and plain.config == LogConfig() and plain.overrides() == {}
    assert resolver.broker() == BrokerConfig()
    assert resolver.metadata_warnings() == ()


def test_kraft_log_records_name_their_offsets() -> None:
    resolver = _load(KRAFT_42)
    offsets = resolver.resolve("__consumer_offsets")
    assert offsets.sources["cleanup.policy"].detail == "__cluster_metadata-0 offset 976 (topic config)"
    assert offsets.sources["segment.bytes"].detail == "__cluster_metadata-0 offset 977 (topic config)"
    assert resolver.topics() == ["__consumer_offsets", "demo-topic"]
    # The dynamic cluster default min.insync.replicas=1 (offset 8) is no log setting.
    assert resolver.broker_ignored() == {"min.insync.replicas": "1"}
    assert resolver.topic_overrides() == {
        "__consumer_offsets": {"segment.bytes": "104857600", "cleanup.policy": "compact"}
    }


def test_flag_overrides_the_metadata_on_a_real_dir() -> None:
    effective = _load(KRAFT_37, "_schemas:cleanup.policy=delete").resolve("_schemas")
    assert effective.config.cleanup_policy == ("delete",)
    assert effective.sources["cleanup.policy"].kind == "flag"


@pytest.mark.parametrize(
    "log_dir", ZK_DIRS, ids=lambda p: p.parts[-2] if p.name == "kafka-logs" else "zk-cp5.2.2"
)
def test_zookeeper_era_dir_knows_only_internal_topics(log_dir: Path) -> None:
    resolver = _load(log_dir)
    assert resolver.topics()
    for topic in resolver.topics():
        effective = resolver.resolve(topic)
        internal = topic in ("__consumer_offsets", "__transaction_state")
        assert effective.known == internal, topic
        assert effective.config.compact == internal, topic
        if not internal:
            assert all(
                source == (LOGMGR_DEFAULT if key.startswith("logmgr.") else KAFKA_DEFAULT)
                for key, source in effective.sources.items()
            )
    assert any("no __cluster_metadata-0" in warning for warning in resolver.metadata_warnings())
