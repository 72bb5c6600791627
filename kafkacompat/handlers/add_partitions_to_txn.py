"""AddPartitionsToTxn: a producer names the partitions its transaction will write.

v0-3 come from clients (one transaction); v4+ is the batched form brokers
send, with `verify_only` to ask whether partitions are already in the
transaction (KIP-890). v5 is what a broker sends for a Produce v12 of
transactions v2: the partitions join the transaction as a v2 one. If any
partition is unknown, Kafka adds none and answers the others
OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Request, Security, Topics, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .txn_common import fenced_as, resolve_partitions

# AddPartitionsToTxn v0-5: v4+ is the brokers' batched form, v5 transactions v2 (KIP-890); error answers: v4+: top-level code
API = Api(24, (0, 5), changes(("v3_and_below_topics",), "results_by_topic_v3_and_below"))


class Reaches(Topics, Security, Transactions, Protocol):
    """What of the broker this module reaches."""

BATCHED_FROM = 4
TRANSACTIONS_V2_FROM = 5
FENCED_FROM = 2  # versions before answer INVALID_PRODUCER_EPOCH instead


async def _one(ctx: Request[Reaches], txn_id: str, producer_id: int, epoch: int, topics: Any, verify: bool) -> dict:
    if not ctx.cluster.authorizer.transactional_id(ctx, Operation.WRITE, txn_id):
        return {(topic.name, index): ErrorCode.transactional_id_authorization_failed
                for topic in topics for index in topic.partitions}
    found, errors = resolve_partitions(ctx, topics)
    coordinator = ctx.cluster.transactions
    if errors:
        errors.update({name: ErrorCode.operation_not_attempted for name in found})
    elif verify:
        verdicts = coordinator.verify_partitions(txn_id, producer_id, epoch, list(found.values()))
        errors = {name: verdicts[key] for name, key in found.items()}
    else:
        error = await coordinator.add_partitions(txn_id, producer_id, epoch, list(found.values()),
                                                 2 if ctx.version >= TRANSACTIONS_V2_FROM else 0)
        errors = {name: fenced_as(ctx.version, FENCED_FROM, error) for name in found}
    return errors


def _results(m: Any, topics: Any, errors: dict) -> tuple[Any, ...]:
    return tuple(
        make(m.AddPartitionsToTxnTopicResult, name=topic.name, results_by_partition=tuple(
            make(m.AddPartitionsToTxnPartitionResult, partition_index=index,
                 partition_error_code=errors[topic.name, index])
            for index in topic.partitions
        ))
        for topic in topics
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.version < BATCHED_FROM:
        topics = request.v3_and_below_topics
        errors = await _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch, topics, False)
        return make(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                    results_by_topic_v3_and_below=_results(m, topics, errors))
    if not ctx.cluster.authorizer.cluster(ctx, Operation.CLUSTER_ACTION):  # v4+ is sent by brokers only
        return make(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=())
    results = []
    for txn in request.transactions:
        errors = await _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                            txn.verify_only)
        results.append(make(m.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                            topic_results=_results(m, txn.topics, errors)))
    return make(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                results_by_transaction=tuple(results))
