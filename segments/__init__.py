"""Kafka's on-disk formats: record batches, legacy message sets, segment files and their indexes.

This package is the format layer: it never imports ``logmgr``. See ``README.md`` for the module map.
"""
