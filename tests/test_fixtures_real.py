"""Real broker data (``../shared/fixtures/kafka-real``): verify, counts, index rebuilds, metadata round trips."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from logmgr.reindex import reindex
from logmgr.verify import verify_paths
from segments.naming import is_partition_dir_name
from tests.conftest import KAFKA_REAL, require_fixtures

SNAPSHOTS = sorted(p.name for p in KAFKA_REAL.iterdir() if p.is_dir()) if KAFKA_REAL.exists() else []

# Segments whose broker-written index a single recovery pass does not reproduce, and why (format doc §9).
RESTARTED_INSIDE_SEGMENT = "restart inside the segment (index counter reset, close() time entry)"
RECORD_OFFSET_TIME_ENTRY = "pre-shallowOffsetOfMaxTimestamp broker named the record offset in the time index"
KNOWN_DIFFERENCES = {
    "kraft-3.7-clean-transactions/kafka-data/__consumer_offsets-29/00000000000000000000.index": RESTARTED_INSIDE_SEGMENT,
    "kraft-3.7-clean-transactions/kafka-data/__consumer_offsets-29/00000000000000000000.timeindex": RESTARTED_INSIDE_SEGMENT,
    "kraft-3.7-clean-transactions/kafka-data/__consumer_offsets-37/00000000000000000000.timeindex": RESTARTED_INSIDE_SEGMENT,
    "kraft-3.7-clean-transactions/kafka-data/_schemas-0/00000000000000000000.timeindex": RESTARTED_INSIDE_SEGMENT,
    "kraft-3.7-clean-transactions/kafka-data/docker-connect-configs-0/00000000000000000000.timeindex": RESTARTED_INSIDE_SEGMENT,
    "zk-2.1-clean-multiseg/kafka-logs/__consumer_offsets-17/00000000000000000058.timeindex": RECORD_OFFSET_TIME_ENTRY,
}


def _readme_counts(snapshot: Path) -> tuple[int, int]:
    text = (snapshot / "README.md").read_text()
    match = re.search(r"record batches \(incl\. KRaft snapshot \.checkpoint files\): (\d+); records: (\d+)", text)
    assert match, "README states batch and record counts"
    return int(match.group(1)), int(match.group(2))


def test_real_fixtures_present() -> None:
    require_fixtures(KAFKA_REAL)
    assert len(SNAPSHOTS) == 8


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_verify_is_clean_and_counts_match_readme(snapshot: str) -> None:
    root = require_fixtures(KAFKA_REAL / snapshot)
    report = verify_paths([root])
    assert report.ok, [str(p) for p in report.problems]
    # The README counts exclude bootstrap.checkpoint (also a record-batch file, verified separately here).
    bootstrap = list(root.rglob("bootstrap.checkpoint"))
    extra = verify_paths(bootstrap) if bootstrap else None
    batches, records = _readme_counts(root)
    assert report.batches - (extra.batches if extra else 0) == batches
    assert report.records - (extra.records if extra else 0) == records


def _partition_dirs() -> list[Path]:
    if not KAFKA_REAL.exists():
        return []
    return sorted(
        p for p in KAFKA_REAL.glob("*/*/*") if p.is_dir() and is_partition_dir_name(p.name) and any(p.glob("*.log"))
    )


@pytest.mark.parametrize("partition", _partition_dirs(), ids=lambda p: str(p.relative_to(KAFKA_REAL)))
def test_reindex_reproduces_broker_indexes(partition: Path, tmp_path: Path) -> None:
    report = reindex(partition, out=tmp_path)
    assert report.ok
    for segment in report.segments:
        for suffix in (".index", ".timeindex"):
            name = f"{segment.base_offset:020d}{suffix}"
            original = partition / name
            rebuilt = tmp_path / name
            key = str(original.relative_to(KAFKA_REAL))
            if not original.exists() or original.stat().st_size == 0:
                # Empty (trimmed) broker files: the rebuild has no entries either, except the final time entry.
                if suffix == ".index":
                    assert rebuilt.stat().st_size == 0
                continue
            if key in KNOWN_DIFFERENCES:
                assert rebuilt.read_bytes() != original.read_bytes(), f"{key} now matches: drop it from the list"
            else:
                assert rebuilt.read_bytes() == original.read_bytes(), key
    assert verify_paths([tmp_path]).ok


def test_known_differences_exist() -> None:
    require_fixtures(KAFKA_REAL)
    for key in KNOWN_DIFFERENCES:
        assert (KAFKA_REAL / key).exists()


def test_reindex_in_place_is_idempotent_on_a_copy(tmp_path: Path) -> None:
    source = require_fixtures(KAFKA_REAL / "zk-3.7.1-clean-multiseg/kafka-logs/__consumer_offsets-12")
    copy = tmp_path / "__consumer_offsets-12"
    shutil.copytree(source, copy)
    reindex(copy)
    for original in source.iterdir():
        if original.suffix in (".index", ".timeindex", ".log"):
            assert (copy / original.name).read_bytes() == original.read_bytes(), original.name
    assert not [p for p in copy.iterdir() if p.name.startswith(".logmgr-reindex-")]
    assert verify_paths([copy]).ok
