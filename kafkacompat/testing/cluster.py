"""Broker processes that form one cluster over a shared PostgreSQL database (tests, benchmark).

Each broker is a real `python -m kafkacompat serve` process, as users run
them, so kill -9 means what it says.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from .services import free_port


class BrokerProcess:
    """One `kafkacompat serve` process; its output is kept in `lines` for assertions and failures."""

    def __init__(self, node_id: int, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.node_id = node_id
        self.port = free_port()
        self.args = [
            "--host", "127.0.0.1", "--port", str(self.port), "--node-id", str(node_id), *args,
        ]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.listening = False
        self._listening = threading.Event()  # set once it listens, or once its output ended (it exited)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "BrokerProcess":
        self.launch()
        return self.wait_listening(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (brokers of a cluster start side by side)."""
        self.lines = []
        self.listening = False
        self._listening.clear()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkacompat", "serve", *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env,
        )
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()

    def wait_listening(self, timeout: float = 60) -> "BrokerProcess":
        assert self.proc is not None
        if not self._listening.wait(timeout) or not self.listening or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"broker {self.node_id} did not start:\n" + "".join(self.lines[-30:]))
        return self

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)
            if "listening on" in line:
                self.listening = True
                self._listening.set()
        self._listening.set()

    def kill(self) -> None:
        """kill -9: no clean stop, the lease lapses by itself."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class BrokerCluster:
    """Brokers 1..n sharing `store_args` (a --data-dir/--store and --cluster-url or the like)."""

    def __init__(self, count: int, store_args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.brokers = [BrokerProcess(node_id, store_args, env) for node_id in range(1, count + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> "BrokerCluster":
        try:
            for broker in self.brokers:
                broker.launch()
            for broker in self.brokers:
                broker.wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()

    def __enter__(self) -> "BrokerCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
