"""/health/live and /health/ready as an orchestrator's probes see them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from kafkacompat import storage
from kafkacompat.config import BrokerConfig
from kafkacompat.kafka_port.server import BrokerServer
from kafkacompat.testing import Broker

REPO = Path(__file__).resolve().parents[2]


async def status(session: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    async with session.get(url) as answer:
        assert answer.content_type == "application/json"
        return answer.status, await answer.json()


async def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_ready_and_live_on_a_running_broker() -> None:
    with Broker(http_port=0) as broker:
        for path, expected in (("/health/live", {"status": "up"}),
                               ("/health/ready", {"status": "ready",
                                                  "checks": {"store_open": True, "kafka_listener": True}})):
            with urllib.request.urlopen(broker.http_url + path, timeout=10) as answer:
                assert answer.status == 200
                assert json.loads(answer.read()) == expected


async def test_not_ready_while_the_store_opens_and_while_it_closes() -> None:
    """The HTTP server comes up before the store opens and goes down after it closes: probes see 503 then."""
    store = storage.open_store("memory://", default_stream="/default")
    opening, closing = asyncio.Event(), asyncio.Event()
    real_open, real_close = store.open, store.close

    async def slow_open() -> None:
        await opening.wait()
        await real_open()

    async def slow_close() -> None:
        await closing.wait()
        await real_close()

    store.open, store.close = slow_open, slow_close
    server = BrokerServer(BrokerConfig(data_dir="memory://", host="127.0.0.1", port=0, http_port=0), store)
    starting = asyncio.create_task(server.start())
    try:
        await wait_until(lambda: server.http_port is not None)
        url = f"http://127.0.0.1:{server.http_port}"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            assert await status(session, url + "/health/live") == (200, {"status": "up"})
            code, body = await status(session, url + "/health/ready")
            assert (code, body["checks"]) == (503, {"store_open": False, "kafka_listener": False})
            opening.set()
            await asyncio.wait_for(starting, 10)
            assert (await status(session, url + "/health/ready"))[0] == 200

            stopping = asyncio.create_task(server.stop())
            await wait_until(lambda: not server.readiness()["store_open"])
            code, body = await status(session, url + "/health/ready")
            assert (code, body["checks"]) == (503, {"store_open": False, "kafka_listener": False})
            assert (await status(session, url + "/health/live"))[0] == 200
            closing.set()
            await asyncio.wait_for(stopping, 10)
            assert server.http_port is None
            try:
                await session.get(url + "/health/live")
                raise AssertionError("the HTTP server still answers after stop")
            except aiohttp.ClientConnectionError:
                pass
    finally:
        opening.set()
        closing.set()
        if not starting.done():
            starting.cancel()


def test_serve_with_http_port_as_a_subprocess(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "data"),
         "--host", "127.0.0.1", "--port", "0", "--http-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=dict(os.environ),
    )
    try:
        url, deadline = None, time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            found = re.search(r"HTTP server \(console, REST, /metrics, /health\) at (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
            if "kafkacompat listening on" in line or (not line and proc.poll() is not None):
                break
        assert url, "serve never logged its HTTP address"
        with urllib.request.urlopen(url + "/health/ready", timeout=10) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
            names = {family.name for family in text_string_to_metric_families(answer.read().decode())}
        assert {"kafkacompat_requests", "kafkacompat_partitions", "kafkacompat_volume_free_bytes"} <= names
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_http_settings_are_flags_environment_and_checked() -> None:
    def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kafkacompat", "serve", *args], capture_output=True, text=True,
                              cwd=REPO, env={**os.environ, **(env or {})}, timeout=60)

    shown = serve("--print-config", "--http-port", "8081", env={"KAFKACOMPAT_HTTP_HOST": "0.0.0.0"})
    assert shown.returncode == 0
    assert re.search(r'^http_port = 8081 +# flag --http-port$', shown.stdout, re.M)
    assert re.search(r'^http_host = "0.0.0.0" +# environment KAFKACOMPAT_HTTP_HOST$', shown.stdout, re.M)
    bad = serve("--http-port", "70000")
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("kafkacompat: http_port must be a TCP port (at most 65535), got 70000 "
                                  "(flag --http-port)")


def test_http_port_in_use_is_a_one_line_error_and_the_store_untouched(tmp_path: Path) -> None:
    with Broker(http_port=0) as running:
        taken = running.http_port
        data = tmp_path / "data"
        result = subprocess.run(
            [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(data), "--host", "127.0.0.1",
             "--port", "0", "--http-port", str(taken)],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )
    assert result.returncode == 3
    assert result.stderr.strip() == (f"kafkacompat: cannot listen for HTTP on 127.0.0.1:{taken}: the "
                                     "address is already in use; choose another --http-port or --http-host")
    assert not data.exists(), "a broker that cannot listen must not touch the data dir"
