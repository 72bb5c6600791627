"""`kafkacompat serve --store postgresql://... --object-store s3://...` as users start it.

Two broker processes on one store (each its own port): messages produced
through one are consumed through the other while both run, and again after
a restart; a bad store URL is a one-line error.
"""

from __future__ import annotations

import signal
import subprocess

import pytest
from confluent_kafka import Producer

from kafkacompat.testing.ports import free_port
from kafkacompat.testing.services import ServiceUnavailable, cloud_store
from tests.test_cli_serve import start, wait_for_line
from tests.test_clients_produce_consume import consume_all

pytestmark = pytest.mark.slow


def _serve(database: str, objects: str, port: int, node: int) -> subprocess.Popen:
    proc = start(["--store", database, "--object-store", objects, "--host", "127.0.0.1", "--port", str(port),
                  "--node-id", str(node)])
    wait_for_line(proc, "listening on")
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_serve_processes_share_one_store() -> None:
    try:
        database, objects = cloud_store()  # also puts AWS_* into os.environ, which start() passes on
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    ports = [free_port(), free_port()]
    brokers = [_serve(database, objects, ports[0], 1), _serve(database, objects, ports[1], 2)]
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports[0]}", "acks": "all"})
        for i in range(10):
            producer.produce("cloud-cli", f"m{i}".encode())
        assert producer.flush(30) == 0
        got = consume_all(f"127.0.0.1:{ports[1]}", "cloud-cli", 1, 10)  # through the other process
        assert [m.value() for m in got] == [f"m{i}".encode() for i in range(10)]
        assert [m.offset() for m in got] == list(range(10))
    finally:
        for proc in brokers:
            _stop(proc)
    restarted = _serve(database, objects, ports[1], 2)
    try:
        assert len(consume_all(f"127.0.0.1:{ports[1]}", "cloud-cli", 1, 10)) == 10
    finally:
        _stop(restarted)


def test_store_and_object_store_errors_are_one_line() -> None:
    proc = start(["--store", "/var/lib/x", "--object-store", "s3://b/p", "--port", str(free_port())])
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "postgresql://" in out and "Traceback" not in out
    proc = start(["--store", "postgresql://nobody@127.0.0.1:1/none", "--port", str(free_port())])
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "object_store" in out and "Traceback" not in out
