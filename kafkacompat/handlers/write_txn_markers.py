"""WriteTxnMarkers: write commit or abort markers into partitions this broker leads.

On Kafka the transaction coordinator sends it to partition leaders; an
operator sends it too, through Admin.abortTransaction (`kafka-transactions.sh
abort`), to end a hanging transaction the coordinator no longer knows of. This
broker's own coordinator writes its markers directly, so the request is what
operators' tools send. As Kafka's KafkaApis serves it: ALTER on the cluster
or, failing that, CLUSTER_ACTION (else every partition is
CLUSTER_AUTHORIZATION_FAILED); per partition UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER where another broker of a cluster leads it, and the
leader's own checks of the marker (ProducerStates.marker_refusal). The
coordinator's state is left alone, as on Kafka. `__consumer_offsets` holds
no transactional offsets here (they wait in the coordinator), so a marker
for it is refused INVALID_TOPIC_EXCEPTION, as a produce to it is.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType

from ..security.acls import Operation
from ..services import Placement, Request, Security, Topics, Transactions
from ..transactions.markers import append_marker
from .common import ErrorCode, make, schema_of, storage_error_code
from .registry import Api, changes

# WriteTxnMarkers v1 (Kafka 4.1 serves v1 only): kafka-transactions.sh abort; error answers: per producer, topic and partition
API = Api(27, (1, 1), changes(("markers",), "markers"))


class Reaches(Topics, Placement, Security, Transactions, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    authorizer = ctx.cluster.authorizer
    allowed = (authorizer.cluster(ctx, Operation.ALTER, log_denied=False)
               or authorizer.cluster(ctx, Operation.CLUSTER_ACTION))
    # producer id -> topic -> partition -> error: Kafka answers one entry per producer id
    results: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for marker in request.markers:
        control = ControlType.COMMIT if marker.transaction_result else ControlType.ABORT
        by_topic = results.setdefault(marker.producer_id, {})
        for topic in marker.topics:
            errors = by_topic.setdefault(topic.name, {})
            for index in topic.partition_indexes:
                errors[index] = (await _write(ctx, marker, control, topic.name, index) if allowed
                                 else ErrorCode.cluster_authorization_failed)
    return make(m.WriteTxnMarkersResponse, markers=tuple(
        make(m.WritableTxnMarkerResult, producer_id=producer_id, topics=tuple(
            make(m.WritableTxnMarkerTopicResult, name=name, partitions=tuple(
                make(m.WritableTxnMarkerPartitionResult, partition_index=index, error_code=error)
                for index, error in errors.items()))
            for name, errors in by_topic.items()))
        for producer_id, by_topic in results.items()))


async def _write(ctx: Request[Reaches], marker: Any, control: ControlType, name: str, index: int) -> ErrorCode:
    """One partition's marker: checked against the producer's state there, then appended."""
    cluster = ctx.cluster
    info, _ = cluster.topic_for(name)
    if info is not None and cluster.is_internal(info):
        # Kafka's group coordinator would settle the producer's pending offsets there; here offsets are
        # cursors and a transaction's wait in its coordinator, so there is nothing to mark (produce too
        # is refused with this error).
        return ErrorCode.invalid_topic_exception
    partition, error = await cluster.serving_partition(info, ErrorCode.unknown_topic_or_partition, index)
    if partition is None or info is None:  # no partition without its topic
        return error
    key = (info.stream, info.name, index)
    try:
        await cluster.producers.restore(key, partition)
        error = cluster.producers.marker_refusal(marker.producer_id, marker.producer_epoch, key,
                                                 marker.coordinator_epoch)
        if error != ErrorCode.none:
            return error
        durable = await append_marker(
            cluster.transactions.partitions, cluster.producers, key, marker.producer_id, marker.producer_epoch,
            control, marker.coordinator_epoch, int(time.time() * 1000), leader_epoch=cluster.append_epoch(key))
        await durable
    except storage.StorageError as exc:
        return storage_error_code(exc)
    return ErrorCode.none
