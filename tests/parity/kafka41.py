"""A reference Apache Kafka 4.1 broker and Kafka's own command-line tools, for parity tests.

The distribution is looked up at ../shared/jars/kafka_2.13-4.1.0 from the
repository root (or $KAFKA41_HOME); tests skip, saying so, when it is absent.
The broker is one KRaft node (broker and controller) on loopback with
ephemeral ports and a temporary log dir, as a single-node Kafka is run.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence

from kafkacompat.broker.cluster import kafka_uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
KAFKA_HOME = pathlib.Path(os.environ.get("KAFKA41_HOME", REPO.parent.parent / "shared" / "jars" / "kafka_2.13-4.1.0"))
START_TIMEOUT = 90.0
TOOL_TIMEOUT = 90.0


def unavailable() -> str | None:
    """Why the reference Kafka cannot run here, or None when it can."""
    if not (KAFKA_HOME / "bin" / "kafka-server-start.sh").is_file():
        return f"Apache Kafka 4.1 is not at {KAFKA_HOME} (set KAFKA41_HOME)"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    env["KAFKA_JVM_PERFORMANCE_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true"
    env.pop("JMX_PORT", None)
    return env


def run_tool(tool: str, *args: str, stdin: str | None = None, timeout: float = TOOL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run bin/<tool>.sh of the reference distribution; output as text."""
    return subprocess.run(
        [str(KAFKA_HOME / "bin" / f"{tool}.sh"), *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False, env=_tool_env(),
    )


class Kafka41:
    """One KRaft node of Apache Kafka 4.1 on loopback; stop() removes its data."""

    def __init__(self, extra: Sequence[str] = ()) -> None:
        self.port = _free_port()
        self.controller_port = _free_port()
        self._dir = tempfile.mkdtemp(prefix="kafka41-")
        self._extra = list(extra)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> pathlib.Path:
        lines = [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={self._dir}/logs",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            *self._extra,
        ]
        path = pathlib.Path(self._dir) / "server.properties"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> "Kafka41":
        props = self._properties()
        env = _tool_env()
        env["KAFKA_HEAP_OPTS"] = "-Xmx768m -Xms256m"
        env.pop("KAFKA_JVM_PERFORMANCE_OPTS")  # the server keeps Kafka's own GC settings
        env["LOG_DIR"] = f"{self._dir}/server-logs"
        formatted = subprocess.run(
            [str(KAFKA_HOME / "bin" / "kafka-storage.sh"), "format", "--standalone",
             "-t", kafka_uuid(uuid.uuid4()), "-c", str(props)],
            capture_output=True, text=True, timeout=TOOL_TIMEOUT, env=env, check=False,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {formatted.stderr or formatted.stdout}")
        self._proc = subprocess.Popen(
            [str(KAFKA_HOME / "bin" / "kafka-server-start.sh"), str(props)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Ready once a tool can list topics (the broker answers Metadata and the controller is up)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"Kafka 4.1 exited with {self._proc.returncode}; logs in {self._dir}/server-logs")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.2)
                continue
            listed = run_tool("kafka-topics", "--bootstrap-server", self.bootstrap_servers, "--list", timeout=60)
            if listed.returncode == 0:
                return
            time.sleep(0.5)
        raise TimeoutError(f"Kafka 4.1 did not become ready in {START_TIMEOUT} s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, 15)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, 9)
                self._proc.wait(timeout=10)
        self._proc = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "Kafka41":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
