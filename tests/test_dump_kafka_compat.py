"""``logmgr dump`` with kafka-dump-log's own options (``DumpLogSegments.scala``), against the real fixtures and
the output shapes of Kafka's ``DumpLogSegmentsTest``."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.dump_cmd import STRING_DECODER
from logmgr.dump import DumpOptions, RecordDecoder, dump_files
from segments.kafka_messages import write_message
from segments.kafka_schemas import GROUP_COORDINATOR_RECORDS
from segments.records import (
    ControlRecordType,
    EndTransactionMarker,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
)
from tests.conftest import KAFKA_REAL, child_env, require_fixtures
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
            "--share-group-state-decoder is not supported: logmgr has no decoder for __share_group_state "
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
        build_batch(
            [SimpleRecord(b"v0", b"k0", 1), SimpleRecord(b"v1", None, 2), SimpleRecord(None, b"k2", 3)]
        ),
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
    snapshot = require_fixtures(
        KRAFT_37 / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint"
    )
    sizes = batch_sizes(run("--files", snapshot))
    assert len(sizes) > 1
    assert batch_sizes(run("--max-bytes", str(sizes[0]), "--files", snapshot)) == sizes[:1]


def test_max_bytes_silences_trailing_invalid_bytes_as_kafka_does(tmp_path: Path) -> None:
    log, positions = three_batch_segment(tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[:-5])
    full = run("--files", log)
    assert full.exit_code == 1
    assert (
        out_lines(full)[-1] == f"Found {len(data) - 5 - positions[2]} invalid bytes at the end of {log.name}"
    )
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
    errors = [
        o for o in json_lines(run("--json", "--index-sanity-check", index, timeindex)) if o["type"] == "error"
    ]
    assert [(o["file"], o["position"]) for o in errors] == [(str(index), 40), (str(timeindex), 60)]


def test_index_sanity_check_fails_an_index_shorter_than_one_entry(tmp_path: Path) -> None:
    """Deliberate difference: Kafka finds no entry, prints "is empty." and exits 0, yet a broker rebuilds it."""
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(b"\x00" * 5)
    result = run("--index-sanity-check", index)
    assert result.exit_code == 1
    assert err_lines(result) == [
        f"{index}: position 0: file length 5 is not a multiple of the 8-byte entry size"
    ]
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
    assert [line.content for line in lines] == [
        f"Dumping {segment_file(OFFSETS_15, '.log')}",
        "Log starting offset: 0",
    ]


# -- decoders ------------------------------------------------------------------------------------------------

INTERNAL_SEGMENTS = (
    [
        log
        for pattern in ("*/*/__consumer_offsets-*/*.log", "*/*/__transaction_state-*/*.log")
        for log in sorted(KAFKA_REAL.glob(pattern))
        if log.stat().st_size > 0
    ]
    if KAFKA_REAL.exists()
    else []
)
METADATA_FILES = (
    sorted(KAFKA_REAL.glob("*/*/__cluster_metadata-0/*.checkpoint"))
    + sorted(KAFKA_REAL.glob("*/*/__cluster_metadata-0/*.log"))
    + sorted(KAFKA_REAL.glob("*/*/bootstrap.checkpoint"))
    if KAFKA_REAL.exists()
    else []
)


def record_lines(result: Result) -> list[str]:
    return [line for line in out_lines(result) if line.startswith("| ")]


def offsets_record(
    key_type: int, key: dict[str, object], value_version: int, value: dict[str, object] | None
) -> SimpleRecord:
    """A __consumer_offsets record as GroupCoordinatorRecordSerde writes it: int16 type/version + message."""
    key_schema, value_schema = GROUP_COORDINATOR_RECORDS[key_type]
    key_bytes = struct.pack(">h", key_type) + write_message(key_schema, key_type, key)
    value_bytes = (
        None
        if value is None
        else struct.pack(">h", value_version) + write_message(value_schema, value_version, value)
    )
    return SimpleRecord(value_bytes, key_bytes, 1)


def test_offsets_decoder_on_a_real_consumer_offsets_segment() -> None:
    log = segment_file(OFFSETS_15, ".log")
    # The decoder alone implies deep iteration and data printing, as in Kafka.
    result = run("--offsets-decoder", "--files", log)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    lines = record_lines(result)
    assert len(lines) == 256
    assert lines[0] == (
        "| offset: 0 CreateTime: 1779275922621 keySize: 14 valueSize: 24 sequence: 0 headerKeys: [] "
        'key: {"type":"2","data":{"group":"demo-group"}} payload: {"version":"3","data":{"protocolType":"",'
        '"generation":0,"protocol":null,"leader":null,"currentStateTimestamp":1779275922616,"members":[]}}'
    )
    # A consumer group's embedded subscription and assignment are decoded as Kafka's parser does.
    assert (
        '"assignment":{"assignedPartitions":[{"topic":"demo-topic","partitions":[0,1,2]}],"userData":null}'
        in lines[1]
    )
    assert lines[2].endswith(
        'key: {"type":"1","data":{"group":"demo-group","topic":"demo-topic","partition":2}} '
        'payload: {"version":"4","data":{"offset":0,"leaderEpoch":-1,"metadata":"","commitTimestamp":1779275930663}}'
    )


@pytest.mark.parametrize(
    "log", INTERNAL_SEGMENTS, ids=lambda p: f"{p.parent.parent.parent.name}/{p.parent.name}"
)
def test_every_real_internal_topic_record_decodes(log: Path) -> None:
    option = (
        "--offsets-decoder"
        if log.parent.name.startswith("__consumer_offsets")
        else "--transaction-log-decoder"
    )
    result = run(option, "--skip-record-metadata", "--files", log)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    for line in out_lines(result)[2:]:
        if not line.startswith("baseOffset: "):
            assert line.startswith("| key: "), line
            assert "skipping" not in line and "unknown::" not in line, line


def test_offsets_decoder_shapes_from_kafkas_test(tmp_path: Path) -> None:
    """DumpLogSegmentsTest.testOffsetsMessageParser's expected strings, through the dump."""
    log = write_log(
        tmp_path / f"{SEGMENT}.log",
        build_batch([offsets_record(3, {"groupId": "group"}, 0, {"epoch": 10})], base_offset=0),
        build_batch([offsets_record(3, {"groupId": "group"}, 0, None)], base_offset=1),
        build_batch([SimpleRecord(b"v", struct.pack(">h", 99), 1)], base_offset=2),
    )
    result = run("--offsets-decoder", "--skip-record-metadata", "--files", log)
    assert result.exit_code == 0, result.output
    assert record_lines(result) == [
        '| key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}',
        '| key: {"type":"3","data":{"groupId":"group"}} payload: <DELETE>',
        "| key: Unknown record type 99 at offset 2, skipping.",
    ]


