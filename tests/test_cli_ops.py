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
from cli.recover_cmd import recover
from cli.serve_cmd import serve
from logmgr.log_manager import LogManager
from logmgr.verify import verify_paths
from segments.naming import TopicPartition
from tests.conftest import KAFKA_REAL, require_fixtures

REPO = Path(__file__).resolve().parent.parent
KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"
KSQL = "_confluent-ksql-default__command_topic-0"
CONNECT = "docker-connect-configs-0"
OFFSETS_37 = "__consumer_offsets-37"
FIRST = "00000000000000000000"
TIMEOUT_S = 60


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


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


# -- flush ---------------------------------------------------------------------------------------------------------


def test_flush_selected_partition_writes_recovery_point_and_marker(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    (logdir / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n1\ndocker-connect-configs 0 0\n")
    result = CliRunner().invoke(flush, [str(logdir), "--partition", CONNECT, "--json"])
    assert result.exit_code == 0, result.output
    (line,) = _json_lines(result.output)
    assert line == {
        "partition": CONNECT,
        "recoveryPointBefore": 0,
        "recoveryPointAfter": 10,
        "logEndOffset": 10,
    }
    points = OffsetCheckpointFile(logdir / RECOVERY_POINT_CHECKPOINT_FILE).read()
    assert points[TopicPartition.parse(CONNECT)] == 10
    assert CleanShutdownMarker.exists(logdir)
    assert verify_paths([logdir]).ok


def test_flush_all_text_and_unknown_partition(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    result = CliRunner().invoke(flush, [str(logdir)])
    assert result.exit_code == 0, result.output
    assert f"{KSQL}: recovery point 2 -> 2 (log end offset 2)" in result.output, result.output
    unknown = CliRunner().invoke(flush, [str(logdir), "--partition", "nope-7"])
    assert unknown.exit_code == 1
    assert "no such partition: nope-7" in unknown.output
    assert CleanShutdownMarker.exists(logdir), "a refused flush still closes the dir cleanly"
    usage = CliRunner().invoke(flush, [str(logdir), "--partition", "no-dash"])
    assert usage.exit_code == 2


# -- cleanup -------------------------------------------------------------------------------------------------------


def test_cleanup_dry_run_changes_no_byte_and_explains(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    before = _tree_hash(logdir)
    result = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert _tree_hash(logdir) == before
    plan = json.loads(result.output)
    assert plan["dryRun"] is True
    assert set(plan["partitions"]) == {KSQL, CONNECT, "_schemas-0"}
    connect = plan["partitions"][CONNECT]
    assert connect["rollFirst"] is True and connect["newLogStartOffset"] == 10
    assert [(d["baseOffset"], d["size"], d["reason"]) for d in connect["deletions"]] == [
        (0, 1950, "retention.ms")
    ]
    assert plan["bytesFreed"] == sum(d["size"] for p in plan["partitions"].values() for d in p["deletions"])
    assert not any(name.startswith("__consumer_offsets") for name in plan["partitions"]), (
        "internal topics compact"
    )

    unlimited = CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--retention-ms", "-1"])
    assert unlimited.exit_code == 0, unlimited.output
    assert "would delete 0 segment(s)" in unlimited.output
    by_size = CliRunner().invoke(
        cleanup, [str(logdir), "--dry-run", "--retention-ms", "-1", "--retention-bytes", "0"]
    )
    assert by_size.exit_code == 0, by_size.output
    assert "retention.bytes: log size 1950 B exceeds retention.bytes 0 B" in by_size.output
    assert _tree_hash(logdir) == before


def test_cleanup_with_config_file_then_verify_clean(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    config = tmp_path / "server.properties"
    config.write_text("log.dirs=/elsewhere\nlog.retention.hours=1\n")
    planned = json.loads(
        CliRunner().invoke(cleanup, [str(logdir), "--dry-run", "--json", "--config", str(config)]).output
    )
    result = CliRunner().invoke(cleanup, [str(logdir), "--json", "--config", str(config)])
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)
    assert done["dryRun"] is False
    assert done["bytesFreed"] == done["bytesDeleted"] == planned["bytesFreed"] > 0
    assert {tp: [d["baseOffset"] for d in p["deletions"]] for tp, p in done["partitions"].items()} == {
        tp: [d["baseOffset"] for d in p["deletions"]] for tp, p in planned["partitions"].items()
    }
    assert not list(logdir.rglob("*.deleted"))
    assert not (logdir / CONNECT / f"{FIRST}.log").exists()
    report = verify_paths([logdir])
    assert report.ok, [str(p) for p in report.problems][:5]
    assert CleanShutdownMarker.exists(logdir)
    again = CliRunner().invoke(cleanup, [str(logdir), "--dry-run"])
    assert "would delete 0 segment(s)" in again.output


def test_cleanup_bad_config_value_is_one_line_exit_1(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    config = tmp_path / "server.properties"
    config.write_text("log.retention.bytes=lots\n")
    result = CliRunner().invoke(cleanup, [str(logdir), "--config", str(config)])
    assert result.exit_code == 1
    assert "log.retention.bytes" in result.output and "Traceback" not in result.output


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
    plan, summary = _json_lines(result.output)
    assert plan["command"] == "recover" and summary["summary"]["dryRun"] is True
    connect = _plan_actions(plan, CONNECT)
    cut = [a["sizeBefore"] - a["sizeAfter"] for a in connect if a["action"] == "truncate"]
    # The 7 bytes torn off leave a partial batch: recovery cuts it whole.
    assert len(cut) == 1 and cut[0] > 7
    assert any(a["action"] == "rebuild-indexes" for a in _plan_actions(plan, KSQL))
    assert summary["summary"]["truncatedBytes"] == cut[0]


def test_recover_with_the_marker_handles_only_missing_indexes(tmp_path: Path) -> None:
    logdir = _copy(KRAFT_37, tmp_path)
    assert CleanShutdownMarker.exists(logdir)
    _damage(logdir)
    result = CliRunner().invoke(recover, [str(logdir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "unclean" not in result.output and "clean-shutdown marker present" in result.output
    # A broker trusts the marker: the torn tail (a partial batch it does not read) is left to --full.
    assert "  truncate " not in result.output and CONNECT not in result.output
    assert result.output.count("rebuild the indexes") == 2
    assert result.output.splitlines()[-1] == (
        "would have: 2 segment(s) recovered, 0 bytes truncated, 0 file(s) deleted, in 2 partition(s)"
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
    assert _json_lines(rerun.output)[-1]["summary"]["truncatedBytes"] == 0


# -- locked dir ----------------------------------------------------------------------------------------------------


@pytest.fixture
def locked_dir(tmp_path: Path) -> Iterator[Path]:
    """A log dir copy whose ``.lock`` a child process holds (fcntl.lockf, as a broker does) until teardown."""
    logdir = _copy(KRAFT_37, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\n"
            "f = open(sys.argv[1], 'a')\n"
            "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
            str(logdir / ".lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    yield logdir
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=TIMEOUT_S)


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
    with urllib.request.urlopen(url, timeout=10) as response:
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
    )
    process = subprocess.Popen(
        [*_serve_command(), str(logdir), "--config", str(config), "--status-port", "0"],
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
