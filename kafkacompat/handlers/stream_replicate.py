"""StreamReplicate (private, unadvertised): batches, topics and cursors from a source cluster.

The source broker's replica link (kafkacompat/replication/engine.py) is the
only client; the operations are in kafkacompat/replication/receiver.py.
Until authentication exists a link is plain TCP: any peer that can reach
the Kafka port can send these requests (see docs/replication.md).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.protocol.admin_api import AdminMessageError, encode_response_body
from kafkacompat.protocol.messages import MalformedRequestError, RequestHeader
from kafkacompat.protocol.replication_api import (
    REPLICATE_KEY,
    REPLICATE_VERSION,
    decode_request_body,
    encode_request,
)

from ..replication import receiver
from ..security.acls import Operation
from ..security.authorizer import deny
from ..services import Placement, Request, Security, Settings, Topics, Transactions
from .common import ErrorCode, storage_error_code
from .registry import Api

# Stream replication between clusters: private, never advertised to stock clients
API = Api(REPLICATE_KEY, (REPLICATE_VERSION, REPLICATE_VERSION), None, advertised=False)


class Reaches(Placement, Security, Settings, Topics, Transactions, Protocol):
    """What of the broker this module reaches."""

log = logging.getLogger(__name__)
CLIENT_ID = "kafkacompat-worker"  # a request relayed to the worker that serves it

_OPS = {
    "hello": receiver.hello,
    "topics": receiver.sync_topics,
    "cursors": receiver.commit_cursors,
    "ping": receiver.ping,
    "log_start": receiver.log_start,
}


def _refusal(ctx: Request[Reaches], body: dict[str, Any]) -> str | None:
    """With authorization on, a link may write into a stream whose copy permission its principal holds,
    or anywhere with CLUSTER_ACTION on the cluster (Kafka's operation for traffic between brokers)."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.enabled or authorizer.cluster(ctx, Operation.CLUSTER_ACTION, log_denied=False):
        return None
    stream = body.get("stream")
    if not isinstance(stream, str):
        return None if body.get("op") == "ping" else f"{ctx.principal} may not replicate into this cluster"
    if authorizer.stream_allows(ctx.principal, stream, "copy"):
        return None
    deny(ctx, "copy permission", "STREAM", stream)
    return f"{ctx.principal} may not replicate into stream {stream} (needs its copy permission or CLUSTER_ACTION)"


PARTITION_OPS = frozenset({"append", "start_at", "log_start"})


async def _relayed(ctx: Request[Reaches], body: dict[str, Any], payload: memoryview) -> bytes | None:
    """The answer of the worker of `serve --workers N` that serves this request when this one does not:
    a partition's writes are its owner's, topics, cursors and the hello worker 0's (which writes the
    catalog and reads every partition's end), whichever worker the link reached. Before stop 56 a link
    into a stream with a partition on worker 1 broke on it. None: this broker serves it."""
    op = body["op"]
    if op == "ping":
        return None
    key = None
    if op in PARTITION_OPS:
        stream, topic, index = body["stream"], body["topic"], body["partition"]
        if not (isinstance(stream, str) and isinstance(topic, str) and isinstance(index, int)):
            raise TypeError("stream, topic and partition must name a partition")
        await ctx.cluster.catch_up_on([(stream, topic)])  # made by worker 0 a moment ago (the link's topics op)
        key = (stream, topic, index)
    return await ctx.cluster.view.relay(encode_request(1, body, bytes(payload), CLIENT_ID), key)


def decode(header: RequestHeader, frame: bytes) -> tuple[dict[str, Any], memoryview]:
    try:
        return decode_request_body(frame, header.body_offset)
    except AdminMessageError as exc:
        raise MalformedRequestError(str(exc)) from None


async def handle(ctx: Request[Reaches], request: tuple[dict[str, Any], memoryview]) -> bytes:
    body, payload = request
    service = ctx.cluster.replication
    op = body["op"]
    refused = _refusal(ctx, body)
    if refused is not None:
        return encode_response_body(ErrorCode.cluster_authorization_failed.value, refused, None)
    try:
        relayed = await _relayed(ctx, body, payload)
        if relayed is not None:
            return relayed
        if service is None:
            raise receiver.ReplicaRequestError("this broker does not run replication")
        if op != "ping" and isinstance(body.get("stream"), str):
            receiver.check_upstream(service, body["stream"], body.get("source"))
        if op == "append":
            key = (body["stream"], body["topic"], body["partition"])
            result = await receiver.append(service, body, payload, ctx.cluster.producers,
                                           ctx.cluster.transactions.partitions, await ctx.cluster.replica_epoch(key))
        elif op == "start_at":
            result = await receiver.start_at(service, body, ctx.cluster.transactions.partitions)
        elif op in _OPS:
            result = await _OPS[op](service, body)
        else:
            raise receiver.ReplicaRequestError(f"unknown replication operation {op!r}")
    except receiver.ReplicaRequestError as exc:
        return encode_response_body(ErrorCode.invalid_request.value, str(exc), None)
    except (KeyError, TypeError, ValueError) as exc:
        return encode_response_body(ErrorCode.invalid_request.value, f"malformed {op} request: {exc!r}", None)
    except storage.StorageError as exc:
        log.error("replication %s from %s failed: %s", op, ctx.peer, exc)
        return encode_response_body(storage_error_code(exc).value, str(exc), None)
    return encode_response_body(ErrorCode.none.value, None, result)
