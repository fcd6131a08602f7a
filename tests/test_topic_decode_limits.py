"""Decode limits from the topic's config (issue 11, item 2: "the larger of max.message.bytes and 64 MiB per record,
256 MiB per batch"): ``read``, ``dump`` and ``verify`` take a topic's ``max.message.bytes`` from the topic config
layers (``--topic-config``, ``--topic-configs``, ``--config`` server.properties, the KRaft metadata) through
:class:`~logmgr.topic_configs.TopicDecodeLimits`; ``--max-record-bytes``/``--max-batch-bytes`` still override it.

The hostile value is one record of 65 MiB of zeros, zstd-compressed to a few KB on disk: above the default record
limit, below a topic limit of 128 MiB.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from logmgr.errors import ConfigError
from logmgr.topic_configs import TopicConfigResolver, TopicDecodeLimits
from segments.compression import CompressionType
from segments.errors import RecordTooLargeError
from segments.records import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_RECORD_BYTES, DecodeLimits
from tests.faults.hostile_batches import huge_value_batch, write_partition

MIB = 1024 * 1024
BIG = DEFAULT_MAX_RECORD_BYTES + MIB
TOPIC_LIMIT = 2 * DEFAULT_MAX_RECORD_BYTES
ADMITTED = f"big:max.message.bytes={TOPIC_LIMIT}"


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log dir whose ``big-0`` holds one batch of one :data:`BIG` value."""
    log_dir = tmp_path_factory.mktemp("logs")
    write_partition(log_dir, [huge_value_batch(CompressionType.ZSTD, BIG)], topic="big")
    return log_dir


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def _read(big_dir: Path, *args: str | Path) -> Result:
    return _run("read", big_dir, "big-0", "--max-value-bytes", "4", *args)


def _read_value_size(result: Result) -> int:
    assert result.exit_code == 0, result.output
    (line,) = [json.loads(text) for text in result.stdout.splitlines()]
    size: int = line["value_truncated_from"]
    return size


def test_bug_read_refused_a_record_its_topics_max_message_bytes_admits(big_dir: Path, tmp_path: Path) -> None:
    """Regression (issue 11): ``read`` decoded within the fixed 64 MiB record limit whatever the topic's
    ``max.message.bytes``, so a record Kafka accepted was refused as corrupt."""
    refused = _read(big_dir)
    assert refused.exit_code == 1 and "exceeds the limit" in refused.stderr
    assert str(big_dir / "big-0" / "00000000000000000000.log") in refused.stderr
    assert _read_value_size(_read(big_dir, "--topic-config", ADMITTED)) == BIG
    topics = tmp_path / "topics.properties"
    topics.write_text(f"topic.big.max.message.bytes={TOPIC_LIMIT}\n")
    assert _read_value_size(_read(big_dir, "--topic-configs", topics)) == BIG
    server = tmp_path / "server.properties"
    server.write_text(f"message.max.bytes={TOPIC_LIMIT}\n")
    assert _read_value_size(_read(big_dir, "--config", server)) == BIG


def test_explicit_max_record_bytes_overrides_the_topic_limit(big_dir: Path) -> None:
    result = _read(big_dir, "--topic-config", ADMITTED, "--max-record-bytes", str(MIB))
    assert result.exit_code == 1 and f"exceeds the limit of {MIB}" in result.stderr
    assert _read_value_size(_read(big_dir, "--max-record-bytes", str(BIG + MIB))) == BIG


def test_bug_dump_and_verify_refused_a_record_its_topics_max_message_bytes_admits(big_dir: Path) -> None:
    """Regression (issue 11): ``dump`` and ``verify`` used the fixed 64 MiB record limit too."""
    segment = big_dir / "big-0" / "00000000000000000000.log"
    refused = _run("dump", segment, "--deep-iteration")
    assert refused.exit_code == 1 and "exceeds the limit" in refused.stderr and str(segment) in refused.stderr
    dumped = _run("dump", segment, "--deep-iteration", "--topic-config", ADMITTED)
    assert dumped.exit_code == 0, dumped.output
    assert f"valueSize: {BIG}" in dumped.stdout
    refused = _run("verify", big_dir)
    assert refused.exit_code == 1 and "exceeds the limit" in refused.stdout
    verified = _run("verify", big_dir, "--topic-config", ADMITTED)
    assert verified.exit_code == 0, verified.output
    assert "OK: " in verified.stdout and "1 records" in verified.stdout


