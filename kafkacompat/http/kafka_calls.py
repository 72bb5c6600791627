"""Kafka API calls made in-process, through the same handlers the Kafka port runs.

The REST proxy is a Kafka client of its own broker, minus the socket: each
call encodes a real request frame, decodes it with the handler's own
decoder and runs the handler with a request context (behind the same
cluster-wide authorization gate as the Kafka port), so validation, quotas,
idempotence, group membership and metrics are exactly those of a client on
the Kafka port. Only the TCP hop is saved; no state or rule is copied.

A group's or transactional id's requests are answered by its coordinator
alone (NOT_COORDINATOR elsewhere, as on Kafka), and the proxy has no
FindCoordinator loop of its own: `coordinator_call` asks the coordinating
broker over its Kafka port when this one is not it, as a client would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import itertools
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType

from kafkacompat.protocol.messages import (
    decode_request,
    encode_body,
    make,
    parse_request_header,
    request_header,
    request_schema,
)
from kafkacompat.protocol.versions import schema

from ..broker import admin_log
from ..broker.cluster import Cluster, TopicError
from ..broker.request_stats import response_errors
from ..cluster.membership import Member
from ..handlers import HANDLERS, SUPPORTED
from ..handlers.common import NO_RESPONSE
from ..kafka_port.connection import RequestContext
from ..security.refusals import cluster_gate
from ..workers.forward import ForwardError, forward
from .principal import current_entry, current_peer, current_principal

CLIENT_ID = "kafkacompat-rest"
NO_TOPIC_ID = uuid.UUID(int=0)  # topics named, not identified
_correlation = itertools.count(1)
ELSEWHERE = ErrorCode.not_coordinator.name  # as response_errors names it
PEER_TIMEOUT_S = 10.0
LIST_OFFSETS = 2
LIST_OFFSETS_TIMEOUT = datetime.timedelta(seconds=30)


def version_of(api_key: int) -> int:
    """The newest version this broker serves: the proxy always speaks it."""
    return SUPPORTED[api_key][1]


def request_types(api_key: int) -> Any:
    """The kio module of an API's request at the version the proxy speaks (its nested entity classes)."""
    return sys.modules[request_schema(api_key, version_of(api_key)).__module__]


@functools.cache
def _response_reader(api_key: int, version: int) -> Any:
    return entity_reader(schema(api_key, version, EntityType.response))


def _frame(api_key: int, version: int, body: Any, client_id: str) -> bytes:
    head = request_header(api_key, version, next(_correlation) & 0x7FFFFFFF, client_id.encode())
    return head + (body if isinstance(body, (bytes, bytearray)) else encode_body(body))


async def call(cluster: Cluster, api_key: int, body: Any | bytes, *, client_id: str = CLIENT_ID) -> Any:
    """Run one request through the broker's handler for it and return the decoded kio response.

    `body` is a kio request (build it with `build`) or its encoded bytes (a
    produce request built by hand). The call is counted in the broker's
    request stats like any other.
    """
    version = version_of(api_key)
    started = time.perf_counter()
    frame = _frame(api_key, version, body, client_id)
    header = parse_request_header(frame)
    ctx = RequestContext(cluster, header, current_peer(), CLIENT_ID, len(frame), principal=current_principal(),
                         listener="HTTP", entry=current_entry())
    handler = HANDLERS[api_key]
    request = getattr(handler, "decode", decode_request)(header, frame)
    refused = cluster_gate(ctx, request, handler.API.answer) if cluster.authorizer.enabled else None  # as the Kafka port's connection
    answer = admin_log.logged(ctx, request, refused if refused is not None else await handler.handle(ctx, request))
    if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
        answer = await answer
    cluster.stats.request_done(api_key, version, time.perf_counter() - started)
    if answer is NO_RESPONSE:
        return None
    if isinstance(answer, (bytes, bytearray, list)):  # Produce and Fetch encode their own answers (and count errors)
        data = answer if not isinstance(answer, list) else b"".join(bytes(chunk) for chunk in answer)
        return _response_reader(api_key, version)(bytes(data), 0)[0]
    if dataclasses.is_dataclass(answer):
        for error in response_errors(answer):
            cluster.stats.error(api_key, version, error)
    return answer


