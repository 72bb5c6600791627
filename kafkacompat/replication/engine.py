"""The source side: one task per replica link, shipping a stream to another cluster.

A link task connects to the destination broker's Kafka port, learns where
each destination partition ends (the resume point, so a restart of either
side loses and repeats nothing), makes the destination's topics match,
then follows every partition of every topic of the stream: it reads whole
batches from the store and ships them unchanged with their offsets, each
with its replication path. A batch whose path already holds the
destination is skipped (the destination has it: that is how rings and
meshes end). Committed cursors follow once the data they point at is there.

States, as `stream replica list` shows them: `in-sync` (nothing behind),
`pending` (catching up, or the destination cannot be reached: retried),
`paused`, `broken` (a collision or a mismatch that needs a person; the
reason names the topic and partition; `resume` retries).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

import cramjam

from kafkacompat import storage
from kafkacompat.storage import Store
from kafkacompat.storage import batch_format as bf

from ..security.client import load_command_config
from ..security.scram import AuthenticationFailed
from .batches import split_batches
from .generations import generations, recreated
from .identity import ClusterIdentity, ensure_identity
from .link_client import LinkClient, LinkRefused
from .links import LINKS_TABLE, UPSTREAMS_TABLE, LinkSpec
from .paths import Path, PathIndex, PathTable

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..transactions import TransactionCoordinator

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 1 << 20  # batches read and shipped per request
PIPELINE_DEPTH = 4  # requests in flight per partition
ROUND_BYTES = 32 << 20  # shipped per partition before the link looks at topics, cursors and settings again
ROUND_S = 0.2  # or this long, however slowly the data comes
IDLE_WAIT_S = 0.5  # an idle link looks for new topics and cursors this often
CURSOR_SYNC_S = 0.2
RETRY_MAX_S = 5.0
REFUSED_RETRY_S = 30.0
STOP_RETRY_S = 0.5  # a link task not ended this long after its cancellation is cancelled again
SKIPPED_TOPICS = frozenset({"__consumer_offsets"})


class LinkBroken(Exception):
    """The link cannot go on without a person: it stops and says why."""


class LoginFailed(Exception):
    """The destination refused this broker's TLS handshake or SASL login (--replication-client-config)."""


def compress(codec: str, data: bytes) -> bytes:
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(data))
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    return data


def _unread(answer: asyncio.Future[Any]) -> None:
    """An answer left in a broken round's window: its failure is the link's, which the session
    reports once; read here, so asyncio does not log each as never retrieved."""
    if not answer.cancelled():
        answer.exception()


def _unusable(opened: asyncio.Future[LinkClient | None]) -> bool:
    """Whether a connection made (done) to a destination worker cannot carry requests: it failed to open
    (its error read here: the call that awaited it reported it), or it closed since."""
    if opened.cancelled() or opened.exception() is not None:
        return True
    client = opened.result()
    return client is None or client.closed


