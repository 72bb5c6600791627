"""WorkerState (private, unadvertised): what the workers of `serve --workers N` ask of each other.

The reads of a worker's partitions that worker 0's console, /metrics and
links make (only the owner opens a partition's files), the replication
paths the others keep at worker 0 (whose links cache them), and the
resets of share-partitions an admin request made. The framing is the admin
API's (protocol/admin_api.py): a JSON object naming the operation. (Share
state and aborted transactions, kept at worker 0 this way until stop 61,
are written by each worker into the store's tables itself.)

- {"op": "partition.figures", "stream", "topic", "partition", "wait_beyond"?:
  offset, "partitionlets"?: bool}: a partition this worker owns, as worker
  0's console and /metrics show it (workers/peer_partition.py): its log
  start offset and high watermark (once it holds `wait_beyond`, or after
  WAIT_S), and its partitionlets when asked.
- {"op": "partitions.figures", "partitions": [[stream, topic, partition],
  ...], "partitionlets": bool}: the same figures for many partitions at
  once, in order, {"error": why} for one that cannot be read (topic and
  cursor listings: one request per worker, not one per partition).
- {"op": "partition.read", ..., "offset", "max_bytes"}: its figures, with its
  record batches from `offset` (at most READ_MAX bytes) as raw bytes after
  the JSON (admin_api.encode_response_with_payload).
- {"op": "partition.offset_for_timestamp", ..., "timestamp"}: the hit.
- {"op": "replica_paths.read", "stream", "key": "TOPIC/PARTITION"} and
  {"op": "replica_paths.write", "stream", "records", "durable"}: where the
  batches a replica link brought into a worker's partition came from (kept
  by worker 0, whose links read them to break loops: replication/paths.py).
- {"op": "traffic.read"}: this worker's produce and fetch counters, in all
  and per topic ([messages in, bytes in, messages out, bytes out]), which
  worker 0's console charts add to its own.
- {"op": "metrics.read"}: this worker's /metrics text, {"text": ...}, which
  worker 0's /metrics shows with its own (one HTTP port for all workers).
- {"op": "share_state.forget", "keys": [[group, topic id, partition], ...]}:
  sent by a share group's coordinator to a partition's owner once it wrote
  those share-partitions' state for AlterShareGroupOffsets or
  DeleteShareGroupOffsets; the owner drops what it holds of them and reads
  the table again at their next use.

With authorization on, the caller needs CLUSTER_ACTION on the cluster, as
Kafka asks of brokers for its share coordinator's requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeGuard

from kafkacompat import storage
from kafkacompat.protocol.admin_api import (
    WORKER_STATE_KEY,
    WORKER_STATE_VERSION,
    encode_response_body,
    encode_response_with_payload,
)

from ..replication.paths import TABLE as PATHS_TABLE
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import ErrorCode, decode_json_request, storage_error_code
from .registry import Api

WAIT_S = 5.0  # the longest a partition.figures waits for `wait_beyond` (a long poll, as a fetch's max wait)
READ_MAX = 1024 * 1024  # the most a partition.read answers with
FIGURES_MAX = 100_000  # partitions one partitions.figures may ask for

# Between the workers of one `serve --workers N`: private, never advertised to stock clients
API = Api(WORKER_STATE_KEY, (WORKER_STATE_VERSION, WORKER_STATE_VERSION), None, advertised=False)


class Reaches(Groups, Placement, Security, Settings, Topics, Protocol):
    """What of the broker this module reaches."""


decode = decode_json_request


async def handle(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    authorizer = ctx.cluster.authorizer
    if authorizer.enabled and not authorizer.cluster(ctx, Operation.CLUSTER_ACTION):
        return encode_response_body(ErrorCode.cluster_authorization_failed.value,
                                    f"{ctx.principal} may not ask worker state here (needs CLUSTER_ACTION "
                                    "on the cluster)", None)
    op = request["op"]
    run = OPS.get(op) or (_partition_op if op.startswith("partition.") else None)
    if run is None:
        return _invalid(f"unknown worker state operation {op!r}")
    try:
        return await run(ctx, request)
    except storage.StorageError as exc:
        return encode_response_body(storage_error_code(exc).value, str(exc), None)


async def _share_forget(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    keys = _share_keys(request.get("keys"))
    if keys is None:
        return _invalid("'keys' must list [group, topic id, partition] triples")
    ctx.cluster.shares.forget(keys)
    return _answer(None)


async def _traffic(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    stats = ctx.cluster.stats
    return _answer({"totals": [stats.messages_in, stats.bytes_in, stats.messages_out, stats.bytes_out],
                    "topics": stats.topic_totals})


async def _metrics(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    if ctx.cluster.metrics_exposition is None:
        return _invalid("this worker keeps no metrics")
    return _answer({"text": (await ctx.cluster.metrics_exposition()).decode()})


async def _partition_op(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    """A read of a partition this worker owns, for worker 0's console and /metrics."""
    stream, topic, index = request.get("stream"), request.get("topic"), request.get("partition")
    if not (isinstance(stream, str) and isinstance(topic, str) and _count(index)):
        return _invalid("'stream', 'topic' and 'partition' must name a partition")
    await ctx.cluster.catch_up_on([(stream, topic)])  # made through worker 0 a moment ago?
    partition = ctx.cluster.store.partition(stream, topic, index)
    op = request["op"]
    if op == "partition.figures":
        wait_beyond = request.get("wait_beyond")
        if _count(wait_beyond) and partition.high_watermark <= wait_beyond:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(partition.wait_for_data(wait_beyond), WAIT_S)
        (found,) = (await ctx.cluster.partition_figures([(stream, topic, index)],
                                                        request.get("partitionlets") is True)).values()
        if isinstance(found, storage.StorageError):
            raise found
        return _answer(dataclasses.asdict(found))
    if op == "partition.read":
        offset, most = request.get("offset"), request.get("max_bytes")
        if not (_count(offset) and _count(most)):
            return _invalid("'offset' and 'max_bytes' must be counts")
        data = await partition.read(offset, min(most, READ_MAX))
        figures = {"log_start_offset": partition.log_start_offset, "high_watermark": partition.high_watermark}
        return encode_response_with_payload(ErrorCode.none.value, None, figures, bytes(data))
    if op == "partition.offset_for_timestamp":
        timestamp = request.get("timestamp")
        if not isinstance(timestamp, int) or isinstance(timestamp, bool):
            return _invalid("'timestamp' must be a whole number")
        hit = await partition.offset_for_timestamp(timestamp)
        return _answer({"hit": None if hit is None else {
            "offset": hit.offset, "timestamp": hit.timestamp, "leader_epoch": hit.leader_epoch}})
    return _invalid(f"unknown worker state operation {op!r}")


