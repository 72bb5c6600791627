"""A PostgreSQL server per test module for brokers that form one cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing.services import Postgres, postgres_fixture


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    yield from postgres_fixture()
