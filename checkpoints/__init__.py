"""Kafka's checkpoint and metadata files: offset checkpoints, leader-epoch checkpoints, partition.metadata,
meta.properties, the clean-shutdown marker and producer-state snapshots.

Part of the format layer: it never imports ``logmgr``.
"""

from checkpoints.atomic import atomic_write_bytes, fsync_dir
from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownMarker
from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCheckpointFile,
)
from checkpoints.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from checkpoints.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    read_partition_metadata,
    write_partition_metadata,
)
from checkpoints.producer_snapshot import (
    ProducerSnapshot,
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "META_PROPERTIES_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "CleanShutdownMarker",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "MetaProperties",
    "OffsetCheckpointFile",
    "PartitionMetadata",
    "ProducerSnapshot",
    "ProducerSnapshotEntry",
    "atomic_write_bytes",
    "fsync_dir",
    "read_meta_properties",
    "read_partition_metadata",
    "read_producer_snapshot",
    "write_meta_properties",
    "write_partition_metadata",
    "write_producer_snapshot",
]
