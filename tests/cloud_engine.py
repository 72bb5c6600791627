"""Brokers on the cloud engine in tests: PostgreSQL and an S3 endpoint, started once per session."""

from __future__ import annotations

import pytest

from kafkacompat.testing.services import TEST_STORE_VARIABLE, ServiceUnavailable, cloud_store


def on_the_cloud_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers this test starts from now on open a cloud store, as `serve --store postgresql://...`
    does; the test is skipped where PostgreSQL or the S3 endpoint cannot be started."""
    try:
        cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv(TEST_STORE_VARIABLE, "cloud")
