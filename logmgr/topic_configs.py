"""The effective configuration of every topic of a log dir, from where Kafka keeps it, with each value's source.

A broker resolves a topic's log config from layers, the highest present winning (Kafka's ``LogConfig`` over
``DynamicBrokerConfig`` over ``KafkaConfig``):

1. the topic's own configs (``ConfigRecord`` s of the TOPIC resource in the KRaft ``__cluster_metadata`` log);
2. dynamic broker configs of this broker (BROKER resource named by its ``node.id``), then
3. dynamic cluster-wide broker defaults (BROKER resource ``""``), for the log settings Kafka lets them change
   (``DynamicLogConfig.ReconfigurableConfigs``: ``log.retention.ms``, ``log.cleanup.policy``, ...);
4. the static ``server.properties``;
5. Kafka's defaults.

An offline tool adds two layers on top: ``--topic-configs FILE`` lines, then ``--topic-config`` flags, for what
the dirs cannot tell (a ZooKeeper-era dir keeps no configs on disk). Kafka creates its internal topics
(``__consumer_offsets``, ``__transaction_state``) with ``cleanup.policy=compact``; an internal topic whose
cleanup.policy no other topic-level layer sets gets that, as the lowest topic-level layer.

:class:`TopicConfigResolver` is pure (it is handed parsed layers); :func:`load_resolver`,
:func:`read_topic_configs_file` and :func:`read_node_id` are the only functions that read files.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from checkpoints.meta_properties import (
    JAVA_TRIMMED,
    META_PROPERTIES_FILE,
    logical_lines,
    read_meta_properties,
)
from logmgr.cluster_metadata import load_cluster_metadata
from logmgr.config import (
    BROKER_CONFIG_KEYS,
    DYNAMIC_BROKER_LOG_KEYS,
    KAFKA_TOPIC_CONFIG_NAMES,
    LOG_CONFIG_KEYS,
    LOGMGR_PREFIX,
    TOPIC_KEY_OF_BROKER_KEY,
    BrokerConfig,
    LogConfig,
    broker_setting_keys,
    read_properties,
)
from logmgr.errors import ConfigError
from logmgr.log_dirs import partition_dirs
from segments.errors import InvalidPartitionDirError, StorageFormatError
from segments.naming import PartitionDirName, validate_topic
from segments.records import DecodeLimits

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
"""Topics Kafka creates itself, with ``cleanup.policy=compact``."""

METADATA_TOPIC = "__cluster_metadata"
CLUSTER_DEFAULT = ""
"""The BROKER resource name of the dynamic cluster-wide defaults."""

_TOPIC_PREFIX = "topic."
# How much of an operator's text an error message quotes.
_SHOWN = 200
_BROKER_KEY_OF_TOPIC_KEY = {
    topic_key: broker_key for broker_key, topic_key in TOPIC_KEY_OF_BROKER_KEY.items()
}

SourceKind = Literal["default", "server.properties", "metadata", "flag", "internal-topic"]


@dataclass(frozen=True)
class ConfigSource:
    """Where a value came from: the layer (``kind``) and a precise place an operator can look at (``detail``:
    ``"server.properties line 12"``, ``"__cluster_metadata-0 offset 1234 (topic config)"``, ``"--topic-config
    orders:retention.ms=1"``, ``"topics.properties line 3"``, ``"Kafka default"``)."""

    kind: SourceKind
    detail: str

    def __str__(self) -> str:
        return self.detail


KAFKA_DEFAULT = ConfigSource("default", "Kafka default")
LOGMGR_DEFAULT = ConfigSource("default", "logmgr default")

SourcedProperties = Mapping[str, tuple[str, ConfigSource]]
"""``key -> (text value, where it came from)``: one configuration layer."""


@dataclass(frozen=True)
class TopicConfigSetting:
    """One ``TOPIC:KEY=VALUE`` (or ``topic.TOPIC.KEY=VALUE``) given by a flag or a line of a file."""

    topic: str
    key: str
    value: str
    source: ConfigSource


@dataclass(frozen=True)
class EffectiveTopicConfig:
    """A topic's resolved :class:`LogConfig` and where each of its values came from."""

    topic: str
    config: LogConfig
    sources: Mapping[str, ConfigSource]
    """Every LogConfig key (Kafka's name) -> where its value came from."""
    known: bool
    """Anything topic-specific is known: the metadata lists the topic, a flag names it, or it is internal."""
    ignored: Mapping[str, str]
    """Topic-level keys given (by the metadata or a flag) that logmgr does not use (``min.insync.replicas``...)."""
    topic_keys: frozenset[str] = field(default=frozenset())
    """The LogConfig keys set at topic level (metadata topic config, flag, internal topic)."""

    def overrides(self) -> dict[str, str]:
        """``key -> Kafka text value`` of the topic-level settings: what to pass as a LogManager's topic overrides
        so that ``broker.effective_log_config(topic, ...)`` equals :attr:`config`. O(keys)."""
        text = self.config.to_properties()
        return {key: text[key] for key in LOG_CONFIG_KEYS if key in self.topic_keys}


class ConfigEntryView(Protocol):
    """One config value of the metadata image (``logmgr.cluster_metadata.ConfigEntry``)."""

    @property
    def value(self) -> str: ...

    @property
    def offset(self) -> int: ...


class MetadataView(Protocol):
    """What the resolver reads of a ``logmgr.cluster_metadata.ClusterMetadataImage``."""

    @property
    def topics(self) -> Mapping[str, object]: ...

    @property
    def topic_configs(self) -> Mapping[str, Mapping[str, ConfigEntryView]]: ...

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, ConfigEntryView]]: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def warnings(self) -> tuple[str, ...]: ...

    def describe_source(self, offset: int) -> str: ...


