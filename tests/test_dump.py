"""``logmgr dump``: kafka-dump-log's lines for every file type, the JSON form, and corrupt input."""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkpoints.producer_snapshot import ProducerSnapshotEntry, serialize_producer_snapshot
from cli.dump_cmd import dump
from logmgr.dump import DumpOptions, dump_files, file_kind, kraft_control_json
from segments.errors import CorruptRecordError
from segments.records import (
    ControlRecordType,
    EndTransactionMarker,
    Header,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker,
)
from segments.transaction_index import AbortedTxn, TransactionIndex
from tests.conftest import CLIENTS_GENERATED, KAFKA_REAL, require_fixtures

SEGMENT = "00000000000000000000"
KRAFT_37 = KAFKA_REAL / "kraft-3.7-clean-transactions" / "kafka-data"
KSQL = KRAFT_37 / "_confluent-ksql-default__command_topic-0"
OFFSETS_29 = KRAFT_37 / "__consumer_offsets-29"
GENERATED_FOLDERS = (
    sorted(p.name for p in CLIENTS_GENERATED.iterdir() if p.is_dir()) if CLIENTS_GENERATED.exists() else []
)
fuzz = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150, deadline=None)


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(dump, [str(arg) for arg in args], catch_exceptions=False)


def out_lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


def err_lines(result: Result) -> list[str]:
    return result.stderr.splitlines()


def json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out_lines(result)]


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def generated(folder: str) -> Path:
    return require_fixtures(CLIENTS_GENERATED / folder / f"{SEGMENT}.log")


def write_log(path: Path, *batches: bytes) -> Path:
    path.write_bytes(b"".join(batches))
    return path


def records(count: int, start_ts: int = 1_700_000_000_000, prefix: str = "k") -> list[SimpleRecord]:
    return [SimpleRecord(f"v{i}".encode(), f"{prefix}{i}".encode(), start_ts + i) for i in range(count)]


# -- .log: Kafka's lines -------------------------------------------------------------------------------------


def test_transactions_deep_print_matches_kafka_lines() -> None:
    log = generated("transactions-0")
    result = run(log, "--deep-iteration", "--print-data-log")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = out_lines(result)
    assert lines[:3] == [
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1000 producerEpoch: 0 "
        "partitionLeaderEpoch: 5 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1700000000002 size: 160 magic: 2 compresscodec: none crc: 1179384277 "
        "isvalid: true",
    ]
    assert lines[3] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 12 valueSize: 14 sequence: 0 headerKeys: [] "
        "key: A-txn1-key-0 payload: A-txn1 value 0"
    )
    assert (
        "| offset: 4 CreateTime: 1700000000009 keySize: -1 valueSize: -1 sequence: 1 headerKeys: [txn]"
        in lines
    )
    assert (
        "| offset: 7 CreateTime: 1700000000030 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 11"
    ) in lines
    assert any(line.endswith("endTxnMarker: COMMIT coordinatorEpoch: 4") for line in lines)
    # Control records never print key/payload.
    assert not any("endTxnMarker" in line and "payload:" in line for line in lines)


def test_shallow_dump_prints_one_line_per_batch() -> None:
    for folder in GENERATED_FOLDERS:
        log = generated(folder)
        result = run(log)
        assert result.exit_code == 0, (folder, result.output)
        body = out_lines(result)[2:]
        assert len(body) == len(jsonl(log.parent / "batches.jsonl"))
        assert not any(line.startswith("|") for line in body)


def test_deep_iteration_without_print_has_no_payload() -> None:
    result = run(generated("none-0"), "--deep-iteration")
    assert result.exit_code == 0
    record_lines = [line for line in out_lines(result) if line.startswith("| ")]
    assert len(record_lines) == len(jsonl(CLIENTS_GENERATED / "none-0" / "expected.jsonl"))
    assert not any(" key: " in line or " payload: " in line for line in record_lines)


