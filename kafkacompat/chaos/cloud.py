"""The cloud engine: three `kafkacompat serve` brokers as one cluster on PostgreSQL and an S3 endpoint.

PostgreSQL (Debian's, initdb'd privately) and moto's S3 server are
started on loopback by kafkacompat.testing.services, as the cluster tests
start them; the brokers run as subprocesses with the command line of docs/cloud.md
(`--store postgresql://... --object-store s3://... --node-id N`). Process
faults hit one broker at a time, so leadership and group coordination move
between the others. Its storage faults: a database outage, every session
of the brokers' database is ended and new ones refused for a few seconds
(docs/cloud.md promises acknowledged records and committed offsets come
through intact once it is back), and an object store outage: moto's
server paused (SIGSTOP, its objects kept), so uploads and reads hang.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kafkacompat.testing.services import Postgres, S3Server

from ..testing.ports import free_port
from .engine import Engine, StorageFault
from .history import History
from .process import BrokerProcess, BrokerProcesses
from .workload import PARTITIONS

BROKERS = 3
BUCKET = "chaos"
STREAM = "/chaos"


class CloudEngine(BrokerProcesses, Engine):
    name = "cloud"

    def __init__(self, workdir: Path, history: History) -> None:
        self.history = history
        self.pg = Postgres().start()
        try:
            self.s3 = S3Server().start()
        except BaseException:
            self.pg.stop()
            raise
        self.s3.create_bucket(BUCKET)
        self.database = self.pg.create_database()
        self.env = env = {**os.environ, **self.s3.environ()}
        self.nodes = list(range(1, BROKERS + 1))
        ports = {n: free_port() for n in self.nodes}
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        self.log = open(workdir / "broker.log", "a", encoding="utf-8")
        lock = threading.Lock()
        self.brokers = {n: BrokerProcess(
            n, ["--store", self.database, "--object-store", f"s3://{BUCKET}/cluster", "--node-id", str(n),
                "--host", "127.0.0.1", "--port", str(ports[n]), "--advertised-host", "127.0.0.1",
                "--group-initial-rebalance-delay-ms", "500"], history, self.log, lock, env=env)
            for n in self.nodes}


    def setup(self, rng: random.Random) -> dict[str, Any]:
        cli = [sys.executable, "-m", "kafkacompat"]
        where = ["--bootstrap-server", self.bootstrap.split(",")[0]]
        commands = [["stream", "create", STREAM, "--ttl", "0"]]
        for topic, count in PARTITIONS.items():
            commands.append(["topic", "create", f"{STREAM}:{topic.split('..')[1]}", "--partitions", str(count)])
        for command in commands:
            subprocess.run(cli + command + where, check=True, capture_output=True, timeout=60, env=self.env)
        return {"brokers": BROKERS}

    def storage_faults(self) -> list[StorageFault]:
        return [StorageFault("database-outage", self._cut_database, live=True, heal=self._restore_database),
                StorageFault("object-store-outage", self._cut_object_store, live=True, heal=self.s3.resume)]

    def _cut_object_store(self, rng: random.Random) -> dict[str, Any]:
        self.s3.pause()
        return {"endpoint": self.s3.endpoint}

    def _cut_database(self, rng: random.Random) -> dict[str, Any]:
        name = self.database.rsplit("/", 1)[1]
        self.pg.sql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        self.pg.sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        return {"database": name}

    def _restore_database(self) -> None:
        self.pg.sql(f"ALTER DATABASE {self.database.rsplit('/', 1)[1]} ALLOW_CONNECTIONS true")

    def close(self) -> None:
        for b in self.brokers.values():
            b.kill()
        self.s3.stop()
        self.pg.stop()
        self.log.close()
