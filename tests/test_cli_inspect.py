"""``logmgr info``, ``checkpoints show|set``, ``append`` and ``read``: CliRunner tests on real files."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from checkpoints import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    read_partition_metadata,
)
from cli.append_cmd import append
from cli.checkpoints_cmd import checkpoints
from cli.info_cmd import info
from cli.read_cmd import read
from logmgr.config import LogConfig
from logmgr.log_loader import load_log
from logmgr.verify import verify_paths
from segments.naming import TopicPartition
from segments.records import ControlRecordType, SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S, KAFKA_REAL, require_fixtures

REAL_DIRS = {
    "zk-3.7.1-clean-multiseg": "kafka-logs",
    "kraft-3.7-clean-transactions": "kafka-data",
    "zk-cp5.2.2-lz4-subset": "kafka/data",
}


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def _real_copy(tmp_path: Path, name: str, target: str = "logs") -> Path:
    return _copy(require_fixtures(KAFKA_REAL / name / REAL_DIRS[name]), tmp_path / target)


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _invoke(command: click.Command, args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(command, args, input=stdin)


def _lines(result: Result) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line]


@pytest.fixture
def lock_holder() -> Iterator[Callable[[Path], None]]:
    """Start a child process that holds the ``.lock`` of a dir, as a running broker does."""
    children: list[subprocess.Popen[str]] = []

    def hold(log_dir: Path) -> None:
        code = (
            "import fcntl, os, sys\n"
            f"fd = os.open({str(log_dir / '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n"
        )
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        children.append(child)
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"

    yield hold
    for child in children:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=FAILURE_DEADLINE_S)


# -- info ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REAL_DIRS))
def test_info_totals_match_the_library_and_change_nothing(tmp_path: Path, name: str) -> None:
    logs = _real_copy(tmp_path, name)
    before = _tree_hash(logs)
    result = _invoke(info, ["--json", str(logs)])
    assert result.exit_code == 0, result.output
    assert _tree_hash(logs) == before
    report = json.loads(result.output)
    by_tp = {TopicPartition(p["topic"], p["partition"]): p for p in report["partitions"]}

    loaded = _real_copy(tmp_path, name, "loaded")
    starts = OffsetCheckpointFile(loaded / "log-start-offset-checkpoint").read()
    recovery = OffsetCheckpointFile(loaded / RECOVERY_POINT_CHECKPOINT_FILE).read()
    watermarks = OffsetCheckpointFile(loaded / "replication-offset-checkpoint").read()
    size = segments = 0
    for tp, entry in by_tp.items():
        partition_dir = loaded / str(tp)
        had_logs = any(partition_dir.glob("*.log"))
        log = load_log(partition_dir, LogConfig(), log_start_offset=starts.get(tp, 0), had_clean_shutdown=True)
        try:
            assert (entry["logStartOffset"], entry["logEndOffset"]) == (log.log_start_offset, log.log_end_offset), tp
            assert entry["size"] == log.size_in_bytes, tp
            assert entry["recoveryPoint"] == recovery.get(tp) and entry["highWatermark"] == watermarks.get(tp)
            size += log.size_in_bytes
            segments += len(log.segments) if had_logs else 0
        finally:
            log.close()
    totals = report["totals"]
    assert (totals["partitions"], totals["size"], totals["segments"]) == (len(by_tp), size, segments)
    assert totals["records"] == sum(p["records"] for p in by_tp.values()) > 0
    assert totals["diskUsage"] >= totals["size"]


def test_info_text_lists_partitions_and_totals(tmp_path: Path) -> None:
    logs = _real_copy(tmp_path, "zk-3.7.1-clean-multiseg")
    result = _invoke(info, [str(logs)])
    assert result.exit_code == 0, result.output
    assert "nikhilDemo-0" in result.output
    assert result.output.splitlines()[-1].startswith("total: ")
    assert _invoke(info, [str(tmp_path / "missing")]).exit_code == 2


# -- checkpoints ----------------------------------------------------------------------------------------------------


def test_checkpoints_show_every_file_of_a_real_dir(tmp_path: Path) -> None:
    logs = _real_copy(tmp_path, "kraft-3.7-clean-transactions")
    result = _invoke(checkpoints, ["show", "--json", str(logs)])
    assert result.exit_code == 0, result.output
    shown = {Path(str(entry["file"])): entry for entry in _lines(result)}
    assert {str(e["type"]) for e in shown.values()} >= {
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "meta.properties",
        "clean-shutdown",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "producer-snapshot",
    }
    recovery = shown[logs / RECOVERY_POINT_CHECKPOINT_FILE]["entries"]
    expected = OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).read()
    assert recovery == [{"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in expected.items()]
    epochs_path = next(logs.glob("*/leader-epoch-checkpoint"))
    epochs = [{"epoch": e.epoch, "startOffset": e.start_offset} for e in LeaderEpochCheckpointFile(epochs_path).read()]
    assert shown[epochs_path]["entries"] == epochs
    assert shown[logs / ".kafka_cleanshutdown"]["brokerEpoch"] == 53326
    assert any(e["producers"] for e in shown.values() if e["type"] == "producer-snapshot")

    one = _invoke(checkpoints, ["show", str(logs / "meta.properties")])
    assert one.exit_code == 0 and "cluster.id=" in one.output


def test_checkpoints_show_reports_a_malformed_file_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n1\nt 0\n")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    result = _invoke(checkpoints, ["show", "--json", str(tmp_path)])
    assert result.exit_code == 1
    by_type = {e["type"]: e for e in _lines(result) if "file" in e}
    assert "error" in by_type["recovery-point-offset-checkpoint"]
    assert str(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE) in str(by_type["recovery-point-offset-checkpoint"]["error"])
    assert by_type["log-start-offset-checkpoint"]["entries"] == [{"topic": "t", "partition": 0, "offset": 5}]
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert _invoke(checkpoints, ["show", str(other)]).exit_code == 1


def test_checkpoints_set_rewrites_and_refuses_unknown_partitions(tmp_path: Path, lock_holder: Callable[[Path], None]) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT_FILE
    OffsetCheckpointFile(path).write({TopicPartition("a", 0): 5, TopicPartition("b", 1): 7})
    (tmp_path / "c-2").mkdir()
    assert _invoke(checkpoints, ["set", str(path), "b-1", "9"]).exit_code == 0
    assert _invoke(checkpoints, ["set", str(path), "c-2", "3"]).exit_code == 0
    refused = _invoke(checkpoints, ["set", str(path), "zz-0", "1"])
    assert refused.exit_code == 1 and "--force" in refused.output
    assert _invoke(checkpoints, ["set", "--force", str(path), "zz-0", "1"]).exit_code == 0
    assert OffsetCheckpointFile(path).read() == {
        TopicPartition("a", 0): 5,
        TopicPartition("b", 1): 9,
        TopicPartition("c", 2): 3,
        TopicPartition("zz", 0): 1,
    }
    assert not (tmp_path / (path.name + ".tmp")).exists()
    assert _invoke(checkpoints, ["set", str(path), "a-0", "-1"]).exit_code == 2
    other = tmp_path / "partition.metadata"
    other.write_text("version: 0\n")
    assert _invoke(checkpoints, ["set", str(other), "a-0", "1"]).exit_code == 1

    before = path.read_bytes()
    lock_holder(tmp_path)
    locked = _invoke(checkpoints, ["set", str(path), "a-0", "1"])
    assert locked.exit_code == 3, locked.output
    assert path.read_bytes() == before


# -- append and read ----------------------------------------------------------------------------------------------

INPUT: list[dict[str, object]] = [
    {"key": "k1", "value": "hello", "headers": [["h", None], ["h2", "x"]], "timestamp": 1_700_000_000_000},
    {"value_b64": "/wA=", "timestamp": 1_700_000_000_500},
    {"key": None, "value": None, "timestamp": 1_700_000_001_000},
    {"value": "now"},
]


def _jsonl(objects: list[dict[str, object]]) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_append_creates_then_read_returns_the_records(tmp_path: Path, codec: str) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    missing = _invoke(append, [str(logs), "orders-0"], _jsonl(INPUT))
    assert missing.exit_code == 1 and "--create" in missing.output
    args = [str(logs), "orders-0", "--create", "--compression", codec, "--batch-records", "2", "--json"]
    result = _invoke(append, args, _jsonl(INPUT))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report | {"created": []} == {
        "topic": "orders", "partition": 0, "records": 4, "firstOffset": 0, "lastOffset": 3, "created": [], "removed": []
    }
    assert "partition.metadata" in report["created"] and "00000000000000000000.log" in report["created"]
    assert read_partition_metadata(logs / "orders-0" / "partition.metadata").version == 0
    assert OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).read() == {TopicPartition("orders", 0): 4}
    assert verify_paths([logs]).ok

    again = _invoke(append, [str(logs), "orders-0"], _jsonl(INPUT[:1]))
    assert again.exit_code == 0 and "offsets 4..4" in again.output

    before = _tree_hash(logs)
    records = _lines(_invoke(read, [str(logs), "orders-0"]))
    assert _tree_hash(logs) == before
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4]
    first = records[0]
    assert first == {
        "topic": "orders",
        "partition": 0,
        "offset": 0,
        "timestamp": 1_700_000_000_000,
        "timestampType": "CreateTime",
        "key": "k1",
        "value": "hello",
        "headers": [["h", None], ["h2", "x"]],
    }
    assert records[1]["value_b64"] == "/wA=" and "value" not in records[1]
    assert records[2]["key"] is None and records[2]["value"] is None
    assert isinstance(records[3]["timestamp"], int) and records[3]["timestamp"] > 1_700_000_001_000


def test_append_input_errors_and_lock(tmp_path: Path, lock_holder: Callable[[Path], None]) -> None:
    logs = tmp_path / "logs"
    (logs / "t-0").mkdir(parents=True)
    bad = _invoke(append, [str(logs), "t-0"], '{"value": "ok"}\n{"value": 3}\n')
    assert bad.exit_code == 1 and "line 2" in bad.output
    assert _invoke(append, [str(logs), "t-0"], '{"colour": "red"}\n').exit_code == 1
    assert _invoke(append, [str(logs), "t-0", "--compression", "brotli"], "").exit_code == 2
    assert _invoke(append, [str(logs), "bad topic-0", "--create"], '{"value": "x"}\n').exit_code == 1
    source = tmp_path / "in.jsonl"
    source.write_text(_jsonl(INPUT))
    assert _invoke(append, [str(logs), "t-0", "--from", str(source)]).exit_code == 0
    before = _tree_hash(logs)
    lock_holder(logs)
    locked = _invoke(append, [str(logs), "t-0", "--from", str(source)])
    assert locked.exit_code == 3, locked.output
    assert _tree_hash(logs) == before


def test_append_to_a_real_dir_keeps_the_clean_shutdown_marker(tmp_path: Path) -> None:
    logs = _real_copy(tmp_path, "zk-3.7.1-clean-multiseg")
    marker = (logs / ".kafka_cleanshutdown").read_bytes()
    metadata = (logs / "nikhilDemo-0" / "partition.metadata").read_bytes()
    result = _invoke(append, [str(logs), "nikhilDemo-0", "--json"], '{"value": "x", "timestamp": 1722857166600}\n')
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["firstOffset"] == 3
    assert (logs / ".kafka_cleanshutdown").read_bytes() == marker
    assert (logs / "nikhilDemo-0" / "partition.metadata").read_bytes() == metadata
    assert OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT_FILE).read()[TopicPartition("nikhilDemo", 0)] == 4
    assert verify_paths([logs / "nikhilDemo-0"]).ok
    values = [r["value"] for r in _lines(_invoke(read, [str(logs), "nikhilDemo-0"]))]
    assert values == ["hi", "hi", "i", "x"]


def test_bug_append_cut_a_garbage_tail_as_a_silent_side_effect(tmp_path: Path) -> None:
    """Was: after an unclean shutdown, append loaded the log with a broker's recovery, which truncated the invalid
    bytes at the end of a .log, and printed only "appended 1 record(s)". Now refused, nothing written."""
    logs = _real_copy(tmp_path, "kraft-3.7-clean-transactions")
    (logs / ".kafka_cleanshutdown").unlink()
    log = logs / "_schemas-0" / "00000000000000000000.log"
    size = log.stat().st_size
    with open(log, "ab") as out:
        out.write(b"garbage" * 2)
    before = _tree_hash(logs)
    result = _invoke(append, [str(logs), "_schemas-0"], '{"key": "k", "value": "v"}\n')
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1 and f"{log}: position {size}" in result.stderr
    assert "logmgr recover" in result.stderr
    assert _tree_hash(logs) == before


def test_bug_append_deleted_older_producer_snapshots_as_a_side_effect(tmp_path: Path) -> None:
    """Was: append loaded the partition as a broker does, whose loader deletes the producer snapshots of no
    segment (here 00000000000000000038.snapshot of _schemas-0), outside any plan and unreported. Now the append
    changes nothing but what it writes (records, a rolled segment, the snapshot at close, the recovery point) and
    names each file it created; the broker's next load still prunes the old snapshot."""
    logs = _real_copy(tmp_path, "kraft-3.7-clean-transactions")
    partition = logs / "_schemas-0"
    stray = partition / "00000000000000000038.snapshot"
    kept = {p.name: p.read_bytes() for p in partition.iterdir()}
    outside = {p.name: p.read_bytes() for p in logs.iterdir() if p.is_file()}
    assert stray.name in kept
    result = _invoke(append, [str(logs), "_schemas-0", "--json"], '{"key": "k", "value": "v"}\n')
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["firstOffset"], report["removed"]) == (42, [])
    after = {p.name: p.read_bytes() for p in partition.iterdir()}
    assert sorted(set(after) - set(kept)) == report["created"]
    # Rolled (the segment is older than segment.ms) then closed: the new segment and the snapshot at the log end.
    assert report["created"] == [
        "00000000000000000042.index", "00000000000000000042.log", "00000000000000000042.timeindex",
        "00000000000000000043.snapshot",
    ]
    assert {name: data for name, data in after.items() if name in kept} == kept, "nothing there before changed"
    changed = {p.name for p in logs.iterdir() if p.is_file() and p.read_bytes() != outside.get(p.name)}
    assert changed == {RECOVERY_POINT_CHECKPOINT_FILE}
    text = _invoke(append, [str(logs), "_schemas-0"], '{"key": "k", "value": "w"}\n')
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines() == [
        "_schemas-0: appended 1 record(s) at offsets 43..43",
        f"{partition}: created 00000000000000000044.snapshot",
    ]
    assert stray.exists()
    log = load_log(partition, LogConfig(), had_clean_shutdown=True)
    try:
        assert log.log_end_offset == 44 and not stray.exists()  # what a broker's load does, in its own time
    finally:
        log.close()


