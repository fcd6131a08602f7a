"""Hostile batches (issue 11, items 1 and 2) through every reader: ``read``, ``dump``, ``verify``, the Spark
slice reader, ``Log.read`` consumers and log recovery at startup.

Each batch has a valid CRC and is tiny on disk: one huge zero-filled value, hundreds of thousands of empty
records, a legacy wrapper of many messages, legacy wrappers nested 30 deep. Readers must refuse them with a typed
error naming file and position, or stream them: the tracemalloc peak of each read stays far below what
materialising the batch would take. The full-size figures (240 MiB values, tens of millions of records, RSS and
wall time per command) come from ``bench/hostile_bench.py``; durations are never asserted here.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner

from cli.dump_cmd import dump
from cli.read_cmd import read
from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.dump import DumpOptions, dump_files
from logmgr.errors import LogmgrError
from logmgr.log_loader import load_log
from logmgr.spark.columnar import TARGET_ROWS
from logmgr.spark.options import parse_options
from logmgr.spark.scan import plan_scan, read_slice
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.errors import CorruptRecordError, RecordTooLargeError, StorageFormatError
from segments.records import CRC_OFFSET, DEFAULT_MAX_RECORD_BYTES, DecodeLimits, SimpleRecord, build_batch
from tests.faults.hostile_batches import (
    CODECS,
    LEGACY_CODECS,
    empty_records_batch,
    huge_value_batch,
    legacy_empty_messages,
    legacy_nested,
    write_partition,
)

T = TypeVar("T")
MIB = 1024 * 1024
EMPTY_COUNT = 150_000
"""Empty records per hostile batch: 1 MB decoded, about 30 MB as a list of Record objects."""
STREAMED_PEAK = 8 * MIB
"""What a streaming reader may hold at once here: a few decompressed pieces and Arrow/JSON buffers."""


def _peak(action: Callable[[], T]) -> tuple[T, int]:
    """``action()`` and the tracemalloc peak (bytes) while it ran."""
    tracemalloc.start()
    try:
        result = action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def _flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0x01
    return bytes(out)


@pytest.fixture
def crc_damaged_dir(tmp_path: Path) -> tuple[Path, Path, int]:
    """A log dir whose partition ``hostile-0`` holds a good batch, one failing its CRC, then a good one; returns
    the dir, the segment and the damaged batch's position."""
    good = build_batch([SimpleRecord(b"good-0")])
    bad = build_batch([SimpleRecord(b"bad" * 30)], base_offset=1)
    last = build_batch([SimpleRecord(b"good-2")], base_offset=2)
    partition = write_partition(tmp_path, [good, _flip(bad, len(bad) - 4), last])
    return tmp_path, partition / "00000000000000000000.log", len(good)


# --- item 1: no corrupt record is served as good ----------------------------------------------------------------


def test_read_refuses_a_batch_failing_its_crc(crc_damaged_dir: tuple[Path, Path, int]) -> None:
    """Regression (issue 11): ``logmgr read`` printed the records of a batch whose CRC fails, with exit 0."""
    log_dir, segment, position = crc_damaged_dir
    result = CliRunner().invoke(read, [str(log_dir), "hostile-0"])
    assert result.exit_code == 1
    assert [json.loads(line)["value"] for line in result.stdout.splitlines()] == ["good-0"]
    (line,) = result.stderr.strip().splitlines()
    assert str(segment) in line and f"position {position + CRC_OFFSET}" in line and "crc" in line


def test_read_skip_corrupt_skips_and_counts_the_batch(crc_damaged_dir: tuple[Path, Path, int]) -> None:
    log_dir, segment, _ = crc_damaged_dir
    result = CliRunner().invoke(read, [str(log_dir), "hostile-0", "--skip-corrupt"])
    assert result.exit_code == 0
    assert [json.loads(line)["value"] for line in result.stdout.splitlines()] == ["good-0", "good-2"]
    assert str(segment) in result.stderr and "skipped 1 corrupt batch" in result.stderr


