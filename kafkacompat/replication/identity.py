"""A cluster's durable identity: a name people choose and the store's UUID.

The UUID is the store's own `store_id`, made once when the store was
created, so the Kafka cluster id the broker already answers (its URL-safe
base64 form) and the replication identity are the same value. The name is
kept in the store's settings; `serve --cluster-name` sets it, otherwise the
kept one (or, the first time, the data dir's name) is used.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid

from kafkacompat.storage import Store

log = logging.getLogger(__name__)

NAME_SETTING = "replication:cluster.name"


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterIdentity:
    name: str
    uuid: uuid.UUID

    @property
    def id(self) -> str:
        """The UUID as text: what replication paths and link records hold."""
        return str(self.uuid)


def default_name(data_dir: str, store_id: uuid.UUID) -> str:
    """The data dir's last component (memory stores: 'memory-' and the UUID's first 8 hex digits)."""
    if data_dir.startswith("memory:"):
        return f"memory-{store_id.hex[:8]}"
    path = data_dir[len("file://"):] if data_dir.startswith("file://") else data_dir
    return os.path.basename(os.path.abspath(path).rstrip(os.sep)) or "kafkacompat"


async def ensure_identity(store: Store, configured: str | None, data_dir: str) -> ClusterIdentity:
    """The cluster's identity, writing the name into the store when it is new or changed."""
    kept = store.settings().get(NAME_SETTING)
    name = configured or kept or default_name(data_dir, store.store_id)
    if name != kept:
        await store.set_settings({NAME_SETTING: name})
        if kept:
            log.info("cluster renamed from %s to %s (UUID %s)", kept, name, store.store_id)
    return ClusterIdentity(name, store.store_id)
