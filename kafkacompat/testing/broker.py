"""The test broker: a real broker inside the test process, on an ephemeral loopback port (the package
docstring, kafkacompat/testing/__init__.py, shows it in use).

This module runs the broker (on a thread, or on the test's own event loop) and offers each helper in a sync
form and an `a`-prefixed coroutine form; store_access.py does their work on the store, and `broker.faults`
injects errors, delays and dropped connections that every client sees on the wire.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, Literal, TypeVar

from kafkacompat import storage
from kafkacompat.storage import Store

from ..broker.cluster import Cluster
from ..config import BrokerConfig
from ..kafka_port.server import BrokerServer
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from ..security.scram import make_credential
from . import store_access
from .certificates import CertificateAuthority
from .faults import Faults
from .services import cloud_store, test_store_engine
from .store_access import Data, Headers, Message

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_TIMEOUT = 10.0  # seconds a stop may take before the broker thread is abandoned


class Broker:
    """A broker for tests: memory (default) or a fresh temporary directory."""

    def __init__(
        self,
        data_dir: str | None = None,
        store: Store | None = None,
        *,
        sasl: Mapping[str, str] | None = None,
        tls: bool = False,
        **settings: Any,
    ) -> None:
        """`data_dir=None` keeps data in memory (or, with KAFKACOMPAT_TEST_STORE=cloud,
        in a fresh PostgreSQL database and S3 prefix: see testing/services.py);
        "tmp" uses a fresh temporary directory (removed on stop); other
        settings are BrokerConfig fields (store=, object_store= for a cloud store).

        `store` runs the broker on a store built by the test (e.g. with volume
        caps or a fast retention pass); the broker opens and closes it.

        `sasl={"alice": "secret"}` serves a SASL listener with those users
        (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN); `tls=True` serves TLS with
        a throwaway CA (`broker.certificates`, which also issues client
        certificates). Both give SASL_SSL. `client_config()` is what a
        librdkafka-style client needs to connect.
        """
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir == "tmp":
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkacompat-")
            data_dir = self._tmp.name
        if data_dir is None and store is None and "store" not in settings and test_store_engine() == "cloud":
            settings["store"], settings["object_store"] = cloud_store()
        self.users = dict(sasl or {})
        self.certificates: CertificateAuthority | None = None
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        if tls:
            self._tls_dir = tempfile.TemporaryDirectory(prefix="kafkacompat-tls-")
            self.certificates = CertificateAuthority(self._tls_dir.name)
            issued = self.certificates.issue("broker", {"CN": "localhost"}, server=True)
            settings.setdefault("ssl_certificate_location", issued.certificate)
            settings.setdefault("ssl_key_location", issued.key)
            settings.setdefault("ssl_ca_location", self.certificates.location)
        if sasl is not None or tls:
            protocol = ("SASL_SSL" if tls else "SASL_PLAINTEXT") if sasl is not None else "SSL"
            settings.setdefault("listeners", [f"{protocol}://127.0.0.1:0"])
        settings.setdefault("host", "127.0.0.1")
        settings.setdefault("port", 0)
        self.config = BrokerConfig(data_dir=data_dir or "memory://", **settings)
        self.server = BrokerServer(self.config, store, Faults())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._default_policy: storage.StreamPolicy | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def http_port(self) -> int | None:
        """The port of the broker's HTTP server (console, REST, /metrics, /health) when started with http_port=..., else None."""
        return self.server.http_port

    @property
    def http_url(self) -> str:
        """http(s)://127.0.0.1:PORT of the broker's HTTP server; start the Broker with http_port=0 for one."""
        port = self.server.http_port
        if port is None:
            raise RuntimeError("this broker has no HTTP server: start it with Broker(http_port=0)")
        return f"{'https' if self.config.http_tls else 'http'}://{self.config.http_host}:{port}"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def security_protocol(self) -> str:
        """The first listener's protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        return self.server.listeners[0].security_protocol

    def client_config(self, user: str | None = None, password: str | None = None,
                      mechanism: str = "SCRAM-SHA-512", listener: str | None = None) -> dict[str, str]:
        """librdkafka/confluent-kafka settings for a listener (default: the first), logged in as `user`
        (default: the first user).

        `password` overrides the user's (to test a refused login).
        """
        chosen = next((item for item in self.server.listeners if item.name == (listener or "").upper()),
                      self.server.listeners[0])
        protocol = chosen.security_protocol
        config = {"bootstrap.servers": f"127.0.0.1:{self.server.listener_port(chosen.name)}",
                  "security.protocol": protocol}
        if self.certificates is not None and chosen.tls:
            config["ssl.ca.location"] = self.certificates.location
        if protocol.startswith("SASL_"):
            name = user or next(iter(self.users), "")
            config.update({"sasl.mechanism": mechanism, "sasl.username": name,
                           "sasl.password": password if password is not None else self.users.get(name, "")})
        return config

    @property
    def faults(self) -> Faults:
        """Inject faults: `fail(api, error, count)`, `delay(api, seconds)`, `disconnect(api)`."""
        return self.server.faults

    def __repr__(self) -> str:
        where = "stopped" if self._loop is None else self.bootstrap_servers
        return f"<Broker {where} store={self.config.store_url}>"

    # --- lifecycle -----------------------------------------------------

    async def __aenter__(self) -> "Broker":
        """Serve on the running loop (asyncio tests)."""
        await self._start_server()
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await asyncio.wait_for(self.server.stop(), STOP_TIMEOUT)
        finally:
            self._loop = None
            self._cleanup()

    def start(self) -> "Broker":
        """Serve on a loop of a daemon thread (sync tests); returns once listening."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="kafkacompat-broker", daemon=True
        )
        self._thread.start()
        started.result(timeout=30)
        return self

    def stop(self) -> None:
        """Stop serving; bounded, so clients left open cannot hang a test session."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(STOP_TIMEOUT + 5)
            if thread.is_alive():
                log.warning("broker thread did not stop within %.0f s; leaving it", STOP_TIMEOUT)
        self._loop = None
        self._thread = None
        self._cleanup()

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _start_server(self) -> None:
        await self.server.start()
        for name, password in self.users.items():
            for mechanism in SCRAM_MECHANISMS:
                await self._cluster.credentials.set(name, mechanism, make_credential(mechanism, password))
        stream = self._cluster.store.get_stream(self._cluster.default_stream)
        self._default_policy = stream.policy if stream is not None else None
        await self._coordinate_groups()

    async def _coordinate_groups(self) -> None:
        """On a PostgreSQL store the broker is a cluster of one: it coordinates a group only once it
        leads that group's __consumer_offsets partition, which exists after the first FindCoordinator
        (as on Kafka). Tests speak to it as to the in-memory broker, which coordinates every group from
        the start, so the topic and its leaders are made as the broker starts, as a Kafka fixture waits for
        its coordinator. (reset() deletes it with the other topics: the first FindCoordinator makes it again.)"""
        cluster = self._cluster
        if cluster.groups.owns_all:
            return
        await cluster.ensure_offsets_topic()
        offsets = cluster.offsets_topic()
        if offsets is not None:
            await cluster.settle([offsets])

    def _serve(self, started: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_server())
        except BaseException as exc:  # noqa: BLE001 - reported to the starter
            started.set_exception(exc)
            loop.close()
            return
        self._loop = loop
        started.set_result(None)
        try:
            loop.run_forever()
            loop.run_until_complete(asyncio.wait_for(self.server.stop(), STOP_TIMEOUT))
        except Exception:  # noqa: BLE001 - the test session goes on
            log.exception("stopping the test broker failed")
        finally:
            _cancel_leftovers(loop)
            loop.close()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None

    @property
    def _cluster(self) -> Cluster:
        cluster = self.server.cluster
        if cluster is None:
            raise RuntimeError("the broker is not running: use `with Broker()` or `async with Broker()`")
        return cluster

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run a coroutine on the broker's loop from a sync test and return its result."""
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("the broker is not running: use `with Broker()` or start()")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                "this broker runs on the current event loop: use the awaitable helpers "
                "(`await broker.aproduce(...)`, `aconsume`, `acreate_topic`, `areset`)"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("the broker is not running")
        if asyncio.get_running_loop() is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    # --- setting up and asserting ---------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        """Create a topic (and its stream, for "/stream/path:topic" names); returns the name."""
        return self.call(store_access.create_topic(self._cluster, name, partitions, configs))

    async def acreate_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        return await self._on_loop(store_access.create_topic(self._cluster, name, partitions, configs))

    def delete_topic(self, name: str) -> None:
        self.call(store_access.delete_topic(self._cluster, name))

    async def adelete_topic(self, name: str) -> None:
        await self._on_loop(store_access.delete_topic(self._cluster, name))

    def produce(
        self,
        topic: str,
        value: Data = None,
        *,
        key: Data = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> Message:
        """Append one record as a producer would; returns it with its offset.

        A missing topic is auto-created as the broker would for a client. The
        partition is `partition`, else the murmur2 partition of `key` (Java's
        and kafka-python's default), else 0. `timestamp` defaults to now (ms).
        """
        return self.call(store_access.produce(self._cluster, topic, value, key, headers, partition, timestamp))

    async def aproduce(
        self,
        topic: str,
        value: Data = None,
        *,
        key: Data = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> Message:
        return await self._on_loop(store_access.produce(self._cluster, topic, value, key, headers, partition, timestamp))

    def consume(
        self,
        topic: str,
        *,
        partition: int | None = None,
        offset: int | Literal["earliest", "latest"] = "earliest",
        count: int | None = None,
        timeout: float = 10.0,
    ) -> list[Message]:
        """The records of a topic (or one partition) from `offset`, ordered by partition and offset.

        Without `count`: what is stored now. With `count`: waits up to
        `timeout` seconds until at least `count` records are there (and the
        topic exists), then returns all of them, so a duplicate shows up;
        raises TimeoutError otherwise. Consumer groups are not involved.
        """
        return self.call(
            store_access.consume(self._cluster, topic, partition, offset, count, timeout), timeout=timeout + 30
        )

    async def aconsume(
        self,
        topic: str,
        *,
        partition: int | None = None,
        offset: int | Literal["earliest", "latest"] = "earliest",
        count: int | None = None,
        timeout: float = 10.0,
    ) -> list[Message]:
        return await self._on_loop(store_access.consume(self._cluster, topic, partition, offset, count, timeout))

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The offsets `group` has committed for `topic`: partition -> next offset to read."""
        return self.call(store_access.committed(self._cluster, group, topic))

    async def acommitted(self, group: str, topic: str) -> dict[int, int]:
        return await self._on_loop(store_access.committed(self._cluster, group, topic))

    def reset(self) -> None:
        """Back to a fresh broker: no topics, streams, consumer groups, committed offsets,
        producer state or faults."""
        self.call(self._reset())

    async def areset(self) -> None:
        await self._on_loop(self._reset())

    def drop_connections(self) -> int:
        """Close every client connection now (clients reconnect); returns how many."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the broker is not running")
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            return self.server.drop_connections()

        async def drop() -> int:
            return self.server.drop_connections()

        return asyncio.run_coroutine_threadsafe(drop(), loop).result(30)

    # --- the helpers' work, on the broker's loop ------------------------------

    async def _reset(self) -> None:
        cluster = self._cluster
        store = cluster.store
        self.faults.clear()
        await cluster.groups.close()  # forgets every group, its members and timers
        await cluster.groups.durable.forget_all()  # ... and their stored state
        cluster.groups.start()
        default = cluster.default_stream
        for stream in store.list_streams():
            if stream.path != default:
                await store.delete_stream(stream.path)
        for topic in store.list_topics(default):
            await store.delete_topic(default, topic.name)
        for group in store.list_cursor_groups(default):
            await store.delete_cursors(default, group)
        current = store.get_stream(default)
        if self._default_policy is not None and current is not None and current.policy != self._default_policy:
            await store.edit_stream(default, self._default_policy)
        await cluster.reset_producers()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending (e.g. a client's long poll) so the loop closes quietly."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