def test_magic0_legacy_lines() -> None:
    result = run(generated("magic0-0"), "--print-data-log")
    assert result.exit_code == 0
    lines = out_lines(result)
    assert lines[2] == (
        "offset: 0 position: 0 NoTimestampType: -1 size: 33 magic: 0 compresscodec: none crc: 2828769619 "
        "isvalid: true"
    )
    # Kafka prints a stray '}' after the record crc.
    assert lines[3] == (
        "| offset: 0 NoTimestampType: -1 keySize: 5 valueSize: 2 isValid: true crc: 2828769619} key: m0-k0 payload: v0"
    )
    assert (
        "| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 8 isValid: true crc: 1117854738} payload: null key"
        in lines
    )


def test_magic1_legacy_lines() -> None:
    result = run(generated("magic1-0"), "--deep-iteration")
    assert result.exit_code == 0
    lines = out_lines(result)
    batch_lines = [line for line in lines[2:] if line.startswith("offset: ")]
    assert all(" magic: 1 " in line for line in batch_lines)
    assert any(" LogAppendTime: " in line and "compresscodec: gzip" in line for line in batch_lines)
    assert any(" CreateTime: " in line for line in batch_lines)
    expected = jsonl(CLIENTS_GENERATED / "magic1-0" / "expected.jsonl")
    record_lines = [line for line in lines if line.startswith("| ")]
    assert [int(line.split()[2]) for line in record_lines] == [r["offset"] for r in expected]
    assert all(
        f"crc: {r['recordChecksum']}}}" in line for line, r in zip(record_lines, expected, strict=True)
    )


@pytest.mark.parametrize("folder", GENERATED_FOLDERS)
def test_json_matches_kafka_reader(folder: str) -> None:
    log = generated(folder)
    result = run(log, "--json", "--print-data-log")
    assert result.exit_code == 0, result.output
    objects = json_lines(result)
    assert objects[0] == {"type": "file", "path": str(log), "kind": "log", "baseOffset": 0}
    batches = [o for o in objects if o["type"] == "batch"]
    recs = [o for o in objects if o["type"] == "record"]
    for got, want in zip(batches, jsonl(log.parent / "batches.jsonl"), strict=True):
        assert {key: got[key] for key in want} == want
        assert got["isValid"] is True
    for got, want in zip(recs, jsonl(log.parent / "expected.jsonl"), strict=True):
        assert {key: got[key] for key in want} == want
        assert got["keySize"] == (-1 if want["key"] is None else len(base64.b64decode(want["key"])))


def test_json_without_print_omits_data() -> None:
    result = run(generated("transactions-0"), "--json", "--deep-iteration")
    recs = [o for o in json_lines(result) if o["type"] == "record"]
    assert recs
    assert all("key" not in r and "value" not in r and "headers" not in r for r in recs)
    assert recs[3]["headerKeys"] == ["txn"]
    assert [r["coordinatorEpoch"] for r in recs if r["controlType"] == "ABORT"] == [11, 4]


# -- KRaft snapshots -----------------------------------------------------------------------------------------


