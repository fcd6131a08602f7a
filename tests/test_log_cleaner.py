"""The log cleaner (issue 12): offset map, Kafka's retention rules (keys, tombstones and their delete horizon,
transactions, producer state), the cleanable range, the checkpoint, the LogManager job and metrics, the offline
``logmgr compact`` plan, and the real fixtures' ``__consumer_offsets``."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from checkpoints.offset_checkpoint import OffsetCheckpointFile
from cli.compact_cmd import compact
from cli.read_cmd import read
from logmgr.cleaner import manager as manager_module
from logmgr.cleaner.cleaner import empty_batch, group_segments_by_size
from logmgr.cleaner.log_cleaner import LogCleaner, segment_stats
from logmgr.cleaner.manager import CleanerCheckpoints
from logmgr.cleaner.offset_map import OffsetMapFullError, SkimpyOffsetMap
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.errors import InvalidRecordError, OutOfOrderSequenceError
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.log_manager import JOB_LOG_CLEANER, LogManager
from logmgr.offline.plan import read_tree
from logmgr.scheduler import ManualScheduler
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.naming import TopicPartition
from segments.records import ControlRecordType, DefaultRecordBatch, SimpleRecord, build_batch
from tests import test_disk_tiers
from tests.conftest import (
    CLIENTS_GENERATED,
    FAILURE_DEADLINE_S,
    KAFKA_REAL,
    ContendedLock,
    calm_disk,
    require_fixtures,
)
from tests.test_log_cleaner_model import read_batches, read_committed_records

T0 = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=1_000, delete_retention_ms=1_000, file_delete_delay_ms=0)
small_fs = test_disk_tiers.small_fs  # a fresh 4 MiB tmpfs (root only), here remounted read-only


def open_log(directory: Path, clock: ManualClock, config: LogConfig = COMPACT) -> Log:
    return load_log(directory / "t-0", config, clock=clock)


def cleaner_for(root: Path, log: Log, clock: ManualClock, **broker: object) -> LogCleaner:
    return LogCleaner(BrokerConfig(**broker), lambda: {root: [log]}, clock)  # type: ignore[arg-type]


def started_compacting_manager(log_dir: Path, **props: str) -> LogManager:
    """A started manager over ``log_dir`` (segments of 1000 bytes, ``props`` on top) on a manual clock and
    scheduler, with topic ``c`` compacted."""
    clock = ManualClock(T0)
    broker = BrokerConfig.from_properties({"log.dirs": str(log_dir), "log.segment.bytes": "1000", **props})
    manager = LogManager(
        broker, clock=clock, scheduler=ManualScheduler(clock), topic_overrides={"c": {"cleanup.policy": "compact"}}
    )
    manager.startup()
    return manager


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    batches, _ = read_batches(log)
    return [(r.offset, r.key, r.value) for b in batches if not b.is_control for r in b.records()]


def fill(log: Log, count: int, keys: int = 5) -> None:
    for _ in range(count):
        offset = log.log_end_offset
        log.append_records([SimpleRecord(b"v%d" % offset, b"k%d" % (offset % keys))])


# -- offset map ----------------------------------------------------------------------------------------------------


@given(st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 1 << 40)), max_size=60))
def test_offset_map_agrees_with_a_dict(puts: list[tuple[bytes, int]]) -> None:
    offset_map = SkimpyOffsetMap(24 * 100)
    model: dict[bytes, int] = {}
    for key, offset in puts:
        offset_map.put(key, offset)
        model[key] = offset
    assert len(offset_map) == len(model)
    assert all(offset_map.get(key) == offset for key, offset in model.items())
    assert offset_map.get(b"never put, longer than six") == -1
    assert offset_map.latest_offset == (puts[-1][1] if puts else -1)


def test_offset_map_has_a_fixed_size_and_refuses_a_new_key_when_full() -> None:
    offset_map = SkimpyOffsetMap(24 * 3 + 23)
    assert offset_map.slots == 3
    for i in range(3):
        offset_map.put(b"k%d" % i, i)
    offset_map.put(b"k0", 9)  # an existing key always fits
    with pytest.raises(OffsetMapFullError):
        offset_map.put(b"k3", 3)
    offset_map.clear()
    assert len(offset_map) == 0 and offset_map.get(b"k0") == -1


# -- selection -------------------------------------------------------------------------------------------------------


def test_segment_stats_pass_over_a_segment_deleted_since_the_listing(tmp_path: Path) -> None:
    """The cleaner lists a log's segments without its lock; retention may delete (close) one before its stats are
    read. Its largest timestamp then counts as unknown (-1), as for a renamed file, instead of failing the pass."""
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    fill(log, 60)
    listed = log.segments.values()
    assert len(listed) > 2
    listed[0].close()
    stats = segment_stats(listed, COMPACT)
    assert [s.base_offset for s in stats] == [s.base_offset for s in listed]
    assert stats[0].largest_timestamp == -1 and stats[1].largest_timestamp >= T0
    log.close()


# -- append rule -----------------------------------------------------------------------------------------------------


def test_compacted_topic_refuses_records_without_key(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_records([SimpleRecord(b"x", b"k"), SimpleRecord(b"y", None)])
    assert log.log_end_offset == 0
    # Replicas copy what the leader accepted: no check there (Kafka validates leader appends only).
    log.append_as_follower(build_batch([SimpleRecord(b"y", None, T0)]))
    delete = load_log(tmp_path / "d-0", LogConfig(), clock=clock)
    delete.append_records([SimpleRecord(b"y", None)])
    log.close()
    delete.close()


# -- semantics --------------------------------------------------------------------------------------------------------


def test_clean_keeps_the_latest_record_per_key_with_offsets_and_timestamps(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    for i in range(60):
        clock.advance(1)
        log.append_records([SimpleRecord(b"v%d" % i, b"k%d" % (i % 5))])
    log.roll()
    before = {o: (k, v) for o, k, v in records(log)}
    result = cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    assert result is not None and result.error is None and result.stats is not None
    after = records(log)
    assert [o for o, _, _ in after] == list(range(55, 60))
    assert all(before[o] == (k, v) for o, k, v in after)
    batches, _ = read_batches(log)
    assert [b.max_timestamp for b in batches] == [T0 + o + 1 for o in range(55, 60)]
    assert result.stats.records_removed == 55
    assert result.before.cleanable_ratio == 1.0 and result.after is not None and result.after.cleanable_ratio == 0.0
    # Kafka's offset-checkpoint format, version 0, one entry.
    assert (tmp_path / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 60\n"
    log.close()
    reopened = open_log(tmp_path, clock)
    assert records(reopened) == after
    reopened.close()
    assert verify_paths([tmp_path / "t-0"]).ok


def test_tombstones_get_a_delete_horizon_and_go_after_delete_retention_ms(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(tmp_path, log, clock)
    log.append_records([SimpleRecord(b"a", b"k")])
    log.append_records([SimpleRecord(None, b"k")])
    log.roll()
    cleaner.clean_log(tmp_path, log)
    batches, _ = read_batches(log)
    assert [(b.base_offset, b.delete_horizon_ms) for b in batches] == [(1, T0 + 1_000)]
    # A later pass before the horizon keeps it, one after drops it.
    log.append_records([SimpleRecord(b"x", b"other")])
    log.roll()
    cleaner.clean_log(tmp_path, log)
    assert [o for o, _, _ in records(log)] == [1, 2]
    clock.advance(1_000)
    log.append_records([SimpleRecord(b"y", b"other")])
    log.roll()
    cleaner.clean_log(tmp_path, log)
    assert [o for o, _, _ in records(log)] == [3]
    log.close()


def test_aborted_data_goes_markers_follow_and_producer_state_survives(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(tmp_path, log, clock)
    log.append_records([SimpleRecord(b"a", b"k")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(5, 0, ControlRecordType.ABORT, 0)
    log.append_records([SimpleRecord(b"b", b"k")], producer_id=5, producer_epoch=0, base_sequence=1, is_transactional=True)
    log.append_end_txn_marker(5, 0, ControlRecordType.COMMIT, 0)
    log.append_records([SimpleRecord(b"c", b"j")], producer_id=6, producer_epoch=0, base_sequence=0)
    log.append_records([SimpleRecord(b"d", b"j")])
    log.roll()
    cleaner.clean_log(tmp_path, log)
    batches, _ = read_batches(log)
    # Aborted data gone; the ABORT marker stays until a later pass; the COMMIT marker of a transaction whose data
    # is still there stays; producer 6's last batch is kept empty (its sequence survives).
    assert [(b.base_offset, b.records_count, b.is_control) for b in batches] == [
        (1, 1, True), (2, 1, False), (3, 1, True), (4, 0, False), (5, 1, False),
    ]
    assert read_committed_records(log) == [(2, b"k", b"b"), (5, b"j", b"d")]
    log.close()
    log = open_log(tmp_path, clock)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_records([SimpleRecord(b"e", b"j")], producer_id=6, producer_epoch=0, base_sequence=5)
    log.append_records([SimpleRecord(b"e", b"j")], producer_id=6, producer_epoch=0, base_sequence=1)
    log.close()


def test_empty_batch_is_kafkas_empty_header(tmp_path: Path) -> None:
    raw = build_batch(
        [SimpleRecord(b"v", b"k", T0), SimpleRecord(b"w", b"k", T0 + 5)],
        base_offset=40, producer_id=9, producer_epoch=2, base_sequence=7, partition_leader_epoch=3,
    )
    empty = DefaultRecordBatch(empty_batch(DefaultRecordBatch(raw)))
    empty.ensure_valid()
    assert (empty.size_in_bytes, empty.records_count, empty.base_offset, empty.last_offset) == (61, 0, 40, 41)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.partition_leader_epoch) == (9, 2, 7, 3)
    assert (empty.base_timestamp, empty.max_timestamp, empty.records()) == (-1, T0 + 5, [])


def test_active_segment_open_transactions_and_min_compaction_lag_are_never_cleaned(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = LogConfig(cleanup_policy=("compact",), min_compaction_lag_ms=10_000, file_delete_delay_ms=0)
    log = open_log(tmp_path, clock, config)
    cleaner = cleaner_for(tmp_path, log, clock)
    fill(log, 10, keys=1)
    assert cleaner.clean_log(tmp_path, log) is None  # all in the active segment
    log.roll()
    assert cleaner.clean_log(tmp_path, log) is None  # younger than min.compaction.lag.ms
    clock.advance(10_001)
    log.append_records([SimpleRecord(b"t", b"k0")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)
    fill(log, 3, keys=1)
    log.roll()
    result = cleaner.clean_log(tmp_path, log)
    assert result is not None and result.end_offset == 10  # the open transaction at 10 bounds the range
    assert [o for o, _, _ in records(log)] == [9, 10, 11, 12, 13]
    log.close()


def test_a_full_offset_map_cleans_up_to_the_last_offset_it_covers(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    for i in range(40):
        log.append_records([SimpleRecord(b"v", b"key-%d" % (i % 20))])
    log.roll()
    # 10 slots x 0.5: five keys a pass.
    cleaner = cleaner_for(tmp_path, log, clock, log_cleaner_dedupe_buffer_size=240, log_cleaner_io_buffer_load_factor=0.5)
    ends = []
    for _ in range(5):
        result = cleaner.clean_log(tmp_path, log)
        assert result is not None and result.end_offset is not None
        ends.append(result.end_offset)
    assert ends == [5, 10, 15, 20, 25]
    assert CleanerCheckpoints(tmp_path).read() == {log.topic_partition: 25}
    # Only the fifth pass maps keys (key-0..4 at 20..24) whose older records lie below it.
    assert [o for o, _, _ in records(log)] == list(range(5, 40))
    log.close()


# -- manager, job, metrics -------------------------------------------------------------------------------------------


def test_the_log_cleaner_job_cleans_every_dirty_log_and_reports(tmp_path: Path) -> None:
    manager = started_compacting_manager(tmp_path / "d", **{"log.cleaner.dedupe.buffer.size": "65536"})
    try:
        assert JOB_LOG_CLEANER in manager.scheduler.jobs()
        compacted, plain = manager.get_or_create_log("c", 0), manager.get_or_create_log("p", 0)
        fill(compacted, 50)
        fill(plain, 50)
        compacted.roll()
        plain.roll()
        report = manager.run_job_now(JOB_LOG_CLEANER)
        assert report is not None
        assert [r.to_json()["partition"] for r in report.logs] == ["c-0"]
        entry = report.to_json()["logs"][0]
        assert entry["recordsRemoved"] == 45 and entry["dirtyRatioBefore"] == 1.0 and entry["dirtyRatioAfter"] == 0.0
        assert entry["bytesWritten"] < entry["bytesRead"]
        metrics = manager.status()["cleaner"]
        assert set(metrics) >= {"max-dirty-percent", "cleaner-recopy-percent", "max-clean-time-secs", "time-since-last-run-ms"}
        assert 0 < metrics["cleaner-recopy-percent"] < 100
        manager.delete_log(compacted.topic_partition)
        assert CleanerCheckpoints(tmp_path / "d").read() == {}
    finally:
        manager.shutdown()


def test_truncation_pauses_cleaning_and_lowers_the_cleaner_checkpoint(tmp_path: Path) -> None:
    """Kafka's truncateTo + maybeTruncateCheckpoint: the checkpoint never stays above what a truncation rewrote."""
    manager = started_compacting_manager(tmp_path / "d")
    try:
        log = manager.get_or_create_log("c", 0)
        fill(log, 80)
        log.roll()
        manager.run_job_now(JOB_LOG_CLEANER)
        tp = log.topic_partition
        assert CleanerCheckpoints(tmp_path / "d").read() == {tp: 80}
        assert manager.truncate_to(tp, 78)
        assert log.log_end_offset == 78
        assert CleanerCheckpoints(tmp_path / "d").read() == {tp: log.active_segment.base_offset}
        assert manager.cleaner.manager.state(tp) is None, "cleaning resumed after the truncation"
        assert not manager.truncate_to(tp, 100)
    finally:
        manager.shutdown()