def test_bad_topic_config_flag_is_one_line_exit_1(big_dir: Path) -> None:
    for command in (["read", big_dir, "big-0"], ["dump", big_dir / "big-0" / "00000000000000000000.log"],
                    ["verify", big_dir]):
        result = _run(*command, "--topic-config", "big:max.message.bytes=lots")
        assert result.exit_code == 1 and "max.message.bytes" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_unreadable_metadata_warns_and_keeps_the_flags(tmp_path: Path) -> None:
    """A log dir whose ``__cluster_metadata-0`` cannot be read does not stop a reader: it says so on stderr and
    decodes with the limits of the config options alone."""
    write_partition(tmp_path, [huge_value_batch(CompressionType.ZSTD, BIG)], topic="big")
    metadata = tmp_path / "__cluster_metadata-0"
    metadata.mkdir()
    (metadata / "00000000000000000000-0000000000.checkpoint").write_bytes(b"\x80" * 100)
    result = _read(tmp_path, "--topic-config", ADMITTED)
    assert _read_value_size(result) == BIG
    assert f"warning: {tmp_path}: its topic configs cannot be read" in result.stderr


def test_topic_decode_limits_by_segment_path(tmp_path: Path) -> None:
    def load(log_dirs: Sequence[Path]) -> TopicConfigResolver:
        from logmgr.topic_configs import ConfigSource, parse_topic_config

        flags = [f"big:max.message.bytes={TOPIC_LIMIT}", "small:max.message.bytes=1000"]
        settings = [parse_topic_config(flag, ConfigSource("flag", flag)) for flag in flags]
        return TopicConfigResolver(settings=settings)

    limits = TopicDecodeLimits(load)
    assert limits.for_segment(tmp_path / "big-3" / "0.log") == DecodeLimits(TOPIC_LIMIT, DEFAULT_MAX_BATCH_BYTES)
    assert limits.for_segment(tmp_path / "big-3.0123abcd-delete" / "0.log").max_record_bytes == TOPIC_LIMIT
    assert limits.for_segment(tmp_path / "small-0" / "0.log") == DecodeLimits()  # never below the defaults
    assert limits.for_segment(tmp_path / "no_partition" / "0.log") == DecodeLimits()
    overridden = TopicDecodeLimits(load, max_batch_bytes=5 * MIB)
    assert overridden.for_topic(tmp_path, "big") == DecodeLimits(TOPIC_LIMIT, 5 * MIB)

    def failing(log_dirs: Sequence[Path]) -> TopicConfigResolver:
        raise ConfigError("max.message.bytes", "bad")

    with pytest.raises(ConfigError):
        TopicDecodeLimits(failing)


# --- the Spark source and export ------------------------------------------------------------------------------


def test_spark_max_message_bytes_option_parses_one_size_or_a_size_per_topic() -> None:
    from logmgr.spark.options import parse_options

    assert parse_options({"path": "/x"}).decode_limits("big") == DecodeLimits()
    every = parse_options({"path": "/x", "maxMessageBytes": str(TOPIC_LIMIT)})
    admitted = DecodeLimits(TOPIC_LIMIT, DEFAULT_MAX_BATCH_BYTES)
    assert every.decode_limits("big") == every.decode_limits("other") == admitted
    per_topic = parse_options({"path": "/x", "maxmessagebytes": json.dumps({"big": TOPIC_LIMIT})})
    assert per_topic.decode_limits("big").max_record_bytes == TOPIC_LIMIT
    assert per_topic.decode_limits("other") == DecodeLimits()
    for bad in ("lots", "-1", '{"big": "x"}', '{"big": -1}', "{"):
        with pytest.raises(ConfigError, match="maxMessageBytes"):
            parse_options({"path": "/x", "maxMessageBytes": bad})


def test_bug_spark_reader_refused_a_record_its_topics_max_message_bytes_admits(big_dir: Path) -> None:
    """Regression (issue 11): the ``kafka-log`` slice reader decoded within the fixed 64 MiB record limit; the
    ``maxMessageBytes`` option (which ``export`` sets from the topic configs) now raises it for the topic."""
    from logmgr.spark.options import parse_options
    from logmgr.spark.scan import plan_scan, read_slice

    def values(options: dict[str, str]) -> list[int]:
        parsed = parse_options({"path": str(big_dir), **options})
        tables = [t for piece in plan_scan(parsed).slices for t in read_slice(piece, parsed.columns)]
        return [len(value.as_py()) for table in tables for value in table.column("value")]

    with pytest.raises(RecordTooLargeError, match="exceeds the limit"):
        values({})
    assert values({"maxMessageBytes": json.dumps({"big": TOPIC_LIMIT})}) == [BIG]


def test_bug_export_refused_a_record_its_topics_max_message_bytes_admits(
    spark: object, big_dir: Path, tmp_path: Path
) -> None:
    """Regression (issue 11): ``export`` read through the source's fixed 64 MiB limit; it now passes each topic's
    ``max.message.bytes`` from the topic configs (here ``--topic-config``) as ``maxMessageBytes``."""
    base = ["export", big_dir, "--to", "parquet", "--json"]
    refused = _run(*base, "--out", tmp_path / "refused")
    assert refused.exit_code == 1 and "exceeds the limit" in refused.stderr
    done = _run(*base, "--out", tmp_path / "out", "--topic-config", ADMITTED)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["rows"] == 1
