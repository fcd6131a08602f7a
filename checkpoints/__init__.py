"""Kafka's checkpoint and metadata files: offset checkpoints, leader-epoch checkpoints, partition.metadata,
meta.properties, the clean-shutdown marker and producer-state snapshots.

Part of the format layer: it never imports ``logmgr``.
"""
