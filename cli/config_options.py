"""The configuration options every command that applies a retention or roll policy takes, as one decorator.

``@topic_config_options`` adds ``--config server.properties``, ``--topic-config TOPIC:KEY=VALUE`` (repeatable) and
``--topic-configs FILE`` (repeatable) and hands the command one ``config_options`` parameter; the command builds
the :class:`~logmgr.topic_configs.TopicConfigResolver` of its log dirs with :func:`build_resolver` inside its body
(under ``one_line_errors``, so a bad value is a one-line error, exit 1)::

    @click.command()
    @click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @topic_config_options
    @one_line_errors
    def cleanup(logdir: Path, config_options: ConfigOptions) -> None:
        resolver = build_resolver([logdir], config_options)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from logmgr.topic_configs import ConfigSource, TopicConfigResolver, TopicDecodeLimits, load_resolver

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A broker server.properties whose log.* settings apply (log.dirs is ignored).",
    ),
    click.option(
        "--topic-config",
        "topic_config",
        multiple=True,
        metavar="TOPIC:KEY=VALUE",
        help="A topic config that overrides every other source (repeatable), e.g. _schemas:cleanup.policy=compact.",
    ),
    click.option(
        "--topic-configs",
        "topic_configs",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A properties file of TOPIC:KEY=VALUE or topic.TOPIC.KEY=VALUE lines (repeatable); "
        "--topic-config flags override it.",
    ),
)


@dataclass(frozen=True)
class ConfigOptions:
    """The parsed values of the three options."""

    config_file: Path | None
    topic_config: tuple[str, ...]
    topic_configs: tuple[Path, ...]


def topic_config_options(func: F) -> F:
    """Add ``--config``, ``--topic-config`` and ``--topic-configs`` to a click command; the command function
    receives them as one keyword argument, ``config_options: ConfigOptions``. O(1)."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        config_file: Path | None,
        topic_config: tuple[str, ...],
        topic_configs: tuple[Path, ...],
        **kwargs: Any,
    ) -> Any:
        options = ConfigOptions(config_file, tuple(topic_config), tuple(topic_configs))
        return func(*args, config_options=options, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def build_resolver(
    log_dirs: Sequence[Path], options: ConfigOptions, *, broker_flags: Mapping[str, tuple[str, str]] | None = None
) -> TopicConfigResolver:
    """The resolver of ``log_dirs`` under ``options`` (:func:`~logmgr.topic_configs.load_resolver`): reads
    server.properties, the topic-configs files, each dir's meta.properties and ``__cluster_metadata``, writes
    nothing. ``broker_flags`` maps broker keys to ``(value, the flag that set it)``: a command's own options, above
    every other broker-level layer. Raises ``ConfigError`` for a bad flag, line or value. O(files read)."""
    return load_resolver(
        log_dirs,
        server_properties=options.config_file,
        topic_config_flags=options.topic_config,
        topic_configs_files=options.topic_configs,
        broker_flags={
            key: (value, ConfigSource("flag", flag)) for key, (value, flag) in (broker_flags or {}).items()
        },
    )


def topic_decode_limits(
    options: ConfigOptions, *, max_record_bytes: int | None = None, max_batch_bytes: int | None = None
) -> TopicDecodeLimits:
    """The decode limits of every topic under ``options`` (a reader's ``--config``/``--topic-config``/
    ``--topic-configs`` and each log dir's KRaft metadata), with a reader's explicit ``--max-record-bytes`` /
    ``--max-batch-bytes`` over them; a log dir whose configs cannot be read is named in a ``warning:`` line on
    stderr. Raises ``ConfigError`` for a bad flag, line or value of ``options``. O(files read)."""
    return TopicDecodeLimits(
        lambda log_dirs: build_resolver(log_dirs, options),
        max_record_bytes=max_record_bytes,
        max_batch_bytes=max_batch_bytes,
        warn=lambda message: click.echo(f"warning: {message}", err=True),
    )
