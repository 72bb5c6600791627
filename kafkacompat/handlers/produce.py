"""Produce: validate batch headers and CRC, dedupe idempotent retries, append.

Records are decoded only for compacted topics, which refuse records without
a key as Kafka does. Every batch of a partition is checked before
any is written, so a corrupt batch leaves nothing behind. acks=0 gets no
answer; acks=1 and acks=all answer once the batch is in the log, as on a
single Kafka broker, except on an fsync=always stream, where they answer
after an fsync covering it (the design's per-stream promise: `interval`
syncs in the background within `fsync_interval_ms`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import struct
import time
from collections.abc import Callable
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.protocol.messages import RequestHeader
from kafkacompat.protocol.produce_request import FIRST_WITH_TOPIC_ID, ProduceRequest, parse_produce_request
from kafkacompat.protocol.produce_response import NodeEndpoint, PartitionResult, encode_produce_response
from kafkacompat.protocol.record_validation import (
    CORRUPT,
    INVALID,
    TOO_LARGE,
    RecordValidationError,
    validate_records,
)
from kafkacompat.protocol.records import (
    InvalidBatchError,
    iter_records,
    keyless_records,
    set_log_append_time,
    split_batches,
)

from ..broker.cluster import TopicError
from ..broker.quotas import PRODUCE as PRODUCER_BYTE_RATE
from ..catalog.topic_configs import ProduceConfigs, produce_configs
from ..schemas import validation as schema_validation
from ..security.acls import Operation
from ..services import Placement, Request, Security, Settings, Topics, Transactions
from ..transactions import PartitionTxns
from .common import NO_RESPONSE, CloseConnection, ErrorCode, storage_error_code
from .registry import Api, changes

log = logging.getLogger(__name__)

FIRST_SERVED_VERSION = 3  # v0-2 are advertised (librdkafka needs it) but refused

# Produce v0-13: 0-2 answered with UNSUPPORTED_VERSION (librdkafka needs min 0); v13 names topics by id
API = Api(0, (0, 13), changes(("topic_data",), "responses", handler_refuses_below=FIRST_SERVED_VERSION))


class Reaches(Topics, Placement, Security, Transactions, Settings, Protocol):
    """What of the broker this module reaches."""

FIRST_WITH_CURRENT_LEADER = 10  # KIP-951: a refusal names the partition's leader
IMPLICIT_ADD_FROM = 12  # KIP-890 part 2: a transactional batch adds its partition to the transaction
ANSWER_WITHIN = 0.9  # of a produce request's timeout: a write not done by then is answered REQUEST_TIMED_OUT


@dataclasses.dataclass(slots=True)
class _Outcome:
    index: int
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()
    durable_at: tuple[storage.Partition, int] | None = None
    # set once the batches are being appended; _finish completes them
    partition: storage.Partition | None = None
    key: tuple[str, str, int] = ("", "", -1)
    topic: str = ""
    log_append: bool = False
    fsync_always: bool = False  # the stream's fsync policy is `always`: the answer waits for the fsync
    txns: PartitionTxns | None = None
    appending: list[_Append] = dataclasses.field(default_factory=list)  # placed in the log, not yet written
    answered_late: bool = False  # answered REQUEST_TIMED_OUT while its writes went on (_answer_when_written)


@dataclasses.dataclass(slots=True)
class _Append:
    """One batch whose place in its partition is taken and whose write is under way."""

    written: Any  # awaitable AppendResult
    header: Any
    now: int
    state: Any  # an idempotent batch: its place in the producer's window (ProducerStates.appending)
    txns: PartitionTxns | None = None  # a transactional batch: its partition's state, holding the LSO until written


_REFUSAL = {CORRUPT: ErrorCode.corrupt_message, INVALID: ErrorCode.invalid_record, TOO_LARGE: ErrorCode.invalid_record}
TIMESTAMP_REFUSAL = "One or more records have been rejected due to invalid timestamp"  # Kafka's words
INLINE_DECOMPRESSED = 4 << 20  # compressed records up to this size are checked without a thread hop


async def _validate(configs: ProduceConfigs, records: Any, batches: Any) -> None:
    """Kafka's LogValidator checks on every batch; RecordValidationError names the first failure.

    A compressed batch is first checked in place with a 4 MiB bound on its
    decompressed records (a millisecond or two at most); one that inflates
    further is checked again in a worker thread up to the full bound, so a
    large or hostile batch does not stall every other connection meanwhile.
    """
    before, after = configs.timestamp_before_max_ms, configs.timestamp_after_max_ms
    log_append = configs.log_append_time
    now = int(time.time() * 1000)
    view = memoryview(records)
    for pos, header in batches:
        batch = view[pos : pos + header.size]
        try:
            validate_records(
                batch, header, now, before, after, check_timestamps=not log_append,
                decompressed_limit=INLINE_DECOMPRESSED,
            )
        except RecordValidationError as exc:
            if exc.kind != TOO_LARGE:
                raise
            await asyncio.to_thread(
                validate_records, batch, header, now, before, after, check_timestamps=not log_append
            )


def decode(header: RequestHeader, frame: bytes | bytearray) -> ProduceRequest:
    """By hand, records left in the frame (v0-2 parse too, to be refused politely)."""
    return parse_produce_request(frame, header.body_offset, header.api_version)


def _legacy_refusal(version: int, request: Any) -> bytes:
    """A v0-2 response refusing every partition with UNSUPPORTED_VERSION."""
    out = bytearray(struct.pack(">i", len(request.topic_data)))
    for topic in request.topic_data:
        name = topic.name.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(topic.partition_data))
        for part in topic.partition_data:
            out += struct.pack(">ihq", part.index, ErrorCode.unsupported_version.value, -1)
            if version >= 2:
                out += struct.pack(">q", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    return bytes(out)


def _refuse_keyless(outcome: _Outcome, topic: str, index: int, view: memoryview, batches: list) -> bool:
    """Refuse records without a key, as Kafka's LogValidator does on a compacted topic."""
    errors = [
        (i, f"Compacted topic cannot accept message without key in topic partition {topic}-{index}")
        for pos, header in batches for i in keyless_records(view[pos : pos + header.size])
    ]
    if not errors:
        return False
    _refuse_records(outcome, errors)
    return True