def test_append_applies_the_topic_config_from_the_metadata_and_flags(tmp_path: Path) -> None:
    logs = _real_copy(tmp_path, "kraft-3.7-clean-transactions")
    marker = (logs / ".kafka_cleanshutdown").read_bytes()
    log = logs / "docker-connect-configs-0" / "00000000000000000000.log"
    data = log.read_bytes()
    # __cluster_metadata says docker-connect-configs is compacted: Kafka refuses a record without a key there.
    keyless = _invoke(append, [str(logs), "docker-connect-configs-0"], '{"value": "v"}\n')
    assert keyless.exit_code == 1 and "without key" in keyless.stderr, keyless.output
    # Nothing appended, and the dir is still marked clean (the marker is removed while an append runs).
    assert log.read_bytes() == data and (logs / ".kafka_cleanshutdown").read_bytes() == marker
    flag = "docker-connect-configs:cleanup.policy=delete"
    accepted = _invoke(append, [str(logs), "docker-connect-configs-0", "--topic-config", flag], '{"value": "v"}\n')
    assert accepted.exit_code == 0, accepted.output
    stamped = _invoke(
        append,
        [str(logs), "patient_admissions-0", "--topic-config", "patient_admissions:message.timestamp.type=LogAppendTime"],
        '{"value": "v", "timestamp": 1}\n',
    )
    assert stamped.exit_code == 0, stamped.output
    (record,) = _lines(_invoke(read, [str(logs), "patient_admissions-0"]))
    assert record["timestampType"] == "LogAppendTime" and record["timestamp"] != 1


