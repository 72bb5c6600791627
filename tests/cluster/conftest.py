"""A PostgreSQL server per test module for brokers that form one cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing.services import Postgres, ServiceUnavailable


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    try:
        db = Postgres()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    db.start()
    try:
        yield db
    finally:
        db.stop()
