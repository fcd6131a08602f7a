"""``logmgr configs``: text and JSON output, flags and files, one-line config errors, and that it only reads."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from logmgr.config import LOG_CONFIG_KEYS
from tests.conftest import KAFKA_REAL, require_fixtures

ZK_362 = KAFKA_REAL / "zk-3.6.2-running" / "kafka-logs"
KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["configs", *map(str, args)])


def _json(*args: str | Path) -> dict[str, Any]:
    result = _run(*args, "--json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _tree_hash(root: Path) -> str:
    """Names, contents, modes and modification times of everything under ``root``."""
    digest = hashlib.sha256()
    for path in sorted([root, *root.rglob("*")]):
        info = path.lstat()
        digest.update(f"{path.relative_to(root)} {info.st_mode} {info.st_mtime_ns}".encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_zk_dir_json_shape_and_internal_topics() -> None:
    document = _json(require_fixtures(ZK_362))
    assert set(document) == {"broker", "topics", "warnings"}
    assert set(document["topics"]) == {"__consumer_offsets", "one"}
    offsets = document["topics"]["__consumer_offsets"]
    assert offsets["known"] is True
    assert offsets["config"]["cleanup.policy"] == ["compact"]
    assert offsets["sources"]["cleanup.policy"]["kind"] == "internal-topic"
    assert offsets["overrides"] == {"cleanup.policy": "compact"}
    one = document["topics"]["one"]
    assert one["known"] is False
    assert set(one["config"]) == set(LOG_CONFIG_KEYS)
    assert one["config"]["retention.ms"] == 604800000
    assert one["sources"]["retention.ms"] == {"kind": "default", "detail": "Kafka default"}
    assert "log.dirs" not in document["broker"]["config"]
    assert document["broker"]["config"]["log.retention.ms"] == 604800000
    assert any("no __cluster_metadata-0" in w for w in document["warnings"])


def test_flags_file_and_server_properties_in_json(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("log.retention.hours=24\nlog.cleaner.min.compaction.lag.ms=10\n")
    topics = tmp_path / "topics.properties"
    topics.write_text("# overrides\ntopic.one.retention.ms=1000\none:min.insync.replicas=2\n")
    document = _json(
        require_fixtures(ZK_362),
        "--config",
        server,
        "--topic-configs",
        topics,
        "--topic-config",
        "one:cleanup.policy=compact,delete",
        "--topic-config",
        "not.here:retention.bytes=5",
    )
    one = document["topics"]["one"]
    assert one["known"] is True
    assert one["config"]["retention.ms"] == 1000
    assert one["sources"]["retention.ms"] == {"kind": "flag", "detail": f"{topics} line 2"}
    assert one["config"]["cleanup.policy"] == ["compact", "delete"]
    assert one["sources"]["cleanup.policy"]["detail"] == "--topic-config one:cleanup.policy=compact,delete"
    assert one["sources"]["min.compaction.lag.ms"] == {
        "kind": "server.properties",
        "detail": f"log.cleaner.min.compaction.lag.ms at {server} line 2",
    }
    assert one["ignored"] == {"min.insync.replicas": "2"}
    assert one["overrides"] == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
    assert document["topics"]["not.here"]["config"]["retention.bytes"] == 5
    assert (
        document["broker"]["sources"]["log.retention.ms"]["detail"]
        == f"log.retention.hours at {server} line 1"
    )


def test_text_output_names_values_and_sources() -> None:
    result = _run(require_fixtures(ZK_362), "--topic-config", "one:retention.ms=1000")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("broker")
    assert "topic one (topic-specific configs known):" in lines
    assert any(
        line.split() == ["retention.ms", "1000", "--topic-config", "one:retention.ms=1000"] for line in lines
    )
    assert any(
        line.split()[:2] == ["cleanup.policy", "compact"] and "Kafka creates __consumer_offsets" in line
        for line in lines
    )
    assert "2 topic(s); compacted: __consumer_offsets" in lines
    assert any(line.startswith("warning: no __cluster_metadata-0") for line in lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic-config", "one:retention.mss=1"], "retention.mss: not a Kafka topic config"),
        (["--topic-config", "one:retention.ms=soon"], "retention.ms: invalid value 'soon'"),
    ],
)
def test_config_error_is_one_line_exit_1(args: list[str], message: str) -> None:
    result = _run(require_fixtures(ZK_362), *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_topic_configs_line_names_file_and_line(tmp_path: Path) -> None:
    topics = tmp_path / "topics.properties"
    topics.write_text("one:retention.ms=1\n\nonly-a-topic\n")
    result = _run(require_fixtures(ZK_362), "--topic-configs", topics)
    assert result.exit_code == 1
    assert f"{topics} line 3" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def _read_only_copy(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / source.name
    shutil.copytree(require_fixtures(source), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return copy


@pytest.mark.parametrize("source", [ZK_362, KRAFT_37], ids=["zk", "kraft"])
def test_read_only_dir_and_nothing_written(source: Path, tmp_path: Path) -> None:
    copy = _read_only_copy(source, tmp_path)
    before = _tree_hash(copy)
    try:
        for args in ([], ["--json"]):
            result = _run(copy, *args)
            assert result.exit_code == 0, result.output
        # Root ignores permissions, so the unchanged tree is what shows nothing was written.
        assert _tree_hash(copy) == before
        if os.geteuid() != 0:
            assert not os.access(copy, os.W_OK)
    finally:
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_kraft_dir_text_and_json_show_compacted_topics_from_metadata() -> None:
    result = _run(require_fixtures(KRAFT_37))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    schemas = lines.index("topic _schemas (topic-specific configs known):")
    policy = next(line for line in lines[schemas:] if line.split()[:1] == ["cleanup.policy"])
    assert policy.split()[1] == "compact"
    assert policy.endswith("snapshot 00000000000000060500-0000000025.checkpoint (topic config)")
    assert (
        "9 topic(s); compacted: __consumer_offsets, __transaction_state, _schemas, docker-connect-configs, "
        "docker-connect-offsets, docker-connect-status"
    ) in lines
    assert not any(line.startswith("warning:") for line in lines)
    document = _json(KRAFT_37)
    assert document["topics"]["docker-connect-offsets"]["sources"]["cleanup.policy"]["kind"] == "metadata"
    assert document["topics"]["__transaction_state"]["ignored"] == {
        "compression.type": "uncompressed",
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
    }
    assert document["warnings"] == []
