"""Fixtures: every behavioural test runs against each engine."""

from __future__ import annotations

import pytest

from kafkacompat import storage
from kafkacompat.protocol.records import record_timestamps

ENGINES = ["memory", "disk"]


@pytest.fixture(params=ENGINES)
async def store(request, tmp_path):
    url = "memory://" if request.param == "memory" else str(tmp_path / "data")
    st = storage.open_store(url, record_timestamps=record_timestamps)
    await st.open()
    yield st
    await st.close()