def _transactional_partition(tmp_path: Path) -> Path:
    """Offsets: 0 txn pid 1 (aborted), 1 plain, 2 ABORT marker pid 1, 3 txn pid 2, 4 COMMIT pid 2, 5 plain,
    6 txn pid 3 (left open), 7 plain."""
    partition_dir = tmp_path / "logs" / "tx-0"
    log = load_log(partition_dir, LogConfig())
    try:

        def txn(pid: int, value: str) -> None:
            log.append_records(
                [SimpleRecord(value.encode(), None, 1000 + pid)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )

        txn(1, "aborted")
        log.append_records([SimpleRecord(b"plain1", None, 2000)])
        log.append_end_txn_marker(1, 0, ControlRecordType.ABORT, 0)
        txn(2, "committed")
        log.append_end_txn_marker(2, 0, ControlRecordType.COMMIT, 0)
        log.append_records([SimpleRecord(b"plain2", b"\xff", 3000)])
        txn(3, "open")
        log.append_records([SimpleRecord(b"plain3", None, 4000)])
        log.flush()
    finally:
        log.close()
    return partition_dir.parent


def test_read_options(tmp_path: Path) -> None:
    logs = _transactional_partition(tmp_path)
    before = _tree_hash(logs)

    def values(*args: str) -> list[object]:
        result = _invoke(read, [str(logs), "tx-0", *args])
        assert result.exit_code == 0, result.output
        return [r.get("value") for r in _lines(result)]

    assert values() == ["aborted", "plain1", "committed", "plain2", "open", "plain3"]
    assert values("--committed") == ["plain1", "committed", "plain2"]
    assert values("--committed", "--from-offset", "3") == ["committed", "plain2"]
    assert values("--from-offset", "5", "--max", "2") == ["plain2", "open"]
    assert values("--max", "0") == []
    OffsetCheckpointFile(logs / "log-start-offset-checkpoint").write({TopicPartition("tx", 0): 5})
    assert values("--from-offset", "1") == ["plain2", "open", "plain3"]
    (logs / "log-start-offset-checkpoint").unlink()
    assert values("--from-time", "1970-01-01T00:00:02.500+00:00") == ["plain2", "open", "plain3"]
    assert values("--from-time", "3000") == ["plain2", "open", "plain3"]
    encoded = _lines(_invoke(read, [str(logs), "tx-0", "--from-offset", "5", "--max", "1", "--decode", "base64"]))
    assert encoded[0]["value_b64"] == "cGxhaW4y" and encoded[0]["key_b64"] == "/w=="
    fallback = _lines(_invoke(read, [str(logs), "tx-0", "--from-offset", "5", "--max", "1"]))
    assert fallback[0]["value"] == "plain2" and fallback[0]["key_b64"] == "/w=="
    assert _tree_hash(logs) == before


def test_read_errors(tmp_path: Path) -> None:
    logs = _transactional_partition(tmp_path)
    assert _invoke(read, [str(logs), "tx-0", "--from-offset", "1", "--from-time", "0"]).exit_code == 2
    assert _invoke(read, [str(logs), "tx-0", "--from-time", "yesterday"]).exit_code == 2
    assert _invoke(read, [str(logs), "tx-0", "--decode", "hex"]).exit_code == 2
    missing = _invoke(read, [str(logs), "nope-0"])
    assert missing.exit_code == 1 and "nope-0" in missing.output
    assert _invoke(read, [str(logs), "nodash"]).exit_code == 1
