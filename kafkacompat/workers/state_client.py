"""The WorkerState request's client: a worker of `serve --workers N` keeping state in worker 0's tables.

Only worker 0 writes the store's state tables (storage/disk/shared.py). The
others keep what must outlive them there through the private WorkerState
request (kafkacompat/handlers/worker_state.py): their share-partitions'
state (share_state.py) and their partitions' aborted transactions
(`WorkerAbortedEntries`) and the replication paths of the batches replica
links bring them (`WorkerPathTable`), as Kafka's share-partition leaders
write to the share coordinator. Worker 0 also uses it the other way, to tell an owner to
drop share-partitions an admin request reset.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from .view import WorkerView


async def ask_table(view: WorkerView, body: dict[str, Any], what: str) -> dict[str, dict]:
    """Worker 0's answer to a WorkerState read of a table: {key: record}; StorageError as `WorkerView.ask`, or when
    the answer is something else than a table."""
    rows = await view.ask(body, what)
    if not isinstance(rows, dict):
        raise storage.StorageError(f"worker 0 answered the {what} with something else than a table")
    return rows


class WorkerAbortedEntries:
    """The transactions.partition_state.AbortedEntries of a worker other than 0: worker 0's aborted_txns
    table. A load waits for worker 0 (StorageError while it restarts: the request is refused, retriable)."""

    def __init__(self, view: WorkerView) -> None:
        self.view = view

    async def read(self, stream: str, prefix: str) -> dict[str, dict]:
        return await ask_table(self.view, {"op": "aborted_txns.read", "stream": stream, "prefix": prefix},
                               "aborted transactions")

    async def put(self, stream: str, records: dict[str, dict | None], durable: bool = True) -> None:
        await self.view.ask({"op": "aborted_txns.write", "stream": stream, "records": records,
                              "durable": durable}, "aborted transactions")


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
