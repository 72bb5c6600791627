"""DescribeQuorum: the KRaft metadata quorum as kafka-metadata-quorum.sh and Admin.describeMetadataQuorum see it.

kafkacompat has no Raft log: cluster metadata lives in the store, and the
controller is the node the cluster view names. Kafka 4.1 brokers forward
this API to the active controller, and tools and clients (kafka-python's
describe_metadata_quorum) expect it, so the answer describes that truth in
KRaft's terms: one voter, the controller, leading epoch 1 of a log that has
no records (high watermark 0, no follower lag), and every other live broker
an observer, as Kafka's brokers are. Directory ids are stable per store and
node. Any other partition asked for gets Kafka's UNKNOWN_TOPIC_OR_PARTITION
(DESCRIBE on the cluster is checked by security.refusals).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

from ..services import Placement, Request, Topics
from .common import ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeQuorum v0-2: the controller as the metadata quorum's one voter (Kafka forwards it)
API = Api(55, (0, 2), reads())


class Reaches(Topics, Placement, Protocol):
    """What of the broker this module reaches."""

METADATA_TOPIC = "__cluster_metadata"
CONTROLLER_LISTENER = "CONTROLLER"
LEADER_EPOCH = 1
HIGH_WATERMARK = 0


def _directory_id(store_id: uuid.UUID, node_id: int) -> uuid.UUID:
    return uuid.uuid5(store_id, f"metadata-log-dir/{node_id}")


NOT_HOSTED = "This server does not host this topic-partition."


def _not_hosted(m: Any, index: int) -> Any:
    return make(m.PartitionData, partition_index=index, error_code=ErrorCode.unknown_topic_or_partition,
                error_message=NOT_HOSTED, leader_id=0, leader_epoch=0, high_watermark=0, current_voters=(),
                observers=())


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    now = int(time.time() * 1000)
    live = cluster.brokers_for(ctx.listener)
    controller = cluster.view.controller_id
    store_id = cluster.store.store_id

    def replica(node_id: int) -> Any:
        return make(m.ReplicaState, replica_id=node_id, replica_directory_id=_directory_id(store_id, node_id),
                    log_end_offset=HIGH_WATERMARK, last_fetch_timestamp=now, last_caught_up_timestamp=now)

    def described(topic: str, index: int) -> Any:
        if (topic, index) != (METADATA_TOPIC, 0):
            return _not_hosted(m, index)
        return make(
            m.PartitionData, partition_index=0, error_code=ErrorCode.none, error_message="", leader_id=controller,
            leader_epoch=LEADER_EPOCH, high_watermark=HIGH_WATERMARK, current_voters=(replica(controller),),
            observers=tuple(replica(b.node_id) for b in live if b.node_id != controller),
        )

    topics = tuple(
        make(m.TopicData, topic_name=t.topic_name, partitions=tuple(described(t.topic_name, p.partition_index)
                                                                    for p in t.partitions))
        for t in request.topics
    )
    asked = any(t.topic_name == METADATA_TOPIC and any(p.partition_index == 0 for p in t.partitions)
                for t in request.topics)
    nodes = tuple(
        make(m.Node, node_id=b.node_id, listeners=(make(m.Listener, name=CONTROLLER_LISTENER, host=b.host, port=b.port),))
        for b in live if asked and b.node_id == controller
    )
    return make(m.DescribeQuorumResponse, error_code=ErrorCode.none, error_message="", topics=topics, nodes=nodes)
