"""Stream replication between clusters, as MapR Event Store does it.

A source broker runs one task per replica link (engine.py) that ships a
stream's record batches byte for byte, at their offsets, to the destination
broker's own Kafka port over a private API (receiver.py), with the stream's
topics, partition counts, configs and consumer cursors. Each cluster has a
durable name and UUID (identity.py); each replicated batch's path of cluster
UUIDs is kept beside the partition (paths.py), so no link ships a batch to a
cluster it has already passed through. Links are managed with
`kafkacompat stream replica|upstream` (cli.py, admin_ops.py).

Nothing is imported here, so the command line loads only what it uses.
"""
