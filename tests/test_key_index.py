"""The key index: its file format (segments/key_index.py) and the per-log index and dispatcher
(logmgr/key_index.py), checked against a scan of the log."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.key_index import KeyIndexDispatcher, LogKeyIndex, log_batches, query_by_key, query_segments
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.log_manager import LogManager
from segments.errors import StorageFormatError
from segments.file_records import FileBatch, iter_batches
from segments.key_index import (
    ENTRY_SIZE,
    HEADER_SIZE,
    SLOT_SIZE,
    KeyIndexCorruptError,
    KeyIndexHeader,
    KeyIndexReader,
    KeyIndexWriter,
    key_hash,
    key_index_file,
)
from segments.records import CRC_OFFSET, Record, RecordBatch, SimpleRecord

T0 = 1_700_000_000_000


def open_log(directory: Path, clock: ManualClock, **props: object) -> Log:
    config = LogConfig.from_properties(
        {"logmgr.key.index.enable": "true", **{k.replace("_", "."): str(v) for k, v in props.items()}}
    )
    return load_log(directory, config, clock=clock, had_clean_shutdown=False)


def scan(log: Log, key: bytes, begin: int | None = None, end: int | None = None) -> list[int]:
    """Offsets of the records with ``key`` by reading the whole log (the model)."""
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
        for item in iter_batches(fetch.records):
            for record in item.batch.records():
                ok = (begin is None or record.timestamp >= begin) and (end is None or record.timestamp <= end)
                if record.key == key and ok and record.offset >= log.log_start_offset:
                    found.append(record.offset)
            offset = item.batch.next_offset
    return found


def queried(log: Log, key: bytes, begin: int | None = None, end: int | None = None) -> list[int]:
    return [r.offset for r in log.query_by_key(key, begin_timestamp=begin, end_timestamp=end, max_records=10_000)]


# -- file format -----------------------------------------------------------------------------------------------


def test_writer_and_reader_round_trip_with_collisions_and_time_bounds(tmp_path: Path) -> None:
    path = key_index_file(tmp_path, 100)
    writer = KeyIndexWriter(path, 100, slot_count=2)  # two slots: chains mix keys, the hash filters them
    for i in range(50):
        writer.add(b"k%d" % (i % 5), 100 + i, T0 + i)
    writer.advance(160)
    writer.close()
    with KeyIndexReader(path) as reader:
        assert reader.header.entry_count == 50
        assert reader.header.next_offset == 160
        assert (reader.header.min_timestamp, reader.header.max_timestamp) == (T0, T0 + 49)
        hits = reader.lookup(b"k3")
        assert [e.offset for e in hits] == [100 + i for i in range(49, -1, -1) if i % 5 == 3]
        assert all(e.key_hash == key_hash(b"k3") for e in hits)
        assert [e.offset for e in reader.lookup(b"k3", begin_timestamp=T0 + 10, end_timestamp=T0 + 20)] == [118, 113]
        assert reader.lookup(b"k3", begin_timestamp=T0 + 50) == []
        assert reader.lookup(b"absent") == []


def test_reopened_writer_appends_to_existing_chains(tmp_path: Path) -> None:
    path = key_index_file(tmp_path, 0)
    writer = KeyIndexWriter(path, 0, slot_count=8)
    writer.add(b"a", 0, T0)
    writer.close()
    writer = KeyIndexWriter(path, 0)
    writer.add(b"a", 5, T0 - 10)  # an older timestamp than the first: deltas are signed
    writer.close()
    with KeyIndexReader(path) as reader:
        assert [(e.offset, e.timestamp) for e in reader.lookup(b"a")] == [(5, T0 - 10), (0, T0)]
        assert reader.header.min_timestamp == T0 - 10


def test_a_slot_written_past_the_counted_entries_is_not_followed(tmp_path: Path) -> None:
    """Regression: a crash between a slot write and the header write left a slot naming an uncounted entry; the
    next entry written there must not link to itself."""
    path = key_index_file(tmp_path, 0)
    writer = KeyIndexWriter(path, 0, slot_count=1)
    writer.add(b"a", 0, T0)
    writer.close()
    with open(path, "r+b") as f:  # the torn state: slot says entry 2, header counts 1
        f.seek(HEADER_SIZE)
        f.write((2).to_bytes(4, "big"))
    with KeyIndexReader(path) as reader:
        assert reader.lookup(b"a") == []  # the torn head hides the chain, never loops
    writer = KeyIndexWriter(path, 0)
    writer.add(b"a", 1, T0)
    writer.close()
    with KeyIndexReader(path) as reader:
        assert [e.offset for e in reader.lookup(b"a")] == [1]
    # Checked in the file: lookups stop at a link that does not point backwards, so they cannot tell.
    with open(path, "rb") as f:
        f.seek(HEADER_SIZE + SLOT_SIZE + 2 * ENTRY_SIZE - 4)  # entry 2's "previous" field
        assert int.from_bytes(f.read(4), "big") == 0


def test_bad_magic_and_short_files_raise_typed_errors_naming_the_file(tmp_path: Path) -> None:
    path = key_index_file(tmp_path, 0)
    path.write_bytes(b"XXXX" + bytes(HEADER_SIZE))
    with pytest.raises(KeyIndexCorruptError, match="bad magic") as err:
        KeyIndexReader(path)
    assert err.value.path == str(path)
    header = KeyIndexHeader(0, -1, -1, -1, -1, -1, -1, 0, 0, 16, 3)
    path.write_bytes(header.pack())
    with pytest.raises(KeyIndexCorruptError, match="need more than"):
        KeyIndexReader(path)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), key=st.binary(max_size=8))
def test_arbitrary_bytes_either_parse_or_raise_a_format_error(tmp_path: Path, data: bytes, key: bytes) -> None:
    path = tmp_path / "00000000000000000000.keyindex"
    path.write_bytes(data)
    try:
        with KeyIndexReader(path) as reader:
            reader.lookup(key)
            list(reader.entries())
    except StorageFormatError:
        pass


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b""]), st.integers(-(2**40), 2**40)), max_size=40),
    slots=st.integers(1, 7),
)
def test_round_trip_matches_the_entries_written(tmp_path: Path, entries: list[tuple[bytes, int]], slots: int) -> None:
    path = tmp_path / "00000000000000000007.keyindex"
    path.unlink(missing_ok=True)
    writer = KeyIndexWriter(path, 7, slot_count=slots)
    for i, (key, ts) in enumerate(entries):
        writer.add(key, 7 + i, ts)
        if i % 3 == 0:
            writer.commit()
    writer.close()
    with KeyIndexReader(path) as reader:
        assert [(e.offset, e.timestamp) for e in reader.entries()] == [(7 + i, ts) for i, (_k, ts) in enumerate(entries)]
        for key in (b"a", b"b", b"c", b""):
            want = [(7 + i, ts) for i, (k, ts) in enumerate(entries) if k == key]
            assert [(e.offset, e.timestamp) for e in reversed(reader.lookup(key))] == want


# -- the log's index --------------------------------------------------------------------------------------------


def append(log: Log, rng: random.Random, clock: ManualClock, keys: int = 12) -> None:
    records = []
    for _ in range(rng.randint(1, 4)):
        key = None if rng.random() < 0.1 else b"key-%d" % rng.randrange(keys)
        records.append(SimpleRecord(b"v", key, clock.time_ms() + rng.randint(-5, 5)))
    log.append_records(records)
    clock.advance(1)


@pytest.mark.parametrize("seed", range(6))
def test_model_random_keys_rolls_retention_truncation_and_crash_agree_with_a_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    pdir = tmp_path / "t-0"
    log = open_log(pdir, clock, segment_bytes=600, file_delete_delay_ms=0)
    dispatcher = KeyIndexDispatcher()
    dispatcher.register(log)
    for step in range(120):
        op = rng.random()
        if op < 0.7:
            append(log, rng, clock)
        elif op < 0.78:
            log.roll()
        elif op < 0.84 and log.log_end_offset > 0:
            log.delete_records_before(rng.randint(log.log_start_offset, log.high_watermark))
            log.delete_old_segments()
            log.deleter.run_due()
        elif op < 0.9 and log.log_end_offset > log.log_start_offset:
            log.truncate_to(rng.randint(log.log_start_offset, log.log_end_offset))
        elif op < 0.95:
            # SIGKILL: nothing is closed or committed; the next open recovers the log and the index from disk.
            dispatcher.unregister(log)
            log = open_log(pdir, clock, segment_bytes=600, file_delete_delay_ms=0)
            dispatcher.register(log)
        if rng.random() < 0.6:
            dispatcher.run_once()  # the dispatcher lags the appends by a random amount
        key = b"key-%d" % rng.randrange(12)
        assert queried(log, key) == scan(log, key), f"step {step}"
        begin, end = T0 + rng.randint(0, step + 5), T0 + rng.randint(0, step + 5)
        assert queried(log, key, begin, end) == scan(log, key, begin, end), f"step {step}"
    dispatcher.drain()
    index = log.key_index
    assert index is not None and index.progress == log.log_end_offset
    for k in range(12):
        assert queried(log, b"key-%d" % k) == scan(log, b"key-%d" % k)
    dispatcher.stop()
    log.close()


def test_dispatcher_starts_its_thread_only_once_a_log_is_registered(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    dispatcher = KeyIndexDispatcher()
    dispatcher.start()
    off = load_log(tmp_path / "off-0", LogConfig(), clock=clock)
    # The key index off everywhere (the default): no thread, nothing waking every poll interval.
    assert dispatcher.register(off) is None
    assert dispatcher._thread is None
    log = open_log(tmp_path / "t-0", clock)
    assert dispatcher.register(log) is not None
    thread = dispatcher._thread
    assert thread is not None and thread.is_alive()
    append(log, random.Random(3), clock)
    dispatcher.stop()
    assert dispatcher._thread is None and not thread.is_alive()
    # A dispatcher started with a log already registered starts its thread at once.
    dispatcher.start()
    assert dispatcher._thread is not None and dispatcher._thread.is_alive()
    dispatcher.stop()
    off.close()
    log.close()


def test_caught_up_index_is_used_and_files_follow_their_segments(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, file_delete_delay_ms=0)
    dispatcher = KeyIndexDispatcher()
    index = dispatcher.register(log)
    assert index is not None
    rng = random.Random(1)
    for _ in range(60):
        append(log, rng, clock)
    dispatcher.drain()
    bases = log.segments.base_offsets()
    assert len(bases) > 2
    assert {p.name for p in (tmp_path / "t-0").glob("*.keyindex")} == {key_index_file(".", b).name for b in bases}
    log.delete_records_before(bases[2])
    log.delete_old_segments()
    assert not key_index_file(log.dir, bases[0]).exists()
    assert queried(log, b"key-1") == scan(log, b"key-1")
    assert all(o >= bases[2] for o in queried(log, b"key-1"))
    log.close()


def test_index_enabled_on_an_existing_log_catches_up_from_the_log(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = LogConfig.from_properties({"segment.bytes": "500"})
    log = load_log(tmp_path / "t-0", config, clock=clock)
    rng = random.Random(2)
    for _ in range(40):
        append(log, rng, clock)
    log.close()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=500)
    dispatcher = KeyIndexDispatcher()
    index = dispatcher.register(log)
    assert index is not None and index.progress == 0
    dispatcher.drain()
    assert index.progress == log.log_end_offset
    assert queried(log, b"key-3") == scan(log, b"key-3")
    log.close()


def test_an_index_ahead_of_the_log_after_a_crash_is_rebuilt(tmp_path: Path) -> None:
    """Regression: the log lost its unflushed tail in a crash but the key index kept entries past it."""
    clock = ManualClock(T0)
    pdir = tmp_path / "t-0"
    log = open_log(pdir, clock)
    rng = random.Random(3)
    for _ in range(20):
        append(log, rng, clock)
    end = log.log_end_offset
    log.flush()
    LogKeyIndex(log, lambda: None).catch_up()
    log.close()
    # The lost tail: cut the .log back to its first batch.
    log_file = next(pdir.glob("*.log"))
    first = next(iter_batches(log_file.read_bytes())).batch
    os.truncate(log_file, first.size_in_bytes)
    log = open_log(pdir, clock)
    assert log.log_end_offset < end
    index = LogKeyIndex(log, lambda: None)
    assert index.progress == 0
    assert not key_index_file(pdir, 0).exists()  # removed: it indexed records the log no longer has
    index.catch_up()
    with KeyIndexReader(key_index_file(pdir, 0)) as reader:
        assert reader.header.next_offset == log.log_end_offset
    log.close()


def test_truncation_then_new_appends_with_other_keys_are_indexed(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock)
    index = LogKeyIndex(log, lambda: None)
    log.key_index = index
    for _ in range(5):
        log.append_records([SimpleRecord(b"v", b"a", T0)])
    index.catch_up()
    log.truncate_to(2)
    log.append_records([SimpleRecord(b"v", b"b", T0)] * 3)
    index.catch_up()
    with KeyIndexReader(key_index_file(log.dir, 0)) as reader:
        assert [e.offset for e in reader.lookup(b"a")] == [1, 0]
        assert [e.offset for e in reader.lookup(b"b")] == [4, 3, 2]
    assert queried(log, b"a") == [0, 1]
    log.close()


def test_max_records_keeps_the_first_in_offset_order(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=300)
    for i in range(30):
        log.append_records([SimpleRecord(b"%d" % i, b"k", T0 + i)])
    LogKeyIndex(log, lambda: None).catch_up()
    got = query_by_key(log, b"k", max_records=7)
    assert [r.offset for r in got] == list(range(7))
    assert [r.value for r in got] == [b"%d" % i for i in range(7)]
    assert query_by_key(log, b"k", max_records=0) == []
    log.close()


def test_bug_query_by_key_read_to_the_segment_end_after_max_records(tmp_path: Path) -> None:
    # A segment with no key index file is scanned; the scan used to decode every batch of the segment even after
    # the first ``max_records`` matches were found.
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock)
    for i in range(50):
        log.append_records([SimpleRecord(b"%d" % i, b"k", T0 + i)])
    bases = log.segments.base_offsets()
    bounds = list(zip(bases, [*bases[1:], log.log_end_offset], strict=True))
    read = log_batches(log)
    batches_read: list[int] = []

    def counting(start: int, stop: int, max_bytes: int) -> Iterator[tuple[RecordBatch, Iterator[Record]]]:
        for batch, records in read(start, stop, max_bytes):
            batches_read.append(batch.base_offset)
            yield batch, records

    got = query_segments(log.dir, bounds, counting, b"k", log_start=0, max_records=3)
    assert [r.offset for r in got] == [0, 1, 2]
    assert batches_read == [0, 1, 2]
    log.close()


def test_log_manager_builds_the_index_off_the_append_path(tmp_path: Path) -> None:
    broker = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "d"), "logmgr.key.index.enable": "false"})
    manager = LogManager(broker, topic_overrides={"t": {"logmgr.key.index.enable": "true"}})
    manager.startup()
    try:
        log = manager.get_or_create_log("t", 0)
        plain = manager.get_or_create_log("u", 0)
        assert log.key_index is not None and plain.key_index is None
        for i in range(20):
            log.append_records([SimpleRecord(b"v", b"k%d" % (i % 3), T0 + i)])
        manager.key_indexer.drain()
        assert log.key_index.progress == 20
        assert queried(log, b"k1") == scan(log, b"k1")
    finally:
        manager.shutdown()
    manager = LogManager(broker, topic_overrides={"t": {"logmgr.key.index.enable": "true"}})
    manager.startup()
    try:
        log = manager.get_or_create_log("t", 0)
        assert log.key_index is not None and log.key_index.progress == 20  # recovered from the headers
    finally:
        manager.shutdown()


def test_cli_read_by_key_with_time_bounds_and_usage_errors(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cli.main import main as cli

    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=300)
    for i in range(30):
        log.append_records([SimpleRecord(b"%d" % i, b"k%d" % (i % 3), T0 + i)])
    log.close()
    result = CliRunner().invoke(cli, ["reindex", str(tmp_path / "t-0"), "--key-index"])
    assert result.exit_code == 0, result.output
    assert f"{key_index_file(tmp_path / 't-0', 0)}: absent -> " in result.stdout
    log = open_log(tmp_path / "t-0", clock, segment_bytes=300)
    for i in range(30, 36):  # past the index: scanned
        log.append_records([SimpleRecord(b"%d" % i, b"k%d" % (i % 3), T0 + i)])
    log.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["read", str(tmp_path), "t-0", "--key", "k1"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == list(range(1, 36, 3))
    result = runner.invoke(
        cli, ["read", str(tmp_path), "t-0", "--key", "k1", "--from-time", str(T0 + 5), "--to-time", str(T0 + 20)]
    )
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == [7, 10, 13, 16, 19]
    result = runner.invoke(cli, ["read", str(tmp_path), "t-0", "--key", "nope"])
    assert result.exit_code == 0 and result.stdout == "" and "no records with key 'nope'" in result.stderr
    result = runner.invoke(cli, ["read", str(tmp_path), "t-0", "--to-time", "5"])
    assert result.exit_code == 2 and "--to-time needs --key" in result.stderr
    assert not list((tmp_path / "t-0").glob("*.keyindex.*"))


def test_verify_accepts_a_built_index_and_reports_entries_past_the_log(tmp_path: Path) -> None:
    from logmgr.verify import verify_paths

    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock)
    for i in range(10):
        log.append_records([SimpleRecord(b"v", b"k%d" % (i % 2), T0 + i)])
    LogKeyIndex(log, lambda: None).catch_up()
    log.close()
    report = verify_paths([tmp_path / "t-0"])
    assert report.ok, report.problems
    assert not report.warnings
    # The .log loses its tail but the index keeps it (what a crash without recovery could leave).
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    first = next(iter_batches(log_file.read_bytes())).batch
    os.truncate(log_file, first.size_in_bytes * 3)
    report = verify_paths([tmp_path / "t-0"])
    messages = [p.error for p in report.problems if p.file.endswith(".keyindex")]
    assert any("past the segment's last offset 2" in m for m in messages), report.problems
    assert any("entry 4 names offset 3, which no batch" in m for m in messages)


def test_files_of_segments_gone_from_the_log_are_removed_at_registration(tmp_path: Path) -> None:
    """Regression: a segment merged away by the cleaner (or deleted before a crash) left its .keyindex behind."""
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", clock)
    log.append_records([SimpleRecord(b"v", b"k", T0)])
    orphan = key_index_file(log.dir, 12345)
    KeyIndexWriter(orphan, 12345).close()
    LogKeyIndex(log, lambda: None).catch_up()
    assert not orphan.exists()
    assert key_index_file(log.dir, 0).exists()
    log.close()


def test_bug_index_left_by_a_disabled_key_index_hid_records_appended_after_a_truncation(tmp_path: Path) -> None:
    """An index built while the topic enabled it stayed on disk once the topic turned it off; nothing maintained
    it any more, so after a truncation and new appends query_by_key trusted its coverage and missed the new
    records (and after a full truncation a new segment reusing the base offset took the old file)."""
    broker = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "d")})
    manager = LogManager(broker, topic_overrides={"t": {"logmgr.key.index.enable": "true"}})
    manager.startup()
    try:
        log = manager.get_or_create_log("t", 0)
        for _ in range(10):
            log.append_records([SimpleRecord(b"old", b"a", T0)])
        manager.key_indexer.drain()
        manager.update_topic_config("t", {})
        assert log.key_index is None
        log.truncate_to(4)
        for _ in range(6):
            log.append_records([SimpleRecord(b"new", b"b", T0)])
        assert queried(log, b"b") == scan(log, b"b") == list(range(4, 10))
        log.truncate_fully_and_start_at(0)
        log.append_records([SimpleRecord(b"newer", b"a", T0)])
        assert queried(log, b"a") == scan(log, b"a") == [0]
    finally:
        manager.shutdown()


def test_reindex_key_index_is_a_plan_saying_why_per_file_and_the_real_run_does_exactly_it(tmp_path: Path) -> None:
    """``reindex --key-index``: the dry run names each .keyindex to (re)build and why (none yet, partial,
    unreadable, up to date) and each orphan to delete, changing nothing; the real run executes exactly that plan
    (the tree it predicted), reports each file, and leaves every key index complete."""
    from click.testing import CliRunner

    from cli.main import main as cli
    from logmgr.key_index import write_segment_key_index
    from logmgr.offline.plan import DERIVED, read_tree
    from logmgr.reindex import plan_reindex, rebuild_segment_key_index
    from segments.log_segment import LogSegment

    clock = ManualClock(T0)
    partition = tmp_path / "t-0"
    log = open_log(partition, clock, segment_bytes=300)
    for i in range(30):
        log.append_records([SimpleRecord(b"%d" % i, b"k%d" % (i % 3), T0 + i)])
    bases = [s.base_offset for s in log.segments.values()]
    log.close()
    assert len(bases) >= 4
    rebuild_segment_key_index(partition, bases[0])  # up to date
    segment = LogSegment.open(partition, bases[1], writable=False)
    try:
        write_segment_key_index(partition, bases[1], [next(iter(segment.batches(0))).batch])  # partial
    finally:
        segment.close()
    key_index_file(partition, bases[2]).write_bytes(b"not a key index")  # unreadable; the others: none yet
    orphan = key_index_file(partition, 999)
    orphan.write_bytes(key_index_file(partition, bases[0]).read_bytes())
    before = read_tree(tmp_path)

    dry = CliRunner().invoke(cli, ["reindex", str(partition), "--key-index", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert read_tree(tmp_path) == before
    lines = dry.stdout.splitlines()

    def line_of(base: int) -> str:
        (found,) = [line for line in lines if f"key index {key_index_file('.', base).name}" in line]
        return found

    assert "rebuild the key index" in line_of(bases[0]) and "up to date" in line_of(bases[0])
    assert f"it covers offsets [{bases[1]}, " in line_of(bases[1])
    assert "unreadable" in line_of(bases[2])
    assert all("build the key index" in line_of(b) and "none yet" in line_of(b) for b in bases[3:])
    assert any("delete orphan key index" in line and orphan.name in line for line in lines)
    assert lines[-1].endswith(
        f"{len(bases)} segment(s) to reindex, {len(bases)} key index(es) to (re)build, 1 orphan key index(es) to "
        "delete; nothing was changed"
    )

    planned = json.loads(CliRunner().invoke(cli, ["reindex", str(partition), "--key-index", "--dry-run", "--json"]).stdout)
    predicted = plan_reindex(partition, key_index=True).predict(before)
    real = CliRunner().invoke(cli, ["reindex", str(partition), "--key-index", "--json"])
    assert real.exit_code == 0, real.output
    report = json.loads(real.stdout)
    assert report["applied"] == [a for p in planned["partitions"] for a in p["actions"]]
    after = read_tree(tmp_path)
    derived = {path.removesuffix("?") for path, content in predicted.items() if content == DERIVED}
    assert {p: c for p, c in after.items() if p not in derived} == {
        p: c for p, c in predicted.items() if p.removesuffix("?") not in derived
    }
    assert not orphan.exists()
    reported = {Path(f["file"]).name: f for f in report["files"] if f["file"].endswith(".keyindex")}
    assert reported[orphan.name]["bytesAfter"] is None
    assert reported[key_index_file(".", bases[0]).name]["changed"] is False
    for index, base in enumerate(bases):
        stop = bases[index + 1] if index + 1 < len(bases) else 30
        with KeyIndexReader(key_index_file(partition, base)) as reader:
            assert (reader.header.next_offset, reader.header.entry_count) == (stop, stop - base)
        assert reported[key_index_file(".", base).name]["entriesAfter"] == stop - base


def test_bug_query_by_key_served_a_batch_failing_its_crc(tmp_path: Path) -> None:
    """Regression (issue 11, item 1): ``Log.query_by_key`` decoded the batches of its ``Log.read`` fetches without
    checking their CRC, so a record damaged on disk was returned as good. Now the query (through the index and by
    scanning) and ``read --key`` refuse the batch with an error naming the segment file and the batch's position."""
    from click.testing import CliRunner

    from cli.main import main as cli
    from segments.errors import CorruptRecordError

    pdir = tmp_path / "t-0"
    log, dispatcher = _indexed_log(pdir)
    segment = pdir / "00000000000000000000.log"
    damaged = _damage_the_third_batch(segment)
    for indexed in (True, False):
        if not indexed:
            key_index_file(pdir, 0).unlink()
        with pytest.raises(CorruptRecordError, match="crc") as refused:
            log.query_by_key(b"k")
        assert refused.value.path == str(segment) and refused.value.position == damaged.position + CRC_OFFSET
    dispatcher.stop()
    log.close()
    result = CliRunner().invoke(cli, ["read", str(tmp_path), "t-0", "--key", "k"])
    assert result.exit_code == 1 and result.stdout == ""
    assert str(segment) in result.stderr and f"position {damaged.position + CRC_OFFSET}" in result.stderr


