"""Apache Kafka 4.1 as the reference broker: one KRaft node on loopback.

Differential tests (tests/, compat_tests/) and `kafkacompat bench --vs kafka`
compare kafkacompat with a real Kafka 4.1.0; this is the one place that finds
the distribution and starts and stops it. It imports no test framework, so
the bench can use it; test fixtures turn `unavailable()` into a skip.

The distribution is looked up at $KAFKA_HOME, else
$KAFKACOMPAT_JARS_DIR/kafka_2.13-4.1.0, else ../shared/jars/kafka_2.13-4.1.0
beside the repository (or beside the folder of git worktrees); see
../shared/jars/README.md. A user's clone has none.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

from ..broker.cluster import random_kafka_uuid
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from .ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the repository: kafkacompat/, tests/, compat_tests/
KAFKA_DIST = "kafka_2.13-4.1.0"
START_TIMEOUT = 90.0  # seconds Kafka may take to start on a loaded 2-core machine
TOOL_TIMEOUT = 90.0  # seconds one bin/ script may take
HEAP = "-Xms512m -Xmx768m"


def jars_dir() -> pathlib.Path | None:
    """The shared jars folder, or None when this machine has none."""
    configured = os.environ.get("KAFKACOMPAT_JARS_DIR")
    candidates = [pathlib.Path(configured)] if configured else [
        ROOT.parent / "shared" / "jars", ROOT.parent.parent / "shared" / "jars"]
    return next((folder for folder in candidates if folder.is_dir()), None)


def find_kafka_home() -> pathlib.Path | None:
    """The Kafka 4.1.0 distribution, or None when it is not on this machine."""
    explicit = os.environ.get("KAFKA_HOME")
    folder = jars_dir()
    home = pathlib.Path(explicit) if explicit else (folder / KAFKA_DIST if folder else None)
    return home if home is not None and (home / "bin" / "kafka-server-start.sh").is_file() else None


def unavailable() -> str | None:
    """Why the reference Kafka cannot run here, or None when it can."""
    if find_kafka_home() is None:
        return (f"Apache Kafka 4.1.0 is not here ({KAFKA_DIST} under $KAFKACOMPAT_JARS_DIR or ../shared/jars, "
                "or $KAFKA_HOME): the comparison needs it as the reference broker")
    if shutil.which("java") is None:
        return "no java on PATH: Kafka 4.1 needs one"
    return None


def script_env() -> dict[str, str]:
    """The environment for a bin/ tool: a small heap, quick start, no JMX port clash."""
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    env["KAFKA_JVM_PERFORMANCE_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true"
    env.pop("JMX_PORT", None)
    return env


def run_script(tool: str, *args: str, stdin: str | None = None, timeout: float = TOOL_TIMEOUT,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run bin/<tool>.sh of the reference distribution in its own JVM; output as text."""
    home = find_kafka_home()
    if home is None:
        raise FileNotFoundError(unavailable())
    return subprocess.run(
        [str(home / "bin" / f"{tool}.sh"), *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, check=False, env=env or script_env(),
    )


class ReferenceKafka:
    """A single-node KRaft Apache Kafka 4.1.0 (broker and controller) on loopback ephemeral ports,
    with a temporary log dir that `stop()` removes; `with ReferenceKafka() as kafka:`."""

    def __init__(self, home: pathlib.Path | None = None, node_id: int = 1,
                 features: dict[str, int] | None = None, heap: str = HEAP, *,
                 sasl_users: dict[str, str] | None = None, **settings: object) -> None:
        """`settings` go to server.properties (over the single-node defaults); `features` are set
        when the storage is formatted (e.g. {"transaction.version": 1}).

        `sasl_users` (name -> password) adds a SASL_PLAINTEXT listener (`sasl_port`) offering
        SCRAM-SHA-256 and SCRAM-SHA-512 with those users, made when the storage is formatted (as
        `kafka-storage format --add-scram` does); the PLAINTEXT listener stays."""
        found = home or find_kafka_home()
        if found is None:
            raise FileNotFoundError(unavailable())
        self.home = found
        self.node_id = node_id
        self.features = features or {}
        self.sasl_users = sasl_users or {}
        self.settings = settings
        self.heap = heap
        self.start_timeout = START_TIMEOUT  # a broker holding many partitions may take longer
        self.cluster_id = random_kafka_uuid()
        self.port = 0
        self.sasl_port = 0  # the SASL_PLAINTEXT listener's, with sasl_users
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's JVM (kafka-run-class.sh execs java), for CPU and RSS figures."""
        return self._process.pid if self._process is not None else None

    @property
    def workdir(self) -> pathlib.Path | None:
        return pathlib.Path(self._dir.name) if self._dir is not None else None

    def _properties(self, log_dir: str, controller_port: int) -> str:
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": log_dir,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "num.partitions": 1,
        }
        if self.sasl_users:
            settings["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            settings["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            settings["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            settings["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
            for mechanism in SCRAM_MECHANISMS:
                settings[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        settings.update(self.settings)
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _env(self, work: pathlib.Path) -> dict[str, str]:
        env = {**os.environ, "KAFKA_HEAP_OPTS": self.heap, "LOG_DIR": str(work / "app-logs")}
        env.pop("KAFKA_JVM_PERFORMANCE_OPTS", None)  # the server keeps Kafka's own GC settings
        env.pop("JMX_PORT", None)
        return env

    def start(self) -> "ReferenceKafka":
        self._dir = tempfile.TemporaryDirectory(prefix="kafka41-")
        work = pathlib.Path(self._dir.name)
        self.port = free_port()
        self.sasl_port = free_port() if self.sasl_users else 0
        properties = work / "server.properties"
        properties.write_text(self._properties(str(work / "logs"), free_port()))
        env = self._env(work)
        formatted = subprocess.run(
            [str(self.home / "bin" / "kafka-storage.sh"), "format", "--standalone", "-t", self.cluster_id,
             "-c", str(properties), *(arg for name, level in self.features.items()
                                      for arg in ("--feature", f"{name}={level}")),
             *(arg for name, password in self.sasl_users.items() for mechanism in SCRAM_MECHANISMS
               for arg in ("--add-scram", f"{mechanism}=[name={name},password={password}]"))],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )
        if formatted.returncode != 0:
            self.stop()
            raise RuntimeError(f"kafka-storage format failed: {formatted.stderr or formatted.stdout}")
        self._launch()
        return self

    def _launch(self) -> None:
        """Run kafka-server-start.sh on the formatted work dir; return once it says it started."""
        work = self.workdir
        assert work is not None
        env = self._env(work)
        log_path = work / "console.log"
        seen = log_path.stat().st_size if log_path.exists() else 0  # a restart's own "started" comes after
        console = open(log_path, "ab")  # noqa: SIM115 - the broker's whole life
        self._process = subprocess.Popen(
            [str(self.home / "bin" / "kafka-server-start.sh"), str(work / "server.properties")],
            env=env, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        console.close()
        atexit.register(self.stop)  # also when a session ends without its fixture's teardown
        deadline = time.monotonic() + self.start_timeout
        while b"Kafka Server started" not in log_path.read_bytes()[seen:]:
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"Kafka 4.1 did not start:\n{tail}")
            time.sleep(0.1)

    def end(self, sig: int, timeout: float) -> float:
        """Send `sig` to the broker (SIGTERM: Kafka's controlled shutdown; SIGKILL) and keep its log
        dir for `restart()`: the seconds until it exited."""
        process, self._process = self._process, None
        assert process is not None
        started = time.monotonic()
        os.killpg(process.pid, sig)
        process.wait(timeout)
        return time.monotonic() - started

    def restart(self) -> "ReferenceKafka":
        """Start again on the log dir and ports of the broker `end()` stopped."""
        self._launch()
        return self

    def log_tail(self, limit: int = 3000) -> str:
        """The end of the broker's console output."""
        work = self.workdir
        if work is None or not (work / "console.log").exists():
            return ""
        return (work / "console.log").read_text(errors="replace")[-limit:]

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            # Killed, not shut down: its log dir goes next, so nothing a clean shutdown writes is kept,
            # and Kafka's controlled shutdown cost 1-2 s of every stop.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "ReferenceKafka":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
