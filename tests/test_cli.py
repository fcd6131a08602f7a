"""The ``logmgr`` command line: verify and reindex through click, plus the installed entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from segments.log_segment import LogSegment
from segments.records import SimpleRecord, build_batch
from tests.conftest import CLIENTS_GENERATED, FAILURE_DEADLINE_S, KAFKA_REAL, require_fixtures

T0 = 1_700_000_000_000


def _partition(tmp_path: Path, batches: int = 20) -> Path:
    partition = tmp_path / "orders-0"
    partition.mkdir()
    segment = LogSegment.open(partition, 0, create=True, index_interval_bytes=200)
    for i in range(batches):
        segment.append(build_batch([SimpleRecord(b"x" * 50, b"k", T0 + i)] * 3, base_offset=i * 3))
    segment.close()
    return partition


def test_verify_clean_json(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    result = CliRunner().invoke(main, ["verify", "--json", str(partition)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] is True
    assert (report["segments"], report["batches"], report["records"], report["problems"]) == (1, 20, 60, [])
    assert report["files"] == 3


def test_verify_reports_problem_with_file_and_position(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    log = partition / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-5] ^= 0xFF
    log.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["verify", "--json", str(partition)])
    assert result.exit_code == 1
    problems = json.loads(result.output)["problems"]
    assert problems and problems[0]["file"] == str(log) and isinstance(problems[0]["position"], int)
    text = CliRunner().invoke(main, ["verify", str(log)])
    assert text.exit_code == 1
    assert f"{log}: position" in text.output and "crc" in text.output


def test_verify_usage_errors_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["verify"]).exit_code == 2
    assert runner.invoke(main, ["verify", str(tmp_path / "missing")]).exit_code == 2
    assert runner.invoke(main, ["verify", "--bogus", str(tmp_path)]).exit_code == 2


def test_reindex_in_place_and_out(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    index = partition / "00000000000000000000.index"
    original = index.read_bytes()
    index.unlink()
    (partition / "00000000000000000000.timeindex").write_bytes(b"garbage")
    runner = CliRunner()
    result = runner.invoke(main, ["reindex", "--index-interval-bytes", "200", str(partition)])
    assert result.exit_code == 0, result.output
    assert index.read_bytes() == original
    out = tmp_path / "out"
    result = runner.invoke(main, ["reindex", "--json", "--index-interval-bytes", "200", "--out", str(out), str(partition)])
    assert result.exit_code == 0
    line = json.loads(result.output.splitlines()[0])
    assert line["batches"] == 20 and line["invalidTailBytes"] == 0
    assert (out / "00000000000000000000.index").read_bytes() == original
    assert runner.invoke(main, ["verify", str(partition)]).exit_code == 0


def test_reindex_torn_log_exits_1_without_touching_log(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    log = partition / "00000000000000000000.log"
    torn = log.read_bytes()[:-10]
    log.write_bytes(torn)
    result = CliRunner().invoke(main, ["reindex", str(partition)])
    assert result.exit_code == 1
    assert log.read_bytes() == torn


def test_errors_are_one_line_not_tracebacks(tmp_path: Path) -> None:
    bad = tmp_path / "notalog.txt"
    bad.write_text("x")
    result = CliRunner().invoke(main, ["reindex", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_verify_real_and_generated_fixtures_via_cli() -> None:
    require_fixtures(KAFKA_REAL)
    result = CliRunner().invoke(main, ["verify", "--json", str(KAFKA_REAL), str(CLIENTS_GENERATED)])
    assert result.exit_code == 0, result.output[:2000]
    assert json.loads(result.output)["ok"] is True


def test_installed_entry_point(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    exe = shutil.which("logmgr", path=str(Path(sys.executable).parent))
    assert exe is not None, "the logmgr console script is installed into the venv"
    done = subprocess.run([exe, "verify", "--json", str(partition)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    done = subprocess.run([exe, "verify", str(tmp_path / "nope")], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_reindex_in_place_refuses_a_locked_dir_with_exit_3(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); "
            "sys.stdin.read()",
            str(tmp_path / ".lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = {p.name: p.read_bytes() for p in partition.iterdir()}
        result = CliRunner().invoke(main, ["reindex", str(partition)])
        assert result.exit_code == 3, result.output
        assert {p.name: p.read_bytes() for p in partition.iterdir()} == before
        # Writing elsewhere (--out) does not touch the locked dir and is allowed.
        assert CliRunner().invoke(main, ["reindex", "--out", str(tmp_path / "out"), str(partition)]).exit_code == 0
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=FAILURE_DEADLINE_S)


def test_progress_bar_draws_only_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.common import ProgressBar

    with ProgressBar("verifying", as_json=False) as bar:  # stderr is captured, not a terminal
        bar.update(1, 2, "x")
    assert capsys.readouterr().err == ""
    with ProgressBar("verifying", as_json=False) as bar:
        bar.enabled = True
        bar.update(1, 2, "x")
    err = capsys.readouterr().err
    # click strips the ANSI erase sequence when stderr is not a terminal; the carriage returns remain.
    assert "[" + "#" * 15 + "-" * 15 + "] 1/2 verifying x" in err and err.endswith("\r")


def test_verify_a_log_dir_named_like_a_partition_dir_checks_its_partitions(tmp_path: Path) -> None:
    """Regression: ``kafka-logs-1`` parses as partition 1 of topic ``kafka-logs``; verify took it for a partition
    dir, skipped its subdirectories and reported a corrupt segment below it as OK."""
    from logmgr.verify import verify_paths
    from segments.naming import log_file
    from segments.records import SimpleRecord, build_batch

    partition = tmp_path / "kafka-logs-1" / "orders-0"
    partition.mkdir(parents=True)
    data = bytearray(build_batch([SimpleRecord(b"value")]))
    data[-1] ^= 0xFF
    log_file(partition, 0).write_bytes(bytes(data))
    report = verify_paths([tmp_path / "kafka-logs-1"])
    assert not report.ok and report.segments == 1
