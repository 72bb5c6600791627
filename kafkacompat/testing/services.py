"""Throwaway servers on loopback for tests and benchmarks: PostgreSQL and an S3 endpoint.

    with Postgres() as pg, S3Server() as s3:
        db = pg.create_database()            # postgresql://postgres@127.0.0.1:PORT/NAME
        s3.create_bucket("kc")               # s3.environ() holds the AWS_* variables to use

`Postgres` runs Debian's PostgreSQL (initdb + pg_ctl on a temporary
directory, as the `postgres` user when we are root, since it refuses root).
`S3Server` runs moto's server mode (`python -m moto.server`, PyPI
`moto[server]`), used only as an S3 endpoint. Both raise ServiceUnavailable,
saying what to install, when their software is missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

from .ports import free_port


class ServiceUnavailable(RuntimeError):
    """The software for a service is not installed; the message says what to install."""


class Postgres:
    """A private PostgreSQL cluster on a free loopback port; `stop()` removes it."""

    def __init__(self, options: str = "") -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise ServiceUnavailable("PostgreSQL is not installed (apt install postgresql)")
        self.bin = os.path.dirname(bins[-1])
        self.options = options
        self.root = tempfile.mkdtemp(prefix="kafkacompat-pg-")
        self.port = free_port()
        self.user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.root, "data")

    def _run(self, *args: str) -> str:
        done = subprocess.run([*self.user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def start(self) -> "Postgres":
        self._run(f"{self.bin}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start_server()
        return self

    def start_server(self) -> None:
        """Start the server on its data (again, after `stop_server`)."""
        options = (f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
                   f"-c fsync=off -c max_connections=300 {self.options}")
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.root, "log"),
                  "-w", "start")

    def stop_server(self) -> None:
        """Stop the server, keeping its data (a database outage; `start_server` ends it)."""
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        return self._run(f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                         "-d", database, "-v", "ON_ERROR_STOP=1", "-q", "-A", "-t", "-c", statement)

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = f"kc_{uuid.uuid4().hex[:12]}"
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def postgres_fixture(options: str = "") -> Iterator[Postgres]:
    """The body of a pytest fixture: a running Postgres, stopped after; the test is skipped without PostgreSQL.

    `options` are extra server settings (`-c name=value ...`), as for Postgres.
    """
    import pytest  # only tests use this; benchmarks import the module without pytest

    try:
        db = Postgres(options)
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with db:
        yield db


class S3Server:
    """moto's server mode on a free loopback port, as an S3 endpoint with fixed test credentials."""

    def __init__(self) -> None:
        try:
            import moto.server  # noqa: F401  (only to say what to install when it is missing)
        except ImportError:
            raise ServiceUnavailable("moto's server mode is not installed (pip install 'moto[server]')") from None
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (the bench counts its CPU)."""
        return self._process.pid if self._process is not None else None

    def environ(self) -> dict[str, str]:
        """The AWS_* variables a client (the broker) needs to use this endpoint."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_REGION": "us-east-1"}

    def start(self) -> "S3Server":
        self._process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                          "-p", str(self.port)], stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self._log.seek(0)
                    output = self._log.read().decode(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(f"moto server did not start: {output}") from None
                time.sleep(0.1)

    def client(self) -> Any:
        import botocore.session

        env = self.environ()
        return botocore.session.get_session().create_client(
            "s3", endpoint_url=self.endpoint, region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        answer = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for item in answer.get("Contents", ())]

    def pause(self) -> None:
        """Stop answering (SIGSTOP), every object kept (moto holds them in memory): an object store out
        of reach, whose requests hang until the client's timeout. `resume` ends it."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None:
            self.resume()
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        self._log.close()

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


BUCKET = "kafkacompat"
_shared: tuple[Postgres, S3Server] | None = None


def cloud_store() -> tuple[str, str]:
    """(database URL, object store URL) of a fresh, empty cloud store for one test.

    The first call starts one PostgreSQL and one S3 endpoint for the whole
    process (stopped when it exits) and puts their AWS_* variables into
    os.environ, where the broker and its subprocesses read them; every
    call makes a new database and a new key prefix, so tests never share
    state. Raises ServiceUnavailable when PostgreSQL or moto is missing.
    """
    global _shared
    if _shared is None:
        import atexit

        pg = Postgres().start()
        try:
            s3 = S3Server().start()
        except BaseException:
            pg.stop()
            raise
        atexit.register(s3.stop)
        atexit.register(pg.stop)
        os.environ.update(s3.environ())
        s3.create_bucket(BUCKET)
        _shared = (pg, s3)
    pg, _ = _shared
    return pg.create_database(), f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"


TERMINATE_WAIT_MS = 10_000  # how long database_outage waits for each ended session to exit


@contextlib.contextmanager
def database_outage(database_url: str) -> Iterator[None]:
    """Inside, the database of `database_url` (made by cloud_store) is out of reach: every session
    connected to it is ended (pg_terminate_backend, as a failover or an administrator does) and new
    ones are refused, while the server and every other test's database keep running."""
    if _shared is None:
        raise RuntimeError("database_outage is for databases cloud_store made")
    pg = _shared[0]
    name = database_url.rsplit("/", 1)[1]
    pg.sql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
    try:
        # with a timeout it returns once each session has exited, not when it was only signalled: a
        # broker's request inside then meets a closed session, as in a real outage, and not one still
        # open whose statement's fate it cannot know (its commit is then retried, answered late)
        pg.sql(f"SELECT pg_terminate_backend(pid, {TERMINATE_WAIT_MS}) FROM pg_stat_activity WHERE datname = '{name}'")
        yield
    finally:
        pg.sql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")


@contextlib.contextmanager
def object_store_outage() -> Iterator[None]:
    """Inside, the S3 endpoint of the stores cloud_store made answers nothing (paused, its objects kept):
    uploads and reads hang until it is back. Every test's store shares that endpoint."""
    if _shared is None:
        raise RuntimeError("object_store_outage is for stores cloud_store made")
    _shared[1].pause()
    try:
        yield
    finally:
        _shared[1].resume()


TEST_STORE_VARIABLE = "KAFKACOMPAT_TEST_STORE"


def test_store_engine() -> str:
    """The engine tests run their default broker on: `memory` (default) or `cloud` (KAFKACOMPAT_TEST_STORE)."""
    engine = os.environ.get(TEST_STORE_VARIABLE, "memory") or "memory"
    if engine not in ("memory", "cloud"):
        raise ValueError(f"{TEST_STORE_VARIABLE}={engine!r}: use memory or cloud")
    return engine
