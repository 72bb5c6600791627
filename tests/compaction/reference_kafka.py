"""Apache Kafka 4.1 as a reference broker: one KRaft node on loopback, for differential tests.

From ../shared/jars/kafka_2.13-4.1.0 (or under KAFKACOMPAT_JARS_DIR); tests skip
with the reason when it or Java is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kafka_home() -> str:
    """Where Kafka 4.1 is: beside the checkout, or beside the folder of git worktrees."""
    env = (os.path.join(os.environ["KAFKACOMPAT_JARS_DIR"], "kafka_2.13-4.1.0")
    if os.environ.get("KAFKACOMPAT_JARS_DIR") else None)
    candidates = [env] if env else [os.path.join(REPO, *[".."] * up, "shared", "jars", "kafka_2.13-4.1.0")
                                    for up in (1, 2)]
    for home in candidates:
        if os.path.exists(os.path.join(home, "bin", "kafka-server-start.sh")):
            return os.path.abspath(home)
    pytest.skip(f"the reference Apache Kafka 4.1 is not at {candidates[0]} (or under KAFKACOMPAT_JARS_DIR)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ReferenceKafka:
    """A single-node Kafka 4.1 (broker and controller) in a temporary directory."""

    def __init__(self, **broker_settings: str) -> None:
        if shutil.which("java") is None:
            pytest.skip("the reference Kafka needs Java")
        self.home = kafka_home()
        self.root = tempfile.mkdtemp(prefix="kafkacompat-kafka41-")
        self.port, controller = _free_port(), _free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        settings = {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": os.path.join(self.root, "data"),
            "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
            **broker_settings,
        }
        self.config = os.path.join(self.root, "server.properties")
        with open(self.config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        self.proc: subprocess.Popen | None = None
        self.env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx768m", LOG_DIR=os.path.join(self.root, "logs"))

    def start(self, timeout: float = 120) -> "ReferenceKafka":
        tool = os.path.join(self.home, "bin", "kafka-storage.sh")
        subprocess.run([tool, "format", "--standalone", "-t", str(uuid.uuid4()), "-c", self.config],
                       env=self.env, check=True, capture_output=True, timeout=120)
        log = open(os.path.join(self.root, "server.log"), "ab")
        self.proc = subprocess.Popen([os.path.join(self.home, "bin", "kafka-server-start.sh"), self.config],
                                     stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"Kafka 4.1 exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"Kafka 4.1 did not listen within {timeout} s: {self.log_tail()}")
                time.sleep(0.3)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(os.path.join(self.root, "server.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