def _indexed_log(pdir: Path) -> tuple[Log, KeyIndexDispatcher]:
    """Log ``pdir`` (partition ``t-0``) holding four key-indexed one-record batches with key ``k`` (values
    ``value-0``..``value-3``), its index drained; returns the open log and its dispatcher."""
    log = open_log(pdir, ManualClock(T0))
    dispatcher = KeyIndexDispatcher()
    dispatcher.register(log)
    for i in range(4):
        log.append_records([SimpleRecord(b"value-%d" % i, b"k", T0 + i)])
    dispatcher.drain()
    return log, dispatcher


def _damage_the_third_batch(segment: Path) -> FileBatch:
    """Overwrite the last value byte of the third batch of ``segment`` (offset 2, under the CRC); return that
    batch as it was."""
    damaged = list(iter_batches(segment.read_bytes()))[2]
    with open(segment, "r+b") as out:
        out.seek(damaged.end_position - 2)
        out.write(b"X")
    return damaged


def _indexed_log_with_a_damaged_batch(tmp_path: Path, *, damage: bool = True) -> tuple[Path, int]:
    """A log dir whose ``t-0`` is :func:`_indexed_log`'s, closed, the third batch failing its CRC unless not
    ``damage``; returns the segment and that batch's position."""
    pdir = tmp_path / "t-0"
    log, dispatcher = _indexed_log(pdir)
    dispatcher.stop()
    log.close()
    segment = pdir / "00000000000000000000.log"
    if not damage:
        return segment, list(iter_batches(segment.read_bytes()))[2].position
    return segment, _damage_the_third_batch(segment).position


