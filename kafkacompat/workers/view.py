"""The cluster as a worker of `serve --workers N` presents it: N brokers, each partition led by its owner.

Ownership is a pure function (storage/disk/shared.py `owner_of`), so every
worker names the same leader without talking to the others; the workers
are always all members (the supervisor restarts one that dies, and until
it is back its clients reconnect and retry, as to a restarting Kafka
broker). A partition's leader epoch is its owner's: this worker's store
knows its own, and the others' come from the supervisor's workers.json,
rewritten with the new epoch before a worker is restarted.

A worker other than 0 reads the topic catalog that worker 0 writes; the
view's background task takes in its changes every REFRESH_S, and Metadata
takes them in before it answers (`catch_up`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import zlib
from collections.abc import Sequence
from typing import Any

import kio.schema.find_coordinator.v2.request as find_v2
from kio.static.primitive import i8

from kafkacompat import storage
from kafkacompat.protocol.admin_api import (
    STREAM_ADMIN_KEY,
    WORKER_STATE_KEY,
    AdminMessageError,
    AdminReply,
    decode_response_with_payload,
    encode_request,
)
from kafkacompat.protocol.messages import make

from ..cluster.membership import ClusterView, Member, PartitionKey
from ..storage.disk.files import read_if_there
from ..storage.disk.shared import owner_of
from .forward import CLIENT_ID, ForwardError, create_at_controller, forward
from .peer_partition import PeerPartition, figures_of
from .role import WorkerRole

log = logging.getLogger(__name__)
REFRESH_S = 0.2  # how often a worker looks for catalog changes and restarted workers' epochs
FIND_COORDINATOR = 10
EPOCHS_FILE = "workers.json"  # in the data dir, written by the supervisor
EPOCHS_COPY = "workers.copy.json"  # the same record again, written after it: one of the two is always whole
ASK_TIMEOUT_S = 10.0  # a WorkerState request to another worker
ADMIN_TIMEOUT_S = 50.0  # an admin CLI request run by worker 0 (a stream's purge may take a while): under the CLI's 60 s
FIGURES_PER_ASK = 10_000  # partitions whose figures one WorkerState request asks for
PEERS_KEPT = 10_000  # other workers' partitions kept for reading (one forgotten is made again, figures asked afresh)


def epochs_record(epochs: list[int]) -> bytes:
    """workers.json's content: the epochs and a checksum of them, so a torn or garbled record is told
    from a whole one (a full disk makes the supervisor rewrite the file in place)."""
    return json.dumps({"epochs": epochs, "crc": zlib.crc32(json.dumps(epochs).encode())}).encode()


def read_record(path: str) -> tuple[list[int] | None, str | None]:
    """(epochs, None) from a whole record, (None, None) when there is none, (None, what is wrong) else."""
    data, problem = read_if_there(path)
    if data is None:
        return None, problem
    try:
        record = json.loads(data)
        epochs = record["epochs"]
        if not isinstance(epochs, list) or not all(isinstance(e, int) and e >= 0 for e in epochs):
            raise ValueError("epochs are not counts")
        if "crc" in record and record["crc"] != zlib.crc32(json.dumps(epochs).encode()):  # none: an earlier release's
            raise ValueError("checksum mismatch")
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"is garbled or torn ({exc})"
    return epochs, None


def read_epochs(data_dir: str) -> list[int]:
    """Each worker's leader epoch as the supervisor last wrote it; [] when there is no whole record.
    Both records are read: one torn, garbled or left unwritten on a full disk is older than the other
    or unreadable, and epochs only rise, so each worker's is the higher of the two."""
    whole = [epochs for name in (EPOCHS_FILE, EPOCHS_COPY)
             if (epochs := read_record(os.path.join(data_dir, name))[0])]
    if len(whole) == 2 and len(whole[0]) == len(whole[1]):
        return [max(pair) for pair in zip(*whole)]
    return whole[0] if whole else []  # of another worker count: workers.json is the one written first


