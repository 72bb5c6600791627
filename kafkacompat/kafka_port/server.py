"""The asyncio TCP server: accepts connections and owns the store's lifetime.

With http_port set it also runs the HTTP server (console, REST, /metrics, /health) on the
same loop, over the same Cluster."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkacompat import storage
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage import Store

from ..broker.cleaner_codec import CLEANER_CODEC
from ..broker.cluster import Cluster
from ..config import BrokerConfig
from ..replication.engine import ReplicationService
from ..security.authenticator import SaslAuthenticator, audit
from ..security.listeners import Listener, parse_listeners
from ..security.principal import ANONYMOUS, WORKER
from ..security.tls import CertificatePrincipals, PrincipalMappingError, TlsServerProtocol, server_context
from ..workers.role import WorkerRole
from .connection import Connection, FaultHook, NoFaults
from .receive import FrameBudget, FrameStream, serve_frames

if TYPE_CHECKING:
    from ..http import HttpServer

log = logging.getLogger(__name__)
WORKERS = Listener("WORKERS", "PLAINTEXT", "", 0)  # the workers' own channel (workers/channel.py)

STOP_GRACE = 5.0  # seconds a stopping broker waits for the answers it owes (a fetch long poll ends sooner)


class BrokerServer:
    """A running broker: `await start()`, `await stop()`, or `async with`."""

    def __init__(self, config: BrokerConfig, store: Store | None = None, faults: FaultHook | None = None) -> None:
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
            object_store=config.object_store,
            flush_ms=config.store_flush_ms,
            cache_bytes=config.store_cache_bytes,
        )
        self._listen_fd = -1  # a worker's listening socket, bound by its supervisor
        self._channel_fd = -1  # and its Unix socket, where the other workers ask it (workers/channel.py)
        if config.worker_of is not None:  # one of `serve --workers N`: it writes its share of the store only
            role = WorkerRole.parse(config.worker_of)
            self.store.share = role.share  # type: ignore[attr-defined]
            self._listen_fd, self._channel_fd = role.listen_fd, role.channel_fd
        self.cluster: Cluster | None = None
        self.listeners = parse_listeners(config)
        self._servers: dict[str, asyncio.base_events.Server] = {}  # listener name -> its server
        self._tls = server_context(config) if any(listener.tls for listener in self.listeners) else None
        self._certificates = CertificatePrincipals(config.ssl_principal_mapping_rules)
        self._connections: dict[asyncio.Task[None], Connection | None] = {}  # None until it is set up
        self._channel_open = 0  # of them, other workers' (workers/channel.py): neither counted nor limited
        self._per_ip: collections.Counter[str] = collections.Counter()
        self.connections_accepted = 0  # Kafka client connections since start, read by /metrics
        self.connections_refused = 0  # over max_connections or max_connections_per_ip
        budget = config.queued_max_request_bytes
        self._frame_budget = FrameBudget(None if budget == -1 else budget)
        self.faults = NoFaults() if faults is None else faults  # injected by tests: kafkacompat.testing.faults
        self._http: "HttpServer | None" = None
        self._store_open = False

    @property
    def port(self) -> int:
        """The bound port of the first listener (useful with port 0)."""
        return self.listener_port(self.listeners[0].name)

    def listener_port(self, name: str) -> int:
        """The bound port of the listener called `name` (PLAINTEXT, SASL_SSL, ...)."""
        server = self._servers.get(name.upper())
        assert server is not None, f"broker not started or no listener {name}"
        return server.sockets[0].getsockname()[1]

    async def _metrics_exposition(self) -> bytes:
        """This broker's /metrics figures without the group lag (worker 0 of `serve --workers N`, which
        holds every group's offsets, shows them with its own; the lag is its to count)."""
        from ..http.metrics import exposition  # only here: aiohttp and prometheus_client load when asked

        return await exposition(self, lag=False)

    @property
    def http_port(self) -> int | None:
        """The HTTP server's bound port, or None when it is off (http_port unset)."""
        return self._http.port if self._http is not None else None

    @property
    def connection_count(self) -> int:
        """Kafka client connections open now."""
        return len(self._connections) - self._channel_open

    def readiness(self) -> dict[str, bool]:
        """What /health/ready checks: the store is open and the Kafka listener accepts connections."""
        return {
            "store_open": self._store_open,
            "kafka_listener": bool(self._servers) and all(s.is_serving() for s in self._servers.values()),
        }

    async def start(self, before_serving: Callable[[], None] | None = None) -> None:
        """Bind, open the store, join the cluster, start the services, then serve; `before_serving`
        runs last before the listeners accept (the broker process freezes its start-up heap there)."""
        # Bind before opening the store: a broker that cannot listen must not
        # touch the data dir (opening it consumes the clean-shutdown marker).
        try:
            for listener in self.listeners:
                self._servers[listener.name] = await self._bind(listener)
            if self._channel_fd >= 0:
                self._servers[WORKERS.name] = await serve_frames(
                    self._accept_worker, "", 0, self._frame_budget, start_serving=False,
                    sock=socket.socket(fileno=self._channel_fd))
            if self.config.http_port is not None:  # before the store opens: /health/ready says "not yet"
                from ..http import HttpServer  # imported here: aiohttp is only loaded when HTTP is on

                self._http = HttpServer(self, self.config.http_host, self.config.http_port)
                await self._http.start()
            await self.store.open()
            self._store_open = True
        except BaseException:
            for server in self._servers.values():
                server.close()
            self._servers.clear()
            await self._stop_http()
            raise
        if self.config.listeners:  # peers and REST know this broker by its first listener's address
            first = self.listeners[0]
            self.config.advertised_host, self.config.advertised_port = first.advertised(self.listener_port(first.name))
        elif self.config.advertised_port is None and self.config.port == 0:
            self.config.advertised_port = self.port
        self.cluster = Cluster(self.config, self.store)
        self.cluster.metrics_exposition = self._metrics_exposition
        for listener in self.listeners:
            bound = self.listener_port(listener.name)
            self.cluster.listener_addresses[listener.name] = listener.advertised(bound)
            self.cluster.listener_names.append(str(dataclasses.replace(listener, port=bound)))
        try:
            await self.cluster.view.start()  # joins the cluster (registers, first leaders) before clients come
        except BaseException:
            for server in self._servers.values():
                server.close()
            self._servers.clear()
            self._store_open = False
            await self.store.close()
            await self._stop_http()
            raise
        await self.cluster.load_owned_coordinators()
        self.cluster.groups.start()
        await self.cluster.transactions.start()
        self.cluster.tokens.start(self.config.delegation_token_expiry_check_interval_ms)
        if self.cluster.oauth is not None:
            await self.cluster.oauth.start()
        self.cluster.replication = ReplicationService(self.store, self.config, self.cluster)
        await self.cluster.replication.start()
        if before_serving is not None:
            before_serving()
        if WORKERS.name in self._servers:
            await self._servers[WORKERS.name].start_serving()
        for listener in self.listeners:
            await self._servers[listener.name].start_serving()
            host, port = self.cluster.address(listener.name)
            log.info("kafkacompat listening on %s (%s, advertised %s:%d), store %s",
                     self.cluster.listener_names[self.listeners.index(listener)], listener.security_protocol,
                     host, port, self.config.store_url)
        await self.cluster.view.serving()  # the others hand this broker its partitions from now

    async def _bind(self, listener: Listener) -> asyncio.base_events.Server:
        wrap = None
        if listener.tls:
            tls, timeout = self._tls, self.config.authentication_timeout_ms / 1000
            assert tls is not None
            wrap = functools.partial(TlsServerProtocol, context=tls, timeout=timeout)
        # a worker's one PLAINTEXT listener (workers refuse --listeners) listens on the socket its supervisor bound
        where = {"sock": socket.socket(fileno=self._listen_fd)} if self._listen_fd >= 0 else {"reuse_address": True}
        return await serve_frames(
            functools.partial(self._accept, listener), listener.host, listener.port, self._frame_budget,
            wrap=wrap, start_serving=False, **where,
        )

    async def stop(self) -> None:
        """Close the Kafka listener, hand the partitions this broker leads to the others (in a cluster),
        close the connections once their answers are sent, then the groups, the store, the HTTP server.

        HTTP goes last so probes see "not ready" while the broker drains.
        """
        if self._servers:
            for server in self._servers.values():
                server.close()
            if self.cluster is not None:
                await self.cluster.view.leave()  # hand the partitions on first: the answers owed say where
            await self._close_connections()
            for server in self._servers.values():
                await server.wait_closed()
            self._servers.clear()
        try:
            if self.cluster is not None:
                await self.cluster.view.close()  # end the lease: what it still leads moves now
                if self.cluster.replication is not None:
                    await self.cluster.replication.close()
                await self.cluster.transactions.close()
                await self.cluster.tokens.close()
                if self.cluster.oauth is not None:
                    await self.cluster.oauth.close()
                await self.cluster.groups.close()
                await self.cluster.shares.close()
        finally:
            self._store_open = False  # /health/ready: the store is closing
            try:
                await self.store.close()  # always: it releases the data dir and marks a clean stop
            finally:
                await self._stop_http()
        log.info("kafkacompat stopped")

    async def _close_connections(self) -> None:
        """Read no more requests, send the answers owed (within STOP_GRACE seconds), then close.

        As Kafka's controlled shutdown: a request the broker acted on is answered, else a producer
        takes a stored write for unsent and may reuse its sequence number for another record.
        """
        for task, connection in list(self._connections.items()):
            if connection is None:
                task.cancel()
            else:
                connection.stop_reading()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=STOP_GRACE)
        late = list(self._connections.items())
        for task, connection in late:
            if connection is None:
                task.cancel()
                continue
            log.warning("closing connection from %s with answers still owed after %.0f s", connection.peer,
                        STOP_GRACE)
            connection.abandon()
        await asyncio.gather(*(task for task, _ in late), return_exceptions=True)

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

    async def _accept_worker(self, reader: FrameStream, writer: asyncio.StreamWriter) -> None:
        """Another worker of `serve --workers N`, on this worker's Unix socket: the broker itself (principal
        WORKER, a super user). Its connections are the broker's own, as Kafka's inter-broker ones: neither
        refused for the client connection limits nor counted among the client connections."""
        await self._serve(WORKERS, WORKER, "worker", reader, writer)

    async def _accept(self, listener: Listener, reader: FrameStream, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        refusal = self._refusal(ip)
        if refusal is not None:
            log.warning("refusing connection from %s: %s", ip, refusal)
            self.connections_refused += 1
            writer.close()
            return
        client = f"{ip}:{peer[1]}" if isinstance(peer, tuple) else ip
        principal = ANONYMOUS
        if listener.security_protocol == "SSL":  # with SASL_SSL the SASL user is the principal, as on Kafka
            certificate = writer.get_extra_info("peercert")
            try:
                principal = self._certificates.principal(certificate)
            except PrincipalMappingError as exc:
                audit.warning("authentication failed: client=%s listener=%s mechanism=certificate: %s",
                              client, listener.name, exc)
                writer.close()
                return
            if certificate:
                audit.info("authenticated: principal=%s client=%s listener=%s mechanism=certificate",
                           principal, client, listener.name)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await self._serve(listener, principal, client, reader, writer, ip)

    async def _serve(self, listener: Listener, principal: str, client: str, reader: FrameStream,
                     writer: asyncio.StreamWriter, ip: str = "") -> None:
        assert self.cluster is not None
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = None
        own = listener is WORKERS  # another worker's connection: not a client's (_accept_worker)
        if own:
            self._channel_open += 1
        else:
            self._per_ip[ip] += 1
            self.connections_accepted += 1
        try:
            sasl = None
            if listener.sasl:
                sasl = SaslAuthenticator(
                    self.config.sasl_enabled_mechanisms, self.cluster.credentials, self.cluster.tokens,
                    reauth_ms=self.config.connections_max_reauth_ms,
                    peer=client, listener=listener.name,
                    oauth=self.cluster.oauth, sub_claim=self.config.sasl_oauthbearer_sub_claim_name,
                )
            connection = Connection(self.cluster, reader, writer, self.config, self.faults, listener, principal, sasl)
            self._connections[task] = connection
            await connection.run()
        finally:
            self._connections.pop(task, None)
            if own:
                self._channel_open -= 1
            else:
                self._per_ip[ip] -= 1
                if not self._per_ip[ip]:
                    del self._per_ip[ip]

    def _refusal(self, ip: str) -> str | None:
        """Why a new connection from `ip` is refused (max.connections, max.connections.per.ip)."""
        if self.connection_count >= self.config.max_connections:
            return f"max_connections={self.config.max_connections} reached"
        if self._per_ip[ip] >= self.config.max_connections_per_ip:
            return f"max_connections_per_ip={self.config.max_connections_per_ip} reached for {ip}"
        return None
