"""A Java consumer group fails over between replicated clusters and resumes at its committed cursor."""

from __future__ import annotations

import json
import subprocess

import pytest

from kafkacompat.admin.client import AdminClient
from kafkacompat.testing import Broker
from tests.replication.helpers import wait_for

from .drivers import ClientUnavailable
from .drivers.java import java_command

pytestmark = pytest.mark.java


def _consume(bootstrap: str, count: int, commit: bool) -> list[str]:
    try:
        command = java_command("Failover")
    except ClientUnavailable as exc:
        pytest.skip(f"Java kafka-clients unavailable: {exc}")
    done = subprocess.run([*command, bootstrap, "/s:rides", "riders", str(count), str(commit).lower(), "8000"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cursor_failover_between_clusters(tmp_path):
    a = Broker(str(tmp_path / "sanjose"), cluster_name="sanjose", group_initial_rebalance_delay_ms=0).start()
    b = Broker(str(tmp_path / "newyork"), cluster_name="newyork", group_initial_rebalance_delay_ms=0).start()
    try:
        for broker in (a, b):
            AdminClient(broker.bootstrap_servers).call("stream.create", path="/s", policy={"default_partitions": 2})
        AdminClient(a.bootstrap_servers).call("replica.add", path="/s", replica=f"127.0.0.1:{b.port}/s")
        for i in range(30):
            a.produce("/s:rides", f"r{i}", partition=i % 2)
        first = _consume(a.bootstrap_servers, 17, commit=True)
        committed = a.committed("riders", "/s:rides")
        assert sum(committed.values()) == 17
        wait_for(lambda: b.committed("riders", "/s:rides") == committed, what="cursors replicated")
        a.stop()
        rest = _consume(b.bootstrap_servers, 100, commit=False)
        assert sorted(first + rest, key=lambda v: int(v[1:])) == [f"r{i}" for i in range(30)]
    finally:
        a.stop()
        b.stop()
