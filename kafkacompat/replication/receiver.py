"""The destination side of a replica link: what a StreamReplicate request does here.

Every operation but ping names its source (cluster UUID and stream); a
stream that lists upstreams refuses any other (check_upstream).

Operations (the source's link task sends them in this order):
- hello: who is this cluster, does the destination stream exist, and
  where every partition of it ends (the resume point of the link);
- topics: make the destination's topics match the source's (create,
  add partitions, configs, delete the ones the source deleted, create
  again the ones it deleted and created again);
- append: store batches at the offsets they have at the source. A batch
  below the high watermark must be the very batch stored there (same bytes
  but for the partitionLeaderEpoch field): then it is skipped, otherwise it
  is a collision. A batch beyond the high watermark is a gap: the answer
  says where the partition ends so the source resends from there, unless
  the source vouches that it holds nothing there (`from`: its log
  cleaner removed those batches), when an empty batch fills the stretch;
- start_at: the source no longer holds what this partition lacks (its
  log start passed our end): drop what we hold and go on at its log start;
- log_start: the source's log start moved (DeleteRecords, retention): so
  does this partition's, up to what it holds;
- cursors: consumer groups' committed offsets, newest commit wins;
- ping: an idle link's heartbeat.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType, marker_type
from kafkacompat.protocol.records import InvalidBatchError, empty_batch, iter_records
from kafkacompat.storage import Cursor
from kafkacompat.storage import batch_format as bf

from .batches import split_batches
from .generations import forget_origin, generation, note_origin
from .paths import Path

if TYPE_CHECKING:
    from ..catalog.producer_state import ProducerStates
    from ..transactions.partition_state import PartitionTxnRegistry, PartitionTxns
    from .engine import ReplicationService

log = logging.getLogger(__name__)


class ReplicaRequestError(Exception):
    """A replication request this cluster refuses; the link reports the message."""


def same_batch(stored: bytes | memoryview, shipped: bytes | memoryview) -> bool:
    """Whether two copies of a batch are the same batch.

    Equal bytes but for partitionLeaderEpoch (bytes 12-16), or, in a
    compacted topic where either side's log cleaner may have rewritten it,
    the same batch cleaned differently: the same header identity (offsets,
    producer id, epoch and sequence, attributes) and every record both
    copies still hold equal (key, value, headers, timestamp).
    """
    if len(stored) == len(shipped) and stored[:12] == shipped[:12] and stored[16:] == shipped[16:]:
        return True
    return _same_cleaned_batch(stored, shipped)


def _same_cleaned_batch(stored: bytes | memoryview, shipped: bytes | memoryview) -> bool:
    a, b = bf.parse_header(stored), bf.parse_header(shipped)
    identity = ("base_offset", "magic", "attributes", "last_offset_delta", "producer_id", "producer_epoch",
                "base_sequence")
    if any(getattr(a, name) != getattr(b, name) for name in identity) or a.attributes & bf.ATTR_CONTROL:
        return False
    try:
        mine = {r.offset: r for r in iter_records(stored)}
        theirs = {r.offset: r for r in iter_records(shipped)}
    except InvalidBatchError:
        return False
    return all(mine[offset] == theirs[offset] for offset in mine.keys() & theirs.keys())


async def _partition_ends(service: ReplicationService, stream: str) -> dict[str, dict[str, Any]]:
    """Where each partition of the stream ends: this broker's, and (worker 0 of `serve --workers N`)
    the other workers' partitions as their owners answer, with the port of the worker that writes each
    (`ports`), so that the link sends each partition's batches there and not through this worker."""
    store, cluster = service.store, service.cluster
    topics = {}
    for info in store.list_topics(stream):
        parts = [await cluster.readable_partition(stream, info.name, i) if cluster is not None
                 else store.partition(stream, info.name, i) for i in range(info.partitions)]
        topics[info.name] = {"partitions": info.partitions, "hw": [p.high_watermark for p in parts],
                             "log_start": [p.log_start_offset for p in parts]}
        ports = [cluster.serving_port(stream, info.name, i) for i in range(info.partitions)] if cluster else []
        if any(port is not None for port in ports):
            topics[info.name]["ports"] = ports
    return topics