def _with_source(err: ConfigError, source: ConfigSource | None, topic: str | None = None) -> ConfigError:
    """``err`` with the topic and the place its value came from appended."""
    where = [] if topic is None else [f"topic {topic!r}"]
    if source is not None:
        where.append(f"from {source.detail}")
    return ConfigError(err.key, f"{err.message} ({', '.join(where)})") if where else err


# Kafka's topic configs and logmgr's own (``logmgr.key.index.enable``).
_TOPIC_CONFIG_NAMES = KAFKA_TOPIC_CONFIG_NAMES | {key for key in LOG_CONFIG_KEYS if key.startswith(LOGMGR_PREFIX)}


def _unknown_key(key: str, source: ConfigSource) -> ConfigError:
    # A typo is short: a long key gets no suggestion (difflib is quadratic in its length).
    close = (
        difflib.get_close_matches(key, sorted(KAFKA_TOPIC_CONFIG_NAMES), n=1) if len(key) <= _SHOWN else []
    )
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(key[:_SHOWN], f"not a Kafka topic config ({source.detail}){hint}")


def _split_dotted(name: str, source: ConfigSource) -> tuple[str, str]:
    """``TOPIC.KEY`` of a ``topic.TOPIC.KEY`` line: KEY is the Kafka topic config the name ends with (topic names
    hold dots). Two readings (``t.delete.retention.ms``: topic ``t`` or ``t.delete``) are refused.
    O(len(name) * number of Kafka topic configs)."""
    readings = [
        (name[: -len(key) - 1], key)
        for key in _TOPIC_CONFIG_NAMES
        if name.endswith("." + key) and len(name) > len(key) + 1
    ]
    if not readings:
        raise ConfigError(
            name[:_SHOWN], f"does not end with a Kafka topic config after topic.TOPIC. ({source.detail})"
        )
    if len(readings) > 1:
        shown = " or ".join(f"topic {topic!r} key {key!r}" for topic, key in sorted(readings))
        raise ConfigError(
            name[:_SHOWN], f"ambiguous: {shown}; write TOPIC:KEY=VALUE instead ({source.detail})"
        )
    return readings[0]


