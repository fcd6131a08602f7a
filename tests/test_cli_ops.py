"""The writing ``logmgr`` commands (flush, cleanup, recover, serve) on copies of real broker log dirs, and the
exit code 3 every one of them gives while another process holds the dir's ``.lock``."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from checkpoints.clean_shutdown import CleanShutdownMarker
from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from cli.cleanup_cmd import broker_config, cleanup
from cli.flush_cmd import flush
from cli.main import main
from cli.recover_cmd import recover
from cli.serve_cmd import serve
from logmgr.log_manager import LogManager
from logmgr.verify import verify_paths
from tests import test_disk_tiers
from tests.conftest import KAFKA_REAL, lock_held_elsewhere, require_fixtures

REPO = Path(__file__).resolve().parent.parent
KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"
KSQL = "_confluent-ksql-default__command_topic-0"
CONNECT = "docker-connect-configs-0"
OFFSETS_37 = "__consumer_offsets-37"
FIRST = "00000000000000000000"
TIMEOUT_S = 60
small_fs = test_disk_tiers.small_fs  # a fresh 4 MiB tmpfs (root only), here remounted read-only


def _copy(source: Path, tmp_path: Path) -> Path:
    """A writable copy of a fixture log dir (the shared fixtures are read-only)."""
    copy = tmp_path / source.name
    shutil.copytree(require_fixtures(source), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return copy


def _tree_hash(root: Path) -> dict[str, tuple[str, int]]:
    """Every file's content hash and mode, and every dir, under ``root``."""
    return {
        str(p.relative_to(root)): (
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
            p.stat().st_mode,
        )
        for p in sorted(root.rglob("*"))
    }


def _without_reason(action: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in action.items() if key != "reason"}


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


# -- flush ---------------------------------------------------------------------------------------------------------