def check_upstream(service: ReplicationService, stream: str, source: Any) -> None:
    """Refuse a source the destination stream does not list among its upstreams (when it lists any).

    As MapR's `stream upstream`: a stream accepts replicated data from the
    streams registered as its upstreams, and removing one stops it. A
    stream that lists none accepts any source (`stream replica add` to a
    new stream works without a step on the destination).
    """
    if service.store.get_stream(stream) is None:
        return
    upstreams = service.upstreams(stream)
    if not upstreams:
        return
    if isinstance(source, dict):
        for name, record in upstreams.items():
            path = record.get("stream") or name[name.index("/"):]
            if path == source.get("stream") and record.get("cluster", source.get("uuid")) == source.get("uuid"):
                return
        who = f"{source.get('stream')} of cluster {source.get('name')} ({source.get('uuid')})"
    else:
        who = "a source that does not name itself"
    raise ReplicaRequestError(
        f"stream {stream} on cluster {service.identity.name} takes replication only from its upstreams "
        f"({', '.join(sorted(upstreams))}), not from {who}: register it there with `kafkacompat stream upstream "
        f"add --path {stream} --upstream HOST:PORT/PATH`")


async def hello(service: ReplicationService, request: dict[str, Any]) -> dict[str, Any]:
    stream = request["stream"]
    store = service.store
    exists = store.get_stream(stream) is not None
    return {"uuid": service.identity.id, "name": service.identity.name, "stream_exists": exists,
            "topics": await _partition_ends(service, stream) if exists else {}}


async def ping(service: ReplicationService, request: dict[str, Any]) -> dict[str, Any]:
    """An idle link's heartbeat: a lost destination shows in `replica list` within a second."""
    return {"uuid": service.identity.id}


async def _delete_topic(service: ReplicationService, stream: str, info: storage.TopicInfo) -> None:
    """Delete a topic as the source did, with everything kept beside it."""
    await service.store.delete_topic(stream, info.name)
    await service.paths.forget(stream, info.name, info.partitions)
    await forget_origin(service.store, stream, info)
    if service.cluster is not None:
        service.cluster.forget_topic(info)


async def sync_topics(service: ReplicationService, request: dict[str, Any]) -> dict[str, Any]:
    """Create, grow, reconfigure, recreate and delete topics to match the source; answers where partitions end.

    Generations (generations.py) decide what a deletion or a recreation at
    the source means here: only a topic of the generation the source
    deleted or replaced goes.
    """
    store = service.store
    stream = request["stream"]
    me = service.identity.id
    if store.get_stream(stream) is None:
        raise ReplicaRequestError(f"stream {stream} does not exist on cluster {service.identity.name}")
    deleted = request.get("deleted", {})
    if isinstance(deleted, list):  # a source that names no generations
        deleted = dict.fromkeys(deleted)
    for name, gen in deleted.items():
        info = store.get_topic(stream, name)
        if info is not None and (gen is None or generation(store, me, stream, info) == gen):
            await _delete_topic(service, stream, info)
            log.info("replication: deleted topic %s:%s as its source did", stream, name)
    replaces = request.get("replaces", {})
    for name, want in request["topics"].items():
        info = store.get_topic(stream, name)
        gen = want.get("gen")
        if info is not None and name in replaces and generation(store, me, stream, info) == replaces[name]:
            await _delete_topic(service, stream, info)
            log.warning("replication: topic %s:%s was deleted and created again at its source: so it is here",
                        stream, name)
            info = None
        if info is None:
            if gen is not None and gen[0] == me:
                continue  # created here and deleted since: a peer that has not heard yet does not bring it back
            info = await store.create_topic(stream, name, want["partitions"], dict(want["configs"]))
            if gen is not None:
                await note_origin(store, stream, info, gen)
            log.info("replication: created topic %s:%s with %d partition(s)", stream, name, want["partitions"])
            continue
        if info.partitions > want["partitions"]:
            raise ReplicaRequestError(
                f"topic {name} has {info.partitions} partitions on cluster {service.identity.name} but "
                f"{want['partitions']} at the source: partition counts differ")
        if info.partitions < want["partitions"]:
            await store.add_partitions(stream, name, want["partitions"])
            log.info("replication: %s:%s grown to %d partitions", stream, name, want["partitions"])
        if info.configs != want["configs"]:
            await store.set_topic_configs(stream, name, dict(want["configs"]))
    answer: dict[str, Any] = {"topics": await _partition_ends(service, stream)}
    workers = service.cluster.worker_ports() if service.cluster is not None else []
    if workers:
        answer["workers"] = workers  # a link that reached one of these ports may reach the others too
    return answer