def parse_topic_config(text: str, source: ConfigSource) -> TopicConfigSetting:
    """Parse ``TOPIC:KEY=VALUE`` or ``topic.TOPIC.KEY=VALUE``; ``source`` is where the text came from. O(len).

    Whitespace around the topic, key and value is dropped; the value runs to the end (it may hold ``=``). The
    topic must be one Kafka accepts and the key a Kafka topic config (:data:`KAFKA_TOPIC_CONFIG_NAMES`); the
    value of a key logmgr uses must be valid for it. Raises :class:`ConfigError` naming ``source`` otherwise.
    """
    name, equals, value = text.partition("=")
    name, value = name.strip(JAVA_TRIMMED), value.strip(JAVA_TRIMMED)
    if not equals:
        raise ConfigError(
            text[:_SHOWN], f"expected TOPIC:KEY=VALUE or topic.TOPIC.KEY=VALUE ({source.detail})"
        )
    if ":" in name:
        topic, _, key = name.partition(":")
        topic, key = topic.strip(JAVA_TRIMMED), key.strip(JAVA_TRIMMED)
    elif name.startswith(_TOPIC_PREFIX):
        topic, key = _split_dotted(name[len(_TOPIC_PREFIX) :], source)
    else:
        raise ConfigError(
            name[:_SHOWN], f"expected TOPIC:KEY=VALUE or topic.TOPIC.KEY=VALUE ({source.detail})"
        )
    try:
        validate_topic(topic)
    except StorageFormatError as err:
        raise ConfigError(key[:_SHOWN], f"{err.message} ({source.detail})") from None
    if key not in _TOPIC_CONFIG_NAMES:
        raise _unknown_key(key, source)
    if key in LOG_CONFIG_KEYS:
        # Alone over Kafka's defaults, a valid value never breaks min <= max compaction lag: that check waits
        # for the topic's other values, at resolve time.
        try:
            LogConfig.from_properties({key: value})
        except ConfigError as err:
            raise _with_source(err, source) from None
    return TopicConfigSetting(topic, key, value, source)


def parse_topic_configs_text(text: str, name: str) -> list[TopicConfigSetting]:
    """The settings of a ``--topic-configs`` file's text; ``name`` (the file as the user gave it) appears in each
    source as ``"<name> line N"``. ``#``/``!`` comments, blank lines and backslash continuations are read as
    ``java.util.Properties`` reads them. O(len(text))."""
    return [
        parse_topic_config(line, ConfigSource("flag", f"{name} line {number}"))
        for number, line, is_comment in logical_lines(text)
        if not is_comment
    ]


def read_topic_configs_file(path: Path) -> list[TopicConfigSetting]:
    """Read a ``--topic-configs`` file (ISO-8859-1, as properties files are): :func:`parse_topic_configs_text`.
    ``OSError`` if it cannot be read. O(file size)."""
    with open(path, "rb") as source:
        return parse_topic_configs_text(source.read().decode("latin-1"), str(path))


def static_layer(
    props: Mapping[str, str], lines: Mapping[str, int], name: str
) -> dict[str, tuple[str, ConfigSource]]:
    """``server.properties`` values (from :func:`~logmgr.config.read_properties`) as a layer whose sources read
    ``"<name> line N"``. O(len(props))."""
    return {
        key: (value, ConfigSource("server.properties", f"{name} line {lines[key]}" if key in lines else name))
        for key, value in props.items()
    }


