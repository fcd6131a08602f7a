"""A local SparkSession set up as logmgr's tools, examples and tests run Spark."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def local_session(master: str = "local[2]", app_name: str = "logmgr", **conf: str) -> SparkSession:
    """Get or create a session on ``master`` with the UI off, the driver bound to 127.0.0.1, session time zone
    UTC, Spark's log level ERROR, Python workers on this interpreter (the one with logmgr installed) and
    ``kafka-log`` registered; ``conf`` adds or overrides settings (``spark.sql.shuffle.partitions="2"`` ...).
    O(JVM start) the first time."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark binds to 127.0.0.1 anyway; saying so up front spares the warning about the host name's address.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": "ERROR",
        **conf,
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    from logmgr.spark.source import register

    register(session)
    return session
