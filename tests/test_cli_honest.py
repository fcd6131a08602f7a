"""An honest ``logmgr``: exit codes, one-line messages and no surprises on bad input, a closed stdout or Ctrl-C.

Each bad input is checked for its exit code, its one-line message and a directory tree left unchanged. What is
about the process itself (a pipe closed by its reader, SIGINT in the middle of a command, ``python -m``) runs a
real ``logmgr`` process: ``sys.executable -m cli.main`` with this checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from checkpoints import LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE
from cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, format_time
from cli.main import main
from segments.log_segment import LogSegment
from segments.naming import TopicPartition
from segments.records import SimpleRecord, build_batch
from tests.conftest import KAFKA_REAL, child_env, require_fixtures
from tests.test_cli_inspect import _real_copy, _transactional_partition, _tree_hash

T0 = 1_700_000_000_000
WATCHDOG_S = 120


# -- helpers ---------------------------------------------------------------------------------------------------


def _segment(partition: Path, base: int, batches: int, records_per_batch: int = 3, value_size: int = 50) -> int:
    """Append ``batches`` batches at ``base`` as a new segment; returns the next offset."""
    segment = LogSegment.open(partition, base, create=True, index_interval_bytes=4096)
    offset = base
    try:
        for _ in range(batches):
            records = [SimpleRecord(b"v" * value_size, b"k", T0 + offset + j) for j in range(records_per_batch)]
            segment.append(build_batch(records, base_offset=offset))
            offset += records_per_batch
    finally:
        segment.close()
    return offset


def _log_dir(tmp_path: Path, *segments: tuple[int, int]) -> Path:
    """A log dir with partition ``t-0`` made of ``(base offset, batches)`` segments of 3 records each."""
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    for base, batches in segments:
        _segment(partition, base, batches)
    return partition.parent


def _big_log_dir(tmp_path: Path) -> Path:
    """A partition whose ``read`` prints megabytes: far more than a pipe holds, so a process writing it into a
    pipe nobody reads is certainly still running (blocked on the pipe)."""
    partition = tmp_path / "big" / "t-0"
    partition.mkdir(parents=True)
    _segment(partition, 0, batches=400, records_per_batch=50, value_size=200)
    return partition.parent


def _invoke(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, args, input=stdin)


def _one_line_error(result: Result, code: int) -> str:
    """Assert ``result`` exited with ``code`` and a single line on stderr, no traceback; return that line."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


def _logmgr() -> list[str]:
    return [sys.executable, "-m", "cli.main"]


