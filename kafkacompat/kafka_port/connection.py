"""One client connection: read frames, dispatch, answer strictly in order.

Requests are handled one after another (so appends from one producer keep
their order), but a handler may hand back a deferred answer (a fetch long
poll, a produce waiting for the fsync of an fsync=always stream): the next
request is then handled at once while a writer task sends answers in
request order. An answer that is ready when no earlier one is still owed
is sent by the reading task itself (most produce answers): no queue, no
task switch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from kafkacompat import storage
from kafkacompat.protocol.fetch_response import Buffer
from kafkacompat.protocol.framing import FrameError, frame_size
from kafkacompat.protocol.messages import (
    MalformedRequestError,
    RequestHeader,
    decode_request,
    parse_request_header,
    response_chunks,
)
from kafkacompat.protocol.versions import API_VERSIONS_KEY, api_name

from ..broker import admin_log
from ..broker.cluster import Cluster
from ..broker.request_stats import response_errors
from ..config import BrokerConfig
from ..handlers import HANDLERS, REGISTRY
from ..handlers.api_versions import unsupported_version_response
from ..handlers.common import NO_RESPONSE, CloseConnection
from ..security.authenticator import BEFORE_AUTHENTICATION, SASL_AUTHENTICATE_KEY, SaslAuthenticator
from ..security.listeners import DEFAULT_LISTENER, Listener
from ..security.principal import ANONYMOUS
from ..security.refusals import cluster_gate
from ..security.scram import AuthenticationFailed
from . import storage_refusal
from .receive import FrameStream
from .send import in_pieces, plain_socket_fd, send_chunks, send_in_pieces

log = logging.getLogger(__name__)
# one DEBUG line per request (API, version, client, principal, size, latency); off, it costs one level check
request_log = logging.getLogger("kafkacompat.request")

MAX_IN_FLIGHT = 64  # answers queued per connection before reading pauses


class FaultHook(Protocol):
    """Faults a test injects (kafkacompat.testing.faults.Faults); consulted only for API keys in `rules`."""

    rules: dict[int, list[Any]]

    def take(self, api_key: int) -> Any | None: ...

    async def apply(self, rule: Any, ctx: RequestContext, handler: ModuleType, request: Any) -> Any: ...


class NoFaults:
    """A broker no test injects faults into: no rules, so the connection never asks for one."""

    rules: dict[int, list[Any]] = {}

    def take(self, api_key: int) -> Any | None:
        return None

    async def apply(self, rule: Any, ctx: RequestContext, handler: ModuleType, request: Any) -> Any:
        raise AssertionError("no faults are set on this broker")


@dataclasses.dataclass(frozen=True, slots=True)
class BareToken:
    """A SASL token sent without a Kafka response header (the exchange after SaslHandshake v0)."""

    token: bytes


@dataclasses.dataclass(slots=True)
class RequestContext:
    cluster: Cluster
    header: RequestHeader
    peer: str
    client_software_name: str = ""  # from ApiVersions v3+; "" until the client says
    size: int = 0  # bytes of the request frame (what byte-rate quotas count for produce)
    throttle_ms: int = 0  # set by a handler over a quota: the connection reads nothing more for this long
    # who is asking, and through which listener (kafkacompat/security): the authorizer reads these
    principal: str = ANONYMOUS  # "User:<name>" after SASL, the mapped certificate subject with mTLS
    listener: str = "PLAINTEXT"  # the listener name the client connected to
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    sasl: SaslAuthenticator | None = None  # the connection's SASL state on a SASL listener
    entry: str = ""  # audit lines' entry point when not a Kafka listener: the HTTP route of an in-process call
    peer_closed: Callable[[], bool] | None = None  # the connection's FrameStream.peer_closed; None: not over one

    @property
    def version(self) -> int:
        return self.header.api_version

    def client_gone(self) -> bool:
        """Whether the client closed the connection the request came on: its answer reaches nobody."""
        return self.peer_closed is not None and self.peer_closed()


class Connection:
    def __init__(
        self,
        cluster: Cluster,
        reader: FrameStream,
        writer: asyncio.StreamWriter,
        config: BrokerConfig,
        injected: FaultHook,
        listener: Listener = DEFAULT_LISTENER,
        principal: str = ANONYMOUS,
        sasl: SaslAuthenticator | None = None,
    ) -> None:
        self.cluster = cluster
        self.listener = listener
        self._principal = principal  # of the TLS client certificate, or anonymous
        self.sasl = sasl
        self._sasl_max_frame = config.sasl_server_max_receive_size
        self._authentication_timeout = config.authentication_timeout_ms / 1000
        self._failed_authentication_delay = config.connection_failed_authentication_delay_ms / 1000
        self.faults = injected
        self._fault_rules = injected.rules  # read once per request: empty unless a test set faults
        self.reader = reader
        self.writer = writer
        self.max_frame_bytes = config.socket_request_max_bytes
        self._idle_after = config.connections_max_idle_ms / 1000
        self._last_sent = reader.last_received
        self._idle_timer: asyncio.TimerHandle | None = None
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_software_name = ""
        self._stats = cluster.stats
        # (context, answer, perf_counter() when its frame was read): the writer records the latency. Made with
        # the writer task at the first answer that must wait behind another: most connections never need them
        # (about 4 KiB each, held by every idle device connection).
        self._answers: asyncio.Queue[tuple[RequestContext, Awaitable[Any], float] | None] | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._muted_until = 0.0  # loop time before which no request is handled (client quotas)
        # Answers queued for the writer task and not sent yet. While none are, a ready answer is
        # sent by the reader itself: order is kept, and the common case skips two task switches.
        self._owed = 0
        self._fd = plain_socket_fd(writer)  # None on TLS: bytes go through the transport
        self._current: RequestContext | None = None  # the request being handled, named if it fails
        self._task: asyncio.Task[None] | None = None  # the one running run()
        self._reading = False  # waiting for a request's bytes: nothing acted on, safe to interrupt
        self._closing = False  # the broker is stopping: no more requests, but the answers owed are sent

    @property
    def principal(self) -> str:
        """Who this connection acts for: the SASL user once authenticated, else the TLS/anonymous principal."""
        if self.sasl is not None and self.sasl.principal is not None:
            return self.sasl.principal
        return self._principal

    def _close_if_unauthenticated(self) -> None:
        """A SASL client that has not authenticated in authentication_timeout_ms is let go."""
        if self.sasl is not None and not self.sasl.authenticated:
            log.warning("closing connection from %s: not authenticated within %d ms", self.peer,
                        int(self._authentication_timeout * 1000))
            self.writer.close()

    def _mute(self, ctx: RequestContext) -> None:
        """After an answer over a quota: hold the next requests for its throttle time."""
        if ctx.throttle_ms > 0:
            self._muted_until = max(self._muted_until, asyncio.get_running_loop().time() + ctx.throttle_ms / 1000)

    def _internal_error(self, ctx: RequestContext | None, what: str) -> None:
        """A bug met while serving: logged naming the request, the connection and who sent it; counted."""
        if ctx is None:
            log.exception("%s from %s (%s): internal error", what, self.peer, self.principal)
            return
        header = ctx.header
        self._stats.error(header.api_key, header.api_version, "unknown_server_error")
        log.exception("%s: internal error in %s v%d (correlation id %d, client %s) from %s (%s on %s)", what,
                      admin_log.request_name(header.api_key), header.api_version, header.correlation_id,
                      header.client_id or "-", self.peer, ctx.principal, self.listener.name)

    def stop_reading(self) -> None:
        """The broker is stopping: handle no further request, send the answers owed, then close (run() ends)."""
        self._closing = True
        if self._reading and self._task is not None:
            self._task.cancel()

    def abandon(self) -> None:
        """Close now, dropping any answer still owed (after stop_reading, when they took too long)."""
        self._closing = False
        if self._task is not None:
            self._task.cancel()

    async def run(self) -> None:
        log.debug("connection from %s opened on %s", self.peer, self.listener.name)
        self._task = asyncio.current_task()
        self._idle_timer = asyncio.get_running_loop().call_later(self._idle_after, self._close_if_idle)
        auth_timer = None
        if self.sasl is not None:
            auth_timer = asyncio.get_running_loop().call_later(self._authentication_timeout,
                                                              self._close_if_unauthenticated)
        stopping = False
        try:
            await self._read_requests()
        except asyncio.CancelledError:  # the broker is stopping
            stopping = True
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except MalformedRequestError as exc:
            log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
        except Exception:
            self._internal_error(self._current, "closing the connection")
        stopping = stopping or self._closing
        self._idle_timer.cancel()
        if auth_timer is not None:
            auth_timer.cancel()
        if not stopping:
            self.cluster.shares.connection_closed(self.peer)  # a share consumer that died gives its records back
        if self._writer_task is not None:
            await self._end_writer(stopping)
        if self.sasl is not None and self.sasl.failed and not stopping:
            # as Kafka's connection.failed.authentication.delay.ms: the refusal arrives well before the
            # close, so a client reads the authentication error rather than only a dropped connection
            await asyncio.sleep(self._failed_authentication_delay)
        self.writer.close()
        log.debug("connection from %s (%s) closed", self.peer, self.principal)

    def _close_if_idle(self) -> None:
        """connections.max.idle.ms: close a connection that neither sent nor received for that long.

        A stalled half-sent frame counts as idle too, so its buffer is freed.
        """
        loop = asyncio.get_running_loop()
        quiet_since = max(self.reader.last_received, self._last_sent)
        remaining = quiet_since + self._idle_after - loop.time()
        if remaining > 0 or self._owed:
            self._idle_timer = loop.call_later(max(remaining, 0.05), self._close_if_idle)
            return
        log.info("closing connection from %s: idle for %d ms", self.peer, int(self._idle_after * 1000))
        self.writer.close()

    async def _end_writer(self, stopping: bool) -> None:
        """The writer task sends what is owed and ends; dropped at once when the connection is dropped."""
        writer_task, answers = self._writer_task, self._answers
        assert writer_task is not None and answers is not None
        try:
            if stopping and not self._closing:
                writer_task.cancel()  # dropped at once, as in a crash (drop_connections, abandon)
            else:
                await answers.put(None)  # send what is owed, then stop
            await writer_task
        except asyncio.CancelledError:
            writer_task.cancel()  # abandoned while sending what was owed
        except Exception:  # noqa: BLE001 - the socket is going anyway
            log.debug("writer for %s ended with an error", self.peer, exc_info=True)

    async def _read_requests(self) -> None:
        while not self._closing and await self._serve_next():
            pass

    async def _serve_next(self) -> bool:
        """Read one request, handle it, send or queue its answer; False when the connection is to close.

        A call per request so that nothing of the last request (its frame, up to a MiB, and its answer) stays
        referenced while the connection waits for the next one: an idle connection holds neither.
        """
        reader = self.reader
        loop = asyncio.get_running_loop()
        sasl = self.sasl
        self._reading = True
        unauthenticated = sasl is not None and not sasl.authenticated
        if unauthenticated:  # sasl.server.max.receive.size: no large frames from strangers
            size = frame_size(await reader.readexactly(4), self._sasl_max_frame)
        else:
            size = frame_size(await reader.readexactly(4), self.max_frame_bytes)
        frame = await reader.readexactly(size)
        self._reading = False
        self._current = None
        if sasl is not None and sasl.raw_tokens:  # after SaslHandshake v0: a bare token, not a request
            await self._answer_bare_token(sasl, bytes(frame))
            return not sasl.failed
        muted = self._muted_until - loop.time()
        if muted > 0:
            await asyncio.sleep(muted)  # over a quota: this request waits, as on a muted Kafka channel
        received = time.perf_counter()
        header = parse_request_header(frame)
        ctx = RequestContext(self.cluster, header, self.peer, self.client_software_name, size,
                             principal=self.principal, listener=self.listener.name,
                             security_protocol=self.listener.security_protocol, sasl=sasl,
                             peer_closed=reader.peer_closed)
        self._current = ctx
        if sasl is not None and header.api_key not in BEFORE_AUTHENTICATION:
            if not sasl.authenticated:
                raise CloseConnection(f"unexpected {api_name(header.api_key)} request before SASL "
                                      "authentication completed")
            if sasl.expired():
                raise CloseConnection(f"SASL session of {sasl.principal} expired (connections_max_reauth_ms or "
                                      "the end of its token) "
                                      "and the client did not re-authenticate")
        answer = await self._dispatch(ctx, frame)
        if answer is NO_RESPONSE:
            self._done(ctx, received)
            self._mute(ctx)
            self._current = None
            return True
        await self._answer(ctx, answer, received)
        self._current = None
        return sasl is None or not sasl.failed  # after a refusal is sent the connection closes (as Kafka does)

    async def _answer(self, ctx: RequestContext, answer: Any, received: float) -> None:
        """Send a ready answer now when nothing is owed before it; else queue it for the writer, in order."""
        if asyncio.iscoroutine(answer):
            answer = asyncio.ensure_future(answer)
        elif not isinstance(answer, asyncio.Future):
            if not self._owed:  # nothing before it to wait for: no hop to the writer
                rest = self._send(ctx, answer, received)
                if rest is not None:
                    await send_in_pieces(self.writer, rest, self._fd)
                if self.writer.transport.get_write_buffer_size():
                    await self.writer.drain()
                return
            done = asyncio.get_running_loop().create_future()
            done.set_result(answer)
            answer = done
        self._owed += 1
        if self._answers is None:
            self._answers = asyncio.Queue(MAX_IN_FLIGHT)
            self._writer_task = asyncio.create_task(self._write_answers(), name=f"writer {self.peer}")
        await self._answers.put((ctx, answer, received))

    async def _answer_bare_token(self, sasl: SaslAuthenticator, token: bytes) -> None:
        """A SASL token of the v0 exchange, answered with a bare length-prefixed token (none on failure)."""
        try:
            answer = await sasl.evaluate(token)
        except AuthenticationFailed:
            return  # v0 has no way to say why: the connection just closes (logged by the authenticator)
        header = RequestHeader(SASL_AUTHENTICATE_KEY, 0, -1, None, 0)  # counted as a SaslAuthenticate
        await self._answer(RequestContext(self.cluster, header, self.peer), BareToken(answer), time.perf_counter())

    async def _dispatch(self, ctx: RequestContext, frame: bytes | bytearray) -> Any:
        header = ctx.header
        key, version = header.api_key, header.api_version
        supported = REGISTRY.versions(key)
        if key == API_VERSIONS_KEY and supported and not supported[0] <= version <= supported[1]:
            return unsupported_version_response()
        handler = HANDLERS.get(key)
        if handler is None or supported is None:
            raise CloseConnection(f"unknown or unsupported API key {key}")
        if not supported[0] <= version <= supported[1]:
            raise CloseConnection(
                f"{api_name(key)} v{version} is not supported (this broker serves "
                f"v{supported[0]}-{supported[1]})"
            )
        self.cluster.follow_settings()
        decode = getattr(handler, "decode", decode_request)
        request = decode(header, frame)
        if key == API_VERSIONS_KEY:
            self.client_software_name = getattr(request, "client_software_name", None) or self.client_software_name
            ctx.client_software_name = self.client_software_name
        if self.cluster.authorizer.enabled:
            refusal = cluster_gate(ctx, request, handler.API.answer)
            if refusal is not None:
                return admin_log.logged(ctx, request, refusal)
        if self._fault_rules.get(key):
            rule = self.faults.take(key)
            if rule is not None:
                return await self.faults.apply(rule, ctx, handler, request)
        return admin_log.logged(ctx, request, await _handled(handler, key, version, request, ctx))

    def _send(self, ctx: RequestContext, body: Any, received: float) -> Sequence[Buffer] | None:
        """Hand one answer to the transport and count it; an answer too big to hand over at once is
        returned instead, for the caller to write with send_in_pieces before anything else."""
        header = ctx.header
        rest = None
        if isinstance(body, BareToken):
            self.writer.write(len(body.token).to_bytes(4, "big") + body.token)
        else:
            chunks = response_chunks(header.api_key, header.api_version, header.correlation_id, body)
            if in_pieces(chunks):
                rest = chunks
            else:
                send_chunks(self.writer, chunks, self._fd)
        self._done(ctx, received)
        if not isinstance(body, (bytes, list)) and dataclasses.is_dataclass(body):
            # a kio response; Produce and Fetch encode theirs and count their errors
            for error in response_errors(body):
                self._stats.error(header.api_key, header.api_version, error)
        self._last_sent = asyncio.get_running_loop().time()
        self._mute(ctx)
        return rest

    def _done(self, ctx: RequestContext, received: float) -> None:
        """A request answered (or, acks=0, handled): counted, and logged when the request log is on."""
        header = ctx.header
        seconds = time.perf_counter() - received
        self._stats.request_done(header.api_key, header.api_version, seconds)
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("%s v%d from %s client %s principal %s: %d bytes, %.3f ms",
                              admin_log.request_name(header.api_key), header.api_version, self.peer,
                              header.client_id or "-", ctx.principal, ctx.size, seconds * 1000)

    async def _write_answers(self) -> None:
        writer, answers = self.writer, self._answers
        assert answers is not None
        while True:
            item = await answers.get()
            if item is None:
                break
            ctx, answer, received = item
            try:
                body = await answer
                rest = self._send(ctx, body, received)
                if rest is not None:
                    await send_in_pieces(writer, rest, self._fd)
            except Exception:
                self._internal_error(ctx, "closing the connection")
                writer.close()
                raise
            finally:
                self._owed -= 1
            if answers.empty():
                await writer.drain()


_HOT = frozenset({0, 1})  # Produce and Fetch answer store errors per partition themselves: no extra task per request


async def _handled(handler: Any, key: int, version: int, request: Any, ctx: RequestContext) -> Any:
    """The handler's answer; a store error it let out becomes Kafka's retriable refusal (storage_refusal.py),
    also for an answer the handler defers (a coroutine or future awaited by the writer)."""
    try:
        answer = await handler.handle(ctx, request)
    except storage.StorageError as exc:
        return storage_refusal.refusal(key, version, request, exc)
    if key not in _HOT and (asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future)):
        return _refused_later(key, version, request, answer)
    return answer


async def _refused_later(key: int, version: int, request: Any, answer: Awaitable[Any]) -> Any:
    try:
        return await answer
    except storage.StorageError as exc:
        return storage_refusal.refusal(key, version, request, exc)


if TYPE_CHECKING:
    from ..catalog.views import BrokerConfigSource
    from ..operations.streams import Caller
    from ..services import Broker, Context

    def _provided(cluster: Cluster, ctx: RequestContext) -> tuple[Broker, Context, Caller]:
        """Checked by mypy only: the composition root and this connection's context provide the handlers' views
        (and the operations' Caller, which StreamAdmin hands on)."""
        return cluster, ctx, ctx

    def _whole(broker: Broker) -> BrokerConfigSource:
        """Checked by mypy only: the whole broker view includes what the catalog's views ask for, which some
        handlers' views are made of (config_changes.ConfigChanges)."""
        return broker
