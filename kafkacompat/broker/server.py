"""The asyncio TCP server: accepts connections and owns the store's lifetime.

With http_port set it also runs the HTTP server (/metrics, /health) on the
same loop, over the same Cluster."""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
from typing import TYPE_CHECKING

from kafkacompat import storage
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage import Store

from .cleaner_codec import CLEANER_CODEC
from .cluster import Cluster
from ..config import BrokerConfig
from .connection import Connection
from .faults import Faults
from .receive import FrameBudget, FrameStream, serve_frames
from ..replication.engine import ReplicationService

if TYPE_CHECKING:
    from ..http import HttpServer

log = logging.getLogger(__name__)


class BrokerServer:
    """A running broker: `await start()`, `await stop()`, or `async with`."""

    def __init__(self, config: BrokerConfig, store: Store | None = None) -> None:
        self.config = config
        self.store = store or storage.open_store(
            config.store_url,
            volumes=config.volumes,
            default_stream=config.default_stream,
            record_timestamps=record_timestamps,
            retention_check_ms=config.retention_check_ms,
            record_codec=CLEANER_CODEC if config.log_cleaner_enable else None,
            cleaner_dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
            skip_damaged=config.skip_damaged,
        )
        self.cluster: Cluster | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._per_ip: collections.Counter[str] = collections.Counter()
        self.connections_accepted = 0  # Kafka client connections since start, read by /metrics
        self.connections_refused = 0  # over max_connections or max_connections_per_ip
        budget = config.queued_max_request_bytes
        self._frame_budget = FrameBudget(None if budget == -1 else budget)
        self.faults = Faults()  # injected by tests; see kafkacompat.testing
        self._http: "HttpServer | None" = None
        self._store_open = False

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._server is not None, "broker not started"
        return self._server.sockets[0].getsockname()[1]

    @property
    def http_port(self) -> int | None:
        """The HTTP server's bound port, or None when it is off (http_port unset)."""
        return self._http.port if self._http is not None else None

    @property
    def connection_count(self) -> int:
        """Kafka client connections open now."""
        return len(self._connections)

    def readiness(self) -> dict[str, bool]:
        """What /health/ready checks: the store is open and the Kafka listener accepts connections."""
        return {
            "store_open": self._store_open,
            "kafka_listener": self._server is not None and self._server.is_serving(),
        }

    async def start(self) -> None:
        # Bind before opening the store: a broker that cannot listen must not
        # touch the data dir (opening it consumes the clean-shutdown marker).
        self._server = await serve_frames(
            self._accept, self.config.host, self.config.port, self._frame_budget,
            reuse_address=True, start_serving=False,
        )
        try:
            if self.config.http_port is not None:  # before the store opens: /health/ready says "not yet"
                from ..http import HttpServer  # imported here: aiohttp is only loaded when HTTP is on

                self._http = HttpServer(self, self.config.http_host, self.config.http_port)
                await self._http.start()
            await self.store.open()
            self._store_open = True
        except BaseException:
            self._server.close()
            self._server = None
            await self._stop_http()
            raise
        if self.config.advertised_port is None and self.config.port == 0:
            self.config.advertised_port = self.port
        self.cluster = Cluster(self.config, self.store)
        self.cluster.groups.start()
        await self.cluster.transactions.start()
        self.cluster.replication = ReplicationService(self.store, self.config)
        await self.cluster.replication.start()
        await self._server.start_serving()
        host, port = self.cluster.host, self.cluster.port
        log.info(
            "kafkacompat listening on %s:%d (advertised %s:%d), store %s",
            self.config.host, self.port, host, port, self.config.store_url,
        )

    async def stop(self) -> None:
        """Close the Kafka listener and its connections, the groups, the store, then the HTTP server.

        HTTP goes last so probes see "not ready" while the broker drains.
        """
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        try:
            if self.cluster is not None:
                if self.cluster.replication is not None:
                    await self.cluster.replication.close()
                await self.cluster.transactions.close()
                await self.cluster.groups.close()
        finally:
            self._store_open = False  # /health/ready: the store is closing
            try:
                await self.store.close()  # always: it releases the data dir and marks a clean stop
            finally:
                await self._stop_http()
        log.info("kafkacompat stopped")

    async def _stop_http(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None

    def drop_connections(self) -> int:
        """Close every client connection at once, as a broker crash would; returns how many."""
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        return len(tasks)

    async def __aenter__(self) -> "BrokerServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _accept(self, reader: FrameStream, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        refusal = self._refusal(ip)
        if refusal is not None:
            log.warning("refusing connection from %s: %s", ip, refusal)
            self.connections_refused += 1
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert self.cluster is not None
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._per_ip[ip] += 1
        self.connections_accepted += 1
        try:
            await Connection(self.cluster, reader, writer, self.config, self.faults).run()
        finally:
            self._connections.discard(task)
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]

    def _refusal(self, ip: str) -> str | None:
        """Why a new connection from `ip` is refused (max.connections, max.connections.per.ip)."""
        if len(self._connections) >= self.config.max_connections:
            return f"max_connections={self.config.max_connections} reached"
        if self._per_ip[ip] >= self.config.max_connections_per_ip:
            return f"max_connections_per_ip={self.config.max_connections_per_ip} reached for {ip}"
        return None