def test_offsets_decoder_json_values(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / f"{SEGMENT}.log",
        build_batch([offsets_record(3, {"groupId": "group"}, 0, {"epoch": 10})], base_offset=0),
        build_batch([offsets_record(3, {"groupId": "group"}, 0, None)], base_offset=1),
    )
    records_json = [o for o in json_lines(run("--json", "--offsets-decoder", log)) if o["type"] == "record"]
    assert records_json[0]["decodedKey"] == {"type": "3", "data": {"groupId": "group"}}
    assert records_json[0]["decodedPayload"] == {"version": "0", "data": {"epoch": 10}}
    assert records_json[1]["decodedPayload"] == "<DELETE>"
    # The raw bytes stay (base64), as with --print-data-log.
    assert records_json[0]["key"] is not None
    skipped = json_lines(run("--json", "--offsets-decoder", "--skip-record-metadata", log))[-1]
    assert sorted(skipped) == ["decodedKey", "decodedPayload", "headers", "key", "offset", "type", "value"]


def test_offsets_decoder_on_a_record_without_key_reports_file_and_position(tmp_path: Path) -> None:
    """Kafka's parser throws (the tool dies); here the record is reported and the dump goes on."""
    first = build_batch([SimpleRecord(b"x", None, 1)], base_offset=0)
    log = write_log(
        tmp_path / f"{SEGMENT}.log",
        first,
        build_batch([offsets_record(3, {"groupId": "g"}, 0, {"epoch": 1})], base_offset=1),
    )
    result = run("--offsets-decoder", log)
    assert result.exit_code == 1
    assert err_lines(result) == [
        f"{log}: position 0: offsets decoder, record at offset 0: Failed to decode message at offset 0 using offset "
        "topic decoder (message had a missing key)"
    ]
    assert record_lines(result) and record_lines(result)[-1].endswith(
        'payload: {"version":"0","data":{"epoch":1}}'
    )


