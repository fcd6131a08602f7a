"""Crash before the one sync of a load's producer snapshots (``load_log``'s batched snapshot durability).

An unclean load writes a producer snapshot after every recovered segment without fsync and makes them durable
together at its end (one ``syncfs``; the LogManager's once per log dir). A power loss before that sync can leave
each of those snapshots absent, empty, cut or full of zeros (the rename reached the disk, the data did not). Each
case loads a log of several segments (an idempotent producer, a committed transaction and one left open, two
leader epochs) uncleanly with ``sync_snapshots=False``, releases its files without the shutdown's writes (the
crash), damages every snapshot that load wrote, and loads again uncleanly, from the recovery point the first load
had (0: the damaged snapshots are set aside unread, as Kafka's ``truncateAndReload`` does) or from a later one as
if a checkpoint had moved (the damaged snapshots at or below it are read: detected by size, version or CRC,
deleted, the state replayed from the log). The producer state, last stable offset and leader epochs equal those of
the same load of an undamaged copy, and every snapshot the second load leaves is byte-identical to the copy's.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from checkpoints.atomic import sync_filesystem
from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments.records import ControlRecordType, SimpleRecord

T0 = 1_700_000_000_000
IDEMPOTENT = 4242
TRANSACTIONAL = 4343
# A few batches per segment: one recovered segment, one snapshot, every few batches.
CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100, segment_index_bytes=4096)


def _load(partition_dir: Path, *, recovery_point: int = 0, sync_snapshots: bool = True) -> Log:
    return load_log(
        partition_dir,
        CONFIG,
        recovery_point=recovery_point,
        had_clean_shutdown=False,
        clock=ManualClock(T0),
        sync_snapshots=sync_snapshots,
    )


def _build(partition_dir: Path) -> None:
    """Idempotent and transactional appends over two leader epochs and many segments, closed cleanly."""
    log = load_log(partition_dir, CONFIG, clock=ManualClock(T0))
    txn_sequence = 0
    for i in range(24):
        epoch = 1 if i < 12 else 2
        log.append_records([SimpleRecord(b"plain-%d" % i, None, T0 + i)], leader_epoch=epoch)
        log.append_records(
            [SimpleRecord(b"idem-%d" % i, None, T0 + i)],
            producer_id=IDEMPOTENT,
            producer_epoch=0,
            base_sequence=i,
            leader_epoch=epoch,
        )
        if i % 8 == 3:
            log.append_records(
                [SimpleRecord(b"txn-%d" % i, None, T0 + i)],
                producer_id=TRANSACTIONAL,
                producer_epoch=0,
                base_sequence=txn_sequence,
                is_transactional=True,
                leader_epoch=epoch,
            )
            txn_sequence += 1
        if i % 8 == 5 and i < 16:
            log.append_end_txn_marker(TRANSACTIONAL, 0, ControlRecordType.COMMIT, 0, leader_epoch=epoch)
    assert len(log.segments) >= 6
    assert log.producer_state.ongoing_txns, "the last transaction is left open"
    log.close()


def _state(log: Log) -> tuple[object, ...]:
    producers = {
        pid: (entry.producer_epoch, entry.last_seq, entry.last_data_offset, entry.current_txn_first_offset)
        for pid, entry in log.producer_state.active_producers.items()
    }
    return (
        log.log_end_offset,
        producers,
        dict(log.producer_state.ongoing_txns),
        log.last_stable_offset,
        log.leader_epochs.entries,
    )


def _snapshots(partition_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(partition_dir.glob("*.snapshot"))}


def _crash(log: Log) -> None:
    """Release the log's descriptors without the shutdown's snapshot or checkpoint writes."""
    log.segments.close()


def _zeroed(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "absent": Path.unlink,
    "empty": lambda path: path.write_bytes(b""),
    "cut": _cut,
    "zeroed": _zeroed,
}


@pytest.mark.parametrize("later_recovery_point", [False, True])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_snapshots_lost_before_the_load_sync_are_rebuilt_with_identical_state(
    tmp_path: Path, damage: str, later_recovery_point: bool
) -> None:
    pdir = tmp_path / "topic-0"
    _build(pdir)
    reference_dir = tmp_path / "reference" / "topic-0"
    shutil.copytree(pdir, reference_dir)

    crashed = _load(pdir, sync_snapshots=False)
    written = crashed.recovery.unsynced_snapshots
    assert crashed.recovery.recovered_segments == len(crashed.segments)
    assert written >= len(crashed.segments) - 1
    _crash(crashed)
    damaged = sorted(pdir.glob("*.snapshot"))
    assert len(damaged) >= len(crashed.segments) - 1
    for path in damaged:
        DAMAGE[damage](path)

    bases = crashed.segments.base_offsets()
    recovery_point = bases[len(bases) // 2] + 1 if later_recovery_point else 0
    reference = _load(reference_dir, recovery_point=recovery_point)
    reloaded = _load(pdir, recovery_point=recovery_point)
    assert _state(reloaded) == _state(reference)
    reloaded.producer_state._check()
    left, expected = _snapshots(pdir), _snapshots(reference_dir)
    if later_recovery_point:
        # The damaged snapshots below the recovery start were deleted (the copy's stay): the rest are equal.
        assert left == {name: data for name, data in expected.items() if name in left}
        assert all(int(name[:20]) <= bases[len(bases) // 2] for name in expected.keys() - left.keys())
    else:
        assert left == expected
    reference.close()
    reloaded.close()


def test_sync_filesystem_names_the_path_it_cannot_open(tmp_path: Path) -> None:
    sync_filesystem(tmp_path)
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as raised:
        sync_filesystem(missing)
    assert raised.value.filename == str(missing)
