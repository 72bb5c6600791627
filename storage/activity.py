"""What a store's background work has done: fsyncs and retention, counted for monitoring.

Plain counters on the store (one per store, so two brokers in one process
keep theirs apart), bumped where the work happens and read by the broker's
/metrics when scraped.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class StoreActivity:
    fsyncs: int = 0  # of partition logs (group commits and `always` syncs), each covering many appends
    fsync_seconds: float = 0.0
    fsync_failures: int = 0
    retention_passes: int = 0
    retention_deleted_partitionlets: int = 0  # whole partitionlets (a memory store: batches) past ttl or size cap
    retention_deleted_bytes: int = 0

    def fsynced(self, seconds: float, failed: bool = False) -> None:
        self.fsyncs += 1
        self.fsync_seconds += seconds
        self.fsync_failures += failed

    def retained(self, pieces: int, nbytes: int) -> None:
        self.retention_deleted_partitionlets += pieces
        self.retention_deleted_bytes += nbytes
