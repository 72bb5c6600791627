"""`kafkacompat serve` as users start it: a subprocess, a log line, SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from kafkacompat.testing.ports import free_port
from tests.test_clients_produce_consume import consume_all


def start(args: list[str], env: dict[str, str] | None = None,
          preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kafkacompat", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})}, cwd=Path(__file__).resolve().parent.parent, preexec_fn=preexec_fn,
    )


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"broker never logged {needle!r}")


def test_serve_logs_listening_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    proc = start(["--data-dir", str(data), "--host", "127.0.0.1", "--port", str(port)])
    try:
        line = wait_for_line(proc, "listening on")
        assert f"127.0.0.1:{port}" in line
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("cli-topic", b"hello")
        assert producer.flush(15) == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "stopped" in proc.stdout.read()
        assert (data / ".clean").exists(), "a clean stop writes the clean-shutdown marker"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # a clean stop leaves a store that reopens with its data
    proc = start(["--data-dir", str(data), "--host", "127.0.0.1"], env={"KAFKACOMPAT_PORT": str(port)})
    try:
        wait_for_line(proc, "listening on")
        [msg] = consume_all(f"127.0.0.1:{port}", "cli-topic", 1, 1)
        assert msg.value() == b"hello"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_serve_help_reads_like_a_kafka_tool() -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=30)
    assert done.returncode == 0
    for flag in ("--data-dir", "--port", "--advertised-host", "--volume", "--default-stream"):
        assert flag in done.stdout


def test_bad_config_is_a_one_line_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve"], capture_output=True, text=True,
                          env={**os.environ, "KAFKACOMPAT_PORT": "ninety"},
                          cwd=Path(__file__).resolve().parent.parent, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == ("kafkacompat: port must be an integer, got 'ninety' "
                                   "(environment variable KAFKACOMPAT_PORT)")


def test_the_start_up_heap_is_frozen_before_the_broker_listens(tmp_path: Path) -> None:
    # The freeze (a full collection) ran after "listening on", holding the first clients 0.2-0.5 s at
    # 20,000 topics (issue 32); it belongs before the listeners accept.
    port = free_port()
    proc = start(["--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1", "--port", str(port),
                  "--log-level", "DEBUG"])
    try:
        lines, deadline = [], time.monotonic() + 30
        while not any("listening on" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())
        assert any(re.search(r"froze \d+ objects loaded at start", line) for line in lines), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
