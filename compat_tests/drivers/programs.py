"""Drivers whose client lives in another runtime: one program run per question.

The program (Java, node) takes `COMMAND BOOTSTRAP key=value...` and prints
one JSON object as its last line; a non-zero exit is a failed scenario and
its stderr is shown. It runs in one long-lived process per runtime
(ProgramServer), not a process per question.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import select
import subprocess
import tempfile
import threading
import time
from typing import IO, Any, Callable

from ..scenario_data import Received
from . import ADMIN_RETENTION_MS, Driver

RUN_TIMEOUT = 120  # seconds one program run may take


class ProgramServer:
    """One long-lived process that runs test programs one after another, started at the first
    run: compat_tests/java/ProgramServer.java for Java, compat_tests/node/server.js for
    kafkajs. Starting a JVM and loading kafka-clients, or starting node and loading kafkajs,
    cost 0.5-3 s on a loaded machine, once per question before.

    The process reads `PROGRAM ARG...` (tab-separated) lines on stdin and answers each with
    one line on stdout: `ok BASE64(what the program printed)` or `error BASE64(its error)`.
    A run that goes over its time kills the process (the next run starts another), as
    a program run over its time was killed; so does a process that died.
    """

    def __init__(self, name: str, command: Callable[[], list[str]]) -> None:
        self.name = name
        self._command = command  # called at each start: the Java one compiles the programs first
        self._process: subprocess.Popen[bytes] | None = None
        self._pending = b""
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()

    def run(self, program: str, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """`program args` as a program run would answer: exit 0 and what it printed, or exit 1
        and its error (a stack trace) as stderr."""
        with self._lock:
            process = self._started()
            assert process.stdin is not None
            try:
                process.stdin.write(("\t".join([program, *args]) + "\n").encode())
                process.stdin.flush()
                status, _, body = self._answer(time.monotonic() + timeout).partition(b" ")
            except (OSError, EOFError, TimeoutError) as exc:
                stderr = self._stop()
                if isinstance(exc, TimeoutError):
                    raise AssertionError(f"{self.name} {program} {args[0]} ran over {timeout}s\n{stderr}") from None
                return subprocess.CompletedProcess(args, 1, "", f"the {self.name} running {program} ended\n{stderr}")
        text = base64.b64decode(body).decode()
        if status == b"ok":
            return subprocess.CompletedProcess(args, 0, text, "")
        return subprocess.CompletedProcess(args, 1, "", text)

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is not None:
            self._stop()  # it died between runs: start another
        if self._process is None:
            self._stderr = tempfile.TemporaryFile()
            self._pending = b""
            self._process = subprocess.Popen(self._command(), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self._stderr)
        return self._process

    def _answer(self, deadline: float) -> bytes:
        """The next line the process prints, within the deadline."""
        assert self._process is not None and self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.strip()

    def _stop(self) -> str:
        """Stop the process; the tail of what it wrote to stderr."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait(10)
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = "\n".join(self._stderr.read().decode(errors="replace").strip().splitlines()[-40:])
            self._stderr.close()
            self._stderr = None
        return tail

    def close(self) -> None:
        with self._lock:
            self._stop()


def stopped_at_exit(name: str, command: Callable[[], list[str]]) -> ProgramServer:
    """A ProgramServer stopped when the test process exits."""
    server = ProgramServer(name, command)
    atexit.register(server.close)
    return server


class ProgramDriver(Driver):
    program: str  # the scenario program, as its ProgramServer names it

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def server(self) -> ProgramServer:
        """The session's long-lived process that runs the program."""
        raise NotImplementedError

    def execute(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        """Run the program with `args` (COMMAND BOOTSTRAP key=value...): its exit code and output."""
        return self.server().run(self.program, args, RUN_TIMEOUT)

    def run(self, command: str, **options: Any) -> dict[str, Any]:
        args = [command, self.bootstrap]
        args += [f"{name}={value}" for name, value in options.items() if value is not None]
        done = self.execute(args)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise AssertionError(
                f"{self.name} {command} exited {done.returncode}\n--- stderr (tail)\n"
                + "\n".join(done.stderr.strip().splitlines()[-40:])
            )
        return json.loads(lines[-1])

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        return self.run(
            "produce", topic=topic, n=n, prefix=prefix, compression=compression or "none",
            acks=acks, idempotent=str(idempotent).lower(), partition=partition,
        )["offsets"]

    def consume(self, topic, n, *, start="earliest", produce_after=0, partition=0):
        got = self.run("consume", topic=topic, n=n, start=start, produce_after=produce_after, partition=partition)
        return [Received.from_json(r) for r in got["records"]]

    def group_consume(self, topic, group, n):
        return [Received.from_json(r) for r in self.run("group_consume", topic=topic, group=group, n=n)["records"]]

    def group_of_three(self, topic, group):
        return self.run("group_of_three", topic=topic, group=group)

    def create_describe_topic(self, topic, partitions):
        return self.run("create_describe_topic", topic=topic, partitions=partitions)

    def alter_configs(self, topic):
        return self.run("alter_configs", topic=topic, value=ADMIN_RETENTION_MS)

    def create_partitions(self, topic, total):
        return self.run("create_partitions", topic=topic, total=total)["partitions"]

    def delete_records(self, topic, before):
        return self.run("delete_records", topic=topic, before=before)["low"]

    def delete_topic(self, topic):
        return self.run("delete_topic", topic=topic)["listed"]

    def list_describe_groups(self, topic, group):
        return self.run("list_describe_groups", topic=topic, group=group)