def test_no_cleaner_job_when_disabled(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    broker = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "d"), "log.cleaner.enable": "false"})
    manager = LogManager(broker, clock=clock, scheduler=ManualScheduler(clock))
    manager.startup()
    try:
        assert JOB_LOG_CLEANER not in manager.scheduler.jobs()
    finally:
        manager.shutdown()


def test_a_paused_partition_is_not_cleaned(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    fill(log, 20)
    log.roll()
    cleaner = cleaner_for(tmp_path, log, clock)
    cleaner.abort_and_pause(log.topic_partition)
    assert cleaner.run_pass().logs == []
    cleaner.resume(log.topic_partition)
    assert [r.error for r in cleaner.run_pass().logs] == [None]
    log.close()


# -- logmgr compact ----------------------------------------------------------------------------------------------------


def test_compact_dry_run_changes_no_byte_and_the_real_run_does_what_it_said(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    root = tmp_path / "logs"
    log = load_log(root / "t-0", COMPACT, clock=clock)
    fill(log, 80)
    log.append_records([SimpleRecord(None, b"k1")])
    log.roll()
    log.close()
    before = read_tree(root)
    flags = ["--topic-config", "t:cleanup.policy=compact", "--topic-config", "t:segment.bytes=1000"]
    dry = CliRunner().invoke(compact, [str(root), "--dry-run", *flags])
    assert dry.exit_code == 0, dry.output
    assert read_tree(root) == before
    assert "dirty ratio 1.000" in dry.output and "reclaimed" in dry.output
    real = CliRunner().invoke(compact, [str(root), "--json", *flags])
    assert real.exit_code == 0, real.output
    log = load_log(root / "t-0", COMPACT, clock=clock, had_clean_shutdown=True)
    assert [(o, k) for o, k, _ in records(log)] == [(75, b"k0"), (77, b"k2"), (78, b"k3"), (79, b"k4"), (80, b"k1")]
    assert records(log)[-1][2] is None
    assert CleanerCheckpoints(root).read() == {log.topic_partition: 81}
    log.close()
    assert verify_paths([root / "t-0"]).ok


def test_bug_compact_dry_run_wrote_its_simulated_pass_into_tmpdir(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the plan simulated the cleaning pass by writing the cleaned segments into $TMPDIR (then removing
    them): on a read-only system with no writable temporary dir the dry run failed, and it doubled the disk use.
    Now the same cleaner decisions are only counted: the plan is made on a log dir mounted read-only with TMPDIR
    a read-only dir that stays empty, and the real run then does exactly the planned pass (groups, bytes of each
    group, batches and records kept)."""
    clock = ManualClock(T0)
    root = small_fs / "logs"
    # Indexes of 4 KiB (not 10 MiB, preallocated): the real run writes its cleaned segments on the 4 MiB tmpfs.
    log = load_log(root / "t-0", dataclasses.replace(COMPACT, segment_index_bytes=4096), clock=clock)
    fill(log, 70)
    log.append_records([SimpleRecord(b"a", b"z")], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(4, 0, ControlRecordType.ABORT, 0)
    log.append_records([SimpleRecord(None, b"k1")])
    log.roll()
    log.close()
    scratch = small_fs / "tmp"
    scratch.mkdir()
    remount = ["mount", "-o", "remount,ro", str(small_fs)]
    if subprocess.run(remount, capture_output=True).returncode != 0:
        pytest.skip("cannot remount the tmpfs read-only here")
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = read_tree(root)
    flags = [
        *("--topic-config", "t:cleanup.policy=compact", "--topic-config", "t:segment.bytes=1000"),
        *("--topic-config", "t:segment.index.bytes=4096", "--json"),
    ]
    try:
        dry = CliRunner().invoke(compact, [str(root), "--dry-run", *flags])
        assert dry.exit_code == 0, dry.output
        assert read_tree(root) == before and list(scratch.iterdir()) == []
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    (planned,) = [a for p in json.loads(dry.output)["partitions"] for a in p["actions"]]
    assert len(planned["groups"]) > 1 and len(planned["groupBytes"]) == len(planned["groups"])
    assert planned["recordsRemoved"] > 0 and planned["batchesAfter"] < planned["batchesBefore"]
    real = CliRunner().invoke(compact, [str(root), *flags])
    assert real.exit_code == 0, real.output
    (applied,) = [a for a in json.loads(real.output)["applied"] if a["action"] == "compact"]
    assert applied == planned
    sizes = [(root / "t-0" / f"{group[0]:020d}.log").stat().st_size for group in planned["groups"]]
    assert sizes == planned["groupBytes"]
    assert list(scratch.iterdir()) == []


def test_real_consumer_offsets_compact_to_the_latest_record_per_key(tmp_path: Path) -> None:
    source = require_fixtures(KAFKA_REAL) / "kraft-3.7-clean-transactions" / "kafka-data"
    partitions = sorted(p for p in source.iterdir() if p.name.startswith("__consumer_offsets-"))
    clock = ManualClock(T0)
    config = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0)
    checked = 0
    for partition in partitions:
        if not any(partition.glob("*.log")) or all(p.stat().st_size == 0 for p in partition.glob("*.log")):
            continue
        target = tmp_path / partition.name
        shutil.copytree(partition, target)
        log = load_log(target, config, clock=clock)
        before = records(log)
        latest = {k: (o, v) for o, k, v in before}
        log.roll()
        cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
        after = records(log)
        assert {k: (o, v) for o, k, v in after} == latest
        assert len({k for _, k, _ in after}) == len(after)
        committed = read_committed_records(log)
        assert set(committed) <= set(after) and committed == sorted(committed)
        log.close()
        assert verify_paths([target]).ok
        checked += 1
    assert checked, "no __consumer_offsets partition with data in the fixture"


@pytest.mark.parametrize(
    "folder",
    ["none-0", "gzip-0", "snappy-0", "lz4-0", "zstd-aiokafka-0", "idempotent-0", "transactions-0", "log-append-time-0"],
)
def test_segments_kafka_wrote_compact_to_what_kafkas_reader_expects(tmp_path: Path, folder: str) -> None:
    """Segments written and read back by Kafka's own record classes (every codec, idempotent and transactional
    producers, LogAppendTime), compacted: what remains is, per key, the last record Kafka's reader reported
    (expected.jsonl), aborted and keyless records gone, with its offset, timestamp and type, headers and producer
    fields unchanged; the cleaned log verifies."""
    source = require_fixtures(CLIENTS_GENERATED) / folder
    expected = [json.loads(line) for line in (source / "expected.jsonl").read_text().splitlines()]
    aborted_file = source / "aborted_transactions.json"
    aborted = set(json.loads(aborted_file.read_text())["abortedDataOffsets"]) if aborted_file.exists() else set()
    latest: dict[str, dict[str, Any]] = {}
    for record in expected:
        if not record["isControl"] and record["key"] is not None and record["offset"] not in aborted:
            latest[record["key"]] = record
    model = sorted(latest.values(), key=lambda r: r["offset"])
    target = tmp_path / "t-0"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.json*"))
    clock = ManualClock(T0)
    log = load_log(target, LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0), clock=clock)
    log.roll()
    result = cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    assert result is not None and result.error is None
    batches, _ = read_batches(log)
    kept = [(batch, record) for batch in batches if not batch.is_control for record in batch.records()]

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode()

    assert [
        (
            r.offset,
            b64(r.key),
            b64(r.value),
            [[h.key, b64(h.value)] for h in r.headers],
            r.timestamp,
            b.timestamp_type.label,
            b.producer_id,
            b.producer_epoch,
            b.is_transactional,
        )
        for b, r in kept
    ] == [
        (
            m["offset"],
            m["key"],
            m["value"],
            m["headers"],
            m["timestamp"],
            m["timestampType"],
            m["producerId"],
            m["producerEpoch"],
            m["isTransactional"],
        )
        for m in model
    ]
    log.close()
    assert verify_paths([target]).ok


def test_isolation_log_end_reads_across_offset_gaps(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    fill(log, 30, keys=3)
    log.roll()
    cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    # Reading from a removed offset serves the next retained batch (Kafka's fetch rule).
    fetch = log.read(3, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert [b.base_offset for b in fetch.batches()][:1] == [27]
    log.close()


def test_bug_an_open_transaction_never_supersedes_committed_records(tmp_path: Path) -> None:
    # Was: the open transaction's record at 2 entered the map and removed the committed value at 1, which the
    # abort then could not bring back. As in Kafka, the segment holding the last stable offset is outside the pass
    # (its base bounds it), so nothing of it is mapped or rewritten: 0 stays until that segment is cleanable.
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(tmp_path, log, clock)
    log.append_records([SimpleRecord(b"old", b"k")])
    log.roll()
    log.append_records([SimpleRecord(b"committed", b"k")])
    log.append_records([SimpleRecord(b"open", b"k")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.roll()
    cleaner.clean_log(tmp_path, log)
    log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
    assert read_committed_records(log) == [(0, b"k", b"old"), (1, b"k", b"committed")]
    log.roll()
    cleaner.clean_log(tmp_path, log)
    assert read_committed_records(log) == [(1, b"k", b"committed")]
    log.close()


def test_cleaning_races_appends_and_retention_without_losing_the_latest_values(tmp_path: Path) -> None:
    import threading

    clock = ManualClock(T0)
    log = open_log(tmp_path, clock, LogConfig(cleanup_policy=("compact",), segment_bytes=600, file_delete_delay_ms=0))
    cleaner = cleaner_for(tmp_path, log, clock)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clean_forever() -> None:
        try:
            while not stop.is_set():
                for result in cleaner.run_pass(all_compacted=True).logs:
                    assert result.error is None or result.error.startswith("aborted"), result.error
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    thread = threading.Thread(target=clean_forever)
    thread.start()
    try:
        for round_ in range(6):
            fill(log, 60, keys=7)
            log.roll()
            # Retention and the log-start-offset rule delete segments under the cleaner's feet.
            log.delete_records_before(max(log.log_start_offset, log.log_end_offset - 100 - round_))
            log.delete_old_segments()
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    end = log.log_end_offset
    present = {o: (k, v) for o, k, v in records(log)}
    for offset in range(end - 7, end):
        assert present.get(offset) == (b"k%d" % (offset % 7), b"v%d" % offset)
    log._check()
    log.close()


def test_spark_scan_reads_a_compacted_log_with_gaps_empty_batches_and_removed_markers(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install -e '.[spark]')")
    pytest.importorskip("numpy", reason="numpy not installed (pip install -e '.[spark]')")
    from logmgr.spark.options import parse_options
    from logmgr.spark.scan import plan_scan, read_slice

    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    fill(log, 30, keys=3)
    log.append_records([SimpleRecord(b"a", b"x")], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(4, 0, ControlRecordType.ABORT, 0)
    log.append_records([SimpleRecord(b"p", b"y")], producer_id=5, producer_epoch=0, base_sequence=0)
    log.append_records([SimpleRecord(b"q", b"y")])
    log.roll()
    cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    expected = [o for o, _, _ in records(log)]
    assert expected == [27, 28, 29, 33]
    log.close()
    for isolation in ("read_uncommitted", "read_committed"):
        options = parse_options({"path": str(tmp_path), "kafka.isolation.level": isolation})
        found: list[int] = []
        for piece in plan_scan(options).slices:
            for table in read_slice(piece, options.columns):
                found.extend(table.column("offset").to_pylist())
        assert found == expected, isolation


def test_compact_plan_predicts_the_tree_the_real_run_leaves(tmp_path: Path) -> None:
    from logmgr.cleaner.offline import plan_compact
    from logmgr.offline.plan import DERIVED, apply_plan
    from logmgr.offline.scan import scan_log_dir
    from logmgr.topic_configs import load_resolver

    clock = ManualClock(T0)
    root = tmp_path / "logs"
    log = load_log(root / "t-0", COMPACT, clock=clock)
    fill(log, 70)
    log.append_records([SimpleRecord(b"a", b"z")], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(4, 0, ControlRecordType.ABORT, 0)
    log.roll()
    log.close()
    resolver = load_resolver(
        [root], server_properties=None, topic_config_flags=["t:cleanup.policy=compact", "t:segment.bytes=1000"],
        topic_configs_files=[],
    )
    before = read_tree(root)
    plan = plan_compact(scan_log_dir(root), resolver.resolve, resolver.broker(), T0)
    assert read_tree(root) == before
    apply_plan(plan)
    after = read_tree(root)
    predicted = plan.predict(before)
    derived = {path.removesuffix("?") for path, content in predicted.items() if content == DERIVED}
    assert {p: c for p, c in after.items() if p not in derived} == {
        p: c for p, c in predicted.items() if p.removesuffix("?") not in derived
    }
    assert {p for p, c in predicted.items() if c == DERIVED and not p.endswith("?")} <= set(after)
    (action,) = [a for p in plan.partitions for a in p.actions]
    assert action.bytes_after == sum(len(c) for p, c in after.items() if p.startswith("t-0/") and p.endswith(".log"))


def test_bug_two_cleaner_threads_updating_one_dirs_checkpoint_lost_an_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: two cleaner threads finishing logs of one dir each read, updated and rewrote cleaner-offset-checkpoint
    at once: one entry was lost, or the shared .tmp vanished under a rename (FileNotFoundError, 1 make test in 15).
    The first writer is held inside its write until the second has reached the update; the file must hold both."""
    lock = ContendedLock(manager_module._CHECKPOINT_UPDATES)
    monkeypatch.setattr(manager_module, "_CHECKPOINT_UPDATES", lock)
    original = OffsetCheckpointFile.write
    first = threading.Event()

    def write_waiting_for_the_second_updater(self: OffsetCheckpointFile, content: Any) -> None:
        if not first.is_set():
            first.set()
            # With the lock, the second thread blocks on it (contended); without, it would run its whole update here.
            lock.contended.wait(FAILURE_DEADLINE_S)
        original(self, content)

    monkeypatch.setattr(OffsetCheckpointFile, "write", write_waiting_for_the_second_updater)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    writer = threading.Thread(target=lambda: CleanerCheckpoints(tmp_path).update({tp0: 10}))
    writer.start()
    assert first.wait(FAILURE_DEADLINE_S)
    CleanerCheckpoints(tmp_path).update({tp1: 20})
    writer.join(FAILURE_DEADLINE_S)
    assert CleanerCheckpoints(tmp_path).read() == {tp0: 10, tp1: 20}


def test_cleaner_threads_share_the_dedupe_buffer_and_never_a_map(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    logs = [load_log(tmp_path / f"t-{p}", COMPACT, clock=clock) for p in range(4)]
    for log in logs:
        fill(log, 40)
        log.roll()
    cleaner = LogCleaner(BrokerConfig(log_cleaner_threads=2, log_cleaner_dedupe_buffer_size=4800), lambda: {tmp_path: logs}, clock)
    report = cleaner.run_pass()
    assert sorted(r.to_json()["partition"] for r in report.logs) == [f"t-{p}" for p in range(4)]
    assert all(r.error is None and r.end_offset == 40 for r in report.logs)
    assert [m.slots for m in cleaner._maps] == [100, 100]
    for log in logs:
        assert [o for o, _, _ in records(log)] == [35, 36, 37, 38, 39]
        log.close()


def test_bug_cleaning_rewrote_the_segment_holding_the_high_watermark(tmp_path: Path) -> None:
    """Was: the pass ran up to the last stable offset itself, not to the base of the segment holding it as Kafka's
    LogToClean.firstUncleanableOffset does, so it rewrote that segment: aborted data above the high watermark went
    and a committed record below it was removed by one in the same segment. That segment must stay byte for byte."""
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    for _ in range(4):
        log.append_records([SimpleRecord(b"old", b"a")])
    log.roll()
    log.append_records([SimpleRecord(b"below", b"a")])
    log.append_records([SimpleRecord(b"x", b"b")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(9, 0, ControlRecordType.ABORT, 0)
    log.append_records([SimpleRecord(b"above", b"a")])
    holding = log.roll().base_offset
    log.high_watermark = 5
    held = (tmp_path / "t-0" / "00000000000000000004.log").read_bytes()
    result = cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    assert result is not None and result.error is None
    assert (result.before.first_uncleanable_offset, result.end_offset, holding) == (4, 4, 8)
    assert [o for o, _, _ in records(log)] == [3, 4, 5, 7]
    assert (tmp_path / "t-0" / "00000000000000000004.log").read_bytes() == held
    log.close()


def test_dirtiest_log_first_above_min_cleanable_dirty_ratio_or_forced_by_max_compaction_lag(tmp_path: Path) -> None:
    """Kafka's grabFilthiestCompactedLog: logs above min.cleanable.dirty.ratio, dirtiest first; one below it only
    once a dirty record is older than max.compaction.lag.ms."""
    clock = ManualClock(T0)
    base = LogConfig(cleanup_policy=("compact",), segment_bytes=1_000, file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.5)
    lagged = dataclasses.replace(base, max_compaction_lag_ms=1_000)
    logs = {
        "hi": load_log(tmp_path / "hi-0", base, clock=clock),
        "mid": load_log(tmp_path / "mid-0", base, clock=clock),
        "lo": load_log(tmp_path / "lo-0", base, clock=clock),
        "forced": load_log(tmp_path / "forced-0", lagged, clock=clock),
    }
    cleaner = LogCleaner(BrokerConfig(), lambda: {tmp_path: list(logs.values())}, clock)
    # 40 distinct keys, cleaned: 40 records stay clean; then the dirty part decides the ratio.
    for name in ("mid", "lo", "forced"):
        fill(logs[name], 40, keys=1_000)
        logs[name].roll()
        assert cleaner.clean_log(tmp_path, logs[name]) is not None
    for name, dirty in (("hi", 40), ("mid", 60), ("lo", 20), ("forced", 20)):
        fill(logs[name], dirty, keys=1_000)
        logs[name].roll()
    ratios = {str(ltc.topic_partition): ltc.cleanable_ratio for _, _, ltc in cleaner.dirty_logs(all_compacted=True)}
    assert ratios["hi-0"] == 1.0 and 0.5 < ratios["mid-0"] < 1.0 and ratios["lo-0"] < 0.5, ratios
    assert [r.to_json()["partition"] for r in cleaner.run_pass().logs] == ["hi-0", "mid-0"]
    clock.advance(1_001)
    report = cleaner.run_pass()
    assert [r.to_json()["partition"] for r in report.logs] == ["forced-0"]
    assert report.logs[0].before.needs_compaction_now
    for log in logs.values():
        log.close()


class StoppedClock:
    """Monotonic seconds that move only when the throttler sleeps: the seconds slept times the rate are the bytes
    it let through."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds



def test_cleaning_is_throttled_to_log_cleaner_io_max_bytes_per_second(tmp_path: Path) -> None:
    """Every byte mapped, read or written is paid for at the rate, but the last period's (fewer than a second's
    worth)."""
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    fill(log, 60)
    log.roll()
    stopped = StoppedClock()
    rate = 2_000.0
    cleaner = LogCleaner(
        BrokerConfig(log_cleaner_io_max_bytes_per_second=rate),
        lambda: {tmp_path: [log]},
        clock,
        sleep=stopped.sleep,
        monotonic=stopped.monotonic,
    )
    (result,) = cleaner.run_pass().logs
    assert result.stats is not None
    moved = result.stats.map_bytes_read + result.stats.bytes_read + result.stats.bytes_written
    assert moved > 2 * rate
    assert moved - rate < stopped.now * rate <= moved + 1e-6
    assert cleaner.throttler.throttled_s == pytest.approx(stopped.now)
    log.close()

def test_bug_the_cleaner_job_waited_log_cleaner_backoff_ms_between_partial_passes_of_a_big_log(tmp_path: Path) -> None:
    """Was: the job cleaned every dirty log once and waited the whole log.cleaner.backoff.ms, so a log five times
    the dedupe buffer took five backoffs. As Kafka's CleanerThread.doWork, a step cleans the dirtiest log and the
    next runs at once while one moved a checkpoint; the backoff follows only a step that cleaned nothing. On
    demand, run_job_now still runs one full pass over every cleanable log."""
    clock = ManualClock(T0)
    broker = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path / "d"),
            "log.cleaner.backoff.ms": "5000",
            "log.initial.task.delay.ms": "0",
            "log.segment.bytes": "1000",
            # 10 slots x 0.5: five keys a pass.
            "log.cleaner.dedupe.buffer.size": "240",
            "log.cleaner.io.buffer.load.factor": "0.5",
        }
    )
    scheduler = ManualScheduler(clock)
    compacted = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    manager = LogManager(broker, clock=clock, scheduler=scheduler, topic_overrides={"c": compacted}, disk_usage=calm_disk)
    manager.startup()
    checkpoints = CleanerCheckpoints(tmp_path / "d")
    try:
        logs = [manager.get_or_create_log("c", p) for p in (0, 1)]
        for log in logs:
            for i in range(25):
                log.append_records([SimpleRecord(b"v", b"key-%d" % i)])
            log.roll()
        report = manager.run_job_now(JOB_LOG_CLEANER)
        assert report is not None
        assert sorted((r.to_json()["partition"], r.end_offset) for r in report.logs) == [("c-0", 5), ("c-1", 5)]
        assert scheduler.job_stats(JOB_LOG_CLEANER).runs == 0
        scheduler.advance(0)
        # Four more partial passes per log, one log a step (log.cleaner.threads=1), then one step finding nothing:
        # all at T0.
        assert scheduler.job_stats(JOB_LOG_CLEANER).runs == 9
        assert checkpoints.read() == {log.topic_partition: 25 for log in logs}
        assert clock.time_ms() == T0
        for i in range(25, 35):
            logs[0].append_records([SimpleRecord(b"v", b"key-%d" % i)])
        logs[0].roll()
        scheduler.advance(4_999)
        assert scheduler.job_stats(JOB_LOG_CLEANER).runs == 9, "new dirty data waits for the backoff"
        scheduler.advance(1)
        assert scheduler.job_stats(JOB_LOG_CLEANER).runs == 12
        assert checkpoints.read()[logs[0].topic_partition] == 35
        scheduler.advance(5_000)
        assert scheduler.job_stats(JOB_LOG_CLEANER).runs == 13
        # Kafka's gauges keep the last cleaning, not the idle steps' emptiness.
        assert manager.cleaner.metrics()["cleaner-recopy-percent"] > 0
    finally:
        manager.shutdown()
    assert JOB_LOG_CLEANER not in scheduler.jobs(), "the loop ends at shutdown"


def test_segments_are_grouped_by_segment_bytes_index_bytes_and_32_bit_relative_offsets(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock, LogConfig(cleanup_policy=("compact",), segment_bytes=1_000, index_interval_bytes=1))
    fill(log, 60)
    log.roll()
    segments = log.segments.values()[:-1]
    assert len(segments) >= 4
    bases = lambda groups: [[s.base_offset for s in g] for g in groups]  # noqa: E731
    end = log.log_end_offset

    def greedy(groups: list[list[Any]], measure: Any, limit: int) -> bool:
        # Each group fits the limit, and the next segment would not have fitted (Kafka groups greedily).
        return all(sum(measure(s) for s in g) <= limit or len(g) == 1 for g in groups) and all(
            sum(measure(s) for s in g) + measure(n[0]) > limit for g, n in itertools.pairwise(groups)
        )

    log_bytes = lambda s: s.size  # noqa: E731
    limit = 2 * max(log_bytes(s) for s in segments)
    by_size = group_segments_by_size(segments, limit, 1 << 20, end)
    assert 1 < len(by_size) < len(segments) and greedy(by_size, log_bytes, limit)
    # Index bytes (an entry a batch here), offset and time index alike.
    index_bytes = lambda s: s.offset_index.size_in_bytes  # noqa: E731
    limit = 2 * max(index_bytes(s) for s in segments)
    by_index = group_segments_by_size(segments, 1 << 30, limit, end)
    assert 1 < len(by_index) < len(segments) and greedy(by_index, index_bytes, limit)
    assert bases(group_segments_by_size(segments, 1 << 30, 1 << 20, end)) == [[s.base_offset for s in segments]]
    log.close()
    # An offset 2^31 past the first base cannot be a relative offset of the same segment (the append rolled too).
    far = load_log(tmp_path / "f-0", COMPACT, clock=clock)
    far.append_records([SimpleRecord(b"a", b"k")])
    far.append_as_follower(build_batch([SimpleRecord(b"b", b"k", T0)], base_offset=(1 << 31) + 5))
    far.roll()
    inactive = far.segments.values()[:-1]
    assert bases(group_segments_by_size(inactive, 1 << 30, 1 << 20, far.log_end_offset)) == [[0], [(1 << 31) + 5]]
    far.close()


def test_rebuilt_batches_keep_leader_epoch_producer_fields_codec_and_timestamp_type(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path, clock)
    log.append_records(
        [SimpleRecord(b"v0", b"k"), SimpleRecord(b"v1", b"j"), SimpleRecord(b"v2", b"k")],
        compression=CompressionType.GZIP, producer_id=11, producer_epoch=3, base_sequence=0, leader_epoch=7,
    )
    log.append_records([SimpleRecord(None, b"j")], leader_epoch=8)
    log.roll()
    before = read_batches(log)[0][0]
    cleaner_for(tmp_path, log, clock).clean_log(tmp_path, log)
    batches, _ = read_batches(log)
    rebuilt = batches[0]
    assert [r.offset for r in rebuilt.records()] == [2]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.partition_leader_epoch) == (0, 2, 7)
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (11, 3, 0)
    assert (rebuilt.compression, rebuilt.timestamp_type, rebuilt.max_timestamp) == (
        before.compression, before.timestamp_type, before.max_timestamp,
    )
    assert (batches[1].partition_leader_epoch, batches[1].delete_horizon_ms) == (8, T0 + 1_000)
    log.close()


def test_compact_on_real_broker_dirs_takes_configs_from_kraft_metadata_and_internal_topics(tmp_path: Path) -> None:
    """No --topic-config: a KRaft dir's compacted topics come from its metadata snapshot, a ZooKeeper-era dir's
    __consumer_offsets is compacted as Kafka creates it; --partition limits the pass to the partitions named."""
    kraft = require_fixtures(KAFKA_REAL) / "kraft-3.7-clean-transactions" / "kafka-data"
    dry = CliRunner().invoke(compact, [str(kraft), "--dry-run", "--json", "--partition", "_schemas-0"])
    assert dry.exit_code == 0, dry.output
    (schemas,) = json.loads(dry.output)["partitions"]
    assert schemas["partition"] == "_schemas-0" and "cleanup.policy=compact (snapshot " in schemas["notes"][0]
    root = tmp_path / "zk"
    shutil.copytree(require_fixtures(KAFKA_REAL) / "zk-3.7.1-clean-multiseg" / "kafka-logs", root)
    tp = TopicPartition("__consumer_offsets", 12)
    clock = ManualClock(T0)
    config = LogConfig(cleanup_policy=("compact",))
    log = load_log(root / str(tp), config, clock=clock, had_clean_shutdown=True)
    latest = {k: (o, v) for o, k, v in records(log) if o < log.active_segment.base_offset}
    log.close()
    before = read_tree(root)
    real = CliRunner().invoke(compact, [str(root), "--partition", str(tp)])
    assert real.exit_code == 0, real.output
    assert real.output.splitlines()[-1].startswith("compacted 1 log(s), ")
    changed = {p for p, c in read_tree(root).items() if before.get(p) != c} | {p for p in before if p not in read_tree(root)}
    assert changed and all(p.startswith(f"{tp}/") or p == "cleaner-offset-checkpoint" for p in changed), changed
    assert CleanerCheckpoints(root).read()[tp] == 862
    log = load_log(root / str(tp), config, clock=clock, had_clean_shutdown=True)
    cleaned = {k: (o, v) for o, k, v in records(log) if o < 862}
    assert cleaned == latest and len(cleaned) == len([o for o, _, _ in records(log) if o < 862])
    retained = [o for o, _, _ in records(log)]
    log.close()
    assert verify_paths([root]).ok
    # `logmgr read` walks the gaps: every retained offset once, in order; a start inside a gap serves the next.
    for args in ([], ["--isolation-level", "read_committed"], ["--offset", str(retained[0] + 1)]):
        out = CliRunner().invoke(read, [str(root), str(tp), *args])
        assert out.exit_code == 0, out.output
        first = retained[0] + 1 if args[:1] == ["--offset"] else 0
        assert [json.loads(line)["offset"] for line in out.stdout.splitlines()] == [o for o in retained if o >= first]


@pytest.mark.parametrize("change", ["delete", "truncate"])
@pytest.mark.parametrize("moment", ["mapping", "after a group was swapped in"])
def test_deleting_or_truncating_a_log_aborts_its_cleaning_pass_in_progress(tmp_path: Path, change: str, moment: str) -> None:
    """Kafka's abortAndPauseCleaning: the pass is held inside its loop (its checkDone) until the deletion or
    truncation is waiting for it (``LogCleanerManager.abort_waiting``), then stops at its next check; nothing
    half-written stays, no checkpoint entry is written, and cleaning resumes after a truncation."""
    manager = started_compacting_manager(tmp_path / "d")
    try:
        log = manager.get_or_create_log("c", 0)
        tp, directory = log.topic_partition, log.dir
        fill(log, 80)
        log.roll()
        states = manager.cleaner.manager
        check_done = states.check_done
        held = threading.Event()

        def due() -> bool:
            return moment == "mapping" or any(p.name.endswith(".log.deleted") for p in directory.iterdir())

        def hooked(checked: TopicPartition) -> None:
            if not held.is_set() and due():
                held.set()
                assert states.abort_waiting.wait(FAILURE_DEADLINE_S), "no abort came"
            check_done(checked)

        states.check_done = hooked  # type: ignore[method-assign, assignment]
        reports: list[Any] = []
        cleaning = threading.Thread(target=lambda: reports.append(manager.run_job_now(JOB_LOG_CLEANER)), daemon=True)
        cleaning.start()
        assert held.wait(FAILURE_DEADLINE_S), "the pass never reached its loop"
        if change == "delete":
            remains = manager.delete_log(tp)
        else:
            assert manager.truncate_to(tp, 70)
            remains = directory
        cleaning.join(FAILURE_DEADLINE_S)
        assert not cleaning.is_alive()
        (result,) = reports[0].logs
        assert result.error is not None and result.error.startswith("aborted"), result.to_json()
        assert not [p.name for p in remains.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert tp not in CleanerCheckpoints(tmp_path / "d").read()
        assert states.state(tp) is None
        if change == "truncate":
            states.check_done = check_done  # type: ignore[method-assign]
            (again,) = manager.run_job_now(JOB_LOG_CLEANER).logs  # type: ignore[union-attr]
            assert again.error is None
            latest = {k: v for _, k, v in records(log)}
            assert latest == {b"k%d" % (o % 5): b"v%d" % o for o in range(70)}
            offsets = [o for o, _, _ in records(log)]
            assert offsets == sorted(set(offsets)) and offsets[-1] == 69
    finally:
        manager.shutdown()


def test_compact_is_throttled_to_log_cleaner_io_max_bytes_per_second_of_the_broker_config(tmp_path: Path) -> None:
    """The offline command honours the broker's throttle, one throttler for its simulations and its real passes
    (as Kafka's cleaner threads share one): every byte mapped, read and written is paid for, at the rate of
    server.properties, but the last period's (fewer than a second's worth)."""
    from logmgr.cleaner.offline import iter_compacted, plan_compact
    from logmgr.offline.plan import apply_plan
    from logmgr.offline.scan import scan_log_dir
    from logmgr.topic_configs import load_resolver

    clock = ManualClock(T0)
    root = tmp_path / "logs"
    for partition in (0, 1):
        log = load_log(root / f"t-{partition}", COMPACT, clock=clock)
        fill(log, 80)
        log.roll()
        log.close()
    properties = tmp_path / "server.properties"
    properties.write_text("log.cleaner.io.max.bytes.per.second=1000\n")
    flags = ["t:cleanup.policy=compact", "t:segment.bytes=1000"]

    def plan_with(server_properties: Path | None, stopped: StoppedClock) -> Any:
        resolver = load_resolver(
            [root], server_properties=server_properties, topic_config_flags=flags, topic_configs_files=[]
        )
        return plan_compact(
            scan_log_dir(root), resolver.resolve, resolver.broker(), T0, sleep=stopped.sleep, monotonic=stopped.monotonic
        )

    unthrottled = StoppedClock()
    assert [a.io_max_bytes_per_second for a in iter_compacted(plan_with(None, unthrottled))] == [None, None]
    assert unthrottled.now == 0
    stopped = StoppedClock()
    plan = plan_with(properties, stopped)
    actions = list(iter_compacted(plan))
    assert [a.io_max_bytes_per_second for a in actions] == [1000, 1000]
    assert all("throttled to 1000 B/s" in a.describe() for a in actions)
    # A first pass maps every dirty byte, reads it again and writes what stays.
    moved = sum(2 * a.bytes_before + a.bytes_after for a in actions)
    assert moved - 1000 < stopped.now * 1000 <= moved + 1e-6
    # The command reads it from --config (a rate this run cannot reach: it never sleeps).
    fast = tmp_path / "fast.properties"
    fast.write_text("log.cleaner.io.max.bytes.per.second=1e12\n")
    topic_flags = [f for flag in flags for f in ("--topic-config", flag)]
    dry = CliRunner().invoke(compact, [str(root), "--dry-run", "--json", "--config", str(fast), *topic_flags])
    assert dry.exit_code == 0, dry.output
    assert [a["ioMaxBytesPerSecond"] for p in json.loads(dry.output)["partitions"] for a in p["actions"]] == [1e12] * 2
    apply_plan(plan)
    assert 2 * moved - 1000 < stopped.now * 1000 <= 2 * moved + 1e-6
