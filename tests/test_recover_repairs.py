"""``recover`` repairs every file that can be rebuilt from the log and quarantines the rest (issue 11, item 6).

Each test damages one file of a real broker's log dir (a writable copy of ``kraft-3.7-clean-transactions``: the
dir's own files and ``_schemas-0``, whose leader-epoch checkpoint has 17 entries and whose producer snapshots are
real), runs ``recover`` and then ``verify``, which must pass. Named after the finding each one pins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE
from checkpoints.meta_properties import META_PROPERTIES_FILE
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    parse_offset_checkpoint,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE
from cli.main import main
from segments.naming import TopicPartition
from tests.conftest import KAFKA_REAL, require_fixtures
from tests.faults.test_recover_fuzz import copy_log_dir

PARTITION = "_schemas-0"


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    source = require_fixtures(KAFKA_REAL) / "kraft-3.7-clean-transactions" / "kafka-data"
    out = tmp_path / "data"
    copy_log_dir(source, PARTITION, out)
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return out


def _recover(log_dir: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["recover", str(log_dir), "--json", *args])
    assert result.exit_code == 0, result.output
    verified = CliRunner().invoke(main, ["verify", str(log_dir)])
    assert verified.exit_code == 0, verified.output
    plan: dict[str, object] = json.loads(result.output.splitlines()[-1])
    return plan


def _applied(plan: dict[str, object], kind: str) -> list[dict[str, object]]:
    applied = plan["applied"]
    assert isinstance(applied, list)
    return [a for a in applied if a["action"] == kind]


def test_malformed_leader_epoch_checkpoint_is_rebuilt_from_the_batches_leader_epochs(log_dir: Path) -> None:
    # Planning used to stop with the format error; a broker fails to load the partition on it.
    epochs = log_dir / PARTITION / LEADER_EPOCH_CHECKPOINT_FILE
    original = epochs.read_bytes()
    epochs.write_bytes(original.replace(b"20 16", b"2x 16"))
    plan = _recover(log_dir)
    [write] = _applied(plan, "write")
    assert "line 11" in str(write["reason"]) and "rebuilt from the partition leader epochs" in str(write["reason"])
    # Every epoch of this partition starts at a batch: the rebuild is byte for byte the broker's file.
    assert epochs.read_bytes() == original


def test_leader_epoch_checkpoint_of_random_bytes_is_rebuilt_with_the_default_plan(log_dir: Path) -> None:
    epochs = log_dir / PARTITION / LEADER_EPOCH_CHECKPOINT_FILE
    original = epochs.read_bytes()
    epochs.write_bytes(b"\xff\x00garbage")
    _recover(log_dir)
    assert epochs.read_bytes() == original


def test_producer_snapshot_failing_its_crc_is_deleted(log_dir: Path) -> None:
    snapshot = sorted((log_dir / PARTITION).glob("*.snapshot"))[-1]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    plan = _recover(log_dir)
    [delete] = _applied(plan, "delete")
    assert "corrupt" in str(delete["reason"]) and "replaying the log" in str(delete["reason"])
    assert not snapshot.exists()


def test_malformed_recovery_point_checkpoint_is_rewritten_with_each_log_end(log_dir: Path) -> None:
    checkpoint = log_dir / RECOVERY_POINT_CHECKPOINT_FILE
    checkpoint.write_bytes(b"0\n1\n_schemas 0 x\n")
    plan = _recover(log_dir)
    [write] = [w for w in _applied(plan, "write") if w["path"] == RECOVERY_POINT_CHECKPOINT_FILE]
    assert "malformed" in str(write["reason"]) and "line 3" in str(write["reason"])
    assert parse_offset_checkpoint(checkpoint.read_bytes()) == {TopicPartition("_schemas", 0): 42}


def test_malformed_log_start_checkpoint_is_rewritten_from_the_first_segment_saying_what_was_lost(
    log_dir: Path,
) -> None:
    checkpoint = log_dir / LOG_START_OFFSET_CHECKPOINT_FILE
    checkpoint.write_bytes(b"0\n7\n")
    plan = _recover(log_dir)
    [write] = [w for w in _applied(plan, "write") if w["path"] == LOG_START_OFFSET_CHECKPOINT_FILE]
    assert "lost: a log start above it" in str(write["reason"])
    assert parse_offset_checkpoint(checkpoint.read_bytes()) == {TopicPartition("_schemas", 0): 0}


@pytest.mark.parametrize("name", [REPLICATION_OFFSET_CHECKPOINT_FILE, CLEANER_OFFSET_CHECKPOINT_FILE])
def test_malformed_watermark_and_cleaner_checkpoints_are_written_empty_saying_what_was_lost(
    log_dir: Path, name: str
) -> None:
    (log_dir / name).write_bytes(b"garbage")
    plan = _recover(log_dir)
    [write] = [w for w in _applied(plan, "write") if w["path"] == name]
    assert "written empty (lost:" in str(write["reason"])
    assert parse_offset_checkpoint((log_dir / name).read_bytes()) == {}


def test_partition_metadata_with_a_bad_topic_id_is_quarantined(log_dir: Path) -> None:
    metadata = log_dir / PARTITION / PARTITION_METADATA_FILE
    original = metadata.read_bytes()
    metadata.write_bytes(original.replace(b"topic_id: ", b"topic_id: !!"))
    plan = _recover(log_dir)
    [quarantine] = _applied(plan, "quarantine")
    assert "controller" in str(quarantine["reason"])
    assert not metadata.exists()
    assert (log_dir / PARTITION / (PARTITION_METADATA_FILE + ".corrupt")).read_bytes() != original


def test_malformed_meta_properties_is_quarantined(log_dir: Path) -> None:
    meta = log_dir / META_PROPERTIES_FILE
    meta.write_bytes(b"version=x\n")
    plan = _recover(log_dir)
    [quarantine] = _applied(plan, "quarantine")
    assert quarantine["target"] == META_PROPERTIES_FILE + ".corrupt" and "kafka-storage format" in str(quarantine["reason"])
    assert not meta.exists()


def test_timeindex_of_a_partial_slot_beside_an_empty_log_is_rebuilt(tmp_path: Path) -> None:
    # Fuzz finding: 9 bytes appended to the empty .timeindex of an empty active segment passed as preallocation.
    source = require_fixtures(KAFKA_REAL) / "kraft-4.2-clean" / "kafka-logs"
    out = tmp_path / "data"
    copy_log_dir(source, "demo-topic-0", out)
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (out / "demo-topic-0" / "00000000000000000000.timeindex").write_bytes(b"\x01" * 9)
    plan = _recover(out, "--full")
    assert _applied(plan, "rebuild-indexes")


def test_timeindex_entry_at_an_offset_outside_the_segment_is_rebuilt_by_full_recovery(log_dir: Path) -> None:
    # Fuzz finding: an entry's offset flipped far above the log passed the format checks, and verify refused it.
    timeindex = log_dir / PARTITION / "00000000000000000000.timeindex"
    data = bytearray(timeindex.read_bytes())
    data[20] ^= 0x70  # the last entry's relative offset
    timeindex.write_bytes(bytes(data))
    plan = _recover(log_dir, "--full")
    [rebuild] = _applied(plan, "rebuild-indexes")
    assert "disagrees with the log" in str(rebuild["reason"])


def test_random_offset_index_beside_an_empty_log_is_not_taken_for_zero_fill(tmp_path: Path) -> None:
    # Fuzz finding: 8 random bytes in the .index of an empty active segment passed as its first preallocated slot,
    # and planning then read the .log at the entry's negative position (a ValueError, exit 1).
    source = require_fixtures(KAFKA_REAL) / "kraft-4.2-clean" / "kafka-logs"
    out = tmp_path / "data"
    copy_log_dir(source, "demo-topic-0", out)
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (out / "demo-topic-0" / "00000000000000000000.index").write_bytes(bytes.fromhex("66ce7d6592261db3"))
    plan = _recover(out, "--full")
    assert _applied(plan, "rebuild-indexes")


def test_a_second_quarantine_keeps_the_first_corrupt_file(log_dir: Path) -> None:
    meta = log_dir / META_PROPERTIES_FILE
    for content in (b"version=x\n", b"version=y\n"):
        meta.write_bytes(content)
        _recover(log_dir)
    assert (log_dir / (META_PROPERTIES_FILE + ".corrupt")).read_bytes() == b"version=x\n"
    assert (log_dir / (META_PROPERTIES_FILE + ".corrupt.1")).read_bytes() == b"version=y\n"


@pytest.mark.parametrize("damage", ["magic", "entry", "cut-log"])
def test_bug_recover_left_a_damaged_keyindex_that_verify_refuses(log_dir: Path, damage: str) -> None:
    # recover knew nothing of logmgr's .keyindex while verify checks it: a damaged one (or one whose segment the
    # plan cuts) stayed, and verify kept failing after recover. It is now deleted; the key index rebuilds it.
    built = CliRunner().invoke(main, ["reindex", str(log_dir / PARTITION), "--key-index"])
    assert built.exit_code == 0, built.output
    keyindex = log_dir / PARTITION / "00000000000000000000.keyindex"
    data = bytearray(keyindex.read_bytes())
    if damage == "magic":
        data[:4] = b"XXXX"
    elif damage == "entry":
        data[-16] ^= 0x40  # the last entry's relative offset, far past the segment
    else:
        segment = log_dir / PARTITION / "00000000000000000000.log"
        segment.write_bytes(segment.read_bytes()[:-7])
    keyindex.write_bytes(bytes(data))
    assert CliRunner().invoke(main, ["verify", str(log_dir)]).exit_code == 1
    plan = _recover(log_dir, "--full")
    deleted = [d for d in _applied(plan, "delete") if "key index" in str(d)]
    assert len(deleted) == 1 and "the key index rebuilds it" in str(deleted[0])
    assert not keyindex.exists()
