"""`kafkacompat serve --workers N`: several broker processes over one disk store, presented as a cluster.

One asyncio process uses one core. The supervisor (supervisor.py) starts N
worker processes, each a whole broker on its own port that owns a share of
the partitions (storage/disk/shared.py says which and what each may write);
Metadata and FindCoordinator route clients to the owner (view.py), as Kafka
routes them among its brokers, so stock clients spread their load unchanged.
"""