async def append(service: ReplicationService, request: dict[str, Any], payload: memoryview,
                 producers: ProducerStates | None = None,
                 txns: PartitionTxnRegistry | None = None, leader_epoch: int | None = None) -> dict[str, Any]:
    """Store shipped batches at their offsets; {"status": "ok"|"gap"|"collision", "hw": ..., ...}.

    Idempotent producers' sequence numbers are noted in `producers` as a
    local append notes them, so a producer that fails over to this cluster
    and retries a batch that reached it by replication gets the original
    offsets instead of a second copy. Transactional batches and their
    markers go through `txns` as the source's produce and coordinator put
    them there: an open transaction holds this partition's last stable
    offset, an abort marker enters the aborted-transaction index, so
    read_committed consumers here see what they would see at the source.
    `leader_epoch` fences the appends as a local produce's (a store shared by brokers).
    """
    store = service.store
    stream, topic, index = request["stream"], request["topic"], request["partition"]
    path: Path = tuple(request["path"])
    if service.identity.id in path:
        raise ReplicaRequestError(f"batches of {stream}:{topic}/{index} already passed through this cluster")
    data = service.decompress(request.get("codec", "none"), payload)
    try:
        partition = store.partition(stream, topic, index)
    except storage.UnknownTopicError:
        raise ReplicaRequestError(f"topic {stream}:{topic} partition {index} does not exist here") from None
    async with service.partition_lock(stream, topic, index):  # links from several clusters may ship it at once
        if producers is not None:  # from the tail before these batches, as a local produce does first
            await producers.restore((stream, topic, index), partition)
        return await _append(service, request, partition, split_batches(data), path, producers, txns, leader_epoch)


async def _append(service: ReplicationService, request: dict[str, Any], partition: storage.Partition,
                  batches: list[tuple[int, memoryview]], path: Path,
                  producers: ProducerStates | None, txns: PartitionTxnRegistry | None,
                  leader_epoch: int | None) -> dict[str, Any]:
    stream, topic, index = request["stream"], request["topic"], request["partition"]
    # the source holds no record in [vouched, first batch) nor between the batches (its cleaner removed them)
    vouched = request.get("from")
    pending = [b for b in batches if b[0] >= partition.high_watermark]
    for base, batch in batches:
        hw = partition.high_watermark
        if base > hw and (vouched is None or hw < vouched):
            return {"status": "gap", "hw": hw}
        if base < hw:
            if base < partition.log_start_offset:
                continue  # deleted here already (retention): nothing to compare with
            stored = split_batches(await partition.read(base, len(batch)))
            if not stored or stored[0][0] != base or not same_batch(stored[0][1], batch):
                return {"status": "collision", "hw": hw, "offset": base}
            continue
        if pending and base == pending[0][0]:  # first new batch: note the path of all of them at once
            last = pending[-1]
            end = last[0] + bf.parse_header(last[1]).last_offset_delta + 1
            await service.paths.record(stream, topic, index, hw, end, path)
            pending = []
        header = bf.parse_header(batch)
        if base > hw:  # a stretch the source's cleaner emptied: an empty batch keeps the offsets
            try:
                await partition.append(empty_batch(hw, base - hw - 1, header.base_timestamp), base - hw, at=hw,
                                        leader_epoch=leader_epoch)
            except storage.OffsetMismatchError as exc:
                return {"status": "collision", "hw": exc.high_watermark, "offset": hw}
        held = await _hold(txns, stream, topic, index, header)
        try:
            try:
                await partition.append(batch, header.last_offset_delta + 1, at=base, leader_epoch=leader_epoch)
            except storage.OffsetMismatchError as exc:  # a local producer got there first
                return {"status": "collision", "hw": exc.high_watermark, "offset": base}
            if producers is not None:  # a producer failing over here is judged as at the source
                aborted = bool(header.attributes & bf.ATTR_CONTROL) and marker_type(batch) == ControlType.ABORT
                producers.note_batch((stream, topic, index), header, base, aborted=aborted)
            if txns is not None and header.attributes & bf.ATTR_TRANSACTIONAL:
                await _note_transactional(txns, stream, topic, index, base, batch, header)
        finally:
            if held is not None:
                held.not_appended(header.producer_id)
    return {"status": "ok", "hw": partition.high_watermark}