def _refuse_records(outcome: _Outcome, errors: list[tuple[int, str]]) -> None:
    """INVALID_RECORD with Kafka's per-record errors and its summary message."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    outcome.error = ErrorCode.invalid_record
    outcome.record_errors = tuple(errors)
    outcome.message = (f"One or more records have been rejected due to {len(errors)} record errors in total, "
                       f"and only showing the first three errors at most: [{shown}]")


async def _refuse_schemaless(ctx: Request[Reaches], outcome: _Outcome, name: str, info: Any, configs: ProduceConfigs,
                             view: memoryview, batches: list) -> bool:
    """A topic with schema validation on: refuse records without a schema id of its subject (schemas.validation)."""
    names = {name, f"{info.stream}:{info.name}"} | ({info.name} if info.stream == ctx.cluster.default_stream else set())
    errors: list[tuple[int, str]] = []
    for pos, header in batches:
        errors += await schema_validation.refusals(ctx.cluster, names, iter_records(view[pos : pos + header.size]),
                                                   keys=configs.key_schemas, values=configs.value_schemas)
    if not errors:
        return False
    _refuse_records(outcome, errors)
    log.info("refused produce to %s-%d from %s: %s", name, outcome.index, ctx.peer, errors[0][1])
    return True


async def _produce_partition(ctx: Request[Reaches], topic: Any, part: Any, pipelined: bool,
                             transactional_id: str | None, placed: list[_Outcome]) -> _Outcome:
    """Check and place one partition's batches (`placed`: the request's partitions before it).

    Pipelined (the answer may wait): a store whose appends take their place
    when called is left writing them (`outcome.appending`, for _finish);
    otherwise every append is complete when this returns."""
    cluster = ctx.cluster
    outcome = _Outcome(part.index)
    try:
        found = cluster.lookup(topic.name)
    except TopicError as exc:
        outcome.error, outcome.message = exc.code, str(exc)
        return outcome
    info = found.info
    if info is None or not 0 <= part.index < info.partitions:
        outcome.error = ErrorCode.unknown_topic_or_partition
        return outcome
    if cluster.is_internal(info):
        outcome.error, outcome.message = ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}"
        return outcome
    records = part.records or b""
    try:
        batches = split_batches(records)
    except InvalidBatchError as exc:
        outcome.error = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
        outcome.message = str(exc)
        log.warning("refused produce to %s-%d from %s: %s", topic.name, part.index, ctx.peer, exc)
        return outcome
    configs = produce_configs(cluster, info)
    max_bytes = configs.max_message_bytes
    key = (info.stream, info.name, part.index)
    txns = None
    for _, header in batches:
        if header.is_transactional:
            error = await _transaction_error(cluster, transactional_id, header, key, ctx.version >= IMPLICIT_ADD_FROM)
            if error != ErrorCode.none:
                outcome.error = error
                _refused(cluster, key, header, error)  # a batch pipelined behind it must not be taken ahead of it
                return outcome
            try:
                txns = await cluster.transactions.partitions.get(*key)
            except storage.StorageError as exc:  # the partition's transaction state cannot be read now
                outcome.topic = topic.name
                _fail_at_door(cluster, key, header, outcome, exc)
                return outcome
        if header.size > max_bytes:
            outcome.error = ErrorCode.message_too_large
            outcome.message = f"batch of {header.size} bytes exceeds max.message.bytes={max_bytes}"
            return outcome
    view = memoryview(records)
    if configs.compacted and _refuse_keyless(outcome, topic.name, part.index, view, batches):
        return outcome
    log_append = configs.log_append_time
    try:
        await _validate(configs, records, batches)
    except RecordValidationError as exc:
        if exc.record_index >= 0:
            outcome.error, outcome.message = ErrorCode.invalid_timestamp, TIMESTAMP_REFUSAL
            outcome.record_errors = ((exc.record_index, str(exc)),)
        else:
            outcome.error, outcome.message = _REFUSAL[exc.kind], str(exc)
        log.warning("refused produce to %s-%d from %s: %s", topic.name, part.index, ctx.peer, exc)
        return outcome
    if (configs.key_schemas or configs.value_schemas) and await _refuse_schemaless(
            ctx, outcome, topic.name, info, configs, view, batches):
        return outcome
    outcome.key = key  # named by the answer's current_leader when this broker does not lead it
    partition, outcome.error = await cluster.serving_partition(info, ErrorCode.unknown_topic_or_partition, part.index)
    if partition is None:
        _refused(cluster, key, batches[0][1] if batches else None, outcome.error)
        return outcome
    outcome.partition, outcome.key, outcome.topic = partition, key, topic.name
    outcome.log_append, outcome.txns, outcome.fsync_always = log_append, txns, configs.fsync_always
    append_epoch = cluster.append_epoch(key)
    txn_since = None
    if txns is not None:
        try:
            txn_since = await _transaction_horizon(partition, txns)
        except storage.StorageError as exc:
            _fail_at_door(cluster, key, batches[0][1], outcome, exc)
            return outcome
    for pos, header in batches:
        batch: Any = view[pos : pos + header.size]
        idempotent = header.producer_id >= 0 and header.base_sequence >= 0
        if idempotent:
            try:
                await cluster.producers.restore(key, partition)
            except storage.StorageError as exc:
                _fail_at_door(cluster, key, header, outcome, exc)
                return outcome
            while True:  # batches in flight are in the producer's window already (see _finish)
                verdict = cluster.producers.check(
                    header.producer_id, header.producer_epoch, key,
                    header.base_sequence, header.record_count,
                )
                if verdict.in_flight is None:
                    break
                # a retry of a batch still being written: answer as it is answered (this request's
                # own appends are finished first, as they may be what it waits for)
                for earlier in (*placed, outcome):
                    if earlier.appending:
                        await _finish(cluster, earlier)
                if outcome.error != ErrorCode.none:
                    return outcome
                await asyncio.shield(verdict.in_flight)
            if verdict.error != ErrorCode.none:
                outcome.error = verdict.error
                return outcome
            if verdict.duplicate_of is not None:
                if outcome.base_offset < 0:
                    outcome.base_offset = verdict.duplicate_of
                    outcome.log_append_time = verdict.log_append_time
                continue
        if pipelined and ctx.client_gone():
            _client_gone(ctx, outcome)
            return outcome
        now = int(time.time() * 1000)
        if log_append:
            batch = set_log_append_time(batch, now)
        held = txns if txns is not None and header.is_transactional else None
        if held is not None and _transaction_ended(held, header.producer_id, txn_since, outcome):
            return outcome
        if held is not None:
            held.appending(header.producer_id)
        try:
            written = partition.append(batch, header.record_count, leader_epoch=append_epoch,
                                       txn_since=txn_since if held is not None else None,
                                       client_gone=_left_out_if(ctx, outcome, pipelined,
                                                                plain=not idempotent and held is None))
        except storage.StorageError as exc:  # refused at once (the cloud engine checks before it buffers)
            if held is not None:
                held.not_appended(header.producer_id)
            _fail(outcome, exc)
            return outcome
        state = None
        if idempotent:
            state = cluster.producers.appending(header.producer_id, header.producer_epoch, key, header.base_sequence,
                                                header.record_count, now if log_append else header.max_timestamp,
                                                written)
        outcome.appending.append(_Append(written, header, now, state, held))
        if not (pipelined and partition.appends_in_call_order):
            await _finish(cluster, outcome)
            if outcome.error != ErrorCode.none:
                return outcome
    return outcome


async def _finish(cluster: Reaches, outcome: _Outcome) -> None:
    """Wait for the outcome's appends in order; record producer and transaction state, or the first error."""
    appends, outcome.appending = outcome.appending, []
    try:
        for item in appends:
            header = item.header
            try:
                result = await item.written
            except storage.StorageError as exc:
                if outcome.error == ErrorCode.none:
                    _fail(outcome, exc)
                if item.state is not None:
                    _refused(cluster, outcome.key, header, storage_error_code(exc))
                continue
            cluster.stats.produced(outcome.topic, header.record_count, header.size)
            appended_at = item.now if outcome.log_append else -1
            if item.state is not None:
                cluster.producers.written(item.state, result.base_offset, appended_at)
            if item.txns is not None:
                item.txns.appended(header.producer_id, result.base_offset)
            if outcome.base_offset < 0:
                outcome.base_offset, outcome.log_append_time = result.base_offset, appended_at
    finally:  # not stored (or cancelled): the producer's retry is judged without these
        for item in appends:
            if item.state is not None and item.state.written is not None:
                cluster.producers.not_written(item.header.producer_id, outcome.key, item.state)
            if item.txns is not None:  # stored or not, the LSO no longer waits for it
                item.txns.not_appended(item.header.producer_id)


