"""Seeded mutation fuzzer: damage one file of a real broker's log dir, ``recover --full``, then ``verify`` must pass.

Every file kind of the real fixtures (``../shared/fixtures/kafka-real``) is a target, chosen kind by kind in turn
so rare kinds (``partition.metadata``, ``.txnindex``, ``meta.properties``) get as many cases as ``.log`` files:
segments, indexes, producer snapshots, ``leader-epoch-checkpoint``, ``partition.metadata``, the dir's offset
checkpoints, ``meta.properties`` and the clean-shutdown marker. Mutations: truncate, flip bytes, append garbage,
replace with random bytes. Each case is a small log dir built from the fixture: its dir-level files and the
partition dir holding the target (or one partition dir, for a dir-level target), copied to a temporary dir.

Not targets, as documented in docs/reliability.md: the KRaft metadata log (``__cluster_metadata-0`` with its
``quorum-state`` and ``.checkpoint`` snapshots) and ``bootstrap.checkpoint``, which ``recover`` leaves to the
controller quorum.

``LOGMGR_SOAK=1`` runs 5,000 cases instead of 300; ``LOGMGR_RECOVER_FUZZ_SEED`` changes the seed;
``LOGMGR_RECOVER_FUZZ_CASE=<n>`` runs only case ``n`` (to replay a failure).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import main
from logmgr.verify import verify_paths
from segments.naming import is_partition_dir_name
from tests.conftest import KAFKA_REAL, require_fixtures

SOAK = os.environ.get("LOGMGR_SOAK") == "1"
CASES = 5000 if SOAK else 300
SEED = int(os.environ.get("LOGMGR_RECOVER_FUZZ_SEED", "20261125"))
ONLY = os.environ.get("LOGMGR_RECOVER_FUZZ_CASE")
MUTATIONS = ("truncate", "flip", "append", "random")
NOT_TARGETS = frozenset({"bootstrap.checkpoint", ".lock"})
METADATA_DIR = "__cluster_metadata-0"


def _log_dirs(root: Path) -> list[Path]:
    """The broker log dirs below the fixtures: dirs holding partition dirs (other than the metadata log)."""
    found = []
    for directory in sorted(p for p in root.rglob("*") if p.is_dir()):
        if any(c.is_dir() and is_partition_dir_name(c.name) and c.name != METADATA_DIR for c in directory.iterdir()):
            found.append(directory)
    return found


def _kind(name: str) -> str:
    if name[:20].isdigit() and "." in name:
        return name[name.index(".") :]
    return name


def _targets(root: Path) -> dict[str, list[tuple[Path, str]]]:
    """File kind -> (log dir, path relative to it) of every file the fuzzer may damage."""
    targets: dict[str, list[tuple[Path, str]]] = {}
    for log_dir in _log_dirs(root):
        for path in sorted(log_dir.rglob("*")):
            relative = path.relative_to(log_dir)
            if not path.is_file() or path.name in NOT_TARGETS or relative.parts[0] == METADATA_DIR:
                continue
            if len(relative.parts) > 2 or (len(relative.parts) == 2 and not is_partition_dir_name(relative.parts[0])):
                continue
            targets.setdefault(_kind(path.name), []).append((log_dir, relative.as_posix()))
    return targets


def _build_case(log_dir: Path, target: str, rng: random.Random, out: Path) -> None:
    """The dir-level files of ``log_dir`` and one partition dir (the target's, or one at random) copied to ``out``."""
    partitions = sorted(c.name for c in log_dir.iterdir() if c.is_dir() and is_partition_dir_name(c.name) and c.name != METADATA_DIR)
    copy_log_dir(log_dir, target.split("/")[0] if "/" in target else rng.choice(partitions), out)


def copy_log_dir(log_dir: Path, partition: str, out: Path) -> None:
    """A writable copy of ``log_dir``'s own files and of its partition dir ``partition`` at ``out``. O(bytes)."""
    out.mkdir()
    for child in log_dir.iterdir():
        if child.is_file():
            shutil.copy2(child, out / child.name)
    shutil.copytree(log_dir / partition, out / partition)
    # The fixtures are read-only: the copy must be writable, as a broker's dir is.
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _mutate(path: Path, mutation: str, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    if mutation == "truncate":
        data = data[: rng.randrange(len(data))] if data else data
    elif mutation == "flip":
        for _ in range(rng.randint(1, 4)):
            if data:
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    elif mutation == "append":
        data += rng.randbytes(rng.randint(1, 64))
    else:
        data = bytearray(rng.randbytes(rng.choice((len(data), rng.randint(0, 256)))))
    path.write_bytes(bytes(data))


def run_case(case: int, targets: dict[str, list[tuple[Path, str]]], work: Path) -> Counter[str]:
    """Damage, recover --full, verify; returns the counts of the actions applied. Fails with the case number."""
    rng = random.Random(f"{SEED}:{case}")
    kinds = sorted(targets)
    kind = kinds[case % len(kinds)]
    log_dir, target = rng.choice(targets[kind])
    mutation = MUTATIONS[(case // len(kinds)) % len(MUTATIONS)]
    case_dir = work / f"case-{case}"
    _build_case(log_dir, target, rng, case_dir)
    _mutate(case_dir / target, mutation, rng)
    where = f"case {case} (seed {SEED}): {mutation} {log_dir.name}/{target}"
    result = CliRunner().invoke(main, ["recover", str(case_dir), "--full", "--json"])
    assert result.exit_code == 0, f"{where}: recover failed: {result.output}"
    report = verify_paths([case_dir])
    assert report.ok, f"{where}: verify after recover: {[str(p) for p in report.problems]}"
    applied = json.loads(result.stdout.splitlines()[-1])["applied"]
    shutil.rmtree(case_dir)
    return Counter(f"{a['action']} {_repaired_kind(a)}" for a in applied)


def _repaired_kind(action: dict[str, Any]) -> str:
    """The file kind an applied action touched, for the figures in docs/reliability.md."""
    if "baseOffset" in action:
        return "segment"
    name = action.get("path") or action["files"][0]["name"]
    return _kind(Path(name).name)


def test_recover_full_then_verify_passes_on_every_damaged_file_kind(tmp_path: Path) -> None:
    targets = _targets(require_fixtures(KAFKA_REAL))
    assert {".log", ".index", ".timeindex", "leader-epoch-checkpoint", "partition.metadata", "meta.properties"} <= set(targets)
    cases = [int(ONLY)] if ONLY is not None else range(CASES)
    repairs: Counter[str] = Counter()
    for case in cases:
        repairs += run_case(case, targets, tmp_path)
    print(f"{len(cases)} cases over {len(targets)} file kinds; repairs: {dict(sorted(repairs.items()))}")


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_mutations_change_the_file(tmp_path: Path, mutation: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(range(200)))
    _mutate(path, mutation, random.Random(1))
    assert path.read_bytes() != bytes(range(200))
