"""Apache Kafka 4.1 as the reference: a real broker and Kafka's own CLI tools.

Differential tests run the same steps against kafkacompat and against a
real Kafka 4.1.0 and compare what the user sees. This module gives them:

- `reference_kafka` (session fixture): one single-node KRaft Kafka 4.1.0 on
  loopback ephemeral ports with a temporary log dir, started once per test
  session and stopped at its end.
- `kafka_tools` (session fixture): Kafka's tools (kafka-topics,
  kafka-configs, kafka-consumer-groups, kafka-console-producer/consumer,
  kafka-get-offsets, kafka-delete-records, kafka-verifiable-producer/consumer)
  run by their main classes with the user's arguments inside one long-lived
  JVM (compat_tests/kafka_tools/ToolRunner.java): a JVM start costs 1-2 s,
  a call in the warm runner a fraction of that.
- `Side`, `Step`, `normalize`, `on_both`, `agree`, `known`, `unique`: the
  vocabulary of differential tests; the session fixture `sides` (in
  conftest.py) pairs the reference with a kafkacompat of its own.

The broker itself is kafkacompat.testing.reference_kafka's (the one launcher
tests/, compat_tests/ and the bench share); the fixtures skip, saying why,
when the distribution is absent (see ../shared/jars/README.md; a user's
clone has none).
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import dataclasses
import functools
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from kafkacompat.testing.reference_kafka import (  # noqa: F401 - re-exported for the differential tests
    KAFKA_DIST,
    ReferenceKafka,
    find_kafka_home,
    jars_dir,
    unavailable,
)

RUNNER_SOURCE = pathlib.Path(__file__).resolve().parent / "kafka_tools" / "ToolRunner.java"
TOOL_TIMEOUT = 90.0  # seconds one tool call may take

# bin/<script>.sh -> the main class it runs (as kafka-run-class.sh does)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
}

# Tools log WARN and above to stderr (config/tools-log4j2.yaml); `follow` makes
# the appender write to the System.err of the call, so warnings are captured.
_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.follow = true
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


def kafka_home() -> pathlib.Path:
    """The Kafka 4.1.0 distribution; skips the test when it or a JDK is missing."""
    why = unavailable()
    if why:
        pytest.skip(why)
    if shutil.which("javac") is None:
        pytest.skip("no javac on PATH: the tool runner is compiled with it")
    home = find_kafka_home()
    assert home is not None
    return home


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What a user of a tool sees: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


@functools.cache
def compiled_runner(home: pathlib.Path) -> str:
    """Compile ToolRunner.java once per session; its class directory."""
    out = tempfile.mkdtemp(prefix="kafkacompat-tools-")
    atexit.register(shutil.rmtree, out, True)
    done = subprocess.run(
        ["javac", "-nowarn", "-d", out, "-cp", str(home / "libs" / "kafka-clients-4.1.0.jar"), str(RUNNER_SOURCE)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stderr}")
    return out


class KafkaTools:
    """Kafka 4.1's CLI tools, called one at a time in one warm JVM (thread-safe)."""

    def __init__(self, home: pathlib.Path) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._dir = tempfile.TemporaryDirectory(prefix="kafka-tools-")
        self.workdir = pathlib.Path(self._dir.name)
        (self.workdir / "log4j2.properties").write_text(_LOG4J2)
        self._process: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        argv = [
            "java", "-Xmx512m", "-XX:+UseSerialGC", "-Xshare:auto", "-Djava.awt.headless=true",
            "-Djava.security.manager=allow", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp", f"{compiled_runner(self.home)}:{self.home / 'libs'}/*", "ToolRunner",
        ]
        log = open(self.workdir / "runner.log", "ab")  # noqa: SIM115 - the runner's whole life
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            cwd=self.workdir, start_new_session=True,
        )
        log.close()
        assert process.stdout is not None
        ready = process.stdout.readline()
        if ready.strip() != "READY":
            raise RuntimeError(f"the tool runner did not start: {ready!r}")
        return process

    def run(self, tool: str, *args: str, stdin: str = "", timeout: float = TOOL_TIMEOUT) -> ToolResult:
        """Run bin/<tool>.sh ARGS with `stdin` as its input, as a user would."""
        fields = [TOOLS[tool], stdin, *args]
        request = " ".join(base64.b64encode(f.encode()).decode() for f in fields) + "\n"
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            process = self._process
            assert process.stdin is not None and process.stdout is not None
            timer = threading.Timer(timeout, self._kill, (process,))
            timer.start()
            try:
                process.stdin.write(request)
                process.stdin.flush()
                answer = process.stdout.readline()
            finally:
                timer.cancel()
        if not answer.startswith("EXIT "):
            self._process = None
            log = (self.workdir / "runner.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"{tool} {' '.join(args)}: ran over {timeout:.0f}s or crashed the runner\n{log}")
        _, code, out, err = answer.split(" ")
        return ToolResult(int(code), base64.b64decode(out).decode(), base64.b64decode(err).decode())

    def script(self, tool: str, *args: str, stdin: str = "", timeout: float = TOOL_TIMEOUT) -> ToolResult:
        """Run the real bin/<tool>.sh in its own JVM (slow: for checking the runner is faithful)."""
        done = subprocess.run(
            [str(self.home / "bin" / f"{tool}.sh"), *args], input=stdin, capture_output=True, text=True,
            timeout=timeout, check=False,
            env={**os.environ, "KAFKA_LOG4J_OPTS": f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}"},
        )
        return ToolResult(done.returncode, done.stdout, done.stderr)

    def file(self, name: str, text: str) -> str:
        """Write an input file a tool reads (a --offset-json-file, a CSV for --from-file); its path."""
        path = self.workdir / name
        path.write_text(text)
        return str(path)

    @staticmethod
    def _kill(process: subprocess.Popen[str]) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """End the runner's JVM (the next call starts another). A tool run in it may leave a client
        thread behind, since the runner catches a tool's exit rather than exiting; once the broker
        that client talks to stops, it would log connection warnings into later tools' output."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                self._kill(process)
                process.wait(10)

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()


# --- differential tests: the same steps against both brokers, compared ------------

SIDES = ("kafka", "kafkacompat")


@dataclasses.dataclass(frozen=True)
class Step:
    """One tool call as the user sees it, normalized."""

    code: int
    out: str
    err: str


class Side:
    """One broker under test (Kafka 4.1 or kafkacompat), driven by Kafka's tools and other clients."""

    def __init__(self, name: str, bootstrap: str, tools: KafkaTools) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.tools = tools

    def run(self, tool: str, *args: str, stdin: str = "") -> ToolResult:
        return self.tools.run(tool, "--bootstrap-server", self.bootstrap, *args, stdin=stdin)

    def step(self, tool: str, *args: str, stdin: str = "") -> Step:
        result = self.run(tool, *args, stdin=stdin)
        return Step(result.code, normalize(result.out, self.bootstrap), normalize(result.err, self.bootstrap))


_NORMALIZE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] ", re.M), ""),  # log line timestamps
    (re.compile(r"TopicId: [A-Za-z0-9_-]{22}"), "TopicId: <id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"console-consumer-\d+"), "console-consumer-<n>"),
    (re.compile(r"/127\.0\.0\.1\b"), "/<host>"),
    (re.compile(r"clientId=adminclient-\d+"), "clientId=adminclient-<n>"),
    # stack traces: frames differ by JIT state and the tool runner's own frames
    (re.compile(r"^\t(at .*|\.\.\. \d+ more)\n", re.M), ""),
    # a client-side deadline: its wording depends on which retry it hit
    (re.compile(r"(errors\.TimeoutException): .*$", re.M), r"\1: <client deadline>"),
)


def normalize(text: str, bootstrap: str) -> str:
    text = text.replace(bootstrap, "<broker>")
    for pattern, replacement in _NORMALIZE:
        text = pattern.sub(replacement, text)
    return text


def columns(text: str) -> list[list[str]]:
    """A table the tools print (whitespace-aligned) as rows of cells, blank lines dropped."""
    return [line.split() for line in text.splitlines() if line.strip()]


def error_classes(step: Step) -> set[str]:
    """The Kafka exception classes a failed call names (messages may word things differently)."""
    return set(re.findall(r"(?:errors|common)\.(\w+(?:Exception|Error))", step.out + step.err))


def on_both(sides: dict[str, Side], script: Callable[[Side], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run `script` against each broker, both at once (clients mostly wait on JVM starts and
    the network; Kafka's tools still take turns in their one JVM); {side name: its transcript}."""
    with concurrent.futures.ThreadPoolExecutor(len(sides), thread_name_prefix="side") as pool:
        futures = {name: pool.submit(script, side) for name, side in sides.items()}
        return {name: future.result() for name, future in futures.items()}


T = TypeVar("T")


def side_by_side(steps: Callable[[str], T], ours: str, kafka: str | None) -> tuple[T, T | None]:
    """`steps` against kafkacompat's bootstrap `ours` and, at the same time, against Kafka 4.1's
    (None without it): clients of their own each, mostly waiting on JVM starts."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka-side") as beside:
        theirs = None if kafka is None else beside.submit(steps, kafka)
        mine = steps(ours)
        return mine, None if theirs is None else theirs.result()


def unique(prefix: str) -> str:
    """A name used on both sides alike, fresh per session (a reused reference keeps old topics)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def agree(runs: dict[str, dict[str, Any]], *keys: str) -> None:
    """The named steps' transcripts are equal on both brokers."""
    theirs = {key: runs["kafka"][key] for key in keys}
    mine = {key: runs["kafkacompat"][key] for key in keys}
    assert mine == theirs


def module_reference_kafka(features: dict[str, int], **settings: Any) -> Iterator[str | None]:
    """A Kafka 4.1 of a test module's own, for `features` and broker `settings` the session's lacks:
    its bootstrap servers, or None without the distribution (then only kafkacompat's answers are
    checked). Module fixtures `yield from` it."""
    folder = jars_dir()
    if folder is None or not (folder / KAFKA_DIST / "libs").is_dir():
        yield None
        return
    with ReferenceKafka(kafka_home(), features=features, **settings) as reference:
        yield reference.bootstrap_servers


def known(reason: str) -> pytest.MarkDecorator:
    """A difference still open: the test fails the day it is fixed, so the mark goes too."""
    return pytest.mark.xfail(strict=True, reason=reason)


_session_kafka: ReferenceKafka | None = None


def session_reference_kafka() -> ReferenceKafka:
    """The one Apache Kafka 4.1.0 of the test process, set up like `compat_broker` (no initial
    rebalance delay) so group timings are comparable; started by the first test that asks.

    Every test that needs no broker setting of its own shares it (compat_tests,
    tests/parity, tests/test_hostile_vs_kafka.py): each start costs 15-30 s of
    a CI run, and those tests name their topics, groups and quotas uniquely or
    clean up after themselves. It stops when the process exits (the launcher's
    atexit), after the last of them.

    KAFKACOMPAT_REFERENCE_PORT=P uses a Kafka 4.1 already listening on
    127.0.0.1:P instead (quicker when iterating on one test).
    """
    global _session_kafka
    if _session_kafka is None:
        why = unavailable()  # no javac needed here: a test that runs the tools asks kafka_home()
        if why:
            pytest.skip(why)
        kafka = ReferenceKafka(**{"group.initial.rebalance.delay.ms": 0})
        running = os.environ.get("KAFKACOMPAT_REFERENCE_PORT")
        if running:
            kafka.port = int(running)
        else:
            kafka.start()
        _session_kafka = kafka
    return _session_kafka


@pytest.fixture(scope="session")
def reference_kafka() -> ReferenceKafka:
    """The session's Kafka 4.1 (`session_reference_kafka`)."""
    return session_reference_kafka()


_session_tools: KafkaTools | None = None


def session_kafka_tools() -> KafkaTools:
    """The test process's one warm tool runner (compat_tests, tests/groups, tests/parity),
    closed when the process exits; skips without Kafka 4.1 or javac."""
    global _session_tools
    if _session_tools is None:
        _session_tools = KafkaTools(kafka_home())
        atexit.register(_session_tools.close)
    return _session_tools


def run_tool(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """bin/<tool>.sh ARGS in the session's warm runner, answered as reference_kafka.run_script
    answers (a JVM start per call cost 2-10 s; test_tool_runner_shows_what_the_script_shows
    holds the runner to the scripts' output)."""
    done = session_kafka_tools().run(tool, *args, stdin=stdin or "")
    return subprocess.CompletedProcess([tool, *args], done.code, done.out, done.err)


def stop_session_tools() -> None:
    """End the session runner's JVM if it runs (the next call starts another): for the end of a
    test module whose brokers stop with it, so no client a tool left behind outlives its broker."""
    if _session_tools is not None:
        _session_tools.stop()


@pytest.fixture(scope="session")
def kafka_tools() -> KafkaTools:
    """The session's warm tool runner (`session_kafka_tools`)."""
    return session_kafka_tools()