def _left_out_if(ctx: Request[Reaches], outcome: _Outcome, pipelined: bool, plain: bool) -> Callable[[], bool] | None:
    """What a store that holds appends asks as a batch's commit begins (None: nothing, the answer waits)."""
    if not pipelined:
        return None
    return functools.partial(_given_up, ctx, outcome) if plain else ctx.client_gone


def _given_up(ctx: Request[Reaches], outcome: _Outcome) -> bool:
    """Whether a batch without idempotence is to be left out as its commit begins: its client closed the
    connection, or it was answered REQUEST_TIMED_OUT already. Either way the producer resends it and
    cannot tell a second copy from the first, so this one is withdrawn. An idempotent or transactional
    batch is not: its retry is matched to it by sequence number (ProducerStates)."""
    return outcome.answered_late or ctx.client_gone()


def _client_gone(ctx: Request[Reaches], outcome: _Outcome) -> None:
    """The client closed the connection before this batch was placed (it waited behind a broker that
    was paused, a leadership hand-over, an in-flight original): it took the request for failed and
    resends it on its next connection, so storing this copy would store the batch twice (a producer
    without idempotence keeps both). NETWORK_EXCEPTION is what the client itself makes of the
    closed connection; the answer reaches nobody."""
    outcome.error = ErrorCode.network_exception
    outcome.message = "the client closed the connection before the batch was appended; not appended"
    log.debug("produce to %s-%d from %s not appended: the client closed the connection first", outcome.topic,
             outcome.index, ctx.peer)


