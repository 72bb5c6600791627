"""Many broker processes as one Kafka cluster: who is alive, who leads which partition.

A broker alone (the default) is the whole cluster: `SingleNode`. Brokers
that share a PostgreSQL database (`--cluster-url`, or the `--store` URL when
that is postgresql://) register there with a lease they renew, and agree on
one leader per partition through a table whose rows carry a leader epoch:
`PostgresCluster`. No consensus of our own: every decision is one
conditional UPDATE that PostgreSQL serializes.
"""

from __future__ import annotations

from .membership import ClusterError, ClusterView, Member, SingleNode, open_cluster_view

__all__ = ["ClusterError", "ClusterView", "Member", "SingleNode", "open_cluster_view"]
