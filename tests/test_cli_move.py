"""``logmgr move-log`` over real log dirs: the plan (source, target, bytes, segments; a resume shown as such), each
refusal (not a log dir, already there, a copy pending elsewhere, no room), the move and its resume, ``--abort``
(Kafka's cancellation of an alter-log-dirs reassignment) and the exit codes (1 problem, 2 usage, 3 locked)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import move_log_cmd
from cli.move_log_cmd import move_log
from tests import test_log_move
from tests.conftest import lock_held_elsewhere
from tests.test_log_move import (
    LEGACY_LOGS,
    TP,
    Factory,
    LogView,
    assert_reopens_as_is,
    expected,
    futures_in,
    live_dirs,
    log_bytes,
    start_in_d1,
    start_legacy,
    stop_mid_copy,
    values,
)

dirs = test_log_move.dirs  # the move tests' fixtures: d1 and d2, managers shut down after
make = test_log_move.make


def tree_hash(*roots: Path) -> str:
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            digest.update(str(path.relative_to(root)).encode())
            if path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(move_log, list(args))
    return result.exit_code, result.output


def prepared(make: Factory, dirs: tuple[Path, Path], count: int = 30) -> None:
    m, _ = start_in_d1(make, dirs, count)
    m.shutdown()


def read_values(make: Factory) -> list[tuple[int, bytes | None]]:
    m = make()
    m.startup()
    log = m.get_log(TP)
    assert log is not None
    try:
        return values(log)
    finally:
        m.shutdown()


def test_dry_run_plans_then_the_move_applies_it(make: Factory, dirs: tuple[Path, Path]) -> None:
    d1, d2 = dirs
    prepared(make, dirs)
    before = tree_hash(d1, d2)
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2), "--dry-run", "--json")
    assert code == 0, out
    plan = json.loads(out)
    assert plan["dryRun"] is True and plan["action"] == "move"
    assert (plan["sourceDir"], plan["targetDir"]) == (str(d1), str(d2))
    assert plan["current"]["segments"] == 6 and plan["bytesToCopy"] == plan["current"]["bytes"] > 0
    assert tree_hash(d1, d2) == before
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2))
    assert code == 0, out
    assert f"move t-0 from {d1} to {d2}" in out and f"moved t-0 to {d2}" in out
    assert live_dirs(dirs) == [d2 / "t-0"] and futures_in(d2) == []
    assert read_values(make) == expected(range(30))


def test_refusals_exit_1_with_one_line_and_change_nothing(
    make: Factory, dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d1, d2 = dirs
    prepared(make, dirs)
    before = tree_hash(d1, d2)
    other = tmp_path / "other"
    other.mkdir()
    cases = {
        "not one of the log dirs": [str(d1), str(d2), "t-0", "--to", str(other)],
        "is already in": [str(d1), str(d2), "t-0", "--to", str(d1)],
        "no log of t-1": [str(d1), str(d2), "t-1", "--to", str(d2)],
        "no future copy of t-0": [str(d1), str(d2), "t-0", "--abort"],
    }
    for message, args in cases.items():
        code, out = run(*args)
        assert code == 1 and message in out and "Traceback" not in out, (message, out)
    # No room: too little free space, or the copy would pass the third disk tier (0.90 by default).
    monkeypatch.setattr(move_log_cmd, "measure_disk_usage", lambda path: (1_000_000 - 100, 1_000_000))
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2))
    assert code == 1 and "has no room for t-0" in out and "B free" in out
    monkeypatch.setattr(move_log_cmd, "measure_disk_usage", lambda path: (899_500, 1_000_000))
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2))
    assert code == 1 and "above logmgr.disk.usage.warn.ratio 90%" in out
    assert tree_hash(d1, d2) == before
    # Usage errors: neither or both of --to and --abort.
    assert run(str(d1), str(d2), "t-0")[0] == 2
    assert run(str(d1), str(d2), "t-0", "--to", str(d2), "--abort")[0] == 2


def test_a_pending_future_copy_is_resumed_or_aborted(make: Factory, dirs: tuple[Path, Path]) -> None:
    d1, d2 = dirs
    stop_mid_copy(make, dirs, 25)
    (future,) = futures_in(d2)
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2), "--dry-run", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["action"] == "resume" and plan["future"]["dir"] == str(future)
    assert 0 <= plan["bytesToCopy"] < plan["current"]["bytes"]
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2), "--dry-run")
    assert f"resume the future copy {future.name}" in out
    # --abort drops the copy; the current log stays whole.
    code, out = run(str(d1), str(d2), "t-0", "--abort", "--dry-run")
    assert code == 0 and f"delete the future copy {future}" in out and future.exists()
    code, out = run(str(d1), str(d2), "t-0", "--abort")
    assert code == 0, out
    assert f"aborted the move of t-0: deleted {future}" in out
    assert futures_in(d2) == [] and not any(p.name.endswith("-delete") for p in d2.iterdir())
    assert live_dirs(dirs) == [d1 / "t-0"] and read_values(make) == expected(range(25))


def test_the_resumed_move_completes(make: Factory, dirs: tuple[Path, Path]) -> None:
    d1, d2 = dirs
    stop_mid_copy(make, dirs, 25)
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2), "--json")
    assert code == 0, out
    assert json.loads(out)["action"] == "resume"
    assert live_dirs(dirs) == [d2 / "t-0"] and futures_in(d2) == []
    assert read_values(make) == expected(range(25))


def test_a_locked_dir_exits_3_and_changes_nothing(make: Factory, dirs: tuple[Path, Path]) -> None:
    d1, d2 = dirs
    prepared(make, dirs)
    before = tree_hash(d1, d2)
    # A broker holding the target's .lock (fcntl.lockf from another process).
    with lock_held_elsewhere(d2 / ".lock"):
        code, out = run(str(d1), str(d2), "t-0", "--to", str(d2))
        assert code == 3 and "lock" in out.lower() and "Traceback" not in out, out
        # The dry run reads only: a broker holding the dir does not stop it.
        assert run(str(d1), str(d2), "t-0", "--to", str(d2), "--dry-run")[0] == 0
    assert tree_hash(d1, d2) == before


def test_a_legacy_log_moves_byte_for_byte(make: Factory, dirs: tuple[Path, Path]) -> None:
    """``logmgr move-log`` of a log written before magic 2 (magic 1 plain and lz4, magic 0 gzip): the moved
    ``.log`` bytes are the source's and it reads as it did."""
    d1, d2 = dirs
    m, current = start_legacy(make, dirs, LEGACY_LOGS["magic1-lz4"])
    source, view = log_bytes(current), LogView.of(current)
    m.shutdown()
    code, out = run(str(d1), str(d2), "t-0", "--to", str(d2))
    assert code == 0, out
    assert f"moved t-0 to {d2}" in out
    assert live_dirs(dirs) == [d2 / "t-0"] and futures_in(d2) == []
    assert_reopens_as_is(make, {}, source, view)