def test_bug_read_key_ignored_skip_corrupt(tmp_path: Path) -> None:
    """Regression (issue 11): ``read --key`` stopped at a batch failing its CRC even with ``--skip-corrupt``; now
    the batch is named on stderr, skipped and counted, and the other records with the key are printed."""
    from click.testing import CliRunner

    from cli.main import main as cli

    segment, position = _indexed_log_with_a_damaged_batch(tmp_path)
    result = CliRunner().invoke(cli, ["read", str(tmp_path), "t-0", "--key", "k", "--skip-corrupt"])
    assert result.exit_code == 0
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == [0, 1, 3]
    assert str(segment) in result.stderr and "skipped 1 corrupt batch(es)" in result.stderr
    assert f"position {position + CRC_OFFSET}" in result.stderr


def test_bug_read_key_ignored_max_value_bytes(tmp_path: Path) -> None:
    """Regression (issue 11): ``read --key`` printed whole values whatever ``--max-value-bytes`` said; now each
    key and value is cut and marked with its whole size, as in the offset path."""
    from click.testing import CliRunner

    from cli.main import main as cli

    _indexed_log_with_a_damaged_batch(tmp_path, damage=False)
    result = CliRunner().invoke(cli, ["read", str(tmp_path), "t-0", "--key", "k", "--max-value-bytes", "3"])
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["value"], line["value_truncated_from"]) for line in lines] == [("val", 7)] * 4
    assert all(line["key"] == "k" and "key_truncated_from" not in line for line in lines)