def _refused(cluster: Reaches, key: tuple[str, str, int], header: Any, error: ErrorCode) -> None:
    """An idempotent batch was not stored: its producer's batches pipelined behind it are answered alike."""
    if header is not None and header.producer_id >= 0 and header.base_sequence >= 0:
        cluster.producers.refused(header.producer_id, header.producer_epoch, key, header.base_sequence, error)


def _fail_at_door(cluster: Reaches, key: tuple[str, str, int], header: Any, outcome: _Outcome,
                  exc: storage.StorageError) -> None:
    """The store failed before the batch was handed to it: answered, and, for an idempotent batch, recorded
    so that those pipelined behind it are answered alike."""
    _fail(outcome, exc)
    _refused(cluster, key, header, outcome.error)


def _fail(outcome: _Outcome, exc: storage.StorageError) -> None:
    outcome.error = storage_error_code(exc)
    outcome.message = str(exc)
    if isinstance(exc, storage.RequesterGoneError):  # not a failure of the store: the answer reaches nobody
        log.debug("produce to %s-%d not appended: %s", outcome.topic, outcome.index, exc)
        return
    _log_append_failure(outcome.topic, outcome.index, exc)


def _durability(acks: int, outcome: _Outcome) -> None:
    """Once appended: the log start to answer with and, on an fsync=always stream, the offset to wait for.

    acks=all waits for nothing more than acks=1 on one broker: Kafka's acks=all promises the log of
    every in-sync replica (page cache, never an fsync), and here the log is the only replica. Only
    the stream's `always` policy holds answers until an fsync has covered the batch.
    """
    partition = outcome.partition
    if partition is None or outcome.error != ErrorCode.none:
        return
    outcome.log_start_offset = partition.log_start_offset
    if acks != 0 and outcome.fsync_always:
        outcome.durable_at = (partition, partition.high_watermark)


