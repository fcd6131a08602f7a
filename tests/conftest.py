"""Shared test helpers: where the reference fixtures live, and a skip when they are absent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
FIXTURES = SHARED / "fixtures"
KAFKA_REAL = FIXTURES / "kafka-real"
CLIENTS_GENERATED = FIXTURES / "kafka-clients-generated"

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


def require_fixtures(path: Path) -> Path:
    """Return ``path``, or skip the calling test when the shared fixtures are not checked out beside the repo."""
    if not path.exists():
        pytest.skip(f"reference fixtures not found at {path} (clone ../shared beside this repository to run)")
    return path


@pytest.fixture
def kafka_real() -> Path:
    return require_fixtures(KAFKA_REAL)


@pytest.fixture
def clients_generated() -> Path:
    return require_fixtures(CLIENTS_GENERATED)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real SparkSession for the whole run: ``local[2]``, UI off, bound to 127.0.0.1, workers on this venv's
    Python (:func:`logmgr.spark.session.local_session`), Python filter pushdown enabled, ``kafka-log``
    registered with pushdown on."""
    pytest.importorskip("pyspark.sql", reason="pyspark not installed (pip install -e '.[spark]')")
    from logmgr.spark.session import local_session

    session = local_session(
        "local[2]",
        "logmgr-tests",
        **{"spark.sql.shuffle.partitions": "2", "spark.sql.python.filterPushdown.enabled": "true"},
    )
    yield session
    session.stop()
