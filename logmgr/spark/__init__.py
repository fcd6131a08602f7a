"""Spark integration: the ``kafka-log`` data source and the export pipeline (extra ``logmgr[spark]``).

``register(spark)`` adds ``format("kafka-log")`` to a session; an installed ``logmgr`` also exposes the
top-level module ``pyspark_logmgr`` that Spark 4 scans for, so the format is found without registering.
"""

from logmgr.spark.source import SOURCE_NAME, KafkaLogDataSource, register

__all__ = ["SOURCE_NAME", "KafkaLogDataSource", "register"]