def test_kraft_snapshot_checkpoint() -> None:
    snapshot = require_fixtures(
        KRAFT_37 / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint"
    )
    result = run(snapshot, "--deep-iteration")
    assert result.exit_code == 0
    lines = out_lines(result)
    assert lines[1] == "Snapshot end offset: 7364, epoch: 1"
    assert lines[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":1728565330138}')
    assert lines[-1].endswith('SnapshotFooter {"version":0}')
    objects = json_lines(run(snapshot, "--json", "--deep-iteration"))
    assert objects[0] == {
        "type": "file",
        "path": str(snapshot),
        "kind": "kraftSnapshot",
        "endOffset": 7364,
        "epoch": 1,
    }
    header = next(o for o in objects if o.get("controlType") == "SNAPSHOT_HEADER")
    assert header["controlData"] == {"version": 0, "lastContainedLogTimestamp": 1728565330138}


def test_bootstrap_checkpoint() -> None:
    bootstrap = require_fixtures(KRAFT_37 / "bootstrap.checkpoint")
    result = run(bootstrap, "--deep-iteration")
    assert result.exit_code == 0
    assert out_lines(result)[1] == "KRaft bootstrap snapshot"
    assert out_lines(result)[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}')


def test_leader_change_control_record() -> None:
    log = require_fixtures(
        KAFKA_REAL / "kraft-4.2-clean" / "kafka-logs" / "__cluster_metadata-0" / f"{SEGMENT}.log"
    )
    lines = out_lines(run(log, "--deep-iteration"))
    assert lines[3].endswith("headerKeys: [] controlType: LEADER_CHANGE(2)")


def test_kraft_snapshot_with_a_bad_name(tmp_path: Path) -> None:
    bad = tmp_path / "snapshot.checkpoint"
    bad.write_bytes(b"")
    result = run(bad)
    assert result.exit_code == 1
    assert err_lines(result) == [
        f"{bad}: not a KRaft snapshot file name (<20-digit end offset>-<10-digit epoch>.checkpoint)"
    ]


def test_kraft_control_json_voters_and_version_regression_voter_uuid_field_name() -> None:
    """Regression: the voter's directory id was written as "voterUuid"; Kafka's VotersRecordJsonConverter
    writes the schema's name, "voterDirectoryId" (the reader is now the schema engine)."""
    uvarint = bytes  # every length below is < 128, a one-byte unsigned varint
    voter_id, directory = 3, bytes(range(16))
    endpoint = (
        uvarint([11]) + b"CONTROLLER" + uvarint([10]) + b"localhost" + struct.pack(">H", 9093) + b"\x00"
    )
    voter = (
        struct.pack(">i", voter_id)
        + directory
        + uvarint([2])
        + endpoint
        + struct.pack(">hh", 0, 1)
        + b"\x00\x00"
    )
    value = struct.pack(">h", 0) + uvarint([2]) + voter + b"\x01\x05\x02ab"  # one unknown tagged field
    assert kraft_control_json(ControlRecordType.KRAFT_VOTERS, value) == {
        "version": 0,
        "voters": [
            {
                "voterId": 3,
                "voterDirectoryId": base64.urlsafe_b64encode(directory).decode().rstrip("="),
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
            }
        ],
    }
    assert kraft_control_json(ControlRecordType.KRAFT_VERSION, struct.pack(">hh", 0, 1) + b"\x00") == {
        "version": 0,
        "kRaftVersion": 1,
    }
    with pytest.raises(CorruptRecordError):
        kraft_control_json(ControlRecordType.SNAPSHOT_HEADER, b"\x00\x00\x00")
    with pytest.raises(
        CorruptRecordError, match=r"VotersRecord\.voters: null where the field is not nullable \(byte 2\)"
    ):
        kraft_control_json(ControlRecordType.KRAFT_VOTERS, b"\x00\x00\x00")


# -- .index and .timeindex -----------------------------------------------------------------------------------


def test_real_index_and_timeindex() -> None:
    index = require_fixtures(OFFSETS_29 / f"{SEGMENT}.index")
    timeindex = OFFSETS_29 / f"{SEGMENT}.timeindex"
    result = run(index, timeindex)
    assert result.exit_code == 0
    assert result.stderr == ""
    assert out_lines(result) == [
        f"Dumping {index}",
        "offset: 12 position: 4395",
        "offset: 26 position: 8556",
        f"Dumping {timeindex}",
        "timestamp: 1728577666889 offset: 12",
        "timestamp: 1728581914245 offset: 26",
        "timestamp: 1728588424551 offset: 38",
        "timestamp: 1728596416491 offset: 44",
    ]
    assert json_lines(run(index, "--json"))[1:] == [
        {"type": "indexEntry", "offset": 12, "position": 4395},
        {"type": "indexEntry", "offset": 26, "position": 8556},
    ]
    assert json_lines(run(timeindex, "--json"))[1] == {
        "type": "timeIndexEntry",
        "timestamp": 1728577666889,
        "offset": 12,
    }


def test_empty_index() -> None:
    index = require_fixtures(KRAFT_37 / "patient_admissions-1" / f"{SEGMENT}.index")
    result = run(index)
    assert result.exit_code == 0
    assert out_lines(result) == [f"Dumping {index}", f"{index} is empty."]


def test_index_whose_log_is_missing_still_prints_entries() -> None:
    index = require_fixtures(KRAFT_37 / "__cluster_metadata-0" / f"{SEGMENT}.index")
    result = run(index)
    assert result.exit_code == 1
    assert out_lines(result)[1] == "offset: 90 position: 6593"
    assert err_lines(result) == [f"{index.parent / (SEGMENT + '.log')}: No such file or directory"]


def three_batch_segment(tmp_path: Path) -> tuple[Path, list[int]]:
    """A segment of batches at offsets 0-1, 2-4, 5-5; returns the .log and the batch positions."""
    first = build_batch(records(2), base_offset=0)
    second = build_batch(records(3, 1_700_000_000_100), base_offset=2)
    third = build_batch(records(1, 1_700_000_000_200), base_offset=5)
    log = write_log(tmp_path / f"{SEGMENT}.log", first, second, third)
    return log, [0, len(first), len(first) + len(second)]


def test_index_mismatches_reported_like_kafka(tmp_path: Path) -> None:
    _, positions = three_batch_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    # Entry 1 is right (batch 2-4 ends at 4); entry 2 names offset 3 for that batch; entry 3 lies past the end.
    index.write_bytes(struct.pack(">iiiiii", 4, positions[1], 3, positions[1], 6, 100_000))
    result = run(index)
    assert result.exit_code == 0
    assert out_lines(result)[1:] == [
        f"offset: 4 position: {positions[1]}",
        f"offset: 3 position: {positions[1]}",
        "offset: 6 position: 100000",
    ]
    assert err_lines(result) == [
        f"Mismatches in :{os.path.abspath(index)}",
        "  Index offset: 3, log offset: 4",
        "  Index offset: 6, log offset: -1",
    ]
    objects = json_lines(run(index, "--json"))
    assert objects[-1] == {
        "type": "indexMismatch",
        "path": os.path.abspath(index),
        "indexOffset": 6,
        "logOffset": -1,
    }


def test_index_dump_stops_at_zero_fill(tmp_path: Path) -> None:
    _, positions = three_batch_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 4, positions[1]) + bytes(8 * 5))
    assert out_lines(run(index))[1:] == [f"offset: 4 position: {positions[1]}"]