class WorkerView(ClusterView):
    def __init__(self, me: Member, role: WorkerRole, store, data_dir: str) -> None:
        super().__init__(me)
        self.role = role
        self.store = store  # a DiskStore opened with this worker's share
        self.data_dir = data_dir
        first = me.node_id - role.index
        self._members = [Member(first + i, me.host, port) for i, port in enumerate(role.ports)]
        self._epochs = [role.epoch] * role.count
        self._task: asyncio.Task | None = None
        self.controller_host = "127.0.0.1"  # where worker 0 is reached: its bind host unless that is a wildcard
        # other workers' partitions this one read lately, least recently used first
        self._peers: collections.OrderedDict[PartitionKey, PeerPartition] = collections.OrderedDict()

    async def start(self) -> None:
        self._read_epochs()
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.peers.close()

    def live(self) -> list[Member]:
        return list(self._members)

    def owner(self, key: PartitionKey) -> int:
        return owner_of(self.role.count, *key)

    def serving_port(self, key: PartitionKey) -> int | None:
        return self.role.ports[self.owner(key)]

    def worker_ports(self) -> list[int]:
        return list(self.role.ports)

    def leader_of(self, key: PartitionKey) -> tuple[int, int] | None:
        index = self.owner(key)
        # -1 for this worker's own partitions: the caller takes the store's epoch (raised above the
        # given one if a partition's files held a higher one)
        return self._members[index].node_id, -1 if index == self.role.index else self._epochs[index]

    def leads(self, key: PartitionKey) -> bool:
        return self.owner(key) == self.role.index

    async def catch_up(self, streams: Sequence[str] = ()) -> None:
        """Worker 0 answered CreateTopics (or created the stream) once the catalog held it: a Metadata
        request that came after that answer sees it here too, not UNKNOWN_TOPIC_OR_PARTITION until
        the next refresh (or, for a stream, a restart)."""
        if streams:
            await self.store.refresh_streams(streams)
        await self.store.refresh_catalog()

    async def catch_up_settings(self) -> None:
        """The settings worker 0 changed, read now rather than at the next refresh: a
        share group whose share.auto.offset.reset was set through worker 0 a moment before its first
        fetch here started at the end of the log (1 in 3 runs of the acks scenario on worker 1)."""
        await self.store.refresh_settings()

    async def create_at_controller(self, name: str, partitions: int) -> None:
        """Have worker 0 create topic `name` (auto-creation a client asked of this worker), then take it
        in; ForwardError when worker 0 cannot be reached or refuses."""
        await create_at_controller(self.controller_host, self.role.ports[0], name, partitions, self.peers)
        await self.catch_up()

    async def offsets_topic_by_controller(self) -> None:
        """Have worker 0 create __consumer_offsets (it does when asked for a group's coordinator, as Kafka
        does), then take it in: a group whose first FindCoordinator reached this worker was refused
        COORDINATOR_NOT_AVAILABLE (this worker may not write the catalog) until the topic existed.
        ForwardError when worker 0 cannot be reached."""
        request = make(find_v2.FindCoordinatorRequest, key="kafkacompat-worker", key_type=i8(0))
        await forward(self.controller_host, self.role.ports[0], FIND_COORDINATOR, 2, request, self.peers)
        await self.catch_up()

    async def forward_to_controller(self, api_key: int, version: int, request: Any) -> Any | None:
        if self.role.index == 0:
            return None
        try:
            answer = await forward(self.controller_host, self.role.ports[0], api_key, version, request, self.peers)
        except ForwardError as exc:
            log.warning("worker %d: cannot forward a request (API %d) to worker 0: %s", self.role.index, api_key, exc)
            return None
        await self.catch_up()
        await self.catch_up_settings()  # ACLs, SCRAM users, quotas and configs in force from the next request
        return answer

    async def admin_at_controller(self, body: dict[str, Any]) -> AdminReply | None:
        if self.role.index == 0:
            return None
        reply, _ = await self._reply(0, body, STREAM_ADMIN_KEY, "stream admin request", ADMIN_TIMEOUT_S)
        path = body.get("path")
        await self.catch_up([path] if isinstance(path, str) else [])  # a stream made there is known here
        await self.catch_up_settings()
        return reply

    async def ask(self, body: dict[str, Any], what: str, index: int = 0) -> Any:
        """Worker `index`'s answer to a WorkerState request (`what` names the state for the errors);
        StorageError when that worker cannot be reached or refuses."""
        return (await self.ask_with_payload(body, what, index))[0]

    async def ask_with_payload(self, body: dict[str, Any], what: str, index: int = 0) -> tuple[Any, memoryview]:
        """`ask`, with the raw bytes the answer carries after its JSON (records), if any."""
        reply, payload = await self._reply(index, body, WORKER_STATE_KEY, what)
        if reply.error_code != 0:
            raise storage.StorageError(f"worker {index} refused the {what}: {reply.error}")
        return reply.result, payload

    async def _reply(self, index: int, body: dict[str, Any], key: int, what: str, timeout: float = ASK_TIMEOUT_S
                     ) -> tuple[AdminReply, memoryview]:
        """Worker `index`'s reply to a JSON request of API `key` (WorkerState, StreamAdmin), with the raw bytes
        after its JSON; StorageError naming `what` when that worker cannot be reached or answers garble."""
        answer = await self._exchange(index, encode_request(1, body, CLIENT_ID.decode(), key=key), f" for the {what}",
                                      timeout)
        try:
            _, reply, payload = decode_response_with_payload(answer)
        except AdminMessageError as exc:
            raise storage.StorageError(f"worker {self.role.index}: cannot reach worker {index} for the {what}: "
                                       f"{exc}") from None
        return reply, payload

    def peer_partition(self, key: PartitionKey) -> PeerPartition | None:
        owner = self.owner(key)
        if owner == self.role.index:
            return None
        found = self._peers.get(key)
        if found is None:
            found = self._peers[key] = PeerPartition(self.ask_with_payload, owner, key)
            if len(self._peers) > PEERS_KEPT:  # a console browsing a million topics keeps the last ones only
                self._peers.popitem(last=False)
        else:
            self._peers.move_to_end(key)
        return found

    async def peer_figures(self, keys: Sequence[PartitionKey], partitionlets: bool
                           ) -> dict[PartitionKey, storage.PartitionFigures | storage.StorageError]:
        by_owner: dict[int, list[PartitionKey]] = {}
        for key in keys:
            by_owner.setdefault(self.owner(key), []).append(key)
        found: dict[PartitionKey, storage.PartitionFigures | storage.StorageError] = {}
        for owner, owned in sorted(by_owner.items()):
            for start in range(0, len(owned), FIGURES_PER_ASK):
                found.update(await self._figures_at(owner, owned[start:start + FIGURES_PER_ASK], partitionlets))
        return found

    async def _figures_at(self, owner: int, keys: list[PartitionKey], partitionlets: bool
                          ) -> dict[PartitionKey, storage.PartitionFigures | storage.StorageError]:
        try:
            answers = await self.ask({"op": "partitions.figures", "partitions": [list(key) for key in keys],
                                      "partitionlets": partitionlets}, "partitions' figures", owner)
            if not isinstance(answers, list) or len(answers) != len(keys):
                raise storage.StorageError(f"worker {owner} answered the partitions' figures with something else")
        except storage.StorageError as exc:
            return dict.fromkeys(keys, exc)
        return {key: figures_of(answer) for key, answer in zip(keys, answers)}

    async def relay(self, frame: bytes, key: PartitionKey | None) -> bytes | None:
        index = 0 if key is None else self.owner(key)
        if index == self.role.index:
            return None
        return (await self._exchange(index, frame, ""))[4:]  # past the correlation id: the body

    async def _exchange(self, index: int, frame: bytes, what: str, timeout: float = ASK_TIMEOUT_S) -> bytes:
        """Worker `index`'s answer frame (without its size prefix) to a whole request frame; StorageError
        naming `what` when that worker cannot be reached, or does not answer, in `timeout` seconds."""
        try:
            return await asyncio.wait_for(
                self.peers.exchange(self.controller_host, self.role.ports[index], frame, timeout), timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            raise storage.StorageError(f"worker {self.role.index}: cannot reach worker {index}{what}: "
                                       f"{exc or type(exc).__name__}") from None

    async def ask_peers(self, body: dict[str, Any], what: str) -> dict[int, Any]:
        found = {}
        for index, member in enumerate(self._members):
            if index == self.role.index:
                continue
            try:
                found[member.node_id] = await self.ask(body, what, index)
            except storage.StorageError as exc:
                log.warning("worker %d: the %s leave out worker %d's: %s", self.role.index, what, index, exc)
        return found

    def _read_epochs(self) -> None:
        epochs = read_epochs(self.data_dir)
        if len(epochs) == self.role.count:
            self._epochs = epochs

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                self._read_epochs()
                await self.store.refresh_catalog()
                await self.store.refresh_settings()
            except Exception:
                log.exception("worker %d: cannot read the catalog's changes; trying again", self.role.index)