class TopicConfigResolver:
    """Effective topic and broker log configs from parsed layers (see the module docstring for precedence).

    ``static`` is server.properties (:func:`static_layer`), ``metadata`` the KRaft image (None: none on disk),
    ``node_id`` this broker's id (selects its dynamic broker configs), ``dir_topics`` the topics with partition
    dirs, ``settings`` the ``--topic-configs`` lines then the ``--topic-config`` flags (later ones win),
    ``warnings`` extra notes about how the layers were found. The broker config is resolved at construction
    (:class:`ConfigError` naming the source of a bad value), O(settings); topics on demand, cached.
    """

    def __init__(
        self,
        *,
        static: SourcedProperties | None = None,
        metadata: MetadataView | None = None,
        node_id: int | None = None,
        dir_topics: Iterable[str] = (),
        settings: Sequence[TopicConfigSetting] = (),
        warnings: Sequence[str] = (),
        broker_flags: SourcedProperties | None = None,
    ) -> None:
        self._metadata = metadata
        self._dir_topics = frozenset(dir_topics)
        self._settings: dict[str, list[TopicConfigSetting]] = {}
        for setting in settings:
            self._settings.setdefault(setting.topic, []).append(setting)
        self._cache: dict[str, EffectiveTopicConfig] = {}
        self._warnings = [*(metadata.warnings if metadata is not None else ()), *warnings]
        merged: dict[str, tuple[str, ConfigSource]] = dict(static or {})
        self._broker_ignored: dict[str, str] = {}
        if metadata is not None:
            names = [(CLUSTER_DEFAULT, "dynamic cluster default")]
            if node_id is not None:
                names.append((str(node_id), f"dynamic config of broker {node_id}"))
            elif any(name != CLUSTER_DEFAULT for name in metadata.broker_configs):
                others = ", ".join(sorted(n for n in metadata.broker_configs if n != CLUSTER_DEFAULT))
                self._warnings.append(
                    f"no node.id in meta.properties: the dynamic configs of broker(s) {others} are not applied"
                )
            for name, what in names:
                for key, entry in metadata.broker_configs.get(name, {}).items():
                    if key in DYNAMIC_BROKER_LOG_KEYS:
                        where = f"{metadata.describe_source(entry.offset)} ({what})"
                        merged[key] = (entry.value, ConfigSource("metadata", where))
                    else:
                        self._broker_ignored[key] = entry.value
        # A command's own flags (cleanup --retention-ms) are what the operator asked for this run: above all.
        merged.update(broker_flags or {})
        props = {key: value for key, (value, _) in merged.items()}
        try:
            self._broker = BrokerConfig.from_properties(props)
        except ConfigError as err:
            known = merged.get(err.key)
            raise _with_source(err, None if known is None else known[1]) from None
        self._broker_sources: dict[str, ConfigSource] = {}
        set_by = broker_setting_keys(props)
        for broker_key in BROKER_CONFIG_KEYS:
            if broker_key in set_by:
                key = set_by[broker_key]
                source = merged[key][1]
                self._broker_sources[broker_key] = ConfigSource(source.kind, f"{key} at {source.detail}")
            else:
                self._broker_sources[broker_key] = (
                    LOGMGR_DEFAULT if broker_key.startswith(LOGMGR_PREFIX) else KAFKA_DEFAULT
                )

    def broker(self) -> BrokerConfig:
        """server.properties, then the dynamic cluster default, then this broker's dynamic configs. O(1)."""
        return self._broker

    def broker_sources(self) -> Mapping[str, ConfigSource]:
        """Every :class:`BrokerConfig` key -> where its value came from (the key that set it and where, or a
        default). O(1)."""
        return self._broker_sources

    def broker_ignored(self) -> Mapping[str, str]:
        """Dynamic broker configs (cluster default and this broker) that logmgr does not apply. O(1)."""
        return self._broker_ignored

    def metadata_warnings(self) -> tuple[str, ...]:
        """The metadata decoder's warnings, then notes on missing layers (no metadata, no node id). O(1)."""
        return tuple(self._warnings)

    def topics(self) -> list[str]:
        """Sorted: topics with partition dirs, topics the metadata lists, topics a flag names. O(t log t)."""
        names = set(self._dir_topics) | set(self._settings)
        if self._metadata is not None:
            names.update(self._metadata.topics)
            names.update(self._metadata.topic_configs)
        return sorted(names)

    def topic_overrides(self) -> dict[str, dict[str, str]]:
        """``topic -> its topic-level settings`` (:meth:`EffectiveTopicConfig.overrides`) for every topic of
        :meth:`topics` that has any: with :meth:`broker`, what a LogManager needs to apply these configs.
        O(topics)."""
        every = {topic: self.resolve(topic).overrides() for topic in self.topics()}
        return {topic: overrides for topic, overrides in every.items() if overrides}

    def resolve(self, topic: str) -> EffectiveTopicConfig:
        """The effective config of ``topic`` (cached): topic-level layers over :meth:`broker`'s defaults. O(keys).

        Raises :class:`ConfigError` naming the key, the topic and where a bad value came from.
        """
        cached = self._cache.get(topic)
        if cached is not None:
            return cached
        layer: dict[str, tuple[str, ConfigSource]] = {}
        ignored: dict[str, str] = {}
        known = topic in INTERNAL_TOPICS or topic in self._settings
        if topic in INTERNAL_TOPICS:
            layer["cleanup.policy"] = (
                "compact",
                ConfigSource("internal-topic", f"Kafka creates {topic} with cleanup.policy=compact"),
            )
        entries: list[tuple[str, str, ConfigSource]] = []
        if self._metadata is not None:
            metadata = self._metadata
            known = known or topic in metadata.topics or topic in metadata.topic_configs
            for key, entry in metadata.topic_configs.get(topic, {}).items():
                where = f"{metadata.describe_source(entry.offset)} (topic config)"
                entries.append((key, entry.value, ConfigSource("metadata", where)))
        entries.extend((s.key, s.value, s.source) for s in self._settings.get(topic, ()))
        for key, value, source in entries:
            if key in LOG_CONFIG_KEYS:
                layer[key] = (value, source)
            else:
                ignored[key] = value
        try:
            config = self._broker.log_config().with_overrides(
                {key: value for key, (value, _) in layer.items()}
            )
        except ConfigError as err:
            known_source = layer.get(err.key)
            raise _with_source(err, None if known_source is None else known_source[1], topic) from None
        sources = {
            key: layer[key][1] if key in layer else self._broker_sources[_BROKER_KEY_OF_TOPIC_KEY[key]]
            for key in LOG_CONFIG_KEYS
        }
        result = EffectiveTopicConfig(topic, config, sources, known, ignored, frozenset(layer))
        self._cache[topic] = result
        return result


