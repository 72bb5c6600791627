"""Many broker processes as one Kafka cluster: who is alive, who leads which partition.

A broker alone (the default) is the whole cluster: `SingleNode`. Brokers
that share a PostgreSQL database (`--cluster-url`, or the `--store` URL when
that is postgresql://) register there with a lease they renew, and agree on
one leader per partition through a table whose rows carry a leader epoch:
`PostgresCluster`. No consensus of our own: every decision is one
conditional UPDATE that PostgreSQL serializes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .membership import ClusterError, ClusterView, Member, PartitionKey, SingleNode, cluster_url

if TYPE_CHECKING:
    from ..config import BrokerConfig


def open_cluster_view(
    config: "BrokerConfig", me: Member, partitions: Callable[[], Iterable[PartitionKey]],
    partitions_stamp: Callable[[], object] | None = None,
) -> ClusterView:
    """SingleNode unless the broker is given a PostgreSQL database to share. `partitions_stamp`
    changes whenever `partitions()` would (PostgresCluster)."""
    url = cluster_url(config)
    if url is None:
        return SingleNode(me)
    try:
        from .postgres_cluster import PostgresCluster  # asyncpg is loaded only for a cluster
    except ImportError as exc:
        raise ClusterError(f"a cluster in PostgreSQL needs asyncpg ({exc}): pip install 'kafkacompat[cloud]'") from exc

    return PostgresCluster(me, url, partitions, config.cluster_lease_ms, config.cluster_heartbeat_ms,
                           partitions_stamp)


__all__ = ["ClusterError", "ClusterView", "Member", "SingleNode", "open_cluster_view"]
