"""One module per Kafka API; this registry maps API keys to them."""

from __future__ import annotations

from types import ModuleType

from kafkacompat.protocol.admin_api import STREAM_ADMIN_KEY

from . import (
    alter_configs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    stream_admin,
    sync_group,
)

HANDLERS: dict[int, ModuleType] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: join_group,
    12: heartbeat,
    13: leave_group,
    14: sync_group,
    15: describe_groups,
    16: list_groups,
    18: api_versions,
    19: create_topics,
    20: delete_topics,
    21: delete_records,
    22: init_producer_id,
    23: offset_for_leader_epoch,
    32: describe_configs,
    33: alter_configs,
    37: create_partitions,
    42: delete_groups,
    44: incremental_alter_configs,
    47: offset_delete,
    60: describe_cluster,
    68: consumer_group_heartbeat,
    69: consumer_group_describe,
    STREAM_ADMIN_KEY: stream_admin,  # private, never advertised (protocol.versions.UNADVERTISED)
}
