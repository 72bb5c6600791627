"""A real Apache Kafka 4.1.0 (single KRaft node on loopback) for differential group tests.

Skips, saying why, when ../shared/jars has no Kafka 4.1.0 or there is no
Java (a user's clone has none); see ../shared/jars/README.md.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# ../shared/jars beside a clone, or beside the folder of git worktrees
_JARS = [pathlib.Path(os.environ["KAFKACOMPAT_JARS_DIR"])] if "KAFKACOMPAT_JARS_DIR" in os.environ else [
    ROOT.parent / "shared" / "jars", ROOT.parent.parent / "shared" / "jars",
]
KAFKA_HOME = next((d for d in _JARS if d.is_dir()), _JARS[0]) / "kafka_2.13-4.1.0"
START_TIMEOUT = 90.0


def kafka_home() -> pathlib.Path:
    if not (KAFKA_HOME / "libs").is_dir() or shutil.which("java") is None:
        pytest.skip(f"Apache Kafka 4.1.0 ({KAFKA_HOME}) or java is missing: the reference broker cannot run")
    return KAFKA_HOME


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Kafka41:
    """Started with `settings` added to its server.properties; stopped (and its files removed) on exit."""

    def __init__(self, **settings: object) -> None:
        self.home = kafka_home()
        self.settings = settings
        self.port = _free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="kafka41-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "Kafka41":
        work = pathlib.Path(self._dir.name)
        controller = _free_port()
        props = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": work / "logs",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            **self.settings,
        }
        config = work / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xms256m -Xmx768m", "LOG_DIR": str(work / "app-logs")}
        subprocess.run(
            [str(self.home / "bin/kafka-storage.sh"), "format", "--standalone", "-t", "MkU3OEVBNTcwNTJENDM2Qg",
             "-c", str(config)],
            check=True, capture_output=True, env=env, timeout=120,
        )
        self._process = subprocess.Popen(
            [str(self.home / "bin/kafka-server-start.sh"), str(config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Kafka 4.1 exited with {self._process.returncode}")
            if self._ready():
                return self
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"Kafka 4.1 did not start within {START_TIMEOUT}s")

    def _ready(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, 15)
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, 9)
                self._process.wait(10)
        self._process = None
        self._dir.cleanup()
