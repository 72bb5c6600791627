"""KAFKACOMPAT_KEEP_LOGS: the log of a broker a test started outlives the test.

A failure that only a loaded machine shows (a full run on two workers) is read
afterwards from the brokers' logs; without the setting they are temporary files,
gone when the test closes its brokers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkacompat.testing.cluster_process import ClusterProcess


def test_a_started_brokers_log_is_kept_where_the_setting_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = tmp_path / "logs"
    monkeypatch.setenv("KAFKACOMPAT_KEEP_LOGS", str(kept))
    broker = ClusterProcess("kept", str(tmp_path / "data"))
    try:
        broker.start()
    finally:
        broker.close()
    logs = list(kept.glob("cluster-kept-*.log"))
    assert len(logs) == 1 and f"127.0.0.1:{broker.port}" in logs[0].read_text()
