"""Drivers whose client lives in another runtime: one program run per question.

The program (Java, node) takes `COMMAND BOOTSTRAP key=value...` and prints
one JSON object as its last line; a non-zero exit is a failed scenario and
its stderr is shown. A driver may run it somewhere cheaper than a new
process (`execute`; the Java driver uses one long-lived JVM).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from ..scenario_data import Received
from . import ADMIN_RETENTION_MS, Driver

RUN_TIMEOUT = 120  # seconds one program run may take


class ProgramDriver(Driver):
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def command(self) -> list[str]:
        """The argv that starts the program (before COMMAND)."""
        raise NotImplementedError

    def execute(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        """Run the program with `args` (COMMAND BOOTSTRAP key=value...): its exit code and output."""
        try:
            return subprocess.run([*self.command(), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{self.name} {args[0]} ran over {RUN_TIMEOUT}s\n{exc.stderr or ''}") from None

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