def read_node_id(log_dir: Path) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper era) of ``log_dir``'s ``meta.properties``; None when the
    file is absent or sets none. Raises :class:`~segments.errors.CorruptCheckpointError` for a malformed file. O(1)."""
    try:
        return read_meta_properties(log_dir / META_PROPERTIES_FILE).node_id
    except FileNotFoundError:
        return None


def dir_topics(log_dir: Path) -> set[str]:
    """Topics of the live partition dirs in ``log_dir`` (not ``__cluster_metadata``, not links). O(entries)."""
    return {tp.topic for tp, _ in partition_dirs(log_dir) if tp.topic != METADATA_TOPIC}


def load_resolver(
    log_dirs: Sequence[Path],
    *,
    server_properties: Path | None,
    topic_config_flags: Sequence[str],
    topic_configs_files: Sequence[Path],
    broker_flags: SourcedProperties | None = None,
) -> TopicConfigResolver:
    """Read every layer for ``log_dirs`` and build their :class:`TopicConfigResolver`. Reads only. O(files read).

    ``broker_flags`` are broker settings a command's own options set (``cleanup --retention-ms``): they override
    every other broker-level layer.

    The metadata is the ``__cluster_metadata-0`` found in the dirs (the one reaching furthest if several hold
    one); the node id is the dirs' ``meta.properties`` one (:class:`ConfigError` if they disagree). Raises
    :class:`ConfigError` for a bad flag, file line or value, ``OSError`` for an unreadable file.
    """
    static: dict[str, tuple[str, ConfigSource]] = {}
    if server_properties is not None:
        props, lines = read_properties(server_properties)
        static = static_layer(props, lines, str(server_properties))
    settings: list[TopicConfigSetting] = []
    for path in topic_configs_files:
        settings.extend(read_topic_configs_file(path))
    settings.extend(
        parse_topic_config(flag, ConfigSource("flag", f"--topic-config {flag}"))
        for flag in topic_config_flags
    )
    warnings: list[str] = []
    node_ids: dict[Path, int] = {}
    for log_dir in log_dirs:
        try:
            node_id = read_node_id(log_dir)
        except StorageFormatError as err:
            warnings.append(f"{err}: its node id is unknown")
            continue
        if node_id is not None:
            node_ids[log_dir] = node_id
    if len(set(node_ids.values())) > 1:
        shown = ", ".join(f"{d} has {n}" for d, n in node_ids.items())
        raise ConfigError("node.id", f"the log dirs belong to different brokers: {shown}")
    images = [image for image in map(load_cluster_metadata, log_dirs) if image is not None]
    metadata = max(images, key=lambda image: image.end_offset, default=None)
    if metadata is None:
        warnings.append(
            "no __cluster_metadata-0 in the log dirs (a ZooKeeper-era dir keeps topic configs in ZooKeeper): "
            "only the internal topics and the topics named by --topic-config/--topic-configs have known configs"
        )
    topics: set[str] = set()
    for log_dir in log_dirs:
        topics |= dir_topics(log_dir)
    return TopicConfigResolver(
        static=static,
        metadata=metadata,
        node_id=next(iter(node_ids.values()), None),
        dir_topics=topics,
        settings=settings,
        warnings=warnings,
        broker_flags=broker_flags,
    )


class TopicDecodeLimits:
    """The decode limits an offline reader (``read``, ``dump``, ``verify``, ``export``) applies to a topic's
    records: :meth:`DecodeLimits.for_max_message_bytes` of the topic's effective ``max.message.bytes``, so a record
    the topic accepted is always read, with ``max_record_bytes`` / ``max_batch_bytes`` (the readers' explicit
    ``--max-record-bytes`` / ``--max-batch-bytes``) replacing the limit they name when given.

    ``load(log_dirs)`` builds the :class:`TopicConfigResolver` of some log dirs under the command's config options
    (``cli.config_options.build_resolver``). It is called at once with no dir, so a bad flag or server.properties
    value raises :class:`ConfigError` before anything is read, then once per log dir, on demand. A log dir whose
    own configs cannot be read (a corrupt ``__cluster_metadata`` snapshot, an unreadable file, a bad value in the
    metadata) must not stop a reader of its segments: its topics get the limits of the flags and server.properties
    alone, and ``warn`` is told why, once per dir.
    """

    def __init__(
        self,
        load: Callable[[Sequence[Path]], TopicConfigResolver],
        *,
        max_record_bytes: int | None = None,
        max_batch_bytes: int | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self._load = load
        self._fallback = load(())
        self._max_record_bytes = max_record_bytes
        self._max_batch_bytes = max_batch_bytes
        self._warn = warn
        self._resolvers: dict[Path, TopicConfigResolver] = {}

    def _resolved(self, log_dir: Path, topic: str) -> EffectiveTopicConfig:
        resolver = self._resolvers.get(log_dir)
        if resolver is None:
            try:
                resolver = self._load([log_dir])
            except (StorageFormatError, OSError, ConfigError) as err:
                self._unreadable(log_dir, err)
                resolver = self._fallback
            self._resolvers[log_dir] = resolver
        try:
            return resolver.resolve(topic)
        except ConfigError as err:
            if resolver is self._fallback:
                raise
            self._unreadable(log_dir, err)
            self._resolvers[log_dir] = self._fallback
            return self._fallback.resolve(topic)

    def _unreadable(self, log_dir: Path, err: Exception) -> None:
        if self._warn is not None:
            self._warn(
                f"{log_dir}: its topic configs cannot be read ({err}); its records are decoded within the limits "
                "of the config options alone"
            )

    def max_message_bytes(self, log_dir: Path, topic: str) -> int:
        """The effective ``max.message.bytes`` of ``topic`` in ``log_dir``. O(1) once the dir's configs are
        read (O(its metadata) the first time)."""
        return self._resolved(log_dir, topic).config.max_message_bytes

    def _limits(self, max_message_bytes: int) -> DecodeLimits:
        limits = DecodeLimits.for_max_message_bytes(max_message_bytes)
        return DecodeLimits(
            self._max_record_bytes or limits.max_record_bytes, self._max_batch_bytes or limits.max_batch_bytes
        )

    def for_topic(self, log_dir: Path, topic: str) -> DecodeLimits:
        """The limits of ``topic``'s records in ``log_dir``. O(1) once the dir's configs are read."""
        return self._limits(self.max_message_bytes(log_dir, topic))

    def for_segment(self, path: Path) -> DecodeLimits:
        """The limits of the records of the segment (or KRaft snapshot) file ``path``: those of the topic of its
        partition dir (live, ``-delete``, ``-future`` or ``-stray``); a file outside a partition dir gets the broker
        default's. O(1) once the dir's configs are read."""
        try:
            topic = PartitionDirName.parse(path.absolute().parent.name).topic
        except InvalidPartitionDirError:
            return self._limits(self._fallback.broker().log_config().max_message_bytes)
        return self.for_topic(path.absolute().parent.parent, topic)
