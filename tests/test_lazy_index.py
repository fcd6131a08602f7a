"""LazyIndex: indexes of inactive segments open on first use and follow renames and deletion unopened."""

from __future__ import annotations

import os
from pathlib import Path

from segments.lazy_index import LazyIndex
from segments.log_segment import LogSegment
from segments.offset_index import OffsetIndex
from segments.records import SimpleRecord, build_batch


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reopened_segment_maps_no_index_until_used(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=10)
    for i in range(5):
        segment.append(build_batch([SimpleRecord(b"v" * 50)] * 2, base_offset=i * 2))
    segment.close()
    before = _fd_count()
    reopened = LogSegment.open(tmp_path, 0)
    assert _fd_count() == before + 1  # only the .log
    assert reopened.read(4, 1000) is not None  # a read maps the offset index
    assert _fd_count() > before + 1
    reopened.close()


def test_unopened_index_follows_rename_and_discard(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0)
    index.append(5, 100)
    index.close()
    lazy: LazyIndex[OffsetIndex] = LazyIndex(path, lambda p: OffsetIndex(p, 0))
    renamed = tmp_path / "00000000000000000000.index.deleted"
    lazy.rename_to(renamed)
    assert not lazy.is_loaded and renamed.exists() and not path.exists()
    assert lazy.get().lookup(7) == (5, 100)
    lazy.discard()
    assert not renamed.exists()


def test_segment_with_unopened_indexes_renames_and_deletes_all_files(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    segment.append(build_batch([SimpleRecord(b"x")]))
    segment.close()
    reopened = LogSegment.open(tmp_path, 0)
    reopened.rename_to_deleted()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    reopened.delete()
    assert list(tmp_path.iterdir()) == []


def test_unclean_load_leaves_recovered_inactive_segments_unmapped(tmp_path: Path) -> None:
    from logmgr.config import LogConfig
    from logmgr.log_loader import load_log

    partition = tmp_path / "t-0"
    config = LogConfig.from_properties({"segment.bytes": "2000"})
    log = load_log(partition, config)
    for _ in range(40):
        log.append_records([SimpleRecord(b"v" * 100)] * 3)
    log.close()
    reopened = load_log(partition, config, recovery_point=0, had_clean_shutdown=False)
    segments = reopened.segments.values()
    assert len(segments) > 3 and reopened.recovery.recovered_segments == len(segments)
    assert not any(s.open_files for s in segments[:-1])
    # Reads reopen them transparently.
    assert reopened.read(reopened.log_start_offset + 1, 10_000).batches()
    reopened.close()
