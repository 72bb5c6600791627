"""A real broker inside the test process, on an ephemeral loopback port.

    with Broker() as broker:            # sync tests: the broker runs on a thread
        broker.create_topic("orders", partitions=3)
        Producer({"bootstrap.servers": broker.bootstrap_servers}) ...
        assert [m.value for m in broker.consume("orders", count=1)] == [b"paid"]

    async with Broker() as broker:      # asyncio tests: on the running loop
        await broker.aproduce("orders", b"paid", key=b"42")

Every helper has a sync form (for a broker on its thread, from any thread
but the broker's) and an `a`-prefixed coroutine form (from any event loop).
`broker.faults` injects errors, delays and dropped connections that every
client sees on the wire.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, Literal, TypeVar

from kafkacompat import storage
from kafkacompat.protocol.records import Record, build_batch, iter_records, set_log_append_time, whole_batches
from kafkacompat.storage import Store

from ..broker.cluster import Cluster, TopicError
from ..config import BrokerConfig
from .faults import Faults
from ..broker.partitioner import partition_for_key
from .certificates import CertificateAuthority
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS, make_credential
from .services import cloud_store, test_store_engine
from ..kafka_port.server import BrokerServer
from ..catalog.topic_configs import topic_config_value, validate_configs

log = logging.getLogger(__name__)

T = TypeVar("T")
Data = bytes | str | None
Headers = Mapping[str, Data] | Iterable[tuple[str, Data]]

STOP_TIMEOUT = 10.0  # seconds a stop may take before the broker thread is abandoned
_READ_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """A stored record, as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int  # ms since the epoch (LogAppendTime topics: the broker's time)


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
        return self.call(self._create_topic(name, partitions, configs))

    async def acreate_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        return await self._on_loop(self._create_topic(name, partitions, configs))

    def delete_topic(self, name: str) -> None:
        self.call(self._delete_topic(name))

    async def adelete_topic(self, name: str) -> None:
        await self._on_loop(self._delete_topic(name))

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
        return self.call(self._produce(topic, value, key, headers, partition, timestamp))

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
        return await self._on_loop(self._produce(topic, value, key, headers, partition, timestamp))

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
            self._consume(topic, partition, offset, count, timeout), timeout=timeout + 30
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
        return await self._on_loop(self._consume(topic, partition, offset, count, timeout))

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The offsets `group` has committed for `topic`: partition -> next offset to read."""
        return self.call(self._committed(group, topic))

    async def acommitted(self, group: str, topic: str) -> dict[int, int]:
        return await self._on_loop(self._committed(group, topic))

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

    async def _create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None) -> str:
        cluster = self._cluster
        stream, topic = _split(cluster, name)
        validate_configs(dict(configs or {}))
        if cluster.store.get_stream(stream) is None:
            await cluster.store.create_stream(stream)
        info = await cluster.store.create_topic(stream, topic, partitions, dict(configs or {}))
        await cluster.settle([info])  # in a cluster (a postgresql:// store), its partitions get leaders now
        return name

    async def _delete_topic(self, name: str) -> None:
        cluster = self._cluster
        stream, topic = _split(cluster, name)
        info = cluster.store.get_topic(stream, topic)
        if info is None:
            raise storage.UnknownTopicError(f"topic {name} does not exist")
        await cluster.store.delete_topic(stream, topic)
        cluster.forget_topic(info)

    async def _produce(
        self,
        topic: str,
        value: Data,
        key: Data,
        headers: Headers | None,
        partition: int | None,
        timestamp: int | None,
    ) -> Message:
        cluster = self._cluster
        try:
            info = await cluster.auto_create(topic)
        except TopicError as exc:
            raise ValueError(str(exc)) from None
        key_bytes, value_bytes = _bytes(key), _bytes(value)
        if partition is None:
            partition = 0 if key_bytes is None else partition_for_key(key_bytes, info.partitions)
        if not 0 <= partition < info.partitions:
            raise ValueError(f"topic {topic} has partitions 0-{info.partitions - 1}, not {partition}")
        pairs = tuple((name, _bytes(v)) for name, v in _header_pairs(headers))
        now = int(time.time() * 1000)
        stamp = now if timestamp is None else timestamp
        batch = build_batch([Record(key_bytes, value_bytes, list(pairs), stamp)])
        if topic_config_value(cluster, info, "message.timestamp.type") == "LogAppendTime":
            stamp = now
            batch = set_log_append_time(batch, now)
        result = await cluster.store.partition(info.stream, info.name, partition).append(batch, 1)
        return Message(topic, partition, result.base_offset, key_bytes, value_bytes, pairs, stamp)

    async def _consume(
        self,
        topic: str,
        partition: int | None,
        offset: int | str,
        count: int | None,
        timeout: float,
    ) -> list[Message]:
        cluster = self._cluster
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stream, name = _split(cluster, topic)
        info = cluster.store.get_topic(stream, name)
        while info is None:  # a producer under test may not have created it yet
            if count is None or loop.time() >= deadline:
                raise storage.UnknownTopicError(f"topic {topic} does not exist")
            await asyncio.sleep(0.005)
            info = cluster.store.get_topic(stream, name)
        if partition is not None and not 0 <= partition < info.partitions:
            raise ValueError(f"topic {topic} has partitions 0-{info.partitions - 1}, not {partition}")
        indexes = range(info.partitions) if partition is None else [partition]
        parts = {i: cluster.store.partition(stream, name, i) for i in indexes}
        positions = {i: _start(p, offset) for i, p in parts.items()}
        found: dict[int, list[Message]] = {i: [] for i in parts}
        while True:
            for i, part in parts.items():
                positions[i] = await _read_into(found[i], topic, i, part, positions[i])
            total = sum(len(messages) for messages in found.values())
            if count is None or total >= count:
                return [m for i in parts for m in found[i]]
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"expected at least {count} record(s) in {topic} within {timeout:g} s, found {total}"
                )
            waits = [part.wait_for_data(positions[i]) for i, part in parts.items()]
            await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()

    async def _committed(self, group: str, topic: str) -> dict[int, int]:
        cluster = self._cluster
        stream, name = _split(cluster, topic)
        return {c.partition: c.offset for c in cluster.groups.offsets.lookup(group, stream, name).values()}

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


def _split(cluster: Cluster, name: str) -> tuple[str, str]:
    try:
        return cluster.split(name)
    except TopicError as exc:
        raise ValueError(str(exc)) from None


def _bytes(data: Data) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _header_pairs(headers: Headers | None) -> Iterable[tuple[str, Data]]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


def _start(part: storage.Partition, offset: int | str) -> int:
    if offset == "earliest":
        return part.log_start_offset
    if offset == "latest":
        return part.high_watermark
    if not isinstance(offset, int):
        raise ValueError(f"offset must be an int, 'earliest' or 'latest', not {offset!r}")
    return max(offset, part.log_start_offset)


async def _read_into(
    out: list[Message], topic: str, index: int, part: storage.Partition, position: int
) -> int:
    """Append the records of one partition from `position` on; returns the next position."""
    while position < part.high_watermark:
        data = await part.read(position, _READ_BYTES)
        advanced = False
        for record in iter_records(data):
            if record.offset >= position:
                out.append(Message(
                    topic, index, record.offset, record.key, record.value,
                    tuple(record.headers), record.timestamp,
                ))
                position = record.offset + 1
                advanced = True
        for header in whole_batches(data):  # batches a log cleaner emptied hold offsets but no record
            if header.last_offset >= position:
                position = header.last_offset + 1
                advanced = True
        if not advanced:
            break
    return position


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending (e.g. a client's long poll) so the loop closes quietly."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
