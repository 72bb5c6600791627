"""A throwaway PostgreSQL server on a free loopback port, for tests and benchmarks.

Started from the Debian package's binaries (tests/run.sh installs them) as
the `postgres` user when we are root (PostgreSQL refuses to run as root),
with fsync off: it holds test data only. Used by the Debezium CDC test, the
cluster tests and the scale-out benchmark.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed here."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Postgres:
    """`start()`, use `url` (or `sql()`), `stop()` — or `with Postgres() as db:`."""

    def __init__(self, *, logical_replication: bool = False) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise PostgresUnavailable("PostgreSQL is not installed (apt install postgresql)")
        self.bin = os.path.dirname(bins[-1])
        self.root = tempfile.mkdtemp(prefix="kafkacompat-pg-")
        self.port = _free_port()
        self.user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.root, "data")
        self._logical = logical_replication

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> str:
        done = subprocess.run([*self.user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def start(self) -> None:
        self._run(f"{self.bin}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = (f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
                   "-c fsync=off -c synchronous_commit=off")
        if self._logical:  # Debezium reads changes through a replication slot
            options += " -c wal_level=logical -c max_wal_senders=4 -c max_replication_slots=4"
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.root, "log"),
                  "-w", "start")

    def sql(self, statement: str) -> str:
        return self._run(f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                         "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-A", "-t", "-c", statement)

    def stop(self) -> None:
        try:
            self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
