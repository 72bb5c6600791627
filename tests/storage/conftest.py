"""Fixtures: every behavioural test runs against each engine.

`cloud` is the PostgreSQL + S3 engine on a private PostgreSQL and moto's S3
server (kafkacompat.testing.services), a fresh database per test; it skips
saying why when either is not installed.
"""

from __future__ import annotations

import pytest
from kafkacompat.protocol.records import record_timestamps

from kafkacompat import storage
from kafkacompat.testing.services import ServiceUnavailable, cloud_store

ENGINES = ["memory", "disk", "cloud"]


def open_engine(engine: str, tmp_path) -> storage.Store:
    """A new store of `engine` (unopened)."""
    if engine == "cloud":
        try:
            database, objects = cloud_store()
        except ServiceUnavailable as exc:
            pytest.skip(str(exc))
        return storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=2)
    url = "memory://" if engine == "memory" else str(tmp_path / "data")
    return storage.open_store(url, record_timestamps=record_timestamps)


@pytest.fixture(params=ENGINES)
async def store(request, tmp_path):
    st = open_engine(request.param, tmp_path)
    await st.open()
    yield st
    await st.close()