def test_transaction_log_decoder_on_the_real_transaction_state() -> None:
    log = segment_file(KRAFT_37 / "__transaction_state-44", ".log")
    result = run("--transaction-log-decoder", "--files", log)
    assert (result.exit_code, result.stderr) == (0, "")
    prefix = "key: transaction_metadata::transactionalId=default_ payload: producerId:0,producerEpoch:0,"
    assert [line.split(" headerKeys: [] ")[1] for line in record_lines(result)] == [
        prefix + "state=Empty,partitions=[],txnLastUpdateTimestamp=1728561474712,txnTimeoutMs=60000",
        prefix + "state=Ongoing,partitions=[_confluent-ksql-default__command_topic-0],"
        "txnLastUpdateTimestamp=1728561475379,txnTimeoutMs=60000",
        prefix + "state=PrepareCommit,partitions=[_confluent-ksql-default__command_topic-0],"
        "txnLastUpdateTimestamp=1728561475538,txnTimeoutMs=60000",
        prefix + "state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=1728561475551,txnTimeoutMs=60000",
    ]
    # Text formats stay JSON strings.
    first = next(
        o for o in json_lines(run("--json", "--transaction-log-decoder", log)) if o["type"] == "record"
    )
    assert first["decodedKey"] == "transaction_metadata::transactionalId=default_"
    assert first["decodedPayload"].startswith("producerId:0,producerEpoch:0,state=Empty,")


def test_transaction_log_decoder_on_an_undecodable_value_reports_it(tmp_path: Path) -> None:
    key = struct.pack(">hh", 0, 1) + b"t"
    log = write_log(
        tmp_path / f"{SEGMENT}.log", build_batch([SimpleRecord(b"\x00\x01\xff", key, 1)], base_offset=0)
    )
    result = run("--transaction-log-decoder", log)
    assert result.exit_code == 1
    [error] = err_lines(result)
    assert error.startswith(f"{log}: position 0: transactionLog decoder, record at offset 0: ")


@pytest.mark.parametrize("path", METADATA_FILES, ids=lambda p: f"{p.parent.parent.parent.name}/{p.name}")
def test_cluster_metadata_decoder_on_every_real_metadata_file(path: Path) -> None:
    result = run("--cluster-metadata-decoder", "--files", path)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    for line in record_lines(result):
        payload = line.partition(" headerKeys: [] ")[2]
        # Metadata records have no key; control records print their own data and no payload.
        assert payload.startswith(
            ('payload: {"type":"', "SnapshotHeader {", "SnapshotFooter {", "controlType: ")
        ), line
        assert "skipping" not in line, line