def test_spark_reader_refuses_a_batch_failing_its_crc(crc_damaged_dir: tuple[Path, Path, int]) -> None:
    log_dir, segment, position = crc_damaged_dir
    options = parse_options({"path": str(log_dir)})
    with pytest.raises(CorruptRecordError) as info:
        for piece in plan_scan(options).slices:
            list(read_slice(piece, options.columns))
    assert info.value.path == str(segment) and info.value.position == position + CRC_OFFSET


# --- item 2: bounded memory on hostile batches ------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_read_refuses_a_huge_value_naming_file_and_position(tmp_path: Path, codec: CompressionType) -> None:
    """Regression (issue 11): one zero-filled value compressed to a few KB drove ``read`` to 4.7 GB RSS."""
    partition = write_partition(tmp_path, [huge_value_batch(codec, 4 * MIB)])
    result, peak = _peak(
        lambda: CliRunner().invoke(read, [str(tmp_path), "hostile-0", "--max-record-bytes", str(MIB)])
    )
    assert result.exit_code == 1 and result.stdout == ""
    assert str(partition / "00000000000000000000.log") in result.stderr and "exceeds the limit" in result.stderr
    # An uncompressed batch is as large on disk as in memory: reading it holds its bytes (a few copies).
    assert peak < (4 * MIB if codec is not CompressionType.NONE else 16 * MIB)


@pytest.mark.parametrize("codec", CODECS)
def test_read_and_dump_stream_a_batch_of_empty_records(tmp_path: Path, codec: CompressionType) -> None:
    """Regression (issue 11): a batch of millions of empty records made ``dump``/``read`` decode it whole first."""
    partition = write_partition(tmp_path, [empty_records_batch(codec, EMPTY_COUNT)])
    result, peak = _peak(lambda: CliRunner().invoke(read, [str(tmp_path), "hostile-0", "--max-messages", "5"]))
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 5
    assert peak < STREAMED_PEAK

    def dump_count() -> int:
        options = DumpOptions(deep_iteration=True)
        lines = dump_files([partition / "00000000000000000000.log"], options)
        return sum(1 for line in lines if "keySize" in str(line.content))

    lines, peak = _peak(dump_count)
    assert lines == EMPTY_COUNT
    assert peak < STREAMED_PEAK


@pytest.mark.parametrize("codec", CODECS)
def test_verify_streams_empty_records_and_refuses_a_value_above_the_default_limit(
    tmp_path: Path, codec: CompressionType
) -> None:
    """Regression (issue 11): ``verify`` took 4 GB on a 15 KB batch of empty records."""
    write_partition(tmp_path, [empty_records_batch(codec, EMPTY_COUNT)], topic="empty")
    report, peak = _peak(lambda: verify_paths([tmp_path / "empty-0"]))
    assert report.ok and report.records == EMPTY_COUNT
    assert peak < STREAMED_PEAK
    if codec is not CompressionType.ZSTD:
        return  # the other codecs meet the limit at smaller sizes in the read and dump tests
    write_partition(tmp_path, [huge_value_batch(codec, DEFAULT_MAX_RECORD_BYTES + MIB)], topic="huge")
    report, peak = _peak(lambda: verify_paths([tmp_path / "huge-0"]))
    (problem,) = report.problems
    assert "exceeds the limit" in problem.error and problem.position is not None
    assert peak < STREAMED_PEAK


@pytest.mark.parametrize("codec", CODECS)
def test_dump_reports_a_huge_value_and_cuts_long_values(tmp_path: Path, codec: CompressionType) -> None:
    partition = write_partition(tmp_path, [huge_value_batch(codec, 4 * MIB)])
    segment = partition / "00000000000000000000.log"
    lines = list(dump_files([segment], DumpOptions(deep_iteration=True, limits=DecodeLimits(MIB, 64 * MIB))))
    errors = [line for line in lines if line.stderr]
    assert len(errors) == 1 and errors[0].problem and str(segment) in str(errors[0].content)
    result = CliRunner().invoke(dump, [str(segment), "--print-data-log", "--max-value-bytes", "10"])
    assert result.exit_code == 0
    assert "payload: \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00...[truncated from 4194304 bytes]" in result.stdout


