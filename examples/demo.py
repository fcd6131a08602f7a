"""End-to-end demo of the format layer, run by ``make run``.

1. Writes a Kafka log dir from scratch: a partition with three segments of batches in every codec, an idempotent
   producer, an aborted and a committed transaction; producer snapshots, checkpoints, partition.metadata,
   meta.properties and the clean-shutdown marker.
2. Runs ``logmgr verify`` on it, dumps a segment and a checkpoint, rebuilds the indexes with ``logmgr reindex
   --out`` and checks they equal the ones written while appending.
3. Tears the tail of the active segment and recovers it: exactly the valid prefix survives.
4. If the reference fixtures are checked out beside the repository, verifies a real broker's log dir too.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from checkpoints.clean_shutdown import CleanShutdownMarker
from checkpoints.leader_epoch_checkpoint import EpochEntry, LeaderEpochCheckpointFile
from checkpoints.meta_properties import MetaProperties, write_meta_properties
from checkpoints.offset_checkpoint import OffsetCheckpointFile
from checkpoints.partition_metadata import PartitionMetadata, write_partition_metadata
from checkpoints.producer_snapshot import ProducerSnapshotEntry, write_producer_snapshot
from segments.compression import CompressionType
from segments.log_segment import LogSegment
from segments.naming import TopicPartition, producer_snapshot_file
from segments.records import (
    ControlRecordType,
    EndTransactionMarker,
    Header,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
)
from segments.transaction_index import AbortedTxn

T0 = 1_700_000_000_000
REPO = Path(__file__).resolve().parent.parent
LOGMGR = [str(Path(sys.executable).with_name("logmgr"))]


def logmgr(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    print(f"$ logmgr {' '.join(args)}")
    result = subprocess.run([*LOGMGR, *args], capture_output=True, text=True, cwd=REPO, check=False)
    print(result.stdout.rstrip()[:2000])
    if result.stderr:
        print(result.stderr.rstrip()[:2000])
    if check and result.returncode != 0:
        raise SystemExit(f"logmgr {args[0]} exited {result.returncode}")
    return result


def write_partition(partition_dir: Path) -> tuple[int, list[int]]:
    """Write three segments; return the log end offset and the segment base offsets."""
    partition_dir.mkdir(parents=True)
    write_partition_metadata(partition_dir / "partition.metadata", PartitionMetadata(0, uuid.uuid4()))
    codecs = list(CompressionType)
    next_offset = 0
    bases: list[int] = []
    segment: LogSegment | None = None
    for segment_number in range(3):
        if segment is not None:
            segment.on_become_inactive_segment()
            segment.flush()
            segment.close()
            write_producer_snapshot(producer_snapshot_file(partition_dir, next_offset), [])
        bases.append(next_offset)
        segment = LogSegment.open(partition_dir, next_offset, create=True, index_interval_bytes=1024)
        for i in range(40):
            records = [
                SimpleRecord(
                    f"value {next_offset + j} ".encode() * 4,
                    f"key-{(next_offset + j) % 7}".encode(),
                    T0 + (next_offset + j) * 10,
                    (Header("source", b"demo"),) if j == 0 else (),
                )
                for j in range(10)
            ]
            batch = build_batch(
                records,
                base_offset=next_offset,
                compression=codecs[(i + segment_number) % len(codecs)],
                producer_id=7,
                producer_epoch=0,
                base_sequence=next_offset,
                partition_leader_epoch=0,
            )
            segment.append(batch)
            next_offset += len(records)
    assert segment is not None
    # An aborted transaction: two data batches of producer 9, then the ABORT marker.
    first = next_offset
    for _ in range(2):
        segment.append(
            build_batch(
                [SimpleRecord(b"doomed", None, T0 + next_offset * 10)],
                base_offset=next_offset,
                producer_id=9,
                producer_epoch=1,
                base_sequence=next_offset - first,
                is_transactional=True,
                partition_leader_epoch=0,
            )
        )
        next_offset += 1
    marker = EndTransactionMarker(ControlRecordType.ABORT, 3)
    segment.append(
        build_end_txn_marker(
            offset=next_offset,
            timestamp=T0 + next_offset * 10,
            partition_leader_epoch=0,
            producer_id=9,
            producer_epoch=1,
            marker=marker,
        )
    )
    segment.append_aborted_txn(AbortedTxn(9, first, next_offset, next_offset + 1))
    next_offset += 1
    segment.flush()
    segment.close()
    write_producer_snapshot(
        producer_snapshot_file(partition_dir, next_offset),
        [ProducerSnapshotEntry(7, 0, next_offset - 4, next_offset - 4, 9, T0 + next_offset * 10, -1, -1)],
    )
    LeaderEpochCheckpointFile(partition_dir / "leader-epoch-checkpoint").write([EpochEntry(0, 0)])
    return next_offset, bases


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="logmgr-demo-") as tmp:
        log_dir = Path(tmp) / "kafka-logs"
        partition = log_dir / "orders-0"
        log_end, bases = write_partition(partition)
        tp = TopicPartition("orders", 0)
        OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").write({tp: log_end})
        OffsetCheckpointFile(log_dir / "log-start-offset-checkpoint").write({})
        OffsetCheckpointFile(log_dir / "replication-offset-checkpoint").write({tp: log_end})
        write_meta_properties(log_dir / "meta.properties", MetaProperties.create(version=1, node_id=1, cluster_id="c2FtcGxlLWNsdXN0ZXItaWQ"))
        CleanShutdownMarker(broker_epoch=42).write(log_dir)
        print(f"wrote {log_dir}: orders-0 with {len(bases)} segments, log end offset {log_end}\n")

        logmgr("verify", str(log_dir))
        logmgr("dump", "--deep-iteration", str(partition / f"{bases[-1]:020d}.log"))
        logmgr("dump", str(log_dir / "recovery-point-offset-checkpoint"))

        rebuilt = Path(tmp) / "rebuilt"
        logmgr("reindex", str(partition), "--out", str(rebuilt), "--index-interval-bytes", "1024")
        for path in sorted(rebuilt.iterdir()):
            original = partition / path.name
            same = original.read_bytes() == path.read_bytes()
            print(f"  {path.name}: {'identical to' if same else 'DIFFERS from'} the index written on append")
            if not same:
                raise SystemExit("reindex disagrees with the append path")

        # Tear the active segment: cut the last batch in half, then recover.
        active = partition / f"{bases[-1]:020d}.log"
        size = active.stat().st_size
        with active.open("r+b") as f:
            f.truncate(size - 40)
        print(f"\ntore {active.name}: {size} -> {size - 40} bytes")
        logmgr("verify", str(partition), check=False)
        segment = LogSegment.open(partition, bases[-1])
        result = segment.recover()
        segment.close()
        print(
            f"recovered: {result.batches} valid batches, {result.valid_bytes} bytes kept, "
            f"{result.truncated_bytes} bytes truncated"
        )
        logmgr("verify", str(partition))

    fixture = REPO.parent / "shared" / "fixtures" / "kafka-real" / "kraft-3.7-clean-transactions"
    if fixture.exists():
        print()
        logmgr("verify", str(fixture))
    print("\ndemo finished")


if __name__ == "__main__":
    main()