async def _transaction_horizon(partition: storage.Partition, txns: PartitionTxns) -> int:
    """Where the request's transactional batches were admitted to their transaction: the partition's end,
    read after the coordinator admitted them. A marker of their producer at or after it ended that
    transaction while they waited (an outage; their producer timed out and aborted), and stored after the
    marker they would join the producer's next transaction: the store refuses them then (append's
    txn_since), as Kafka's partition leader does by its verification guard (KIP-890). On a cluster the end
    is read from the store: the previous transaction's markers, which the coordinator's broker wrote before
    it admitted these, may not have reached this broker's view yet, and would be taken for this one's. The
    transaction state then reads up to that end: the previous transaction's marker is known to the check
    below, and this batch is noted after the previous leader's last batches."""
    if txns.follow_log:
        await partition.refresh()
        await txns.catch_up()  # what the refresh brought (the previous leader's last batches) is noted first
    return partition.high_watermark


def _transaction_ended(txns: PartitionTxns, producer_id: int, since: int | None, outcome: _Outcome) -> bool:
    """The marker this broker wrote (or read) since the batch was admitted, checked before it is handed to
    the store: INVALID_TXN_STATE, as Kafka answers a batch that failed verification."""
    if since is None or txns.ended.get(producer_id, -1) < since:
        return False
    outcome.error = ErrorCode.invalid_txn_state
    outcome.message = f"the transaction of producer {producer_id} ended here before this batch was appended"
    return True


async def _transaction_error(
    cluster: Reaches, transactional_id: str | None, header: Any, key: Any, implicit_add: bool
) -> ErrorCode:
    """A transactional batch is appended only inside its producer's open transaction (v12+: which it joins)."""
    if transactional_id is None:
        return ErrorCode.transactional_id_authorization_failed  # Kafka's answer: no id to authorize
    return await cluster.transactions.admit_produce(
        transactional_id, header.producer_id, header.producer_epoch, key, implicit_add)


_failures_logged: dict[tuple[str, int, type], float] = {}
FAILURE_LOG_EVERY_S = 60.0


def _log_append_failure(topic: str, index: int, exc: Exception) -> None:
    """One line per partition and kind of failure a minute: a full disk must not flood the log."""
    key = (topic, index, type(exc))
    now = time.monotonic()
    if now < _failures_logged.get(key, 0.0):
        return
    if len(_failures_logged) > 10_000:
        _failures_logged.clear()
    _failures_logged[key] = now + FAILURE_LOG_EVERY_S
    log.error("append to %s-%d failed: %s (repeats are not logged for %d s)", topic, index, exc,
              FAILURE_LOG_EVERY_S)


