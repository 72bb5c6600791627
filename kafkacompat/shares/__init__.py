"""KIP-932 share groups: membership, share sessions and the delivery state of share-partitions."""
