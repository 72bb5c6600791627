"""AlterReplicaLogDirs: move partitions to another log dir (a volume of the store), as Kafka's ReplicaManager does.

Each partition named gets the dir as its home: its new partitionlets start
there and those elsewhere are moved there in the background (the store's
move, crash-safe), while it is produced to and consumed as usual;
DescribeLogDirs shows the moved part as the "future" replica until the move
is done. Errors as Kafka answers them: LOG_DIR_NOT_FOUND for a path that is
not one of the log dirs (checked first), UNKNOWN_TOPIC_OR_PARTITION,
REPLICA_NOT_AVAILABLE on a broker of a cluster that does not host the
partition, KAFKA_STORAGE_ERROR when the partition is offline or the dir
has no room or cannot be written (CLUSTER_AUTHORIZATION_FAILED for every
partition without ALTER on the cluster comes from security/refusals.py). A
partition named twice goes to the last dir named, as in Kafka's map of
partition to dir. Stores with one data dir (memory, cloud) hold every
partition there: naming it succeeds and changes nothing.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from ..services import Request, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, changes


def _topics_of_dirs(request: Any) -> tuple[Any, ...]:
    """Asked per dir, answered per topic: each dir's topics, as Kafka's getErrorResponse lists them."""
    return tuple(topic for log_dir in request.dirs for topic in log_dir.topics)


# AlterReplicaLogDirs v1-2 (v0 is gone since Kafka 4.0)
API = Api(34, (1, 2), changes(("dirs",), "results", items=_topics_of_dirs))


async def _move(ctx: Request[Topics], topic: str, index: int, log_dir: str) -> ErrorCode:
    cluster = ctx.cluster
    if log_dir not in cluster.store.data_dirs():
        return ErrorCode.log_dir_not_found
    info, missing = cluster.topic_for(topic)
    partition, error = await cluster.serving_partition(info, missing, index)
    if partition is None:
        return ErrorCode.replica_not_available if error == ErrorCode.not_leader_or_follower else error
    try:
        await partition.move_to_log_dir(log_dir)
    except storage.StorageError as exc:
        return storage_error_code(exc)
    return ErrorCode.none


async def handle(ctx: Request[Topics], request: Any) -> Any:
    m = schema_of(ctx)
    wanted: dict[str, dict[int, str]] = {}  # topic as the client spelled it -> partition -> dir
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                wanted.setdefault(topic.name, {})[index] = log_dir.path
    results = []
    for topic, partitions in wanted.items():
        answers = []
        for index, log_dir in partitions.items():
            error = await _move(ctx, topic, index, log_dir)
            answers.append(make(m.AlterReplicaLogDirPartitionResult, partition_index=index, error_code=error))
        results.append(make(m.AlterReplicaLogDirTopicResult, topic_name=topic, partitions=tuple(answers)))
    return make(m.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