@pytest.fixture
def watchdog() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes registered here are killed if a test hangs, and always reaped."""
    processes: list[subprocess.Popen[bytes]] = []

    def kill_all() -> None:
        for process in processes:
            process.kill()

    timer = threading.Timer(WATCHDOG_S, kill_all)
    timer.start()
    yield processes
    timer.cancel()
    kill_all()
    for process in processes:
        process.wait()


# -- verify ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["text-file", "empty-dir", "dir-of-unrelated-files", "only-a-lock"])
def test_verify_of_a_path_holding_no_kafka_data_is_not_ok(tmp_path: Path, kind: str) -> None:
    # The bug: "OK: 0 files" and exit 0 for a text file or an empty dir.
    target = tmp_path / "target"
    if kind == "text-file":
        target.write_text("not kafka\n")
    else:
        target.mkdir()
        if kind == "dir-of-unrelated-files":
            (target / "notes.txt").write_text("x")
            (target / "sub").mkdir()
            (target / "sub" / "data.csv").write_text("a,b\n")
        elif kind == "only-a-lock":
            (target / ".lock").touch()
    before = _tree_hash(tmp_path)
    line = _one_line_error(_invoke(["verify", str(target)]), 1)
    assert line.startswith(f"Error: {target}: ")
    assert ("not a Kafka data file" if kind == "text-file" else "holds no Kafka data") in line
    as_json = _invoke(["verify", "--json", str(target)])
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and [p["file"] for p in report["problems"]] == [str(target)]
    assert _tree_hash(tmp_path) == before


def test_verify_names_the_empty_path_among_good_ones(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 5))
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _invoke(["verify", str(logs), str(empty)])
    assert result.exit_code == 1
    assert f"{empty}: holds no Kafka data" in result.stdout and "1 problem(s): 3 files" in result.stdout


def test_verify_warns_of_orphaned_indexes_as_kafka_deletes_them(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 20), (60, 20))
    partition = logs / "t-0"
    (partition / "00000000000000000000.log").unlink()
    txn = partition / "00000000000000000000.txnindex"
    txn.write_bytes(b"")
    orphans = sorted(str(partition / f"00000000000000000000{s}") for s in (".index", ".timeindex", ".txnindex"))
    result = _invoke(["verify", str(logs)])
    assert result.exit_code == 0, result.stdout
    warned = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert sorted(line.split(": ")[1] for line in warned) == orphans
    assert all("no 00000000000000000000.log beside it (Kafka deletes it" in line for line in warned)
    assert result.stdout.splitlines()[-1].startswith("OK: ") and "3 warning(s)" in result.stdout
    report = json.loads(_invoke(["verify", "--json", str(logs)]).stdout)
    assert report["ok"] is True and sorted(w["file"] for w in report["warnings"]) == orphans
    # Only orphans (what `reindex --out` writes): still checked on their own, and each one warned about.
    (partition / "00000000000000000060.log").unlink()
    alone = _invoke(["verify", str(partition / "00000000000000000060.index")])
    assert alone.exit_code == 0 and alone.stdout.startswith("warning: ") and "1 warning(s)" in alone.stdout
    index = partition / "00000000000000000060.index"
    index.write_bytes(index.read_bytes() + b"\x00\x01")
    torn = _invoke(["verify", str(index)])
    assert torn.exit_code == 1 and torn.stdout.startswith(f"{index}: ")


def test_verify_real_fixture_with_absent_logs_is_clean_with_warnings() -> None:
    # Large .log files of KRaft's __cluster_metadata were not stored with the fixture: their indexes are orphans.
    root = require_fixtures(KAFKA_REAL / "kraft-3.7-clean-transactions")
    result = _invoke(["verify", "--json", str(root)])
    assert result.exit_code == 0, result.stdout[:2000]
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert {Path(w["file"]).parent.name for w in report["warnings"]} == {"__cluster_metadata-0"}


# -- info ------------------------------------------------------------------------------------------------------


def test_info_prints_iso_times_in_text_and_epoch_ms_in_json(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 10))
    text = _invoke(["info", str(logs)])
    assert text.exit_code == 0, text.stderr
    row = text.stdout.splitlines()[1].split()
    assert row[0] == "t-0"
    assert row[8:10] == [format_time(T0), format_time(T0 + 29)] == ["2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20.029Z"]
    entry = json.loads(_invoke(["info", "--json", str(logs)]).stdout)["partitions"][0]
    assert (entry["oldestTimestamp"], entry["newestTimestamp"]) == (T0, T0 + 29)


def test_format_time_keeps_the_millisecond_and_survives_garbage() -> None:
    assert format_time(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    assert format_time(2**62) == str(2**62)


def test_info_flags_a_recovery_point_above_the_log_end_offset(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 10))
    OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).write({TopicPartition("t", 0): 45})
    before = _tree_hash(tmp_path)
    text = _invoke(["info", str(logs)])
    assert text.exit_code == 1
    problem = text.stdout.splitlines()[-1]
    assert problem.startswith("t-0: recovery point 45 (from recovery-point-offset-checkpoint) is above the log end offset 30")
    as_json = _invoke(["info", "--json", str(logs)])
    assert as_json.exit_code == 1
    [found] = json.loads(as_json.stdout)["problems"]
    assert (found["topic"], found["partition"]) == ("t", 0) and "above the log end offset 30" in found["error"]
    assert _tree_hash(tmp_path) == before
    OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).write({TopicPartition("t", 0): 30})
    assert _invoke(["info", str(logs)]).exit_code == 0


# -- read ------------------------------------------------------------------------------------------------------


def test_read_at_the_log_end_says_so_on_stderr(tmp_path: Path) -> None:
    # The bug: a read past the end printed nothing at all.
    logs = _log_dir(tmp_path, (0, 10))
    before = _tree_hash(tmp_path)
    for args in (["--offset", "30"], ["--from-offset", "30"], ["--offset", "latest"]):
        result = _invoke(["read", str(logs), "t-0", *args])
        assert result.exit_code == 0 and result.stdout == ""
        assert result.stderr == "no records at or after offset 30; log end offset is 30\n"
    late = _invoke(["read", str(logs), "t-0", "--from-time", str(T0 + 1000)])
    assert late.exit_code == 0 and late.stdout == ""
    assert late.stderr == f"no records at or after offset 0 with a timestamp at or after {T0 + 1000}; log end offset is 30\n"
    assert _tree_hash(tmp_path) == before


def test_read_beyond_the_log_end_is_offset_out_of_range(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 10))
    OffsetCheckpointFile(logs / LOG_START_OFFSET_CHECKPOINT_FILE).write({TopicPartition("t", 0): 6})
    before = _tree_hash(tmp_path)
    line = _one_line_error(_invoke(["read", str(logs), "t-0", "--offset", "31"]), 1)
    assert "offset 31 is out of range (OffsetOutOfRange" in line
    assert "log start offset 6, log end offset 30" in line
    assert _tree_hash(tmp_path) == before


def test_read_takes_console_consumer_option_names(tmp_path: Path) -> None:
    logs = _transactional_partition(tmp_path)

    def values(*args: str) -> list[object]:
        result = _invoke(["read", str(logs), "tx-0", *args])
        assert result.exit_code == 0, result.stderr
        return [json.loads(line)["value"] for line in result.stdout.splitlines()]

    assert values("--isolation-level", "read_committed") == values("--committed") == ["plain1", "committed", "plain2"]
    assert values("--isolation-level", "read_uncommitted") == values() == [
        "aborted", "plain1", "committed", "plain2", "open", "plain3"
    ]
    assert values("--offset", "5", "--max-messages", "2") == values("--from-offset", "5", "--max", "2")
    assert values("--offset", "5", "--max-messages", "2") == ["plain2", "open"]
    assert values("--offset", "earliest", "--max-messages", "1") == ["aborted"]
    # Past the last stable offset (the open transaction at 6) read_committed has nothing to give.
    stuck = _invoke(["read", str(logs), "tx-0", "--offset", "7", "--isolation-level", "read_committed"])
    assert stuck.exit_code == 0 and stuck.stdout == ""
    assert "last stable offset 6" in stuck.stderr and "log end offset is 8" in stuck.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--offset", "-1"],
        ["--offset", "first"],
        ["--committed", "--isolation-level", "read_uncommitted"],
        ["--isolation-level", "snapshot"],
        ["--offset", "latest", "--from-time", "0"],
    ],
)
def test_read_refuses_bad_options_as_usage_errors(tmp_path: Path, args: list[str]) -> None:
    logs = _log_dir(tmp_path, (0, 2))
    result = _invoke(["read", str(logs), "t-0", *args])
    assert result.exit_code == 2 and result.stdout == "" and "Traceback" not in result.stderr


# -- missing dirs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "{missing}"],
        ["info", "{missing}"],
        ["read", "{missing}", "t-0"],
        ["append", "{missing}", "t-0"],
        ["checkpoints", "show", "{missing}"],
        ["checkpoints", "set", "{missing}/recovery-point-offset-checkpoint", "t-0", "1"],
        ["flush", "{missing}"],
        ["cleanup", "{missing}"],
        ["recover", "{missing}"],
        ["reindex", "{missing}"],
        ["export", "{missing}", "--to", "json", "--out", "{out}"],
    ],
    ids=lambda command: "-".join(command[:2]) if command[0] == "checkpoints" else command[0],
)
def test_offline_commands_refuse_a_missing_dir_without_creating_it(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nope" / "logs"
    args = [part.format(missing=missing, out=tmp_path / "out") for part in command]
    before = _tree_hash(tmp_path)
    result = _invoke(args, stdin='{"value": "v"}\n')
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
    assert _tree_hash(tmp_path) == before


def test_append_without_create_refuses_before_taking_the_lock(tmp_path: Path) -> None:
    # The bug: the refusal came after the lock, leaving a new .lock file in the log dir.
    logs = _log_dir(tmp_path, (0, 2))
    before = _tree_hash(tmp_path)
    line = _one_line_error(_invoke(["append", str(logs), "orders-0"], stdin='{"value": "v"}\n'), 1)
    assert line == f"Error: {logs / 'orders-0'}: no such partition dir (use --create to create it)"
    assert _tree_hash(tmp_path) == before


def test_serve_does_not_create_a_missing_dir_without_create(tmp_path: Path) -> None:
    # The bug: `serve /nonexistent` created the dir and served it.
    missing = tmp_path / "nonexistent"
    before = _tree_hash(tmp_path)
    line = _one_line_error(_invoke(["serve", str(missing)]), 1)
    assert line == f"Error: no such log dir: {missing} (use --create to create it)"
    assert _tree_hash(tmp_path) == before and not missing.exists()


# -- export ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("filters", [[], ["--topics", "nope"], ["--partitions", "7"]], ids=["none", "topics", "partitions"])
def test_export_of_no_partitions_is_an_error_and_writes_nothing(tmp_path: Path, filters: list[str]) -> None:
    # The bug: exporting a dir without partitions succeeded with 0 rows and wrote a manifest.
    pytest.importorskip("pyspark.sql", reason="pyspark not installed (pip install -e '.[spark]')")
    logs = (tmp_path / "empty") if not filters else _log_dir(tmp_path, (0, 2))
    logs.mkdir(exist_ok=True)
    out = tmp_path / "out"
    before = _tree_hash(tmp_path)
    line = _one_line_error(_invoke(["export", str(logs), "--to", "json", "--out", str(out), *filters]), 1)
    expected = "no Kafka partition in" if not filters else "matches the topic and partition filters"
    assert line.startswith("Error: paths: ") and expected in line
    assert _tree_hash(tmp_path) == before and not out.exists()


# -- the process: python -m, closed stdout, SIGINT ---------------------------------------------------------------


def test_python_m_cli_main_runs_logmgr(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, (0, 2))
    done = subprocess.run([*_logmgr(), "verify", "--json", str(logs)], env=child_env(), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 6


def test_read_into_a_pipe_closed_early_ends_quietly(tmp_path: Path, watchdog: list[subprocess.Popen[bytes]]) -> None:
    # The bug: `logmgr read ... | head -1` ended with "Error: [Errno 32] Broken pipe" and exit 1.
    logs = _big_log_dir(tmp_path)
    process = subprocess.Popen(
        [*_logmgr(), "read", str(logs), "t-0"], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watchdog.append(process)
    assert process.stdout is not None and process.stderr is not None
    assert json.loads(process.stdout.readline())["offset"] == 0
    process.stdout.close()  # what `head -1` does after its line
    stderr = process.stderr.read()
    assert process.wait() in (0, EXIT_BROKEN_PIPE)
    assert stderr == b""


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["--version"],
        ["read", "--help"],
        ["verify", "{logs}"],
        ["info", "{logs}"],
        ["info", "--json", "{logs}"],
        ["read", "{logs}", "t-0"],
        ["checkpoints", "show", "{logs}"],
        ["reindex", "{logs}/t-0", "--out", "{out}"],
    ],
    ids=lambda command: "-".join(command).replace("{logs}", "").replace("{out}", "").strip("-"),
)
def test_any_command_into_a_closed_stdout_exits_quietly(tmp_path: Path, command: list[str]) -> None:
    logs = _log_dir(tmp_path, (0, 4))
    OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).write({TopicPartition("t", 0): 12})
    args = [part.format(logs=logs, out=tmp_path / "out") for part in command]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        done = subprocess.run(
            [*_logmgr(), *args], env=child_env(), stdout=write_end, stderr=subprocess.PIPE, check=False, timeout=WATCHDOG_S
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, b"")


def test_sigint_in_the_middle_of_a_read_exits_130_with_one_line(
    tmp_path: Path, watchdog: list[subprocess.Popen[bytes]]
) -> None:
    # The bug: Ctrl-C exited 1 ("Aborted!"), the code of "problems found".
    logs = _big_log_dir(tmp_path)
    before = _tree_hash(tmp_path)
    process = subprocess.Popen(
        [*_logmgr(), "read", str(logs), "t-0"],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As at a terminal: a suite started in the background by a non-interactive shell passes SIGINT ignored to
        # its children, and Python then installs no KeyboardInterrupt handler at all.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    watchdog.append(process)
    assert process.stdout is not None
    # Its first line is out, and megabytes more are to come through a pipe read no further: still running.
    assert json.loads(process.stdout.readline())["offset"] == 0
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=WATCHDOG_S)
    assert process.returncode == EXIT_INTERRUPTED
    assert stderr == b"interrupted\n"
    assert _tree_hash(tmp_path) == before


def test_serve_creates_its_dir_only_with_create_and_exits_130_on_sigint(
    tmp_path: Path, watchdog: list[subprocess.Popen[bytes]]
) -> None:
    logs = tmp_path / "new-logs"
    process = subprocess.Popen(
        [*_logmgr(), "serve", str(logs), "--create"], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watchdog.append(process)
    assert process.stderr is not None
    lines: list[bytes] = []
    while not any(b"serving 0 partition(s) in 1 dir(s)" in line for line in lines):
        line = process.stderr.readline()
        assert line, b"".join(lines)
        lines.append(line)
    process.send_signal(signal.SIGINT)
    _stdout, rest = process.communicate(timeout=WATCHDOG_S)
    tail = rest.decode().splitlines()
    assert process.returncode == EXIT_INTERRUPTED, rest
    assert tail[-1] == "interrupted" and "stopped cleanly" in tail[-2]
    assert (logs / CLEAN_SHUTDOWN_FILE).exists()


def test_serve_names_each_topic_of_unknown_config_its_retention_job_would_delete_from(
    tmp_path: Path, watchdog: list[subprocess.Popen[bytes]]
) -> None:
    """A ZooKeeper-era dir keeps no topic configs: serve warns, as cleanup's plan does, about every topic whose
    segments the retention job would delete under the defaults (a compacted _schemas among them), before any job
    runs (log.initial.task.delay.ms is 30 s by default)."""
    logs = _real_copy(tmp_path, "zk-3.7.1-clean-multiseg")
    process = subprocess.Popen(
        [*_logmgr(), "serve", str(logs), "--topic-config", "demo:cleanup.policy=compact", "--topic-config",
         "my:retention.ms=-1"],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    watchdog.append(process)
    assert process.stderr is not None
    lines: list[str] = []
    while not any("serving" in line for line in lines):
        line = process.stderr.readline().decode()
        assert line, "".join(lines)
        lines.append(line)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=WATCHDOG_S)
    warned = "".join(line for line in lines if " WARNING " in line)
    assert "no __cluster_metadata-0 in the log dirs" in warned
    assert "the config of topic 'nikhilDemo' is unknown" in warned and "retention.ms=604800000 (Kafka default)" in warned
    # Named by a flag, internal (compacted), or keeping everything: nothing to warn about.
    for quiet in ("'demo'", "'my'", "__consumer_offsets"):
        assert quiet not in warned, quiet