async def _partitions_figures(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    """Many partitions' figures at once, in the order asked: a listing of thousands of topics asks
    once per worker, not once per partition."""
    keys = request.get("partitions")
    if not isinstance(keys, list) or len(keys) > FIGURES_MAX or not all(
            isinstance(k, list) and len(k) == 3 and isinstance(k[0], str) and isinstance(k[1], str) and _count(k[2])
            for k in keys):
        return _invalid(f"'partitions' must list at most {FIGURES_MAX} [stream, topic, partition]")
    await ctx.cluster.catch_up_on((stream, topic) for stream, topic, _ in keys)  # made through worker 0 just now?
    asked = [(stream, topic, index) for stream, topic, index in keys]
    found = await ctx.cluster.partition_figures(asked, request.get("partitionlets") is True)
    return _answer([{"error": str(figures)} if isinstance(figures, storage.StorageError) else dataclasses.asdict(figures)
                    for figures in map(found.__getitem__, asked)])


def _invalid(message: str) -> bytes:
    return encode_response_body(ErrorCode.invalid_request.value, message, None)


def _answer(result: Any) -> bytes:
    return encode_response_body(ErrorCode.none.value, None, result)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


async def _replica_paths(ctx: Request[Reaches], request: dict[str, Any]) -> bytes:
    """The replication paths a worker's partitions keep in this worker's table; a write drops what this
    worker's links cached of them (they read them to break loops)."""
    stream = request.get("stream")
    if not isinstance(stream, str):
        return _invalid("'stream' must name a stream")
    if request["op"] == "replica_paths.read":
        key = request.get("key")
        if not isinstance(key, str):
            return _invalid("'key' must be a string")
        return _answer(ctx.cluster.store.get_state(stream, PATHS_TABLE).get(key))
    if (records := _records(request)) is None:
        return _invalid(RECORDS_EXPECTED)
    await ctx.cluster.store.put_state(stream, PATHS_TABLE, records, durable=request.get("durable") is True)
    if ctx.cluster.replication is not None:
        ctx.cluster.replication.paths.drop_cached(stream, list(records))
    return _answer(None)


RECORDS_EXPECTED = "'records' must map keys to a record or null"


def _records(request: dict[str, Any]) -> dict[str, dict | None] | None:
    """The request's table changes, {key: record or None}; None when it names something else."""
    records = request.get("records")
    if not isinstance(records, dict) or not all(v is None or isinstance(v, dict) for v in records.values()):
        return None
    return records


def _share_keys(keys: Any) -> list[tuple[str, uuid.UUID, int]] | None:
    """[group, topic id, partition] triples as share-partition keys; None when any is not one."""
    if not isinstance(keys, list):
        return None
    parsed = []
    for key in keys:
        if not (isinstance(key, list) and len(key) == 3 and isinstance(key[0], str) and isinstance(key[1], str)
                and isinstance(key[2], int) and not isinstance(key[2], bool)):
            return None
        try:
            parsed.append((key[0], uuid.UUID(key[1]), key[2]))
        except ValueError:
            return None
    return parsed


# op -> what answers it ("partition.*": _partition_op)
OPS: dict[str, Callable[[Request[Reaches], dict[str, Any]], Awaitable[bytes]]] = {
    "share_state.forget": _share_forget,
    "replica_paths.read": _replica_paths,
    "replica_paths.write": _replica_paths,
    "traffic.read": _traffic,
    "metrics.read": _metrics,
    "partitions.figures": _partitions_figures,
}