def test_flush_selected_partition_writes_exactly_its_recovery_point(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    (logdir / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n2\ndocker-connect-configs 0 0\nzzz 0 7\n")
    before = _tree_hash(logdir)
    dry = CliRunner().invoke(flush, [str(logdir), "--partition", CONNECT, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"{CONNECT}:\n  recovery point 0 -> 10 (log end offset 10)" in dry.output
    assert _tree_hash(logdir) == before
    result = CliRunner().invoke(flush, [str(logdir), "--partition", CONNECT, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["dryRun"] is False and report["applied"] == report["partitions"][0]["actions"] + report["dirActions"]
    assert {a["action"] for a in report["applied"]} == {"fsync", "write"}
    (write,) = report["dirActions"]
    assert write["changes"] == [f"{CONNECT}: 0 -> 10"]
    # Only that entry changes; the other entries keep their values and order; nothing else is written.
    assert (logdir / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n2\ndocker-connect-configs 0 10\nzzz 0 7\n"
    after = _tree_hash(logdir)
    changed = {path for path in set(before) | set(after) if before.get(path) != after.get(path)}
    assert changed <= {RECOVERY_POINT_CHECKPOINT_FILE, ".lock"}
    assert verify_paths([logdir]).ok


def test_flush_all_text_and_unknown_partition(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    result = CliRunner().invoke(flush, [str(logdir)])
    assert result.exit_code == 0, result.output
    assert f"{KSQL}: recovery point 2 -> 2 (log end offset 2)" in result.output, result.output
    before = _tree_hash(logdir)
    unknown = CliRunner().invoke(flush, [str(logdir), "--partition", "nope-7"])
    assert unknown.exit_code == 1
    assert "no such partition: nope-7" in unknown.output
    assert _tree_hash(logdir) == before, "a refused flush writes nothing"
    usage = CliRunner().invoke(flush, [str(logdir), "--partition", "no-dash"])
    assert usage.exit_code == 2


# -- cleanup -------------------------------------------------------------------------------------------------------


def test_cleanup_dry_run_changes_no_byte_and_explains(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    before = _tree_hash(logdir)
    result = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--json", "--retention-ms", "3600000"])
    assert result.exit_code == 0, result.output
    assert _tree_hash(logdir) == before
    plan = json.loads(result.output)
    assert plan["dryRun"] is True and plan["command"] == "cleanup"
    partitions = {p["partition"]: p for p in plan["partitions"] if p["actions"]}
    # The metadata says _schemas and the connect topics are compacted, the ksql command topic keeps forever.
    assert set(partitions) <= {"patient_admissions-0", "default_ksql_processing_log-0"}
    assert "topic _schemas: cleanup.policy=compact (snapshot" in " ".join(plan["notes"])
    assert any("retention.ms=3600000 (log.retention.ms at --retention-ms 3600000)" in note for note in plan["notes"])
    assert plan["bytesFreed"] == sum(a["bytes"] for p in partitions.values() for a in p["actions"] if a["action"] == "delete")

    unlimited = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--retention-ms", "-1"])
    assert unlimited.exit_code == 0, unlimited.output
    assert "would delete 0 segment(s)" in unlimited.output
    by_size = CliRunner().invoke(
        cleanup, [str(logdir), "--dry-run", "--retention-ms", "-1", "--retention-bytes", "0"]
    )
    assert by_size.exit_code == 0, by_size.output
    assert "retention.bytes: log size" in by_size.output and "exceeds retention.bytes 0 B" in by_size.output
    assert _tree_hash(logdir) == before


def test_bug_cleanup_deleted_compacted_topics_the_kraft_metadata_names(tmp_path: Path) -> None:
    """Was: only __consumer_offsets/__transaction_state counted as compacted; _schemas and Kafka Connect's topics,
    compacted per __cluster_metadata, lost their segments under the 7-day default."""
    logdir = _copy(KRAFT_37, tmp_path)
    result = CliRunner().invoke(cleanup, [str(logdir), "--json", "--retention-ms", "1"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)
    touched = {p["partition"].rsplit("-", 1)[0] for p in done["partitions"] if p["actions"]}
    # Everything else with data there is compacted or keeps forever (the ksql command topic's retention.ms=-1).
    assert not touched & {"_schemas", "docker-connect-configs", "docker-connect-offsets", "docker-connect-status", "__consumer_offsets", "__transaction_state"}
    assert (logdir / "_schemas-0" / f"{FIRST}.log").exists()


def test_cleanup_real_run_executes_the_dry_run_plan_then_verifies_clean(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    config = tmp_path / "server.properties"
    config.write_text("log.dirs=/elsewhere\nlog.retention.hours=1\n")
    args = [str(logdir), "--json", "--config", str(config), "--topic-config", "_schemas:cleanup.policy=delete"]
    planned = json.loads(CliRunner().invoke(cleanup, [*args, "--dry-run"]).output)
    result = CliRunner().invoke(cleanup, args)
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)
    assert done["dryRun"] is False
    planned_actions = [a for p in planned["partitions"] for a in p["actions"]] + planned["dirActions"]
    # The same actions; only the ages in the reasons moved on between the two runs.
    assert [_without_reason(a) for a in done["applied"]] == [_without_reason(a) for a in planned_actions]
    assert done["bytesDeleted"] == planned["bytesFreed"] > 0
    assert "_schemas-0" in {p["partition"] for p in done["partitions"] if p["actions"]}
    assert any(a["action"] == "roll" for p in done["partitions"] for a in p["actions"]), "the roll is planned too"
    assert not list(logdir.rglob("*.deleted"))
    report = verify_paths([logdir])
    assert report.ok, [str(p) for p in report.problems][:5]
    assert CleanShutdownMarker.exists(logdir), "the marker stays as found"
    again = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--config", str(config), "--topic-config", "_schemas:cleanup.policy=delete"])
    assert "would delete 0 segment(s)" in again.output


@pytest.mark.parametrize(
    "fixture",
    [
        "kraft-3.6-running-snapshots/kafka-logs",
        "kraft-3.7-clean-transactions/kafka-data",
        "kraft-4.2-clean/kafka-logs",
        "zk-2.1-clean-multiseg/kafka-logs",
        "zk-3.6.2-running/kafka-logs",
        "zk-3.7.1-clean-multiseg/kafka-logs",
    ],
)
@pytest.mark.parametrize("retention", [["--retention-ms", "1"], []], ids=["retention-1ms", "default-retention"])
def test_bug_cleanup_dry_run_said_nothing_on_real_dirs_the_real_run_then_cleaned(
    tmp_path: Path, fixture: str, retention: list[str]
) -> None:
    """Was: on six real broker dirs the dry run said "would delete 0 segment(s)" and the real run (which rolled the
    active segment first) deleted 2-9 segments each. Now both are one plan: the real run applies exactly the dry
    run's actions, on every real dir, with a retention short enough to delete everything and with the broker's
    default (7 days, which the fixtures' records have outlived): on the code before the plans, only the default
    showed the difference (zk-3.6.2-running: the dry run would delete 0 segments, the real run deleted 1)."""
    logdir = _copy(KAFKA_REAL / fixture, tmp_path)
    args = [str(logdir), "--json", *retention]
    planned = CliRunner().invoke(cleanup, [*args, "--dry-run"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.output)
    done = CliRunner().invoke(cleanup, args)
    assert done.exit_code == 0, done.output
    planned_actions = [a for p in plan["partitions"] for a in p["actions"]] + plan["dirActions"]
    assert [_without_reason(a) for a in json.loads(done.output)["applied"]] == [
        _without_reason(a) for a in planned_actions
    ]
    again = CliRunner().invoke(cleanup, [*args, "--dry-run"])
    assert json.loads(again.output)["counts"].get("delete", 0) == 0, "nothing left that the plan meant to delete"


def test_cleanup_warns_about_topics_of_unknown_config_it_would_delete(tmp_path: Path) -> None:
    logdir = _copy(KAFKA_REAL / "zk-3.7.1-clean-multiseg" / "kafka-logs", tmp_path)
    result = CliRunner().invoke(cleanup, [str(logdir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "warning: nikhilDemo-0: the config of topic 'nikhilDemo' is unknown" in result.stderr
    named = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--topic-config", "nikhilDemo:cleanup.policy=compact"])
    assert "nikhilDemo" not in named.stderr and "would delete 0 segment(s)" in named.output


def _damage_input(logdir: Path, damage: str) -> None:
    """One bad input of the issue's list: a random-bytes .index, a garbage segment, a malformed checkpoint."""
    partition = logdir / "patient_admissions-0"
    if damage == "random-index":
        (partition / f"{FIRST}.index").write_bytes(os.urandom(4096))
    elif damage == "garbage-segment":
        for name in (f"{FIRST}.index", f"{FIRST}.timeindex"):
            (partition / name).write_bytes(b"")
        (partition / f"{FIRST}.log").write_bytes(b"\xfe" * 5000)
    else:
        (logdir / "log-start-offset-checkpoint").write_text("0\n1\nnot a valid line\n")


@pytest.mark.parametrize(
    "damage, where",
    [
        ("random-index", "00000000000000000000.index"),
        ("garbage-segment", "00000000000000000000.log: position 0"),
        ("malformed-checkpoint", "log-start-offset-checkpoint"),
    ],
)
def test_bug_cleanup_on_damaged_input_fails_planning_and_writes_nothing(tmp_path: Path, damage: str, where: str) -> None:
    """Was: a random-bytes .index made cleanup rewrite recovery points, delete producer snapshots, empty
    leader-epoch checkpoints and write the clean-shutdown marker, then die with an AssertionError traceback; a
    garbage segment was truncated from 5,000 bytes to 0 with only 'deleted 0 segment(s)' printed."""
    logdir = _copy(KRAFT_37, tmp_path)
    _damage_input(logdir, damage)
    before = _tree_hash(logdir)
    for args in ([], ["--dry-run"], ["--json"]):
        result = CliRunner().invoke(cleanup, [str(logdir), *args, "--retention-ms", "1"])
        assert result.exit_code == 1, result.output
        assert where in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert _tree_hash(logdir) == before
    if damage == "malformed-checkpoint":
        # --recover-first repairs what can be rebuilt from the segments (tests/test_recover_repairs.py).
        repaired = CliRunner().invoke(cleanup, [str(logdir), "--recover-first", "--dry-run"])
        assert repaired.exit_code == 0 and "rewrite log-start-offset-checkpoint" in repaired.output
        assert _tree_hash(logdir) == before
        return
    if damage != "random-index":
        # A broker trusts the segments of a dir marked clean: --recover-first repairs what its loader would (a
        # corrupt index), and still refuses what only `recover --full` repairs.
        refused = CliRunner().invoke(cleanup, [str(logdir), "--recover-first", "--dry-run"])
        assert refused.exit_code == 1 and "Traceback" not in refused.output
        assert _tree_hash(logdir) == before
        return
    # Asked for, the repair is part of the printed plan, and the real run executes exactly it.
    args = [str(logdir), "--retention-ms", "1", "--recover-first", "--json"]
    planned = CliRunner().invoke(cleanup, [*args, "--dry-run"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.output)
    repairs = [a["action"] for p in plan["previous"]["partitions"] for a in p["actions"]]
    assert "rebuild-indexes" in repairs
    assert _tree_hash(logdir) == before
    done = CliRunner().invoke(cleanup, args)
    assert done.exit_code == 0, done.output
    assert len(json.loads(done.output)["applied"]) == len(repairs) + sum(
        len(p["actions"]) for p in plan["partitions"]
    ) + len(plan["dirActions"]) + len(plan["previous"]["dirActions"])
    assert CliRunner().invoke(cleanup, [str(logdir), "--dry-run"]).exit_code == 0, "nothing left to recover"


@pytest.mark.parametrize("command", ["flush", "compact", "append"])
@pytest.mark.parametrize(
    "damage, where",
    [
        ("random-index", "00000000000000000000.index: position 0"),
        ("garbage-segment", "00000000000000000000.log: position 0"),
        ("malformed-checkpoint", "log-start-offset-checkpoint: line 3"),
    ],
)
def test_the_other_writing_commands_refuse_damaged_input_writing_nothing(
    tmp_path: Path, command: str, damage: str, where: str
) -> None:
    """What cleanup refuses (test above), flush, compact and append refuse too: planning fails with one line
    naming the file and position or line, exit 1, not one byte changed (no recovery as a side effect)."""
    logdir = _copy(KRAFT_37, tmp_path)
    _damage_input(logdir, damage)
    before = _tree_hash(logdir)
    args = {
        "flush": ["flush", str(logdir)],
        "compact": ["compact", str(logdir), "--topic-config", "patient_admissions:cleanup.policy=compact"],
        "append": ["append", str(logdir), "patient_admissions-0"],
    }[command]
    result = CliRunner().invoke(main, args, input='{"key": "k", "value": "v"}\n')
    assert result.exit_code == 1, result.output
    assert where in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert _tree_hash(logdir) == before


@pytest.mark.parametrize("content", ["empty", "unrelated"])
@pytest.mark.parametrize("command", ["cleanup", "flush", "recover", "compact"])
def test_bug_writing_commands_took_a_dir_without_kafka_data_for_an_empty_log_dir(
    tmp_path: Path, command: str, content: str
) -> None:
    """Was: cleanup/flush/recover on a wrong path (an empty dir, a dir of unrelated files) exited 0 and wrote
    ``.lock``, checkpoints and a clean-shutdown marker into it."""
    target = tmp_path / "not-kafka"
    target.mkdir()
    if content == "unrelated":
        (target / "notes.txt").write_text("hello\n")
        (target / "photos").mkdir()
    before = _tree_hash(target)
    result = CliRunner().invoke(main, [command, str(target)])
    assert result.exit_code == 1, result.output
    assert "holds no Kafka data" in result.output and len(result.output.strip().splitlines()) == 1
    assert _tree_hash(target) == before


# -- recover -------------------------------------------------------------------------------------------------------


def _damage(logdir: Path) -> int:
    """Tear the tail of one .log and delete indexes of two others; returns the bytes torn off."""
    torn = logdir / CONNECT / f"{FIRST}.log"
    size = torn.stat().st_size
    os.truncate(torn, size - 7)
    (logdir / KSQL / f"{FIRST}.index").unlink()
    (logdir / KSQL / f"{FIRST}.timeindex").unlink()
    (logdir / OFFSETS_37 / f"{FIRST}.index").unlink()
    return 7


def _plan_actions(plan: dict[str, Any], partition: str) -> list[dict[str, Any]]:
    return next(p["actions"] for p in plan["partitions"] if p["partition"] == partition)


def test_recover_dry_run_leaves_dir_untouched_and_reports(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    _damage(logdir)
    before = _tree_hash(logdir)
    result = CliRunner().invoke(recover, [str(logdir), "--dry-run", "--json", "--full"])
    assert result.exit_code == 0, result.output
    assert _tree_hash(logdir) == before
    (plan,) = _json_lines(result.output)
    assert plan["command"] == "recover" and plan["dryRun"] is True
    connect = _plan_actions(plan, CONNECT)
    cut = [a["sizeBefore"] - a["sizeAfter"] for a in connect if a["action"] == "truncate"]
    # The 7 bytes torn off leave a partial batch: recovery cuts it whole.
    assert len(cut) == 1 and cut[0] > 7
    assert any(a["action"] == "rebuild-indexes" for a in _plan_actions(plan, KSQL))
    assert plan["truncatedBytes"] == cut[0] and plan["recoveredSegments"] == 139


def test_recover_with_the_marker_handles_only_missing_indexes(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    assert CleanShutdownMarker.exists(logdir)
    _damage(logdir)
    result = CliRunner().invoke(recover, [str(logdir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "unclean" not in result.output and "clean-shutdown marker present" in result.output
    # A broker trusts the marker: the torn tail (a partial batch it does not read) is left to --full, with a warning.
    assert "  truncate " not in result.output
    assert f"{CONNECT}/{FIRST}.log" in result.output and "recover --full does" in result.output
    assert result.output.count("rebuild the indexes") == 2
    assert result.output.splitlines()[-1] == (
        "dry run: would have 2 segment(s) recovered, 0 bytes truncated, 0 file(s) deleted, in 2 partition(s); "
        "nothing was changed"
    )
    result = CliRunner().invoke(recover, [str(logdir)])
    assert result.exit_code == 0, result.output
    assert result.output.count("done: rebuild the indexes") == 2
    assert CleanShutdownMarker.exists(logdir)
    for relative in (f"{KSQL}/{FIRST}.index", f"{KSQL}/{FIRST}.timeindex", f"{OFFSETS_37}/{FIRST}.index"):
        assert (logdir / relative).read_bytes() == (KRAFT_37 / relative).read_bytes(), relative


def test_recover_full_restores_a_torn_dir_with_original_indexes(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    _damage(logdir)
    result = CliRunner().invoke(recover, [str(logdir), "--full"])
    assert result.exit_code == 0, result.output
    assert f"{CONNECT}:" in result.output and "done: truncate" in result.output
    report = verify_paths([logdir])
    assert report.ok, [str(p) for p in report.problems][:5]
    # --full changed data in a dir marked clean: the marker goes, every recovery point is at its log end.
    assert not CleanShutdownMarker.exists(logdir)
    manager = LogManager(broker_config([logdir], None))
    manager.startup()
    try:
        points = OffsetCheckpointFile(logdir / RECOVERY_POINT_CHECKPOINT_FILE).read()
        for log in manager.all_logs():
            assert points[log.topic_partition] == log.log_end_offset
            assert log.recovery.truncated_bytes == 0 and log.recovery.recovered_segments <= 1
    finally:
        manager.shutdown()
    # Only segments the fixture list does not name as differing (tests/test_fixtures_real.py KNOWN_DIFFERENCES).
    for relative in (f"{KSQL}/{FIRST}.index", f"{KSQL}/{FIRST}.timeindex", f"{OFFSETS_37}/{FIRST}.index"):
        assert (logdir / relative).read_bytes() == (KRAFT_37 / relative).read_bytes(), relative
    rerun = CliRunner().invoke(recover, [str(logdir), "--dry-run", "--json"])
    assert _json_lines(rerun.output)[-1]["truncatedBytes"] == 0


# -- locked dir ----------------------------------------------------------------------------------------------------


@pytest.fixture
def locked_dir(tmp_path: Path) -> Iterator[Path]:
    """A log dir copy whose ``.lock`` a child process holds (fcntl.lockf, as a broker does) until teardown."""
    logdir = _copy(KRAFT_37, tmp_path)
    with lock_held_elsewhere(logdir / ".lock"):
        yield logdir


@pytest.mark.parametrize(
    "command, args",
    [
        (flush, []),
        (cleanup, []),
        (recover, []),
        (flush, ["--partition", CONNECT, "--json"]),
        (cleanup, ["--json"]),
        (serve, []),
    ],
    ids=["flush", "cleanup", "recover", "flush-partition", "cleanup-json", "serve"],
)
def test_locked_dir_exits_3_and_changes_nothing(
    locked_dir: Path, command: click.Command, args: list[str]
) -> None:
    before = _tree_hash(locked_dir)
    result = CliRunner().invoke(command, [str(locked_dir), *args])
    assert result.exit_code == 3, result.output
    assert "lock" in result.output.lower() and "Traceback" not in result.output
    assert _tree_hash(locked_dir) == before


def test_locked_dir_still_allows_dry_runs(locked_dir: Path) -> None:
    assert CliRunner().invoke(cleanup, [str(locked_dir), "--dry-run"]).exit_code == 0
    assert CliRunner().invoke(recover, [str(locked_dir), "--dry-run"]).exit_code == 0


# -- a read-only file system ---------------------------------------------------------------------------------------


def test_every_plan_is_made_on_a_read_only_file_system(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning reads only: every writing command's dry run works on a log dir whose file system is mounted
    read-only (root ignores file modes, a read-only mount it cannot), and leaves no temporary file behind."""
    logdir = _copy(KRAFT_37, small_fs)
    # No marker: the broker would recover (epochs truncated at the log ends), so the recovery plans are not empty.
    CleanShutdownMarker.remove(logdir)
    remounted = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True, text=True)
    if remounted.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only here: {remounted.stderr.strip()}")
    with pytest.raises(OSError):
        (logdir / ".lock").touch()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = _tree_hash(logdir)
    schemas = "_schemas:cleanup.policy=delete"  # the metadata says compact: a retention topic to plan deletions in
    for args in (
        ["cleanup", "--dry-run", "--json", "--retention-ms", "1", "--topic-config", schemas],
        ["cleanup", "--dry-run", "--json", "--recover-first", "--retention-ms", "1", "--topic-config", schemas],
        ["recover", "--dry-run", "--json"],
        ["recover", "--dry-run", "--json", "--full"],
        ["compact", "--dry-run", "--json"],
        ["flush", "--dry-run", "--json"],
        ["configs", "--json"],
    ):
        result = CliRunner().invoke(main, [args[0], str(logdir), *args[1:]])
        assert result.exit_code == 0, (args, result.output)
        plan = json.loads(result.output)
        if args[0] in ("cleanup", "recover"):
            assert plan["dryRun"] is True and plan["counts"], (args, plan)
    partition = logdir / "_schemas-0"
    checkpoint = logdir / RECOVERY_POINT_CHECKPOINT_FILE
    for args in (
        ["reindex", "--dry-run", str(partition)],
        ["reindex", "--dry-run", "--key-index", str(partition)],
        ["checkpoints", "set", "--dry-run", str(checkpoint), "_schemas-0", "1"],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and "nothing was changed" in result.output, (args, result.output)
    assert _tree_hash(logdir) == before
    assert list(scratch.iterdir()) == [], "planning copies nothing"


# -- serve ---------------------------------------------------------------------------------------------------------


def _serve_command() -> list[str]:
    """The installed entry point once ``serve`` is registered in it, else the command object itself."""
    installed = shutil.which("logmgr", path=str(Path(sys.executable).parent))
    if installed is not None:
        probe = subprocess.run([installed, "serve", "--help"], capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return [installed, "serve"]
    return [sys.executable, "-c", "from cli.serve_cmd import serve; serve()"]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        body: bytes = response.read()
        return body.decode()


def test_serve_runs_jobs_serves_status_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    config = tmp_path / "server.properties"
    config.write_text(
        "log.initial.task.delay.ms=0\n"
        "log.retention.check.interval.ms=100\n"
        "log.flush.scheduler.interval.ms=100\n"
        "log.flush.offset.checkpoint.interval.ms=100\n"
        "log.flush.start.offset.checkpoint.interval.ms=100\n"
        "log.segment.delete.delay.ms=100\n"
        # The disk tiers off: what the jobs delete must not depend on how full the host's disk is.
        "logmgr.disk.max.used.ratio=1.0\n"
        "logmgr.disk.usage.clean.ratio=1.0\n"
        "logmgr.disk.usage.warn.ratio=1.0\n"
    )
    process = subprocess.Popen(
        # The metadata says docker-connect-configs is compacted: the flag makes it a retention topic to delete from.
        [
            *_serve_command(),
            str(logdir),
            "--config",
            str(config),
            "--topic-config",
            f"{CONNECT.rsplit('-', 1)[0]}:cleanup.policy=delete",
            "--status-port",
            "0",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    captured: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        port = None
        while port is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            captured.append(line)
            match = re.search(r"http://127\.0\.0\.1:(\d+)/status", line)
            port = int(match.group(1)) if match else None
        base = f"http://127.0.0.1:{port}"
        while True:
            status = json.loads(_get(f"{base}/status"))
            assert "lastCleanup" in status, "the retention job's last plan is part of the status"
            if status["deletedBytes"] > 0 and all(
                job["runs"] >= 2 for name, job in status["jobs"].items() if name.startswith("kafka-")
            ):
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
        assert status["dirs"][0]["partitions"] > 0
        metrics = _get(f"{base}/metrics")
        for family in (
            "logmgr_segments",
            "logmgr_bytes",
            "logmgr_job_runs_total",
            "logmgr_pending_deletion_bytes",
        ):
            assert f"# TYPE {family} " in metrics
        assert 'logmgr_job_runs_total{job="kafka_log_retention"}' in metrics
        # Kafka's LogCleaner gauges (issue 12).
        for gauge in ("max_dirty_percent", "cleaner_recopy_percent", "max_clean_time_secs", "time_since_last_run_ms"):
            assert f"# TYPE logmgr_cleaner_{gauge} gauge" in metrics
        deleted = re.search(r"^logmgr_deleted_bytes_total (\d+)$", metrics, re.MULTILINE)
        assert deleted and int(deleted.group(1)) > 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    while not lines.empty():
        captured.append(lines.get())
    log = "".join(captured)
    assert "job kafka-log-retention:" in log and "stopped cleanly" in log
    assert CleanShutdownMarker.exists(logdir)
    assert verify_paths([logdir]).ok
    manager = LogManager(broker_config([logdir], None))
    manager.startup()
    try:
        assert sum(log.recovery.recovered_segments for log in manager.all_logs()) == 0
    finally:
        manager.shutdown()