def test_time_index_checks(tmp_path: Path) -> None:
    _, positions = three_batch_segment(tmp_path)
    (tmp_path / f"{SEGMENT}.index").write_bytes(struct.pack(">ii", 4, positions[1]))
    timeindex = tmp_path / f"{SEGMENT}.timeindex"
    entries = [
        (1_700_000_000_001, 1),  # right: batch 0-1 has max timestamp ...001
        (1_700_000_000_999, 4),  # wrong timestamp for batch 2-4 (max ...102)
        (1_700_000_000_050, 3),  # offset 3 is not a batch last offset
        (1_700_000_000_000, 5),  # right timestamp for batch 5 but not increasing
        (1_700_000_000_300, 9),  # beyond the log
    ]
    timeindex.write_bytes(b"".join(struct.pack(">qi", ts, offset) for ts, offset in entries))
    result = run(timeindex)
    assert result.exit_code == 0
    assert out_lines(result)[1:] == [f"timestamp: {ts} offset: {offset}" for ts, offset in entries]
    path = os.path.abspath(timeindex)
    assert err_lines(result) == [
        f"Found timestamp mismatch in :{path}",
        "  Index timestamp: 1700000000999, log timestamp: 1700000000102",
        "  Index timestamp: 1700000000000, log timestamp: 1700000000200",
        f"Found out of order timestamp in :{path}",
        "  Index timestamp: 1700000000000, Previously indexed timestamp: 1700000000050",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 3, found log offset: 4",
        "Indexed offset: 9, found log offset: -1",
    ]
    types = [o["type"] for o in json_lines(run(timeindex, "--json"))]
    assert types.count("timeIndexMismatch") == 2
    assert types.count("timeIndexOutOfOrder") == 1
    assert types.count("timeIndexOffsetNotFound") == 2


# -- .txnindex and .snapshot ---------------------------------------------------------------------------------


