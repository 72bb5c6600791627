"""ElectLeaders: one broker leads every partition, so no election is ever needed (as a single-node Kafka answers)."""

from __future__ import annotations

from typing import Any

from ..services import Request, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# ElectLeaders v0-2
API = Api(43, (0, 2), reads())

NOT_NEEDED = "Leader election not needed for topic partition."


def _result(m: Any, index: int, code: ErrorCode, message: str | None) -> Any:
    return make(m.PartitionResult, partition_id=index, error_code=code, error_message=message)


async def handle(ctx: Request[Topics], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    results = []
    if request.topic_partitions is None:  # every partition: none needs an election, so none is listed
        results = [make(m.ReplicaElectionResult, topic=cluster.listed_name(info.stream, info.name, ctx.client_software_name), partition_result=())
                   for info in cluster.store.list_topics()]
    for topic in request.topic_partitions or ():
        info, missing = cluster.topic_for(topic.topic)
        partitions = []
        for index in topic.partitions:
            if info is None:
                partitions.append(_result(m, index, missing, f"No such topic as {topic.topic}"))
            elif not 0 <= index < info.partitions:
                partitions.append(_result(m, index, ErrorCode.unknown_topic_or_partition,
                                          f"No such partition as {topic.topic}-{index}"))
            else:
                partitions.append(_result(m, index, ErrorCode.election_not_needed, NOT_NEEDED))
        results.append(make(m.ReplicaElectionResult, topic=topic.topic, partition_result=tuple(partitions)))
    return make(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                replica_election_results=tuple(results))