async def _hold(txns: PartitionTxnRegistry | None, stream: str, topic: str, index: int,
                header: bf.BatchHeader) -> PartitionTxns | None:
    """A transactional data batch is about to be appended: its partition's LSO is held below it until its
    transaction is known open here (the store makes it readable first, as for a local produce)."""
    if txns is None or not header.attributes & bf.ATTR_TRANSACTIONAL or header.attributes & bf.ATTR_CONTROL:
        return None
    state = await txns.get(stream, topic, index)
    state.appending(header.producer_id)
    return state


async def _note_transactional(txns: PartitionTxnRegistry, stream: str, topic: str, index: int, base: int,
                              batch: memoryview, header: bf.BatchHeader) -> None:
    """Keep the partition's transaction state as the source keeps it for the same batch.

    Called after the append: a state loaded just now (for a marker; a data
    batch's was loaded by _hold before it) rebuilt itself from a log tail
    that already holds this batch, and both calls below are then no-ops (an
    open transaction keeps its first offset; a marker with no open
    transaction changes nothing).
    """
    state = await txns.get(stream, topic, index)
    if not header.attributes & bf.ATTR_CONTROL:
        state.appended(header.producer_id, base)
        return
    control = marker_type(batch)
    if control is not None:
        await state.marker_written(header.producer_id, base, control)


async def start_at(service: ReplicationService, request: dict[str, Any],
                   txns: PartitionTxnRegistry | None = None) -> dict[str, Any]:
    """Skip a retention gap: the source no longer holds [from, offset), so this partition goes on at `offset`.

    As a Kafka follower does when the leader's log start passed it, the
    partition drops what it holds and starts empty at the source's log
    start, so the offsets that follow stay the source's. Done only while
    the partition still ends at `from` (where the source's link believes
    it ends); otherwise {"status": "moved"} with the real end.
    """
    store = service.store
    stream, topic, index = request["stream"], request["topic"], request["partition"]
    offset, expected = int(request["offset"]), int(request["from"])
    try:
        partition = store.partition(stream, topic, index)
    except storage.UnknownTopicError:
        raise ReplicaRequestError(f"topic {stream}:{topic} partition {index} does not exist here") from None
    async with service.partition_lock(stream, topic, index):
        hw = partition.high_watermark
        if hw != expected or offset < hw:
            return {"status": "moved", "hw": hw}
        await partition.truncate_fully_and_start_at(offset)
        if txns is not None:
            state = await txns.get(stream, topic, index)
            state.restarted_at(offset, {int(pid): int(first) for pid, first in request.get("open", [])})
        log.warning("replication: %s:%s/%d skips offsets %d..%d, which its source no longer holds; "
                    "it now starts at %d", stream, topic, index, expected, offset - 1, offset)
        return {"status": "ok", "hw": partition.high_watermark}


async def log_start(service: ReplicationService, request: dict[str, Any]) -> dict[str, Any]:
    """The source's log start moved (DeleteRecords, retention): this partition's follows, as a Kafka
    follower's follows its leader's, but never past what it holds (the batches beyond come later, and a
    log start past the high watermark would leave a gap). {"log_start": ..., "hw": ...}."""
    store = service.store
    stream, topic, index = request["stream"], request["topic"], request["partition"]
    offset = int(request["offset"])
    try:
        partition = store.partition(stream, topic, index)
    except storage.UnknownTopicError:
        raise ReplicaRequestError(f"topic {stream}:{topic} partition {index} does not exist here") from None
    async with service.partition_lock(stream, topic, index):
        before = partition.log_start_offset
        start = await partition.delete_records(max(min(offset, partition.high_watermark), 0))
        if start > before:
            log.info("replication: %s:%s/%d starts at %d as its source does", stream, topic, index, start)
        return {"log_start": start, "hw": partition.high_watermark}


async def commit_cursors(service: ReplicationService, request: dict[str, Any]) -> dict[str, Any]:
    """Take the source's cursors where they are newer than this cluster's own (by commit time)."""
    store = service.store
    stream = request["stream"]
    taken = 0
    for group, rows in request["groups"].items():
        current = {(c.topic, c.partition): c for c in store.get_cursors(stream, group)}
        newer = []
        for topic, partition, offset, epoch, metadata, commit_ms in rows:
            mine = current.get((topic, partition))
            if mine is not None and (mine.commit_time_ms > commit_ms or
                                     (mine.offset, mine.metadata, mine.commit_time_ms) == (offset, metadata, commit_ms)):
                continue
            newer.append(Cursor(topic, partition, offset, epoch, metadata, commit_ms))
        if newer:
            await store.commit_cursors(stream, group, newer)
            taken += len(newer)
    return {"taken": taken}
