"""The replication paths of a worker of `serve --workers N` other than 0, kept through worker 0.

Every worker writes the store's state tables itself (storage/disk/catalog.py),
but the replica links run in worker 0, which caches the paths of the batches
they brought (replication/paths.py) to break loops. So the owner of a
partition a link writes into keeps its paths in worker 0's `replica_paths`
table through the private WorkerState request
(kafkacompat/handlers/worker_state.py), and worker 0 drops what it cached
of them as it writes them.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from .view import WorkerView


class WorkerPathTable:
    """The replication.paths.PathTable of a worker other than 0: worker 0's `replica_paths` table, where the
    receiver of a replica link into this worker's partitions keeps where their batches came from."""

    def __init__(self, view: WorkerView) -> None:
        self.view = view

    async def read(self, stream: str, key: str) -> dict[str, Any] | None:
        found = await self.view.ask({"op": "replica_paths.read", "stream": stream, "key": key}, "replication paths")
        if found is not None and not isinstance(found, dict):
            raise storage.StorageError("worker 0 answered the replication paths with something else than a record")
        return found

    async def put(self, stream: str, records: dict[str, dict[str, Any] | None], durable: bool) -> None:
        await self.view.ask({"op": "replica_paths.write", "stream": stream, "records": records, "durable": durable},
                            "replication paths")
