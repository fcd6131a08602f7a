"""``LogSegment.read`` (the compiled fetch: index search, windowed header hop, the jump to the next index entry's
batch, the fetch's bytes) against a plain walk of the whole ``.log`` from position 0, over logs of varied batch
sizes, offset gaps and multi-batch appends, index intervals from one entry per append to none, thinned and
truncated indexes, every offset, and varied max sizes and upper bounds."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from segments.file_records import iter_batches
from segments.log_segment import LogSegment
from segments.records import SimpleRecord, build_batch

T0 = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class Expected:
    offset: int
    position: int
    size: int
    first_entry_incomplete: bool
    records: bytes


def reference_read(
    data: bytes, start_offset: int, max_size: int, max_position: int | None, min_one_message: bool
) -> Expected | None:
    """Kafka's ``LogSegment.read`` by a walk of every batch from position 0: the first batch whose last offset is
    >= ``start_offset``, then the byte range. O(batches)."""
    limit = len(data) if max_position is None else max_position
    for found in iter_batches(data):
        batch = found.batch
        if batch.last_offset >= start_offset:
            total = found.end_position - found.position
            adjusted = max(max_size, total) if min_one_message else max_size
            size = max(0, min(limit - found.position, adjusted))
            return Expected(
                batch.last_offset, found.position, size, adjusted < total, data[found.position : found.position + size]
            )
    return None


# (records in the batch, value size, offsets skipped before it (a compacted log's gaps), starts a new append)
batch_shapes = st.tuples(
    st.integers(1, 6), st.sampled_from([0, 10, 300, 1500, 5000]), st.sampled_from([0, 0, 0, 1, 7]), st.booleans()
)


def _append_all(segment: LogSegment, shapes: list[tuple[int, int, int, bool]]) -> int:
    """Append the batches (grouped into appends as ``shapes`` says); return the next offset. O(bytes)."""
    offset = segment.base_offset
    pending: list[bytes] = []
    for count, value_size, gap, new_append in shapes:
        if new_append and pending:
            segment.append(b"".join(pending))
            pending = []
        offset += gap
        records = [SimpleRecord(b"v" * value_size, str(offset + i).encode(), T0 + offset + i) for i in range(count)]
        pending.append(build_batch(records, base_offset=offset))
        offset += count
    if pending:
        segment.append(b"".join(pending))
    return offset


def _check_every_offset(segment: LogSegment, next_offset: int, max_sizes: list[int], bounds: list[int | None]) -> None:
    data = Path(segment.log.path).read_bytes()[: segment.size]
    for offset in range(segment.base_offset - 1, next_offset + 2):
        for max_size in max_sizes:
            for max_position in bounds:
                for min_one in (False, True):
                    got = segment.read(offset, max_size, max_position=max_position, min_one_message=min_one)
                    want = reference_read(data, offset, max_size, max_position, min_one)
                    if want is None:
                        assert got is None, (offset, max_size, max_position, min_one)
                        continue
                    assert got is not None, (offset, max_size, max_position, min_one)
                    assert (got.offset, got.position, got.size, got.first_entry_incomplete, got.records) == (
                        want.offset,
                        want.position,
                        want.size,
                        want.first_entry_incomplete,
                        want.records,
                    ), (offset, max_size, max_position, min_one)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(batch_shapes, min_size=1, max_size=25),
    interval=st.sampled_from([1, 100, 4096, 20_000, 1 << 30]),
    index_damage=st.sampled_from(["none", "thinned", "truncated", "erased"]),
    keep=st.randoms(use_true_random=False),
    max_sizes=st.lists(st.sampled_from([0, 1, 60, 61, 500, 4096, 17_000, 70_000, 1 << 20]), min_size=1, max_size=3),
    bound_fractions=st.lists(st.floats(0, 1), max_size=2),
)
@example(
    # One entry per batch of 10 KiB batches: the jump to the next entry's batch answers most offsets.
    shapes=[(2, 5000, 0, True)] * 8, interval=1, index_damage="none", keep=None, max_sizes=[1], bound_fractions=[]
)
@example(
    # Appends of three batches each, 30 KiB apart: the next entry's first batch is not the one holding the offset.
    shapes=[(2, 5000, 0, True), (2, 5000, 0, False), (2, 5000, 3, False)] * 4,
    interval=1,
    index_damage="none",
    keep=None,
    max_sizes=[1, 70_000],
    bound_fractions=[0.5],
)
def test_segment_read_matches_a_walk_from_position_zero(
    shapes: list[tuple[int, int, int, bool]],
    interval: int,
    index_damage: str,
    keep: random.Random | None,
    max_sizes: list[int],
    bound_fractions: list[float],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        segment = LogSegment.open(Path(directory), 10, create=True, index_interval_bytes=interval)
        try:
            next_offset = _append_all(segment, shapes)
            index = segment.offset_index
            entries = list(index)
            if index_damage == "thinned" and entries:
                # A sparser index than the appends wrote (an index built with a larger interval).
                kept = [e for i, e in enumerate(entries) if (keep.random() < 0.5 if keep else i % 2 == 0)]
                raw = b"".join(
                    (e.offset - segment.base_offset).to_bytes(4, "big") + e.position.to_bytes(4, "big") for e in kept
                )
                index.load_entries(raw, max(len(kept), 1))
            elif index_damage == "truncated" and entries:
                index.truncate_to(entries[len(entries) // 2].offset)
            elif index_damage == "erased":
                index.truncate_to(segment.base_offset)
            bounds: list[int | None] = [None, *(int(segment.size * f) for f in bound_fractions)]
            _check_every_offset(segment, next_offset, max_sizes, bounds)
        finally:
            segment.close()
