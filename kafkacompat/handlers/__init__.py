"""One module per Kafka API; this registry maps API keys to them."""

from __future__ import annotations

from types import ModuleType

from protocol.admin_api import STREAM_ADMIN_KEY

from . import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    stream_admin,
)

HANDLERS: dict[int, ModuleType] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    18: api_versions,
    19: create_topics,
    20: delete_topics,
    21: delete_records,
    22: init_producer_id,
    23: offset_for_leader_epoch,
    32: describe_configs,
    33: alter_configs,
    37: create_partitions,
    44: incremental_alter_configs,
    60: describe_cluster,
    STREAM_ADMIN_KEY: stream_admin,  # private, never advertised (protocol.versions.UNADVERTISED)
}