def test_txn_index(tmp_path: Path) -> None:
    path = tmp_path / f"{SEGMENT}.txnindex"
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1000, 0, 7, 3))
    index.append(AbortedTxn(3000, 16, 19, 20))
    index.close()
    result = run(path)
    assert result.exit_code == 0
    assert out_lines(result)[1:] == [
        "version: 0 producerId: 1000 firstOffset: 0 lastOffset: 7 lastStableOffset: 3",
        "version: 0 producerId: 3000 firstOffset: 16 lastOffset: 19 lastStableOffset: 20",
    ]
    assert json_lines(run(path, "--json"))[1] == {
        "type": "abortedTxn",
        "version": 0,
        "producerId": 1000,
        "firstOffset": 0,
        "lastOffset": 7,
        "lastStableOffset": 3,
    }
    data = bytearray(path.read_bytes())
    data[34] = 1  # version byte of the second entry
    path.write_bytes(bytes(data))
    result = run(path)
    assert result.exit_code == 1
    assert err_lines(result) == [
        f"{path}: position 34: unexpected aborted transaction version 1, current version is 0"
    ]


def test_real_producer_snapshot() -> None:
    snapshot = require_fixtures(KSQL / "00000000000000000002.snapshot")
    result = run(snapshot)
    assert result.exit_code == 0
    assert out_lines(result)[1:] == [
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1728561475581 firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0 "
        "timestamp: 1728561475581"
    ]
    empty = require_fixtures(KRAFT_37 / "_schemas-0" / "00000000000000000038.snapshot")
    assert out_lines(run(empty)) == [f"Dumping {empty}"]


def test_producer_snapshot_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.snapshot"
    entries = [
        ProducerSnapshotEntry(7, 1, 2, 40, 4, 1_700_000_000_000, 3, 37),  # first sequence wraps below 0
        ProducerSnapshotEntry(8, 0, -1, -1, 0, 1_700_000_000_500, -1, -1),  # no batch metadata
    ]
    path.write_bytes(serialize_producer_snapshot(entries))
    result = run(path)
    assert out_lines(result)[1:] == [
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[37] "
        "lastTimestamp: 1700000000000 firstSequence: 2147483646 lastSequence: 2 lastOffset: 40 offsetDelta: 4 "
        "timestamp: 1700000000000",
        # Kafka leaves the trailing space.
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000500 ",
    ]
    second = json_lines(run(path, "--json"))[2]
    assert second["type"] == "producerSnapshotEntry"
    assert second["lastOffset"] is None and second["firstSequence"] is None


def test_corrupt_snapshot_reported_and_next_file_dumped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.snapshot"
    data = bytearray(serialize_producer_snapshot([ProducerSnapshotEntry(7, 1, 2, 40, 4, 1, 3, 37)]))
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    log = generated("none-0")
    result = run(path, log)
    assert result.exit_code == 1
    assert len(err_lines(result)) == 1
    assert err_lines(result)[0].startswith(f"{path}: position 2: CRC mismatch")
    assert f"Dumping {log}" in out_lines(result)
    errors = [o for o in json_lines(run(path, "--json")) if o["type"] == "error"]
    assert errors == [
        {"type": "error", "file": str(path), "position": 2, "line": None, "error": errors[0]["error"]}
    ]


# -- checkpoint and metadata files ---------------------------------------------------------------------------


def test_checkpoint_and_metadata_files() -> None:
    require_fixtures(KRAFT_37)
    recovery = KRAFT_37 / "recovery-point-offset-checkpoint"
    epochs = KSQL / "leader-epoch-checkpoint"
    metadata = KSQL / "partition.metadata"
    meta = KRAFT_37 / "meta.properties"
    clean = KRAFT_37 / ".kafka_cleanshutdown"
    cleaner = KRAFT_37 / "cleaner-offset-checkpoint"
    result = run(recovery, epochs, metadata, meta, clean, cleaner)
    assert result.exit_code == 0
    lines = out_lines(result)
    assert "topic: __consumer_offsets partition: 29 offset: 45" in lines
    start = lines.index(f"Dumping {epochs}")
    assert lines[start + 1 : start + 3] == ["epoch: 0 startOffset: 0", "epoch: 38 startOffset: 2"]
    assert lines[lines.index(f"Dumping {metadata}") + 1] == "version: 0 topicId: TvQoTq0KRHWWLKQ64d1gfw"
    assert "cluster.id: MkU3OEVBNTcwNTJENDM2Qk" in lines
    assert lines[lines.index(f"Dumping {clean}") + 1] == "brokerEpoch: 53326"
    assert lines[-1] == f"Dumping {cleaner}"
    objects = json_lines(run(metadata, meta, clean, "--json"))
    assert objects[1] == {"type": "partitionMetadata", "version": 0, "topicId": "TvQoTq0KRHWWLKQ64d1gfw"}
    assert objects[3]["type"] == "metaProperties" and objects[3]["nodeId"] == 1
    assert objects[5] == {"type": "cleanShutdown", "brokerEpoch": 53326}


