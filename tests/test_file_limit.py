"""`kafkacompat serve` raises its own open-file limit for its connections, or says at start what to set (issue 32).

Started as a service manager often starts it (a soft limit far below the
hard one), a broker that kept the soft limit would refuse connections past
it whatever max_connections says.
"""

from __future__ import annotations

import resource
import signal
from collections.abc import Callable

from kafkacompat.testing.ports import free_port
from tests.test_bad_input import api_versions_ok_on
from tests.test_cli_serve import start, wait_for_line
from tests.wire import Wire


def _limited(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_broker_started_under_a_low_soft_limit_serves_past_it(tmp_path) -> None:
    port = free_port()
    proc = start(["--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1", "--port", str(port),
                  "--max-connections", "1000"], preexec_fn=_limited(128, 4096))
    held: list[Wire] = []
    try:
        wait_for_line(proc, "listening on")
        for _ in range(400):  # three times the soft limit it was started with
            held.append(Wire(f"127.0.0.1:{port}"))
            assert api_versions_ok_on(held[-1]), f"connection {len(held)} was not answered"
    finally:
        for wire in held:
            wire.close()
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, output
    assert "open-file limit" not in output


def test_a_hard_limit_too_low_for_max_connections_is_named_at_start(tmp_path) -> None:
    # past the system's fs.nr_open (1,048,576 by default), so not even root can raise the hard limit that far
    proc = start(["--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1", "--port", str(free_port()),
                  "--max-connections", "2000000"], preexec_fn=_limited(128, 4096))
    said: list[str] = []
    try:
        while not any("listening on" in line for line in said) and proc.poll() is None:
            said.append(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    [line] = [line for line in said if "open-file limit" in line]  # said at start, before it listens
    assert "the open-file limit (4096) is below what max_connections=2000000 needs (2002048)" in line
    assert "ulimit -n 2002048" in line and "LimitNOFILE=2002048" in line
    assert proc.returncode == 0