def test_cluster_metadata_decoder_snapshot_like_kafkas_test() -> None:
    """DumpLogSegmentsTest.testDumpMetadataSnapshot: with --skip-record-metadata the control records vanish."""
    snapshot = require_fixtures(
        KRAFT_37 / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint"
    )
    output = run("--cluster-metadata-decoder", "--files", snapshot).stdout
    assert "Snapshot end offset: 7364, epoch: 1" in output
    assert "TOPIC_RECORD" in output and "REGISTER_BROKER_RECORD" in output
    assert '"lastContainedLogTimestamp":1728565330138' in output
    lines = out_lines(run("--cluster-metadata-decoder", "--skip-record-metadata", "--files", snapshot))
    assert "SnapshotHeader" not in "\n".join(lines)
    assert lines[3] == ""  # the header record
    assert (
        lines[5]
        == ' payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":19}}'
    )
    assert lines[-1] == ""  # the footer record


def test_cluster_metadata_decoder_skips_a_bogus_record_like_kafka(tmp_path: Path) -> None:
    """DumpLogSegmentsTest.testDumpMetadataRecords: a value that is no metadata record prints Kafka's
    "Error at <offset>, skipping." payload and the dump goes on (exit 0, as Kafka)."""
    snapshot = require_fixtures(
        KRAFT_37 / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint"
    )
    bogus = bytes([0x90, 0x4E, 0x90, 0x4E])  # unsigned varints 10000, 10000
    log = write_log(tmp_path / f"{SEGMENT}.log", build_batch([SimpleRecord(bogus, None, 1)], base_offset=0))
    lines = out_lines(run("--cluster-metadata-decoder", "--skip-record-metadata", log, snapshot))
    assert lines[3].startswith(" payload: Error at 0, skipping. ")
    assert any("TOPIC_RECORD" in line for line in lines)
    objects = json_lines(run("--json", "--cluster-metadata-decoder", log))
    assert objects[-1]["decodedKey"] is None
    assert objects[-1]["decodedPayload"].startswith("Error at 0, skipping. ")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200, deadline=None)
@given(
    key=st.one_of(st.none(), st.binary(max_size=40)),
    value=st.one_of(st.none(), st.binary(max_size=80)),
    decoder=st.sampled_from(list(RecordDecoder)),
    as_json=st.booleans(),
    skip=st.booleans(),
)
def test_decoders_fed_arbitrary_bytes_never_raise(
    tmp_path: Path, key: bytes | None, value: bytes | None, decoder: RecordDecoder, as_json: bool, skip: bool
) -> None:
    log = write_log(tmp_path / f"{SEGMENT}.log", build_batch([SimpleRecord(value, key, 1)], base_offset=0))
    options = DumpOptions(as_json=as_json, decoder=decoder, skip_record_metadata=skip)
    lines = list(dump_files([log], options))
    # One record line, or one error naming the file and the batch position (Kafka's parser would throw).
    record = [line for line in lines if not line.stderr and not line.problem][-1]
    errors = [line for line in lines if line.stderr]
    if errors:
        assert errors == [lines[-1]]
        assert str(lines[-1].content).startswith(
            f"{log}: position 0: {decoder.value} decoder, record at offset 0: "
        )
    elif as_json:
        assert isinstance(record.content, dict) and record.content["type"] == "record"
    else:
        assert isinstance(record.content, str) and not record.content.startswith("baseOffset")


def test_closed_stdout_with_a_decoder_exits_quietly() -> None:
    """`logmgr dump --offsets-decoder --files ... | head -1`: the reader goes away, the dump stops with exit 1
    and no traceback."""
    log = segment_file(OFFSETS_15, ".log")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cli.main import main; main()",
            "dump",
            "--offsets-decoder",
            "--files",
            ",".join([str(log)] * 40),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline() == f"Dumping {log}\n".encode()
    child.stdout.close()
    stderr = child.stderr.read()
    # Exit 141 as every command whose stdout is closed by its reader, and nothing on stderr.
    assert child.wait() == 141
    assert stderr == b""


def test_files_option_names_are_printed_as_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's File keeps a leading "./" in "Dumping ./x.index"."""
    (tmp_path / f"{SEGMENT}.index").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    assert out_lines(run("--files", f"./{SEGMENT}.index")) == [
        f"Dumping ./{SEGMENT}.index",
        f"./{SEGMENT}.index is empty.",
    ]