def _count_errors(ctx: Request[Reaches], results: list[tuple[str, list[_Outcome]]]) -> None:
    for _, outcomes in results:
        for outcome in outcomes:
            if outcome.error != ErrorCode.none:
                ctx.cluster.stats.error(ctx.header.api_key, ctx.version, outcome.error.name)


def _name_topics_by_id(cluster: Reaches, request: Any) -> None:
    """v13+ (KIP-516) names each topic by its id alone: the name it has here, or "" for an id nobody knows."""
    for topic in request.topic_data:
        info = cluster.by_id(topic.topic_id)
        topic.name = cluster.display_name(info) if info is not None else ""


def _current_leaders(ctx: Request[Reaches], results: list[tuple[str, list[_Outcome]]]
                     ) -> tuple[dict[int, tuple[int, int]], list[NodeEndpoint]]:
    """KIP-951 (v10+): for each partition refused with NOT_LEADER_OR_FOLLOWER (by id() of its
    outcome), the broker leading it now and where that broker listens, as Kafka answers, so the
    producer sends there at once instead of asking Metadata first. None named while no other
    live broker leads it (a hand-over not yet done, a leader not yet replaced)."""
    if ctx.version < FIRST_WITH_CURRENT_LEADER:
        return {}, []
    cluster = ctx.cluster
    leaders: dict[int, tuple[int, int]] = {}
    nodes: dict[int, NodeEndpoint] = {}
    for _, outcomes in results:
        for outcome in outcomes:
            if outcome.error != ErrorCode.not_leader_or_follower or outcome.key[2] < 0:
                continue
            found = cluster.view.leader_of(outcome.key)
            if found is None or found[0] == cluster.node_id:
                continue
            member = next((m for m in cluster.brokers_for(ctx.listener) if m.node_id == found[0]), None)
            if member is not None:
                leaders[id(outcome)] = found
                nodes[member.node_id] = NodeEndpoint(member.node_id, member.host, member.port)
    return leaders, sorted(nodes.values(), key=lambda n: n.node_id)


def _response(ctx: Request[Reaches], request: Any, results: list[tuple[str, list[_Outcome]]]) -> bytes:
    _count_errors(ctx, results)
    topics: list[Any] = [name for name, _ in results]
    if ctx.version >= FIRST_WITH_TOPIC_ID:  # answered by id, as asked (results follow the request's order)
        topics = [topic.topic_id for topic in request.topic_data]
    leaders, nodes = _current_leaders(ctx, results)
    return encode_produce_response(ctx.version, [
        (topic, [PartitionResult(o.index, o.error.value, o.base_offset, o.log_append_time, o.log_start_offset,
                                 o.message, o.record_errors, leaders.get(id(o))) for o in outcomes])
        for topic, (_, outcomes) in zip(topics, results)
    ], throttle_time_ms=ctx.throttle_ms, node_endpoints=nodes)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    if ctx.version < FIRST_SERVED_VERSION:
        return _legacy_refusal(ctx.version, request)
    acks = request.acks
    if ctx.cluster.quotas.active:
        ctx.throttle_ms = ctx.cluster.quotas.record(ctx.header.client_id, PRODUCER_BYTE_RATE, ctx.size)
    if ctx.version >= FIRST_WITH_TOPIC_ID:
        _name_topics_by_id(ctx.cluster, request)
    authorizer = ctx.cluster.authorizer
    refused_all = authorizer.enabled and request.transactional_id is not None and not authorizer.transactional_id(
        ctx, Operation.WRITE, request.transactional_id)
    refusals = {  # Kafka checks access before the topic's existence, after a v13 topic id's
        topic.name: ErrorCode.unknown_topic_id if topic.topic_id is not None and not topic.name else
        ErrorCode.transactional_id_authorization_failed if refused_all else (
            ErrorCode.topic_authorization_failed
            if authorizer.enabled and not authorizer.topic(ctx, Operation.WRITE, topic.name) else None)
        for topic in request.topic_data
    }
    # Partitions are placed one after another, in the request's order (a partition named twice
    # keeps its batches in order). A store whose appends take their place when called (the cloud
    # engine: they answer after a shared object write and commit) is then left writing them: the
    # answer waits for the writes while the connection goes on to its next request, whose batches
    # join the same object, and answers stay in request order (the connection sends them in order).
    if acks not in (0, 1, -1):
        results = [(topic.name, [_Outcome(part.index, refusals[topic.name] or ErrorCode.invalid_required_acks)
                                 for part in topic.partition_data]) for topic in request.topic_data]
    else:
        await ctx.cluster.open_partitions((ctx.cluster.topic_for(topic.name)[0], part.index)
                                          for topic in request.topic_data if refusals[topic.name] is None
                                          for part in topic.partition_data)
        results, placed = [], list[_Outcome]()
        for topic in request.topic_data:
            outcomes: list[_Outcome] = []
            for part in topic.partition_data:
                refusal = refusals[topic.name]
                outcome = _Outcome(part.index, refusal) if refusal is not None else await _produce_partition(
                    ctx, topic, part, acks != 0, request.transactional_id, placed)
                outcomes.append(outcome)
                placed.append(outcome)
            results.append((topic.name, outcomes))
    if any(o.appending for _, outs in results for o in outs):
        return _answer_when_written(ctx, acks, request, results)
    return _answer(ctx, acks, request, results)