class LinkTask:
    """One replica link: its settings, its task and what it last saw."""

    def __init__(self, service: ReplicationService, spec: LinkSpec) -> None:
        self.service = service
        self.spec = spec
        self.state = "pending"
        self.reason = "starting"
        self.last_error: str | None = None
        self.dest_name: str | None = None
        self.dest_uuid: str | None = None
        self.positions: dict[tuple[str, int], int] = {}  # next offset to ship, per (topic, partition)
        self.dest_log_starts: dict[tuple[str, int], int] = {}  # the destination's log start, as last heard
        self.shipped_bytes = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sent_cursors: dict[tuple[str, str, int], tuple[int, str, int]] = {}
        # a destination of `serve --workers N`: the port of the worker that writes each partition, and a
        # connection to each such worker other than the one the link reached (its `direct` clients)
        self._routes: dict[tuple[str, int], int] = {}
        self._direct: dict[int, asyncio.Future[LinkClient | None]] = {}
        self._topic_signature: Any = None
        self._topic_ids: dict[str, uuid.UUID] = {}  # the topics the positions are of
        self._last_cursor_sync = 0.0
        self._logged_error: str | None = None
        self._throttle_start: float | None = None  # when the current throttled stretch began
        self._throttle_debt = 0.0  # seconds of sending the throttle allows for what was sent in it

    @property
    def store(self) -> Store:
        return self.service.store

    def _part(self, topic: str, index: int) -> storage.ReadablePartition:
        """A partition of the source stream to ship: this broker's, or, in worker 0 of `serve --workers
        N` (which runs the links), another worker's read through it."""
        cluster = self.service.cluster
        if cluster is None:
            return self.store.partition(self.spec.source, topic, index)
        return cluster.partition_to_read(self.spec.source, topic, index)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica {self.spec.source} -> {self.spec.replica}")

    async def stop(self) -> None:
        """Cancel the link's task until it ends. Once is not enough: on Python before 3.12, asyncio.wait_for
        swallows a cancellation that arrives as its awaitable completes (a destination's answer), and the
        link, busy catching up, then runs on, so a SIGTERM never stopped the broker."""
        if self._task is not None:
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=STOP_RETRY_S)
            self._task = None

    def poke(self) -> None:
        """Look at the settings again now (pause, resume, throttle, a new topic)."""
        self._wake.set()

    # running -----------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            if self.spec.paused:
                self.state, self.reason = "paused", "paused by an administrator"
                await self._sleep(None)
                continue
            try:
                await self._session()
                backoff = 0.2
            except LinkBroken as exc:
                self._fail("broken", str(exc), error=True)
                await self._sleep(None)  # until resume, edit or removal
            except LinkRefused as exc:  # the destination said no (not an upstream there, no permission)
                self._fail("broken", f"refused by {self.spec.host}:{self.spec.port}: {exc}", error=True)
                await self._sleep(REFUSED_RETRY_S)  # lifted there (upstream added) without a resume here
            except LoginFailed as exc:  # the client config does not fit that broker
                self._fail("broken", str(exc), error=True)
                await self._sleep(REFUSED_RETRY_S)  # put right there (user, certificate) without a resume here
            except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
                text = f"cannot reach {self.spec.host}:{self.spec.port}: {exc or type(exc).__name__}"
                self._fail("pending", text, error=True)
                await self._sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
            except storage.StorageError as exc:
                if self.store.get_stream(self.spec.source) is None:
                    log.info("replica %s -> %s: the stream was deleted, and its link with it",
                             self.spec.source, self.spec.replica)
                    self.service.links.pop((self.spec.source, self.spec.replica), None)
                    return
                self._fail("pending", f"source store: {exc}", error=True)
                await self._sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)

    def _fail(self, state: str, text: str, error: bool) -> None:
        self.state, self.reason = state, text
        self.last_error = text
        if error and text != self._logged_error:
            log.error("replica %s -> %s: %s", self.spec.source, self.spec.replica, text)
            self._logged_error = text

    async def _sleep(self, seconds: float | None) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _session(self) -> None:
        spec = self.spec
        try:
            client = await LinkClient.connect(spec.host, spec.port, source=self._source(),
                                              security=self.service.link_security)
        except AuthenticationFailed as exc:
            raise LoginFailed(f"login to {spec.host}:{spec.port} failed: {exc}") from None
        except ssl.SSLError as exc:  # only the handshake: TLS trouble later is a broken connection, retried sooner
            raise LoginFailed(f"TLS handshake with {spec.host}:{spec.port} failed: {exc}") from None
        self._routes = {}
        try:
            hello = await client.call({"op": "hello", "stream": spec.dest})
            if hello["uuid"] == self.service.identity.id:
                raise LinkBroken(f"replica {spec.replica} is this cluster itself")
            self.dest_name = hello["name"]
            self.dest_uuid = hello["uuid"]
            if not hello["stream_exists"]:
                raise LinkBroken(f"stream {spec.dest} does not exist on cluster {hello['name']} "
                                 f"({spec.host}:{spec.port})")
            self.positions = {}
            self.dest_log_starts = {}
            self._sent_cursors = {}
            self._topic_signature = None
            self.state, self.reason = "pending", "catching up"
            self._logged_error = None
            log.info("replica %s -> %s (cluster %s): connected", spec.source, spec.replica, hello["name"])
            while not spec.paused:
                ends = await self._sync_topics(client)
                if ends is not None:
                    await self._learn_resume_points(ends)
                # every partition at once: requests are pipelined on the one connection
                shipped = sum(await asyncio.gather(*(self._ship(client, t, i) for t, i in list(self.positions))))
                if spec.paused:
                    return
                await self._sync_cursors(client, force=not shipped)
                if self.lag_messages() == 0:
                    self.state, self.reason = "in-sync", ""
                else:
                    self.state, self.reason = "pending", "catching up"
                if not shipped and not await self._wait_for_data():
                    await client.call({"op": "ping"})  # an idle link notices a lost destination
        finally:
            await client.close()
            await self._close_direct()

    # a destination of several workers --------------------------------------------

    def _source(self) -> dict[str, str]:
        """Who sends, as every request of the link names it (the destination checks its upstreams)."""
        return {"uuid": self.service.identity.id, "name": self.service.identity.name, "stream": self.spec.source}

    def _learn_routes(self, answer: dict[str, Any]) -> None:
        """Which worker's port writes each partition, as the destination's answer to the topics named them
        (`ports`, and every worker's in `workers`); none for a destination of one process, or one that does
        not name them, and none when the link's address is not one of the destination's workers' ports:
        through a relay or a forwarded port (a tunnel, the fault campaign's link proxy) the others' ports
        need not be open at that host, and the link keeps to the one address it was given."""
        if self.spec.port not in (answer.get("workers") or ()):
            self._routes = {}
            return
        self._routes = {(name, index): port for name, dest in answer["topics"].items()
                        for index, port in enumerate(dest.get("ports") or ()) if isinstance(port, int)}

    async def _client_for(self, client: LinkClient, topic: str, index: int) -> LinkClient:
        """The connection a partition's batches go on: straight to the worker that writes it. Through
        the worker the link reached, each request was relayed on a connection of its own (into worker
        1 of `serve --workers 2`, 121-129 MB/s against 296 into the worker reached)."""
        port = self._routes.get((topic, index))
        if port is None or port == self.spec.port:
            return client
        direct = self._direct.get(port)
        if direct is None or (direct.done() and _unusable(direct)):
            direct = self._direct[port] = asyncio.ensure_future(self._open_direct(port))
        return await asyncio.shield(direct) or client

    async def _open_direct(self, port: int) -> LinkClient | None:
        """A connection to the worker at `port`; None, and that worker's partitions sent through the worker
        the link reached from now on, when it cannot be opened."""
        try:
            return await LinkClient.connect(self.spec.host, port, source=self._source(),
                                            security=self.service.link_security)
        except (OSError, asyncio.TimeoutError) as exc:
            log.warning("replica %s -> %s: cannot reach the destination's worker at %s:%d (%s); its partitions' "
                        "batches go through %s:%d", self.spec.source, self.spec.replica, self.spec.host, port,
                        exc or type(exc).__name__, self.spec.host, self.spec.port)
            self._routes = {key: served for key, served in self._routes.items() if served != port}
            return None

    async def _close_direct(self) -> None:
        direct, self._direct = self._direct, {}
        for opened in direct.values():
            if not opened.done():
                opened.cancel()
            elif not _unusable(opened):
                client = opened.result()
                assert client is not None
                await client.close()

    # topics -------------------------------------------------------------------

    def _source_topics(self) -> list[storage.TopicInfo]:
        return [t for t in self.store.list_topics(self.spec.source) if t.name not in SKIPPED_TOPICS]

    async def _sync_topics(self, client: LinkClient) -> dict[str, Any] | None:
        """Send the source's topics when they changed; the destination's partition ends, or None if unchanged.

        A topic whose generation changed since it was last shipped was
        deleted and created again here: the destination does the same if it
        holds the old generation, and the partition is followed afresh.
        """
        topics = self._source_topics()
        spec, me = self.spec, self.service.identity.id
        gens = generations(self.store, me, spec.source, topics)
        # the generations too: an origin noted after the topic was shipped is shipped again
        signature = tuple(sorted((t.name, t.topic_id, t.partitions, tuple(sorted(t.configs.items())),
                                  tuple(gens[t.name])) for t in topics))
        if signature == self._topic_signature:
            return None
        known = spec.topic_gens
        replaces = {t.name: known[t.name] for t in topics if recreated(known.get(t.name), gens[t.name], me, t)}
        deleted = {name: known.get(name) for name in sorted((set(spec.known_topics) | set(known)) - set(gens))}
        try:
            answer = await client.call({
                "op": "topics", "stream": spec.dest, "deleted": deleted, "replaces": replaces,
                "topics": {t.name: {"partitions": t.partitions, "configs": t.configs, "gen": gens[t.name]}
                           for t in topics},
            })
        except LinkRefused as exc:
            raise LinkBroken(str(exc)) from None
        self._topic_signature = signature
        self._topic_ids = {t.name: t.topic_id for t in topics}
        for name in replaces:
            log.warning("replica %s -> %s: topic %s was deleted and created again here; the replica follows",
                        spec.source, spec.replica, name)
        if gens != known or sorted(gens) != spec.known_topics:
            spec.topic_gens, spec.known_topics = gens, sorted(gens)
            await self.service.save_link(spec)
        for key in [k for k in self.positions if k[0] not in gens or k[0] in replaces]:
            del self.positions[key]
            self.dest_log_starts.pop(key, None)
        self._learn_routes(answer)
        return answer["topics"]

    async def _learn_resume_points(self, ends: dict[str, Any]) -> None:
        """Where each partition new to this session starts: the destination's end, checked against ours.

        The last batch both sides should hold is shipped again: the
        destination compares its bytes, so a destination holding other data
        (not a copy of this stream) breaks the link instead of being extended.
        """
        for info in self._source_topics():
            dest = ends.get(info.name)
            if dest is None:
                continue
            for index in range(info.partitions):
                if (info.name, index) in self.positions or index >= len(dest["hw"]):
                    continue
                part = self._part(info.name, index)
                await part.refresh()  # another worker's: as it is now
                common = min(dest["hw"][index], part.high_watermark)
                start = common
                if common > max(part.log_start_offset, dest["log_start"][index]):
                    held = split_batches(await part.read(common - 1, 1))
                    if held:
                        start = held[0][0]
                self.positions[info.name, index] = start
                self.dest_log_starts[info.name, index] = dest["log_start"][index]

    # data ---------------------------------------------------------------------

    async def _read_groups(self, part: storage.ReadablePartition, topic: str, index: int,
                           pos: int) -> list[tuple[Path, int, int, list[memoryview]]]:
        """The batches from `pos` (up to MAX_REQUEST_BYTES) as runs sharing a path: (path, first, end, batches).

        A run with no batches is a stretch to skip: the destination is on its
        path, so it holds it already.
        """
        try:
            data = await part.read(pos, MAX_REQUEST_BYTES)
        except storage.OffsetOutOfRangeError:
            return []  # retention passed `pos` just now: the next round skips the gap
        me, dest = self.service.identity.id, self.dest_uuid
        paths = self.service.paths
        runs: list[tuple[Path, int, int, list[memoryview]]] = []
        for base, batch in split_batches(data):
            end = base + bf.parse_header(batch).last_offset_delta + 1
            if end <= pos:
                continue
            path = paths.path_at(self.spec.source, topic, index, base) + (me,)
            if dest in path:
                path, batch = (), None
            if runs and runs[-1][0] == path and bool(runs[-1][3]) == (batch is not None):
                runs[-1] = (path, runs[-1][1], end, runs[-1][3] + ([batch] if batch is not None else []))
            else:
                runs.append((path, base, end, [batch] if batch is not None else []))
        return runs

    async def _ship(self, client: LinkClient, topic: str, index: int) -> int:
        """Ship what one partition has past its position; bytes sent (1 when only the position moved).

        A sliding window: up to PIPELINE_DEPTH requests in flight, the next one read and sent as soon as
        the oldest is answered, until the partition is caught up or ROUND_BYTES or ROUND_S went (the
        session then looks at topics, cursors and pause again). Draining the window before refilling
        it would leave the connection idle for a round trip every PIPELINE_DEPTH requests.
        """
        info = self.store.get_topic(self.spec.source, topic)
        if info is None or info.topic_id != self._topic_ids.get(topic):
            return 0  # deleted, or created again since the last topic sync, which sees to it
        try:
            part = self._part(topic, index)
        except storage.UnknownTopicError:
            return 0
        client = await self._client_for(client, topic, index)
        pos = self.positions[topic, index]
        if pos < part.log_start_offset:
            return await self._skip_gap(client, topic, index, part, pos)
        window: collections.deque[tuple[asyncio.Future[Any] | None, int, int]] = collections.deque()
        sent = moved = 0
        budget = ROUND_BYTES
        deadline = time.monotonic() + ROUND_S
        try:
            while True:
                while (len(window) < PIPELINE_DEPTH and budget > 0 and pos < part.high_watermark
                       and time.monotonic() < deadline):
                    runs = await self._read_groups(part, topic, index, pos)
                    if not runs:
                        break
                    stored_from = pos  # where the stored batches read go on from: no record lies in between
                    for path, first, end, batches in runs:
                        if not batches:
                            window.append((None, end, 0))
                            stored_from = end
                            continue
                        body = {"op": "append", "stream": self.spec.dest, "topic": topic, "partition": index,
                                "base": first, "path": list(path), "codec": self.spec.compression,
                                "from": stored_from}
                        stored_from = end
                        raw = b"".join(batches)
                        payload = compress(self.spec.compression, raw)
                        window.append((asyncio.ensure_future(client.call(body, payload)), end, len(raw)))
                        budget -= len(raw)
                        await self._throttle(len(raw))  # the stream's bytes, before link compression
                    pos = runs[-1][2]
                if not window:
                    break
                took = await self._settle(topic, index, *window.popleft())
                if took is None:
                    break  # a gap: the next round resends from where the destination ends
                sent += took
                moved = 1
        except storage.UnknownTopicError:
            pass
        finally:
            for answer, _, _ in window:  # answers nobody reads now: the round ended on an earlier one's failure
                if answer is not None:
                    answer.cancel()
                    answer.add_done_callback(_unread)
        return await self._send_log_start(client, topic, index, part) or sent or moved

    async def _settle(self, topic: str, index: int, answer: asyncio.Future[Any] | None, end: int, size: int
                      ) -> int | None:
        """Take one answer, moving the partition's position; bytes the destination took, None for a gap."""
        if answer is None:  # a stretch the destination holds already
            self.positions[topic, index] = end
            return 0
        try:
            result = await answer
        except LinkRefused as exc:
            raise LinkBroken(f"topic {topic} partition {index}: {exc}") from None
        if result["status"] == "collision":
            raise LinkBroken(
                f"collision in topic {topic} partition {index} at offset {result['offset']}: the "
                f"destination holds a different message there (both clusters took writes for this "
                f"partition; topic names must be unique per master)")
        self.positions[topic, index] = result["hw"]
        if result["status"] == "gap":
            return None
        self.shipped_bytes += size
        return size

    async def _skip_gap(self, client: LinkClient, topic: str, index: int, part: storage.ReadablePartition,
                        pos: int) -> int:
        """The source's log start passed what the destination holds (retention, DeleteRecords while paused or
        down): the destination restarts at our log start, as a Kafka follower does, keeping offsets identical."""
        start = part.log_start_offset
        open_txns: list[list[int]] = []
        cluster = self.service.cluster
        if cluster is not None:
            state = await cluster.transactions.partitions.get(self.spec.source, topic, index)
            open_txns = [[pid, first] for pid, first in state.ongoing.items()]
        try:
            answer = await client.call({"op": "start_at", "stream": self.spec.dest, "topic": topic,
                                        "partition": index, "from": pos, "offset": start, "open": open_txns})
        except LinkRefused as exc:
            raise LinkBroken(f"topic {topic} partition {index}: {exc}") from None
        if answer["status"] == "ok":
            self.dest_log_starts[topic, index] = start
            log.warning("replica %s -> %s: topic %s partition %d: offsets %d..%d were deleted here before they "
                        "were shipped; the replica now starts at %d", self.spec.source, self.spec.replica,
                        topic, index, pos, start - 1, start)
        self.positions[topic, index] = answer["hw"]
        return 1

    async def _send_log_start(self, client: LinkClient, topic: str, index: int, part: storage.ReadablePartition) -> int:
        """Move the destination's log start to ours (DeleteRecords, retention), as a Kafka follower follows
        its leader's: the offsets stay identical, and a consumer of the replica finds the records a consumer
        of the source finds. 1 when it was moved.

        Only up to what the destination holds (the batches bring the rest), and never towards a cluster on
        the path of the records deleted: data written there, or that passed through there, keeps the log
        start that cluster gives it (a replica deleting records does not delete them at their origin).
        """
        start = part.log_start_offset
        key = (topic, index)
        if start <= self.dest_log_starts.get(key, 0) or self.positions.get(key, 0) < start:
            return 0  # nothing new, or the destination lacks offsets below it (_skip_gap's work)
        if self.dest_uuid in self.service.paths.path_at(self.spec.source, topic, index, start - 1):
            self.dest_log_starts[key] = start
            return 0
        try:
            answer = await client.call({"op": "log_start", "stream": self.spec.dest, "topic": topic,
                                        "partition": index, "offset": start})
        except LinkRefused as exc:
            raise LinkBroken(f"topic {topic} partition {index}: {exc}") from None
        self.dest_log_starts[key] = answer["log_start"]
        return 1

    async def _throttle(self, size: int) -> None:
        rate = self.spec.throttle_mb_s
        if rate <= 0:
            return
        self._throttle_debt += size / (rate * 1_000_000)
        now = time.monotonic()
        started = self._throttle_start
        if started is None or now - started > self._throttle_debt + 1.0:
            self._throttle_start, self._throttle_debt = now, size / (rate * 1_000_000)
            started = now
        ahead = started + self._throttle_debt - now
        if ahead > 0:
            await asyncio.sleep(ahead)

    async def _wait_for_data(self) -> bool:
        """Wait for an append to a followed partition, a poke, or IDLE_WAIT_S; whether something came."""
        waiters = []
        for (topic, index), pos in self.positions.items():
            try:
                waiters.append(self._part(topic, index).wait_for_data(pos))
            except storage.StorageError:
                continue
        self._wake.clear()
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            done, _ = await asyncio.wait([*waiters, woken], timeout=IDLE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
            return bool(done)
        finally:
            woken.cancel()
            for waiter in waiters:
                waiter.cancel()  # done futures are pruned from the partition's waiters

    # cursors ------------------------------------------------------------------

    async def _sync_cursors(self, client: LinkClient, force: bool) -> None:
        """Ship committed offsets that changed, once the data they point at has been shipped."""
        now = time.monotonic()
        if not force and now - self._last_cursor_sync < CURSOR_SYNC_S:
            return
        self._last_cursor_sync = now
        store, source = self.store, self.spec.source
        groups: dict[str, list[list[Any]]] = {}
        sending = {}
        for group in store.list_cursor_groups(source):
            for c in store.get_cursors(source, group):
                key = (group, c.topic, c.partition)
                value = (c.offset, c.metadata, c.commit_time_ms)
                if self._sent_cursors.get(key) == value:
                    continue
                if self.positions.get((c.topic, c.partition), -1) < c.offset:
                    continue  # its messages are not there yet
                groups.setdefault(group, []).append(
                    [c.topic, c.partition, c.offset, c.leader_epoch, c.metadata, c.commit_time_ms])
                sending[key] = value
        if groups:
            await client.call({"op": "cursors", "stream": self.spec.dest, "groups": groups})
            self._sent_cursors.update(sending)

    # status -------------------------------------------------------------------

    def lag_messages(self) -> int:
        total = 0
        for info in self._source_topics():
            for index in range(info.partitions):
                part = self._part(info.name, index)
                pos = self.positions.get((info.name, index), part.log_start_offset)
                total += max(part.high_watermark - pos, 0)
        return total

    async def status(self) -> dict[str, Any]:
        """What `stream replica list` shows for this link."""
        lag = bytes_behind = 0
        oldest: int | None = None
        for info in self._source_topics():
            for index in range(info.partitions):
                part = self._part(info.name, index)
                pos = max(self.positions.get((info.name, index), part.log_start_offset), part.log_start_offset)
                behind = part.high_watermark - pos
                if behind <= 0:
                    continue
                lag += behind
                lets = await part.partitionlets()
                held = sum(p.next_offset - p.base_offset for p in lets) or 1
                bytes_behind += sum(p.size_bytes for p in lets) * behind // held
                first = split_batches(await part.read(pos, 1))
                if first:
                    ts = bf.parse_header(first[0][1]).base_timestamp
                    oldest = ts if oldest is None else min(oldest, ts)
        state = self.state
        if self.spec.paused:
            state = "paused"
        elif state == "in-sync" and lag:
            state = "pending"
        return {
            "replica": self.spec.replica, "stream": self.spec.source, "state": state,
            "reason": "paused by an administrator" if self.spec.paused else self.reason,
            "cluster": self.dest_name, "lag_messages": lag, "lag_bytes": bytes_behind,
            "oldest_unreplicated_ms": oldest, "last_error": self.last_error,
            "paused": self.spec.paused, "throttle_mb_s": self.spec.throttle_mb_s,
            "compression": self.spec.compression, "shipped_bytes": self.shipped_bytes,
            "ports": sorted({self.spec.port, *self._routes.values()}),
            "created_ms": self.spec.created_ms,
        }


class ReplicatedBroker(Protocol):
    """What replication keeps in step with replicated data in the broker it runs in
    (kafkacompat.broker.cluster.Cluster): the transactions' state and the topics it knows; and where
    links read the source's partitions, and whether they run here (worker 0 of `serve --workers N`)."""

    @property
    def transactions(self) -> "TransactionCoordinator": ...

    def forget_topic(self, info: storage.TopicInfo) -> None: ...

    def partition_to_read(self, stream: str, name: str, index: int) -> storage.ReadablePartition: ...

    async def readable_partition(self, stream: str, name: str, index: int) -> storage.ReadablePartition: ...

    def serving_port(self, stream: str, name: str, index: int) -> int | None: ...

    def worker_ports(self) -> list[int]: ...

    @property
    def runs_links(self) -> bool: ...

    @property
    def path_table(self) -> PathTable | None: ...


class ReplicationService:
    """Every replica link of this broker's streams, the path index and the cluster identity."""

    def __init__(self, store: Store, config: BrokerConfig, cluster: ReplicatedBroker | None = None) -> None:
        self.store = store
        self.config = config
        self.cluster = cluster  # its transaction and producer state, kept in step with replicated data
        self.identity = ClusterIdentity("", store.store_id)
        self.paths = PathIndex(store, cluster.path_table if cluster is not None else None)
        self.links: dict[tuple[str, str], LinkTask] = {}  # (source stream, replica) -> task
        self._locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        # how links connect and log in to their destinations (--replication-client-config); secrets stay there
        self.link_security = (load_command_config(config.replication_client_config, "replication_client_config")
                              if config.replication_client_config else None)

    def partition_lock(self, stream: str, topic: str, index: int) -> asyncio.Lock:
        """Serializes replicated appends to one partition (several upstreams may ship the same batch)."""
        return self._locks.setdefault((stream, topic, index), asyncio.Lock())

    async def start(self) -> None:
        self.identity = await ensure_identity(self.store, self.config.cluster_name, self.config.data_dir)
        if self.cluster is not None and not self.cluster.runs_links:
            return
        for stream in self.store.list_streams():
            for replica, record in self.store.get_state(stream.path, LINKS_TABLE).items():
                task = LinkTask(self, LinkSpec.from_record(stream.path, record))
                self.links[stream.path, replica] = task
                task.start()
        log.info("cluster %s (UUID %s), %d replica link(s)", self.identity.name, self.identity.id, len(self.links))

    async def close(self) -> None:
        await asyncio.gather(*(task.stop() for task in self.links.values()))

    @staticmethod
    def decompress(codec: str, payload: memoryview) -> bytes | memoryview:
        if codec == "lz4":
            return bytes(cramjam.lz4.decompress(bytes(payload)))
        if codec == "zstd":
            return bytes(cramjam.zstd.decompress(bytes(payload)))
        if codec != "none":
            raise ValueError(f"unknown link compression {codec!r}")
        return payload

    # links --------------------------------------------------------------------

    async def save_link(self, spec: LinkSpec) -> None:
        await self.store.put_state(spec.source, LINKS_TABLE, {spec.replica: spec.record()})

    async def add_link(self, spec: LinkSpec) -> LinkTask:
        await self.save_link(spec)
        task = LinkTask(self, spec)
        self.links[spec.source, spec.replica] = task
        task.start()
        return task

    async def remove_link(self, task: LinkTask) -> None:
        await task.stop()
        del self.links[task.spec.source, task.spec.replica]
        await self.store.put_state(task.spec.source, LINKS_TABLE, {task.spec.replica: None})

    def links_of(self, stream: str) -> list[LinkTask]:
        return [task for (source, _), task in sorted(self.links.items()) if source == stream]

    async def set_upstream(self, stream: str, upstream: str, record: dict[str, Any] | None) -> None:
        await self.store.put_state(stream, UPSTREAMS_TABLE, {upstream: record})

    def upstreams(self, stream: str) -> dict[str, dict[str, Any]]:
        return self.store.get_state(stream, UPSTREAMS_TABLE)
