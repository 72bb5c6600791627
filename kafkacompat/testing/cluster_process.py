"""A kafkacompat broker as a subprocess on a fixed loopback port and data dir: kill it, start it again.

For tests and benchmarks where a cluster must die as a crash kills it
(SIGKILL) and come back on the same address and store, as replica links
and clients expect. The broker's log is a temporary file, gone at close();
KAFKACOMPAT_KEEP_LOGS=DIR keeps a copy there, to read after a failure
that only a loaded machine shows.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .ports import free_port

READY_TIMEOUT_S = 30.0


class ClusterProcess:
    """`python -m kafkacompat serve --cluster-name NAME` on 127.0.0.1:port with its own data dir."""

    def __init__(self, name: str, data_dir: str, *extra: str, owns_data_dir: bool = False) -> None:
        self.name = name
        self.data_dir = data_dir
        self._owns_data_dir = owns_data_dir  # made for this process alone: removed by close()
        self.port = free_port()
        self.extra = extra
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix=f"cluster-{name}-", suffix=".log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ClusterProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", self.data_dir, "--host", "127.0.0.1",
             "--port", str(self.port), "--cluster-name", self.name, "--group-initial-rebalance-delay-ms", "0",
             *self.extra],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ),
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"cluster {self.name} exited with {self._proc.returncode}: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"cluster {self.name} did not listen within {READY_TIMEOUT_S:.0f} s")

    @property
    def pid(self) -> int | None:
        """The running process's id (None when stopped), e.g. to read its CPU time."""
        return self._proc.pid if self._proc is not None else None

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean shutdown."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def close(self) -> None:
        self.stop()
        keep = os.environ.get("KAFKACOMPAT_KEEP_LOGS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            self._log.flush()
            shutil.copyfile(self._log.name, os.path.join(keep, os.path.basename(self._log.name)))
        self._log.close()
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def output(self, limit: int = 4000) -> str:
        self._log.flush()
        with open(self._log.name, "rb") as fh:
            return fh.read()[-limit:].decode("utf-8", "replace")
