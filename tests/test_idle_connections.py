"""Idle device connections cost the broker little memory (issue 32; `kafkacompat bench scale` measures 17,000).

An IoT device connects, asks ApiVersions and goes quiet. The broker, started
as users start it, keeps no receive buffer, request, answer, answer queue
or writer task for such a connection once it has been quiet for a second:
6.6 KiB of RSS each at 17,000 (20.0 KiB before).
"""

from __future__ import annotations

import resource
import signal
import time
from pathlib import Path

from kafkacompat.bench.idle_clients import IdleConnections
from kafkacompat.bench.procstats import rss_mb
from kafkacompat.testing.ports import free_port
from tests.test_cli_serve import start, wait_for_line

CONNECTIONS = 3000
CEILING_KIB = 12.0  # per idle connection; measured 6.6 KiB, and 20.0 when each kept its buffer and last answer


def test_idle_connections_cost_the_broker_little_memory(tmp_path: Path) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    port = free_port()
    proc = start(["--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1", "--port", str(port)])
    try:
        wait_for_line(proc, "listening on")
        before = rss_mb(proc.pid)
        with IdleConnections(f"127.0.0.1:{port}", CONNECTIONS):  # each answered its ApiVersions, then silent
            deadline, per_connection = time.monotonic() + 15, float("inf")
            while time.monotonic() < deadline and per_connection >= CEILING_KIB:  # buffers go back after 1 s
                time.sleep(0.2)
                per_connection = (rss_mb(proc.pid) - before) * 1024 / CONNECTIONS
        assert per_connection < CEILING_KIB, f"{per_connection:.1f} KiB per idle connection"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