def build(api_key: int, entity: str | None = None, **values: Any) -> Any:
    """A kio request (or one of its nested entities by class name) at the proxy's version."""
    if entity is None:
        return make(request_schema(api_key, version_of(api_key)), **values)
    return make(getattr(request_types(api_key), entity), **values)


async def coordinator_call(cluster: Cluster, api_key: int, body: Any, key: str, *, client_id: str = CLIENT_ID,
                           timeout_s: float = PEER_TIMEOUT_S) -> Any:
    """`call`, on the broker that coordinates `key` (a group or transactional id): when this broker
    answers NOT_COORDINATOR and nothing else (after the seam's wait), the coordinator's answer, asked
    over its Kafka port within `timeout_s` (a JoinGroup waits for the rebalance); this broker's own
    answer when no other broker coordinates the key or that one cannot be reached (the caller then
    reports the retriable error).

    The peer authorizes a forwarded request as this broker's connection, not as the HTTP user: the
    user's ACLs are checked here first (the handlers check them before they ask the coordinator
    seam), and an answer that refused anything else (a topic the user may not read) is not sent on,
    so forwarding never grants what this broker refused."""
    answer = await call(cluster, api_key, body, client_id=client_id)
    if set(response_errors(answer)) != {ELSEWHERE}:
        return answer
    coordinator = cluster.coordinator(key)
    if coordinator is None or coordinator.node_id == cluster.node_id:
        return answer
    elsewhere = await peer_call(cluster, coordinator, api_key, body, timeout_s)
    return answer if elsewhere is None else elsewhere


async def peer_call(cluster: Cluster, peer: Member, api_key: int, body: Any,
                    timeout_s: float = PEER_TIMEOUT_S) -> Any | None:
    """Broker `peer`'s answer to a kio request (at the proxy's version) over its Kafka port, as a client
    would ask it; None when it cannot be reached in `timeout_s`."""
    try:  # on a connection the broker keeps to that peer (a worker's: on the workers' channel)
        return await forward(peer.host, peer.port, api_key, version_of(api_key), body, cluster.view.peers,
                             timeout_s)
    except ForwardError:
        return None


async def ask_leaders(cluster: Cluster, api_key: int, refused: set[tuple[str, int]],
                      request: Callable[[dict[str, set[int]]], Any]) -> list[Any]:
    """The answers of the live leaders of the partitions this broker refused as led elsewhere
    (NOT_LEADER_OR_FOLLOWER, after the user's ACLs were checked here), each asked over its Kafka port
    `request(the partitions it leads)`, as a consumer asks each leader; one that cannot be reached
    is left out."""
    answers = []
    for leader, led in _leaders(cluster, refused).items():
        found = await peer_call(cluster, leader, api_key, request(led))
        if found is not None:
            answers.append(found)
    return answers


def list_offsets_request(partitions: dict[str, set[int]], timestamp: int = -1) -> Any:
    """A ListOffsets request for the partitions (topic -> indexes) at `timestamp` (-1: the log end,
    -2: the log start), read uncommitted, as a consumer sends it."""
    topics = tuple(
        build(LIST_OFFSETS, "ListOffsetsTopic", name=topic, partitions=tuple(
            build(LIST_OFFSETS, "ListOffsetsPartition", partition_index=i, current_leader_epoch=-1,
                  timestamp=timestamp) for i in sorted(indexes)))
        for topic, indexes in partitions.items()
    )
    return build(LIST_OFFSETS, replica_id=-1, isolation_level=0, topics=topics, timeout=LIST_OFFSETS_TIMEOUT)


def _leaders(cluster: Cluster, partitions: set[tuple[str, int]]) -> dict[Member, dict[str, set[int]]]:
    """The partitions by the live broker that leads each (those without one left out): where to ask
    for those this broker answered NOT_LEADER_OR_FOLLOWER (after checking the user's ACLs)."""
    by_leader: dict[Member, dict[str, set[int]]] = {}
    for name, index in partitions:
        try:
            found = cluster.view.leader_of((*cluster.split(name), index))
        except TopicError:
            continue
        leader = None if found is None else cluster.view.member(found[0])
        if leader is not None:
            by_leader.setdefault(leader, {}).setdefault(name, set()).add(index)
    return by_leader
