"""``logmgr dump`` with kafka-dump-log's own options (``DumpLogSegments.scala``), against the real fixtures and
the output shapes of Kafka's ``DumpLogSegmentsTest``."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import Result

from cli.dump_cmd import STRING_DECODER
from logmgr.dump import DumpOptions, dump_files
from segments.records import (
    ControlRecordType,
    EndTransactionMarker,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
)
from tests.conftest import KAFKA_REAL, require_fixtures
from tests.test_dump import SEGMENT, err_lines, json_lines, out_lines, run, three_batch_segment, write_log

KRAFT_42 = KAFKA_REAL / "kraft-4.2-clean" / "kafka-logs"
KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"
OFFSETS_15 = KRAFT_42 / "__consumer_offsets-15"
BATCH_LINE = re.compile(r"^baseOffset: \d+ lastOffset: .* size: (\d+) magic: ")


def segment_file(directory: Path, suffix: str) -> Path:
    return require_fixtures(directory / f"{SEGMENT}{suffix}")


def dumped_files(result: Result) -> list[str]:
    return [line.removeprefix("Dumping ") for line in out_lines(result) if line.startswith("Dumping ")]


def copy_segment(source: Path, target: Path, *suffixes: str) -> None:
    for suffix in suffixes:
        shutil.copyfile(segment_file(source, suffix), target / f"{SEGMENT}{suffix}")
        os.chmod(target / f"{SEGMENT}{suffix}", 0o644)


def assert_one_line_usage_error(result: Result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert err_lines(result) == [f"Error: {message}"]


# -- naming the files ----------------------------------------------------------------------------------------


def test_files_option_lists_are_split_at_commas_and_kept_in_order() -> None:
    log, index, timeindex = (segment_file(OFFSETS_15, s) for s in (".log", ".index", ".timeindex"))
    result = run("--files", f"{timeindex},{log}", "--files", index, "--max-bytes", "0")
    assert result.exit_code == 0, result.output
    assert dumped_files(result) == [str(timeindex), str(log), str(index)]


def test_positional_files_follow_the_files_option_and_are_never_split(tmp_path: Path) -> None:
    log, index = segment_file(OFFSETS_15, ".log"), segment_file(OFFSETS_15, ".index")
    odd = tmp_path / "a,b.log"
    result = run(log, odd, "--files", index)
    assert dumped_files(result) == [str(index), str(log), str(odd)]
    # The missing file is reported (exit 1) under its whole name.
    assert result.exit_code == 1
    assert any(line.startswith(f"{odd}: ") for line in err_lines(result))


def test_files_option_drops_empty_names_like_a_trailing_comma() -> None:
    index = segment_file(OFFSETS_15, ".index")
    assert dumped_files(run("--files", f"{index},,")) == [str(index)]


@pytest.mark.parametrize("args", [(), ("--files", ""), ("--files", ",,"), ("--deep-iteration",)])
def test_no_file_is_a_one_line_usage_error(args: tuple[str, ...]) -> None:
    assert_one_line_usage_error(run(*args), "no file to dump: give FILES or --files FILE1,FILE2,...")


def test_files_option_without_a_value_is_a_usage_error() -> None:
    result = run("--files")
    assert result.exit_code == 2


# -- refused and accepted Kafka options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--remote-log-metadata-decoder",),
            "--remote-log-metadata-decoder is not supported: Kafka prints the Java toString() of its "
            "RemoteLogMetadata classes, which logmgr does not reproduce; use --print-data-log or --json for the "
            "raw records",
        ),
        (
            ("--share-group-state-decoder",),
            "--share-group-state-decoder is not supported: logmgr has no schemas for __share_group_state "
            "records; use --print-data-log or --json for the raw records",
        ),
        (
            ("--value-decoder-class", "com.example.AvroDecoder"),
            "--value-decoder-class com.example.AvroDecoder: logmgr cannot load Java decoder classes; only "
            f"{STRING_DECODER} (UTF-8 text, the default) is available",
        ),
        (
            ("--key-decoder-class", "kafka.serializer.DefaultDecoder"),
            "--key-decoder-class kafka.serializer.DefaultDecoder: logmgr cannot load Java decoder classes; only "
            f"{STRING_DECODER} (UTF-8 text, the default) is available",
        ),
        (
            ("--offsets-decoder", "--transaction-log-decoder"),
            "--offsets-decoder and --transaction-log-decoder exclude each other: choose one decoder",
        ),
        (
            ("--transaction-log-decoder", "--cluster-metadata-decoder", "--offsets-decoder"),
            "--offsets-decoder and --transaction-log-decoder and --cluster-metadata-decoder exclude each other: "
            "choose one decoder",
        ),
    ],
)
def test_refused_options_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    assert_one_line_usage_error(run(*args, "--files", segment_file(OFFSETS_15, ".log")), message)


@pytest.mark.parametrize(
    "args",
    [("--max-bytes", "-1"), ("--max-bytes", str(2**31)), ("--max-message-size", "x"), ("--max-bytes",)],
)
def test_bad_sizes_are_usage_errors(args: tuple[str, ...]) -> None:
    assert run(*args, "--files", segment_file(OFFSETS_15, ".log")).exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ("--print-data-log",),
        ("--print-data-log", "--deep-iteration"),
        ("--value-decoder-class", STRING_DECODER),
        ("--key-decoder-class", STRING_DECODER),
        ("--key-decoder-class",),
        ("--value-decoder-class", "kafka.serializer.StringDecoder"),
    ],
)
def test_string_decoder_options_print_data_like_kafka(tmp_path: Path, args: tuple[str, ...]) -> None:
    """DumpLogSegmentsTest.testPrintDataLog: a decoder class or --print-data-log prints keys and payloads."""
    log = write_log(
        tmp_path / f"{SEGMENT}.log",
        build_batch([SimpleRecord(b"message value 0", b"message key 0", 1)], base_offset=0),
        build_batch([SimpleRecord(b"message value 1", None, 2)], base_offset=1),
    )
    # A decoder class option given without a value must not swallow the next option.
    result = run(*args, "--files", log)
    assert result.exit_code == 0, result.output
    lines = out_lines(result)
    assert lines[3].startswith("| offset: 0 ")
    assert lines[3].endswith("headerKeys: [] key: message key 0 payload: message value 0")
    assert lines[5].endswith("headerKeys: [] payload: message value 1")


def test_without_print_options_records_carry_no_data(tmp_path: Path) -> None:
    log, _ = three_batch_segment(tmp_path)
    deep = out_lines(run("--deep-iteration", "--files", log))
    assert [line for line in deep if line.startswith("|")]
    assert not any("key:" in line or "payload:" in line for line in deep)
    assert not any(line.startswith("|") for line in out_lines(run("--files", log)))


# -- --skip-record-metadata ----------------------------------------------------------------------------------


def test_skip_record_metadata_prints_kafkas_key_and_payload_part(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / f"{SEGMENT}.log",
        build_batch([SimpleRecord(b"v0", b"k0", 1), SimpleRecord(b"v1", None, 2), SimpleRecord(None, b"k2", 3)]),
        build_end_txn_marker(
            offset=3,
            timestamp=4,
            partition_leader_epoch=0,
            producer_id=7,
            producer_epoch=0,
            marker=EndTransactionMarker(ControlRecordType.COMMIT, 5),
        ),
    )
    result = run("--print-data-log", "--skip-record-metadata", "--files", log)
    assert result.exit_code == 0, result.output
    lines = out_lines(result)
    assert lines[2].startswith("baseOffset: 0 lastOffset: 2 count: 3 ")
    # Kafka's quirks kept: the indent comes only with a key, and a control record leaves an empty line.
    assert lines[3:6] == ["| key: k0 payload: v0", " payload: v1", "| key: k2"]
    assert lines[6].startswith("baseOffset: 3 lastOffset: 3 count: 1 ")
    assert lines[7:] == [""]


def test_skip_record_metadata_without_data_prints_empty_record_lines(tmp_path: Path) -> None:
    log, _ = three_batch_segment(tmp_path)
    lines = out_lines(run("--deep-iteration", "--skip-record-metadata", "--files", log))
    assert lines[2:] == [lines[2], "", "", lines[5], "", "", "", lines[9], ""]


def test_skip_record_metadata_json_keeps_offset_and_data(tmp_path: Path) -> None:
    log = write_log(tmp_path / f"{SEGMENT}.log", build_batch([SimpleRecord(b"v0", b"k0", 1)], base_offset=5))
    objects = json_lines(run("--json", "--print-data-log", "--skip-record-metadata", "--files", log))
    assert objects[-1] == {"type": "record", "offset": 5, "key": "azA=", "value": "djA=", "headers": []}
    objects = json_lines(run("--json", "--deep-iteration", "--skip-record-metadata", "--files", log))
    assert objects[-1] == {"type": "record", "offset": 5}


# -- --max-bytes ---------------------------------------------------------------------------------------------


def batch_sizes(result: Result) -> list[int]:
    return [int(match.group(1)) for line in out_lines(result) if (match := BATCH_LINE.match(line))]


def test_max_bytes_reads_only_whole_batches_like_kafka() -> None:
    """DumpLogSegmentsTest.testPrintDataLogPartialBatches on a real __consumer_offsets segment."""
    log = segment_file(OFFSETS_15, ".log")
    sizes = batch_sizes(run("--files", log))
    half = len(sizes) // 2
    limit = sum(sizes[:half])
    assert batch_sizes(run("--max-bytes", str(limit), "--files", log)) == sizes[:half]
    # One byte short of the next batch still leaves it out; the cut-off is no problem (exit 0).
    result = run("--max-bytes", str(limit + sizes[half] - 1), "--files", log)
    assert result.exit_code == 0
    assert batch_sizes(result) == sizes[:half]
    assert result.stderr == ""
    assert batch_sizes(run("--max-bytes", "0", "--files", log)) == []
    assert batch_sizes(run("--max-bytes", str(2**31 - 1), "--files", log)) == sizes


def test_max_bytes_applies_to_kraft_snapshots() -> None:
    snapshot = require_fixtures(KRAFT_37 / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint")
    sizes = batch_sizes(run("--files", snapshot))
    assert len(sizes) > 1
    assert batch_sizes(run("--max-bytes", str(sizes[0]), "--files", snapshot)) == sizes[:1]


def test_max_bytes_silences_trailing_invalid_bytes_as_kafka_does(tmp_path: Path) -> None:
    log, positions = three_batch_segment(tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[:-5])
    full = run("--files", log)
    assert full.exit_code == 1
    assert out_lines(full)[-1] == f"Found {len(data) - 5 - positions[2]} invalid bytes at the end of {log.name}"
    # Kafka reports trailing bytes only when --max-bytes is its default, Int.MaxValue.
    assert out_lines(run("--max-bytes", str(2**31 - 1), "--files", log)) == out_lines(full)
    limited = run("--max-bytes", str(len(data)), "--files", log)
    assert limited.exit_code == 0
    assert out_lines(limited) == out_lines(full)[:-1]


# -- index options -------------------------------------------------------------------------------------------


def test_index_sanity_check_on_real_indexes() -> None:
    index, timeindex = segment_file(OFFSETS_15, ".index"), segment_file(OFFSETS_15, ".timeindex")
    result = run("--index-sanity-check", "--files", f"{index},{timeindex}")
    assert result.exit_code == 0, result.output
    assert out_lines(result) == [
        f"Dumping {index}",
        f"{index} passed sanity check.",
        f"Dumping {timeindex}",
        f"{timeindex} passed sanity check.",
    ]
    assert result.stderr == ""
    objects = json_lines(run("--json", "--index-sanity-check", index))
    assert objects[1] == {"type": "sanityCheckPassed", "path": str(index)}


def test_index_sanity_check_of_empty_indexes(tmp_path: Path) -> None:
    """Kafka: an empty .index prints "<file> is empty."; an empty .timeindex passes."""
    index, timeindex = tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex"
    index.write_bytes(b"")
    timeindex.write_bytes(b"")
    assert out_lines(run("--index-sanity-check", index, timeindex))[1:] == [
        f"{index} is empty.",
        f"Dumping {timeindex}",
        f"{timeindex} passed sanity check.",
    ]


def test_index_sanity_failures_name_file_and_position(tmp_path: Path) -> None:
    copy_segment(OFFSETS_15, tmp_path, ".log", ".index", ".timeindex")
    index, timeindex = tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex"
    # A torn last entry: the length is no longer a multiple of the entry size.
    with index.open("ab") as out:
        out.write(b"\x00\x00\x00")
    # The last time-index entry goes back before the first one.
    data = bytearray(timeindex.read_bytes())
    data[-12:-4] = struct.pack(">q", 1)
    timeindex.write_bytes(bytes(data))
    result = run("--index-sanity-check", "--files", f"{index},{timeindex}")
    assert result.exit_code == 1
    assert out_lines(result) == [f"Dumping {index}", f"Dumping {timeindex}"]
    assert err_lines(result) == [
        f"{index}: position 40: file length 43 is not a multiple of the 8-byte entry size",
        f"{timeindex}: position 60: last timestamp 1 is less than the first timestamp 1779276005670",
    ]
    errors = [o for o in json_lines(run("--json", "--index-sanity-check", index, timeindex)) if o["type"] == "error"]
    assert [(o["file"], o["position"]) for o in errors] == [(str(index), 40), (str(timeindex), 60)]


def test_index_sanity_check_fails_an_index_shorter_than_one_entry(tmp_path: Path) -> None:
    """Deliberate difference: Kafka finds no entry, prints "is empty." and exits 0, yet a broker rebuilds it."""
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(b"\x00" * 5)
    result = run("--index-sanity-check", index)
    assert result.exit_code == 1
    assert err_lines(result) == [f"{index}: position 0: file length 5 is not a multiple of the 8-byte entry size"]
    # Without the option the dump stays Kafka's.
    assert out_lines(run(index))[1:] == [f"{index} is empty."]


def test_index_sanity_check_last_offset_below_base(tmp_path: Path) -> None:
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", -3, 10))
    result = run("--index-sanity-check", index)
    assert result.exit_code == 1
    assert err_lines(result) == [f"{index}: position 8: last offset 97 is less than the base offset 100"]


def test_verify_index_only_prints_no_entries_but_reports_mismatches(tmp_path: Path) -> None:
    _, positions = three_batch_segment(tmp_path)
    index, timeindex = tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex"
    index.write_bytes(struct.pack(">iiii", 4, positions[1], 3, positions[1]))
    timeindex.write_bytes(struct.pack(">qi", 1_700_000_000_999, 4))
    result = run("--verify-index-only", "--files", f"{index},{timeindex}")
    assert result.exit_code == 0
    assert out_lines(result) == [f"Dumping {index}", f"Dumping {timeindex}"]
    assert err_lines(result) == [
        f"Mismatches in :{os.path.abspath(index)}",
        "  Index offset: 3, log offset: 4",
        f"Found timestamp mismatch in :{os.path.abspath(timeindex)}",
        "  Index timestamp: 1700000000999, log timestamp: 1700000000102",
    ]
    types = [o["type"] for o in json_lines(run("--json", "--verify-index-only", index, timeindex))]
    assert types == ["file", "file", "indexMismatch", "timeIndexMismatch"]


def test_verify_index_only_on_real_indexes_is_silent() -> None:
    index, timeindex = segment_file(OFFSETS_15, ".index"), segment_file(OFFSETS_15, ".timeindex")
    result = run("--verify-index-only", index, timeindex)
    assert (result.exit_code, result.stderr) == (0, "")
    assert out_lines(result) == [f"Dumping {index}", f"Dumping {timeindex}"]


def test_max_message_size_bounds_the_batch_an_index_entry_points_at(tmp_path: Path) -> None:
    _, positions = three_batch_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 4, positions[1]))
    second_size = positions[2] - positions[1]
    assert run("--max-message-size", str(second_size), index).exit_code == 0
    result = run("--max-message-size", str(second_size - 1), index)
    assert result.exit_code == 1
    assert out_lines(result)[1:] == [f"offset: 4 position: {positions[1]}"]
    assert err_lines(result) == [
        f"{tmp_path / SEGMENT}.log: position {positions[1]}: batch of {second_size} bytes is larger than the "
        f"maximum message size {second_size - 1}"
    ]


def test_max_message_size_leaves_a_batch_past_the_end_a_mismatch(tmp_path: Path) -> None:
    """A size running past the file is no complete batch (log offset -1), whatever the limit."""
    log, positions = three_batch_segment(tmp_path)
    with log.open("r+b") as out:
        out.seek(positions[2] + 8)
        out.write(struct.pack(">i", 10**8))
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 5, positions[2]))
    result = run("--max-message-size", "100", index)
    assert result.exit_code == 0
    assert err_lines(result)[1:] == ["  Index offset: 5, log offset: -1"]


def test_library_defaults_are_kafkas() -> None:
    options = DumpOptions()
    assert (options.max_bytes, options.max_message_size) == (2**31 - 1, 5 * 1024 * 1024)
    assert not options.deep and not options.print_data
    lines = list(dump_files([segment_file(OFFSETS_15, ".log")], DumpOptions(max_bytes=0)))
    assert [line.content for line in lines] == [f"Dumping {segment_file(OFFSETS_15, '.log')}", "Log starting offset: 0"]
