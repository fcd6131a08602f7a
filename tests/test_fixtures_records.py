"""Every segment of kafka-clients-generated decodes exactly as Kafka's own reader reported it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.describe import batch_summary, record_summary
from segments.file_records import FileRecords
from segments.log_segment import LogSegment
from segments.records import (
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    Header,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker,
)
from tests.conftest import CLIENTS_GENERATED, require_fixtures

FOLDERS = sorted(p.name for p in CLIENTS_GENERATED.iterdir() if p.is_dir()) if CLIENTS_GENERATED.exists() else []
CODEC_FOLDERS = ["none-0", "gzip-0", "snappy-0", "lz4-0", "zstd-aiokafka-0"]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _decode(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    batches: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    with FileRecords(folder / "00000000000000000000.log") as log:
        for found in log.batches():
            found.batch.ensure_valid()
            batches.append(batch_summary(found))
            records.extend(record_summary(found, record) for record in found.batch.records())
        assert found.end_position == log.size_in_bytes
    return batches, records


def test_fixture_folders_present() -> None:
    require_fixtures(CLIENTS_GENERATED)
    assert len(FOLDERS) == 11


@pytest.mark.parametrize("folder", FOLDERS)
def test_records_match_kafka_reader(folder: str) -> None:
    path = require_fixtures(CLIENTS_GENERATED / folder)
    batches, records = _decode(path)
    expected_records = _jsonl(path / "expected.jsonl")
    assert len(records) == len(expected_records)
    for ours, theirs in zip(records, expected_records, strict=True):
        assert ours == theirs, (ours["offset"], {k: (ours[k], theirs.get(k)) for k in ours if ours[k] != theirs.get(k)})
    expected_batches = _jsonl(path / "batches.jsonl")
    assert len(batches) == len(expected_batches)
    for ours, theirs in zip(batches, expected_batches, strict=True):
        ours = {k: v for k, v in ours.items() if k in theirs}
        assert ours == theirs


def test_codec_folders_decode_identically() -> None:
    require_fixtures(CLIENTS_GENERATED)
    decoded = []
    for folder in CODEC_FOLDERS:
        _, records = _decode(CLIENTS_GENERATED / folder)
        decoded.append([{k: v for k, v in r.items() if k not in ("compression", "batchPosition")} for r in records])
    for other in decoded[1:]:
        assert other == decoded[0]


def _simple(record: dict[str, Any]) -> SimpleRecord:
    def raw(value: str | None) -> bytes | None:
        return None if value is None else base64.b64decode(value)

    return SimpleRecord(
        raw(record["value"]),
        raw(record["key"]),
        record["timestamp"],
        tuple(Header(k, raw(v)) for k, v in record["headers"]),
    )


@pytest.mark.parametrize("folder", ["none-0", "idempotent-0", "transactions-0"])
def test_uncompressed_batches_rebuild_byte_for_byte(folder: str) -> None:
    path = require_fixtures(CLIENTS_GENERATED / folder)
    data = (path / "00000000000000000000.log").read_bytes()
    records = _jsonl(path / "expected.jsonl")
    for batch in _jsonl(path / "batches.jsonl"):
        members = [r for r in records if r["batchPosition"] == batch["position"]]
        if batch["isControl"]:
            assert len(members) == 1
            built = build_end_txn_marker(
                offset=batch["baseOffset"],
                timestamp=members[0]["timestamp"],
                partition_leader_epoch=batch["partitionLeaderEpoch"],
                producer_id=batch["producerId"],
                producer_epoch=batch["producerEpoch"],
                marker=EndTransactionMarker(ControlRecordType[members[0]["controlType"]], members[0]["coordinatorEpoch"]),
            )
            assert len(built) == 78
        else:
            built = build_batch(
                [_simple(r) for r in members],
                base_offset=batch["baseOffset"],
                producer_id=batch["producerId"],
                producer_epoch=batch["producerEpoch"],
                base_sequence=batch["baseSequence"],
                is_transactional=batch["isTransactional"],
                partition_leader_epoch=batch["partitionLeaderEpoch"],
            )
        assert built == data[batch["position"] : batch["position"] + batch["sizeInBytes"]]


@pytest.mark.parametrize("folder", ["gzip-0", "snappy-0", "lz4-0", "zstd-aiokafka-0"])
def test_compressed_records_region_rebuilds(folder: str) -> None:
    """The decompressed records region equals the records re-encoded (the compressed bytes are not
    deterministic across compressor versions)."""
    path = require_fixtures(CLIENTS_GENERATED / folder)
    records = _jsonl(path / "expected.jsonl")
    with FileRecords(path / "00000000000000000000.log") as log:
        for found in log.batches():
            batch = found.batch
            assert isinstance(batch, DefaultRecordBatch)
            members = [r for r in records if r["batchPosition"] == found.position]
            rebuilt = DefaultRecordBatch(build_batch([_simple(r) for r in members], base_offset=batch.base_offset))
            assert batch.decompressed_records_region() == rebuilt.decompressed_records_region()
            codec = CompressionType.from_name(members[0]["compression"])
            recompressed = DefaultRecordBatch(
                build_batch([_simple(r) for r in members], base_offset=batch.base_offset, compression=codec)
            )
            recompressed.ensure_valid()
            assert [r.value for r in recompressed.records()] == [r.value for r in batch.records()]


def test_transactions_txnindex_matches_aborted_transactions(tmp_path: Path) -> None:
    path = require_fixtures(CLIENTS_GENERATED / "transactions-0")
    (tmp_path / "00000000000000000000.log").write_bytes((path / "00000000000000000000.log").read_bytes())
    segment = LogSegment.open(tmp_path, 0)
    result = segment.recover()
    assert result.error is None and result.truncated_bytes == 0
    expected = json.loads((path / "aborted_transactions.json").read_text())["abortedTransactions"]
    got = [
        {"producerId": t.producer_id, "firstOffset": t.first_offset, "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset}
        for t in segment.txn_index.all_aborted_txns()
    ]
    assert got == [{k: e[k] for k in ("producerId", "firstOffset", "lastOffset", "lastStableOffset")} for e in expected]
    segment.close()
    assert (tmp_path / "00000000000000000000.txnindex").stat().st_size == 34 * 2


def test_log_append_time_reports_batch_max_timestamp() -> None:
    path = require_fixtures(CLIENTS_GENERATED / "log-append-time-0")
    with FileRecords(path / "00000000000000000000.log") as log:
        first = next(iter(log.batches())).batch
        assert first.timestamp_type is TimestampType.LOG_APPEND_TIME
        stored = [r.stored_timestamp for r in first.records()]
        assert stored == [1700000000300, 1700000000100, 1700000000500, 1700000000200]
        assert {r.timestamp for r in first.records()} == {first.max_timestamp}


def _readme_table() -> dict[str, tuple[int, int, int]]:
    rows = {}
    for line in (CLIENTS_GENERATED / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].startswith("`") and cells[5].isdigit():
            rows[cells[0].strip("`")] = (int(cells[5]), int(cells[6]), int(cells[7]))
    return rows


@pytest.mark.parametrize("folder", FOLDERS)
def test_verify_counts_match_readme(folder: str) -> None:
    path = require_fixtures(CLIENTS_GENERATED / folder)
    batches, records, size = _readme_table()[folder]
    report = verify_paths([path])
    assert report.ok, [str(p) for p in report.problems]
    assert (report.segments, report.batches, report.records, report.bytes) == (1, batches, records, size)