def test_read_max_value_bytes_marks_a_cut_value(tmp_path: Path) -> None:
    write_partition(tmp_path, [build_batch([SimpleRecord(b"x" * 100, b"key")])])
    result = CliRunner().invoke(read, [str(tmp_path), "hostile-0", "--max-value-bytes", "8"])
    (line,) = [json.loads(text) for text in result.stdout.splitlines()]
    assert line["value"] == "x" * 8 and line["value_truncated_from"] == 100 and "key_truncated_from" not in line


@pytest.mark.parametrize("codec", CODECS)
def test_spark_reader_slices_a_batch_of_empty_records(tmp_path: Path, codec: CompressionType) -> None:
    write_partition(tmp_path, [empty_records_batch(codec, EMPTY_COUNT)])
    options = parse_options({"path": str(tmp_path)})

    def row_counts() -> list[int]:
        return [table.num_rows for piece in plan_scan(options).slices for table in read_slice(piece, options.columns)]

    # Memory follows the Arrow batch (at most TARGET_ROWS rows), not the hostile batch: it comes in slices.
    counts = row_counts()
    assert sum(counts) == EMPTY_COUNT and len(counts) >= 3 and max(counts) <= TARGET_ROWS


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_hostile_wrappers_through_read_and_spark(tmp_path: Path, codec: CompressionType) -> None:
    write_partition(tmp_path, [legacy_nested(codec, 30)], topic="nested")
    result = CliRunner().invoke(read, [str(tmp_path), "nested-0"])
    assert result.exit_code == 1 and "nested" in result.stderr
    write_partition(tmp_path, [legacy_empty_messages(codec, 100_000)], topic="many")
    options = parse_options({"path": str(tmp_path / "many-0")})
    counts = [table.num_rows for piece in plan_scan(options).slices for table in read_slice(piece, options.columns)]
    assert sum(counts) == 100_000 and max(counts) <= TARGET_ROWS


@pytest.mark.parametrize("codec", CODECS)
def test_fetch_records_refuse_a_huge_value(tmp_path: Path, codec: CompressionType) -> None:
    pdir = tmp_path / "t-0"
    config = LogConfig.from_properties({"max.message.bytes": str(4 * MIB)})
    log = load_log(pdir, config, clock=ManualClock(1_700_000_000_000))
    try:
        log.append_as_leader(huge_value_batch(codec, 2 * MIB), leader_epoch=0)
        records: Iterator[object] = log.read(0, 1 << 20).iter_records(DecodeLimits(MIB, 64 * MIB))
        with pytest.raises(RecordTooLargeError) as info:
            next(records)
        assert info.value.path == str(pdir / "00000000000000000000.log")
    finally:
        log.close()


@pytest.mark.parametrize("codec", CODECS)
def test_startup_recovery_of_hostile_batches_stays_bounded(tmp_path: Path, codec: CompressionType) -> None:
    """LogManager startup after an unclean shutdown recovers every segment: hostile batches there are walked
    (CRC, framing) without being held whole."""
    pdir = write_partition(tmp_path, [empty_records_batch(codec, EMPTY_COUNT), huge_value_batch(codec, 4 * MIB)])

    def recover() -> str:
        try:
            log = load_log(pdir, LogConfig.from_properties({}), clock=ManualClock(1_700_000_000_000))
        except (StorageFormatError, LogmgrError) as err:
            return f"refused: {err}"
        log.close()
        return "loaded"

    _, peak = _peak(recover)
    assert peak < 2 * STREAMED_PEAK


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_bug_startup_on_nested_legacy_wrappers_raised_an_error_naming_no_file(tmp_path: Path, codec: CompressionType) -> None:
    """Was: the producer-state replay of a load read a legacy wrapper's base offset, decompressing wrappers nested
    30 deep, and the load failed with a CorruptRecordError naming no file. Kafka's loader takes producer state from
    v2 batches only; the nesting is refused when a reader decodes the wrapper."""
    pdir = write_partition(tmp_path, [legacy_nested(codec, 30)])
    for clean in (True, False):
        log = load_log(pdir, LogConfig.from_properties({}), clock=ManualClock(1_700_000_000_000), had_clean_shutdown=clean)
        assert log.log_end_offset == 1
        log.close()
    result = CliRunner().invoke(read, [str(tmp_path), "hostile-0"])
    assert result.exit_code == 1 and "00000000000000000000.log" in result.stderr
