"""Shared test helpers: where the reference fixtures live, and a skip when they are absent."""

from __future__ import annotations

from pathlib import Path

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
