"""DescribeTransactions: state, producer, timeout and partitions of transactional ids (kafka-transactions.sh describe)."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Request, Security, Topics, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeTransactions v0
API = Api(65, (0, 0), reads())


class Reaches(Topics, Security, Transactions, Protocol):
    """What of the broker this module reaches."""


def _topics(m: Any, cluster: Reaches, partitions: set[tuple[str, str, int]]) -> tuple[Any, ...]:
    by_topic: dict[str, list[int]] = {}
    for stream, topic, index in sorted(partitions):
        info = cluster.store.get_topic(stream, topic)
        if info is not None:
            by_topic.setdefault(cluster.display_name(info), []).append(index)
    return tuple(make(m.TopicData, topic=name, partitions=tuple(indexes)) for name, indexes in by_topic.items())


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    states = []
    for txn_id in request.transactional_ids:
        error = ErrorCode.transactional_id_authorization_failed
        if ctx.cluster.authorizer.transactional_id(ctx, Operation.DESCRIBE, txn_id):
            error = await ctx.cluster.transactions.coordinator_error(txn_id)  # only its coordinator holds it
        meta = ctx.cluster.transactions.describe(txn_id) if error == ErrorCode.none else None
        if meta is None:
            states.append(make(
                m.TransactionState, transactional_id=txn_id,
                error_code=error if error != ErrorCode.none else ErrorCode.transactional_id_not_found,
                transaction_state="", transaction_timeout=datetime.timedelta(0),
                transaction_start_time=datetime.datetime.fromtimestamp(-0.001, datetime.UTC),
                producer_id=-1, producer_epoch=-1, topics=(),
            ))
            continue
        states.append(make(
            m.TransactionState, error_code=ErrorCode.none, transactional_id=txn_id,
            transaction_state=meta.state.value,
            transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
            transaction_start_time=datetime.datetime.fromtimestamp(meta.start_ms / 1000, datetime.UTC),
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=_topics(m, ctx.cluster, meta.partitions),
        ))
    return make(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states))
