"""Apache Kafka 4.1 as the reference broker for differential tests.

A single KRaft node (broker and controller) on loopback with free ports and
a temporary log dir, from ../shared/jars/kafka_2.13-4.1.0 (see its README).
Tests that compare kafkacompat with Kafka run the same client program
against both and compare what the program prints. KAFKACOMPAT_KAFKA_HOME
names another Kafka 4.1 installation (a worktree outside the usual layout).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

KAFKA_HOME = Path(os.environ.get(
    "KAFKACOMPAT_KAFKA_HOME", Path(__file__).resolve().parents[1].parent / "shared" / "jars" / "kafka_2.13-4.1.0"
))
START_TIMEOUT_S = 90.0


class ReferenceUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kafka_home() -> Path:
    """The Kafka 4.1 installation (bin/, libs/), or ReferenceUnavailable."""
    if (KAFKA_HOME / "bin" / "kafka-server-start.sh").is_file():
        return KAFKA_HOME
    raise ReferenceUnavailable(f"Apache Kafka 4.1 is not at {KAFKA_HOME} (see ../shared/jars/README.md)")


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ReferenceUnavailable(f"Kafka exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        if "Kafka Server started" in log_path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise ReferenceUnavailable(f"Kafka did not start within {START_TIMEOUT_S:g}s on port {port}")


@contextmanager
def reference_kafka(
    settings: Mapping[str, str] | None = None, features: Mapping[str, int] | None = None
) -> Iterator[str]:
    """A running Kafka 4.1; yields its bootstrap address. Stopped (and its data removed) on exit.

    `features` are set when the storage is formatted (e.g. transaction.version=1).
    """
    if shutil.which("java") is None:
        raise ReferenceUnavailable("no java on PATH")
    home = kafka_home()
    work = Path(tempfile.mkdtemp(prefix="kafka41-ref-"))
    port, controller = _free_port(), _free_port()
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.dirs": str(work / "data"),
        **(settings or {}),
    }
    config = work / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx768m", "LOG_DIR": str(work / "logs")}
    storage = str(home / "bin" / "kafka-storage.sh")
    cluster_id = subprocess.run([storage, "random-uuid"], capture_output=True, text=True, check=True,
                                env=env, timeout=60).stdout.strip()
    feature_flags = [arg for name, level in (features or {}).items() for arg in ("--feature", f"{name}={level}")]
    subprocess.run([storage, "format", "--standalone", "-t", cluster_id, "-c", str(config), *feature_flags],
                   capture_output=True, check=True, env=env, timeout=60)
    log_path = work / "server.out"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([str(home / "bin" / "kafka-server-start.sh"), str(config)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_listening(port, proc, log_path)
        yield f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
