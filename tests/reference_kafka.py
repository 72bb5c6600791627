"""Apache Kafka 4.1 as a reference broker: a single KRaft node on loopback, for differential tests.

The distribution is looked for at ../shared/jars/kafka_2.13-4.1.0 from the
repository root (or one level further up, from a git worktree), or at
KAFKA_HOME; tests skip, saying so, where it is absent.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_DIST = Path("shared") / "jars" / "kafka_2.13-4.1.0"
KAFKA_HOME = Path(os.environ["KAFKA_HOME"]) if "KAFKA_HOME" in os.environ else next(
    (base / _DIST for base in (ROOT.parent, ROOT.parent.parent) if (base / _DIST).is_dir()), ROOT.parent / _DIST
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def reference_kafka(timeout: float = 90.0) -> Iterator[str]:
    """Start Kafka 4.1 (broker and controller in one process); yields its bootstrap address."""
    if not (KAFKA_HOME / "bin" / "kafka-server-start.sh").exists() or shutil.which("java") is None:
        pytest.skip(f"Apache Kafka 4.1 is not at {KAFKA_HOME} (or java is missing): no reference broker")
    work = Path(tempfile.mkdtemp(prefix="kafka-ref-"))
    port, controller = _free_port(), _free_port()
    properties = work / "server.properties"
    properties.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
        f"transaction.state.log.min.isr=1\nlog.dirs={work / 'data'}\n"
    )
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx512m", "LOG_DIR": str(work / "logs")}
    bin_dir = KAFKA_HOME / "bin"
    cluster_id = subprocess.run(
        [bin_dir / "kafka-storage.sh", "random-uuid"], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    subprocess.run(
        [bin_dir / "kafka-storage.sh", "format", "--standalone", "-t", cluster_id, "-c", properties],
        capture_output=True, env=env, check=True,
    )
    process = subprocess.Popen(
        [bin_dir / "kafka-server-start.sh", properties], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka did not start; logs in {work / 'logs'}") from None
                time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        shutil.rmtree(work, ignore_errors=True)
