"""Spark 4's data source discovery hook: Spark imports every top-level module named ``pyspark_*`` and registers
its ``DefaultSource`` under ``DefaultSource.name()``, so ``format("kafka-log")`` works without calling
``logmgr.spark.register``."""

from logmgr.spark.source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
