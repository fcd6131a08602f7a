"""``logmgr configs``: every topic's effective log config and where each value comes from. Reads only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from cli.common import one_line_errors
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from logmgr.config import config_values
from logmgr.topic_configs import ConfigSource, EffectiveTopicConfig, TopicConfigResolver

LOG_DIRS_KEY = "log.dirs"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "(unset)" if value is None else str(value)


def _rows(values: Mapping[str, Any], sources: Mapping[str, ConfigSource]) -> list[str]:
    """``key  value  source`` lines, columns aligned."""
    texts = {key: _text(value) for key, value in values.items()}
    key_width = max(map(len, texts), default=0)
    value_width = max(map(len, texts.values()), default=0)
    return [f"  {key:<{key_width}}  {text:<{value_width}}  {sources[key]}" for key, text in texts.items()]


def _sources_json(sources: Mapping[str, ConfigSource]) -> dict[str, dict[str, str]]:
    return {key: {"kind": source.kind, "detail": source.detail} for key, source in sources.items()}


def _topic_json(effective: EffectiveTopicConfig) -> dict[str, Any]:
    return {
        "known": effective.known,
        "config": config_values(effective.config),
        "sources": _sources_json(effective.sources),
        "overrides": effective.overrides(),
        "ignored": dict(effective.ignored),
    }


def _broker_values(resolver: TopicConfigResolver) -> dict[str, Any]:
    """The broker settings shown: all but log.dirs, which every command takes from its LOGDIR arguments."""
    return {key: value for key, value in config_values(resolver.broker()).items() if key != LOG_DIRS_KEY}


def _print_text(resolver: TopicConfigResolver, topics: list[EffectiveTopicConfig]) -> None:
    click.echo("broker (server.properties, then dynamic broker configs from __cluster_metadata):")
    for line in _rows(_broker_values(resolver), resolver.broker_sources()):
        click.echo(line)
    if resolver.broker_ignored():
        shown = ", ".join(f"{key}={value}" for key, value in sorted(resolver.broker_ignored().items()))
        click.echo(f"  not used by logmgr: {shown}")
    for effective in topics:
        state = "topic-specific configs known" if effective.known else "nothing topic-specific known"
        click.echo(f"\ntopic {effective.topic} ({state}):")
        for line in _rows(config_values(effective.config), effective.sources):
            click.echo(line)
        if effective.ignored:
            shown = ", ".join(f"{key}={value}" for key, value in sorted(effective.ignored.items()))
            click.echo(f"  not used by logmgr: {shown}")
    compacted = [e.topic for e in topics if e.config.compact]
    unknown = [e.topic for e in topics if not e.known]
    click.echo(f"\n{len(topics)} topic(s); compacted: {', '.join(compacted) or 'none'}")
    if unknown:
        click.echo(f"broker defaults only (nothing topic-specific known): {', '.join(unknown)}")
    for warning in resolver.metadata_warnings():
        click.echo(f"warning: {warning}")


@click.command()
@click.argument(
    "logdirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: broker, topics, warnings.")
@topic_config_options
@one_line_errors
def configs(logdirs: tuple[Path, ...], as_json: bool, config_options: ConfigOptions) -> None:
    """Print the effective log config of every topic of LOGDIR... (partition dirs, topics in the KRaft
    __cluster_metadata, topics named by flags) and where each value comes from: a topic config in
    __cluster_metadata (with its offset), a dynamic broker config, server.properties (with its line), a
    --topic-config flag or --topic-configs line, an internal topic's compaction, or Kafka's default. Also the
    broker-level settings, topic configs logmgr does not use, and warnings about the metadata. Reads only; exit 1
    on an invalid config value.

    \b
    Examples:
        logmgr configs /var/lib/kafka/data
        logmgr configs /var/lib/kafka/data --config server.properties --topic-config orders:retention.ms=86400000
        logmgr configs /var/lib/kafka/data --json
    """
    resolver = build_resolver(logdirs, config_options)
    topics = [resolver.resolve(topic) for topic in resolver.topics()]
    if not as_json:
        _print_text(resolver, topics)
        return
    document = {
        "broker": {
            "config": _broker_values(resolver),
            "sources": _sources_json(
                {key: resolver.broker_sources()[key] for key in _broker_values(resolver)}
            ),
            "ignored": dict(resolver.broker_ignored()),
        },
        "topics": {effective.topic: _topic_json(effective) for effective in topics},
        "warnings": list(resolver.metadata_warnings()),
    }
    click.echo(json.dumps(document, indent=2))