async def _answer_when_written(ctx: Request[Reaches], acks: int, request: Any, results: list[tuple[str, list[_Outcome]]]) -> Any:
    """The answer once every append is written, or REQUEST_TIMED_OUT for the partitions whose write
    is not done by ANSWER_WITHIN of the request's timeout (a commit held up by the database or the
    object store), before the client gives up on the request: its retry is then its choice, as
    after Kafka's own timeout. An idempotent batch's write goes on; retried meanwhile, it waits for
    it and is answered as it ends (ProducerStates). A batch without idempotence is withdrawn unless
    its commit has begun (`_given_up`): stored after the answer it was a second copy beside the
    producer's retry (the cloud campaign's plain producer had runs of 60 records stored twice, held
    behind a commit an outage left in doubt). So only a commit already under way, whose outcome
    the database alone knows, can leave such a producer a second copy, and only after a timeout."""
    writes = [(o, asyncio.ensure_future(_finish(ctx.cluster, o))) for _, outs in results for o in outs if o.appending]
    limit = request.timeout_ms * ANSWER_WITHIN / 1000 if request.timeout_ms > 0 else None
    _, late = await asyncio.wait([task for _, task in writes], timeout=limit)
    for outcome, task in writes:
        if task in late:
            task.add_done_callback(_retrieved)
            outcome.answered_late = True
            outcome.error, outcome.base_offset = ErrorCode.request_timed_out, -1
            outcome.message = (f"the batch was not written within {request.timeout_ms} ms (the store is slow or "
                               "unreachable); it may still be stored if it has idempotence or its commit began")
        else:
            task.result()
    answer = _answer(ctx, acks, request, results)
    return await answer if asyncio.iscoroutine(answer) else answer


def _retrieved(task: asyncio.Task) -> None:
    """A write answered REQUEST_TIMED_OUT ended: its failure, if any, was logged by _finish's store."""
    if not task.cancelled():
        task.exception()


def _answer(ctx: Request[Reaches], acks: int, request: Any, results: list[tuple[str, list[_Outcome]]]) -> Any:
    for _, outs in results:
        for outcome in outs:
            _durability(acks, outcome)
    if acks == 0:
        failed = [o for _, outs in results for o in outs if o.error != ErrorCode.none]
        if failed:
            _count_errors(ctx, results)
            # Kafka's way of telling an acks=0 producer: close, so it refreshes metadata.
            raise CloseConnection(f"acks=0 produce failed with {failed[0].error.name}")
        return NO_RESPONSE
    waits = [(o, o.durable_at) for _, outs in results for o in outs if o.durable_at is not None]
    if not waits:
        return _response(ctx, request, results)

    async def after_fsync() -> Any:
        done = await asyncio.gather(*(partition.wait_durable(offset) for _, (partition, offset) in waits),
                                    return_exceptions=True)
        for (outcome, _), result in zip(waits, done):
            if isinstance(result, storage.StorageError):
                outcome.error, outcome.message = storage_error_code(result), str(result)
            elif isinstance(result, BaseException):
                raise result
        return _response(ctx, request, results)

    return after_fsync()