def test_corrupt_checkpoint_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\nfive 10\n")
    result = run(path)
    assert result.exit_code == 1
    assert err_lines(result)[0].startswith(f"{path}: line 4: malformed entry")


def test_unknown_and_missing_files(tmp_path: Path) -> None:
    unknown = tmp_path / "quorum-state"
    unknown.write_text("{}")
    result = run(unknown)
    assert result.exit_code == 0
    assert out_lines(result) == [f"Dumping {unknown}"]
    assert err_lines(result) == [f"Ignoring unknown file {unknown}"]
    missing = tmp_path / f"{SEGMENT}.log"
    result = run(missing, unknown)
    assert result.exit_code == 1
    assert err_lines(result) == [f"{missing}: No such file or directory", f"Ignoring unknown file {unknown}"]
    directory = tmp_path / "dir.log"
    directory.mkdir()
    assert err_lines(run(directory)) == [f"{directory}: not a regular file"]
    badly_named = tmp_path / "segment.log"
    badly_named.write_bytes(b"")
    assert "does not start with an offset" in run(badly_named).stderr


# -- corrupt .log files --------------------------------------------------------------------------------------


def copy_of(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / f"{SEGMENT}.log"
    shutil.copyfile(source, target)
    return target


def test_flipped_crc_byte_gives_isvalid_false(tmp_path: Path) -> None:
    log = copy_of(generated("none-0"), tmp_path)
    data = bytearray(log.read_bytes())
    data[17] ^= 0x01  # first byte of the stored CRC of the first batch
    log.write_bytes(bytes(data))
    result = run(log, "--deep-iteration")
    assert result.exit_code == 1
    batch_lines = [line for line in out_lines(result) if line.startswith("baseOffset: ")]
    assert batch_lines[0].endswith("isvalid: false")
    assert all(line.endswith("isvalid: true") for line in batch_lines[1:])
    assert result.stderr == ""
    assert json_lines(run(log, "--json"))[1]["isValid"] is False


def test_truncated_tail_reports_invalid_bytes(tmp_path: Path) -> None:
    log = copy_of(generated("transactions-0"), tmp_path)
    size = log.stat().st_size
    with open(log, "r+b") as handle:
        handle.truncate(size - 10)
    result = run(log)
    assert result.exit_code == 1
    last_batch = jsonl(CLIENTS_GENERATED / "transactions-0" / "batches.jsonl")[-1]
    assert out_lines(result)[-1] == (
        f"Found {last_batch['sizeInBytes'] - 10} invalid bytes at the end of {SEGMENT}.log"
    )
    assert json_lines(run(log, "--json"))[-1] == {
        "type": "invalidBytes",
        "path": str(log),
        "position": last_batch["position"],
        "size": last_batch["sizeInBytes"] - 10,
    }


def test_impossible_batch_size_reported_with_position_then_next_file(tmp_path: Path) -> None:
    good = build_batch(records(2))
    bad = bytearray(build_batch(records(2), base_offset=2))
    struct.pack_into(">i", bad, 8, 3)  # below the 14-byte minimum
    log = write_log(tmp_path / f"{SEGMENT}.log", good, bytes(bad))
    other = write_log(tmp_path / "00000000000000000100.log", build_batch(records(1), base_offset=100))
    result = run(log, other)
    assert result.exit_code == 1
    assert err_lines(result) == [
        f"{log}: position {len(good)}: found record size 3 smaller than the minimum record overhead (14)"
    ]
    lines = out_lines(result)
    assert f"Found {len(bad)} invalid bytes at the end of {SEGMENT}.log" in lines
    assert lines[-1].startswith("baseOffset: 100 lastOffset: 100")


def test_undecodable_records_reported_and_next_batch_dumped(tmp_path: Path) -> None:
    broken = bytearray(build_batch(records(3)))
    struct.pack_into(">i", broken, 57, 9)  # record count larger than the records present
    log = write_log(tmp_path / f"{SEGMENT}.log", bytes(broken), build_batch(records(1), base_offset=3))
    result = run(log, "--deep-iteration")
    assert result.exit_code == 1
    assert len(err_lines(result)) == 1
    assert err_lines(result)[0].startswith(f"{log}: position ")
    assert out_lines(result)[-1].startswith("| offset: 3 ")


def test_non_consecutive_offsets(tmp_path: Path) -> None:
    compacted = build_batch(records(3), base_offset=0, offset_deltas=[0, 2, 3])
    later = build_batch(records(1), base_offset=10)
    log = write_log(tmp_path / f"{SEGMENT}.log", compacted, later)
    result = run(log, "--deep-iteration")
    assert result.exit_code == 0
    assert err_lines(result) == [
        f"Non-consecutive offsets in {os.path.abspath(log)}",
        "  0 is followed by 2",
        "  3 is followed by 10",
    ]
    assert run(log).stderr == ""  # only deep iteration looks at record offsets
    reports = [
        o for o in json_lines(run(log, "--json", "--deep-iteration")) if o["type"] == "nonConsecutiveOffsets"
    ]
    assert reports == [
        {"type": "nonConsecutiveOffsets", "path": os.path.abspath(log), "first": 0, "second": 2},
        {"type": "nonConsecutiveOffsets", "path": os.path.abspath(log), "first": 3, "second": 10},
    ]


def test_headers_log_append_time_and_delete_horizon(tmp_path: Path) -> None:
    batch = build_batch(
        [SimpleRecord(b"\xffv", b"k", 5, (Header("a", b"1"), Header("b", None)))],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=99,
        delete_horizon_ms=1234,
    )
    marker = build_end_txn_marker(
        offset=1,
        timestamp=7,
        partition_leader_epoch=0,
        producer_id=5,
        producer_epoch=0,
        marker=EndTransactionMarker(ControlRecordType.COMMIT, 2),
    )
    log = write_log(tmp_path / f"{SEGMENT}.log", batch, marker)
    lines = out_lines(run(log, "--print-data-log"))
    assert "deleteHorizonMs: OptionalLong[1234] position: 0 LogAppendTime: 99 " in lines[2]
    assert lines[3] == (
        "| offset: 0 LogAppendTime: 99 keySize: 1 valueSize: 2 sequence: -1 headerKeys: [a,b] key: k payload: \ufffdv"
    )
    assert lines[5].endswith("endTxnMarker: COMMIT coordinatorEpoch: 2")
    record = next(o for o in json_lines(run(log, "--json", "--print-data-log")) if o["type"] == "record")
    assert record["headers"] == [["a", "MQ=="], ["b", None]]
    assert record["value"] == base64.b64encode(b"\xffv").decode()


# -- library entry points ------------------------------------------------------------------------------------


def test_file_kind() -> None:
    assert file_kind(f"{SEGMENT}.log") == "log"
    assert file_kind(f"{SEGMENT}.log.deleted") == "unknown"
    assert file_kind("00000000000000007364-0000000001.checkpoint") == "kraftSnapshot"
    assert file_kind("bootstrap.checkpoint") == "bootstrapSnapshot"
    assert file_kind("replication-offset-checkpoint") == "offsetCheckpoint"
    assert file_kind("leader-epoch-checkpoint") == "leaderEpochCheckpoint"
    assert file_kind(".kafka_cleanshutdown") == "cleanShutdown"
    assert file_kind(".lock") == "unknown"


def test_dump_files_is_a_lazy_generator(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / f"{SEGMENT}.log", *(build_batch(records(1), base_offset=i) for i in range(100))
    )
    lines = dump_files([log], DumpOptions())
    first = [next(lines).content for _ in range(3)]
    lines.close()
    assert first[:2] == [f"Dumping {log}", "Log starting offset: 0"]


# -- arbitrary bytes never escape as exceptions --------------------------------------------------------------

NAMES = [
    f"{SEGMENT}.log",
    f"{SEGMENT}.index",
    f"{SEGMENT}.timeindex",
    f"{SEGMENT}.txnindex",
    f"{SEGMENT}.snapshot",
    "00000000000000000010-0000000001.checkpoint",
    "recovery-point-offset-checkpoint",
    "leader-epoch-checkpoint",
    "partition.metadata",
    "meta.properties",
    ".kafka_cleanshutdown",
]


@fuzz
@given(data=st.binary(max_size=300), name=st.sampled_from(NAMES), as_json=st.booleans())
def test_arbitrary_bytes_never_raise(tmp_path: Path, data: bytes, name: str, as_json: bool) -> None:
    (tmp_path / name).write_bytes(data)
    args = [tmp_path / name, "--print-data-log", *(["--json"] if as_json else [])]
    result = CliRunner().invoke(dump, [str(arg) for arg in args])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if as_json:
        json_lines(result)


@fuzz
@given(data=st.binary(min_size=1, max_size=200), position=st.integers(0, 10_000))
def test_corrupted_segment_with_indexes_never_raises(tmp_path: Path, data: bytes, position: int) -> None:
    """A valid log with arbitrary bytes spliced in, and index entries pointing anywhere."""
    base = build_batch(records(3)) + build_batch(records(2), base_offset=3)
    cut = position % (len(base) + 1)
    log = write_log(tmp_path / f"{SEGMENT}.log", base[:cut] + data + base[cut:])
    (tmp_path / f"{SEGMENT}.index").write_bytes(struct.pack(">iiii", 2, position, 4, cut))
    (tmp_path / f"{SEGMENT}.timeindex").write_bytes(struct.pack(">qiqi", 1, 2, 2, 4))
    args = [log, tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex", "--deep-iteration"]
    result = CliRunner().invoke(dump, [str(arg) for arg in args])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@fuzz
@given(
    folder=st.sampled_from(["magic0-lz4-0", "magic1-0", "gzip-0", "snappy-0", "lz4-0", "transactions-0"]),
    edits=st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), min_size=1, max_size=4),
    as_json=st.booleans(),
)
def test_mutated_real_logs_never_raise(
    tmp_path: Path, folder: str, edits: list[tuple[int, int]], as_json: bool
) -> None:
    """Byte edits anywhere in Kafka-written logs (compressed, legacy wrappers, control batches)."""
    data = bytearray(generated(folder).read_bytes())
    for position, value in edits:
        data[position % len(data)] = value
    log = write_log(tmp_path / f"{SEGMENT}.log", bytes(data))
    args = [log, "--print-data-log", *(["--json"] if as_json else [])]
    result = CliRunner().invoke(dump, [str(arg) for arg in args])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_undecodable_header_key_and_file_name(tmp_path: Path) -> None:
    batch = bytearray(build_batch([SimpleRecord(b"v", b"k", 5, (Header("ab", b"1"),))]))
    key_at = batch.index(b"ab")
    batch[key_at] = 0xFF  # header key bytes are no longer UTF-8
    # The CRC covers the records; recompute it so only the key is odd.
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    directory = tmp_path / os.fsdecode(b"dir\xfe")
    directory.mkdir()
    log = write_log(directory / f"{SEGMENT}.log", bytes(batch))
    result = run(log, "--deep-iteration")
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.splitlines()[0] == b"Dumping " + os.fsencode(log)
    assert out_lines(result)[-1].endswith("headerKeys: [\ufffdb]")
    record = json_lines(run(log, "--json", "--deep-iteration"))[-1]
    assert record["headerKeys"] == ["\ufffdb"]


def test_time_index_over_undecodable_batch(tmp_path: Path) -> None:
    broken = bytearray(build_batch(records(3)))
    struct.pack_into(">i", broken, 57, 9)  # record count larger than the records present
    log = write_log(tmp_path / f"{SEGMENT}.log", bytes(broken))
    timeindex = tmp_path / f"{SEGMENT}.timeindex"
    timeindex.write_bytes(struct.pack(">qi", 1_700_000_000_002, 2))
    result = run(timeindex)
    assert result.exit_code == 1
    assert out_lines(result)[1:] == ["timestamp: 1700000000002 offset: 2"]
    assert len(err_lines(result)) == 1
    assert err_lines(result)[0].startswith(f"{log}: position ")
