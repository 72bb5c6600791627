"""Share-group state of a worker other than 0, kept in worker 0's table.

A worker leads the share-partitions of the topic partitions it owns, but
only worker 0 writes the store's state tables: the others' writes were
refused ("only worker 0 ... changes ... state tables"), so their members'
acknowledgements were never answered and a share group whose partitions
were another worker's delivered nothing. As Kafka's share-partition leaders
write their state to the share coordinator, a worker sends each write to
worker 0 (the WorkerState request, kafkacompat/handlers/worker_state.py)
and reads the table from there before it restores a share-partition, so a
restarted worker goes on from what was acknowledged.

The other way round, a share group's coordinator (the worker that owns its
__consumer_offsets partition) answers AlterShareGroupOffsets and
DeleteShareGroupOffsets by writing the state (through worker 0 when it is
another); `forget_at_owners` then has each owner drop the share-partitions
it holds, which it reads again from the table at their next use. Before, the
owner went on from what it held: an empty group reset to offset 0 read
nothing again, and the owner's next write put the old start offset back.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafkacompat import storage

from .state_client import ask_table
from .view import WorkerView

log = logging.getLogger(__name__)
ShareKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class WorkerShareState:
    """The shares.manager.StateTable of a worker other than 0: worker 0's `share_state` table."""

    local = False  # rows() is what the last reload() read

    def __init__(self, view: WorkerView) -> None:
        self.view = view
        self._rows: dict[str, dict] = {}

    def rows(self) -> dict[str, dict]:
        return self._rows

    async def reload(self) -> None:
        self._rows = await ask_table(self.view, {"op": "share_state.read"}, "share-group state")

    async def put(self, records: dict[str, dict | None], fence: storage.StateFence | None) -> None:
        """Written by worker 0 (the fence, this worker's own epoch, holds while it runs: its partitions
        are no other worker's); StorageError, and the caller keeps the records to write again, when worker
        0 cannot be reached or refuses."""
        await self.view.ask({"op": "share_state.write", "records": records}, "share-group state")
        for key, record in records.items():
            if record is None:
                self._rows.pop(key, None)
            else:
                self._rows[key] = record


async def forget_at_owners(view: WorkerView, shares: Any, keys: set[ShareKey]) -> None:
    """After the group's coordinator had these share-partitions' state written for an admin request: each
    is dropped here if another worker owns its partition (the coordinator would otherwise answer
    DescribeShareGroupOffsets from a copy that worker's acknowledgements leave behind), and that worker
    is told to drop it. An owner that
    cannot be reached is restarting, and holds nothing yet."""
    by_owner: dict[int, list[ShareKey]] = {}
    for key in keys:
        info = shares.cluster.by_id(key[1])
        if info is not None and (owner := view.owner((info.stream, info.name, key[2]))) != view.role.index:
            by_owner.setdefault(owner, []).append(key)
    for owner, owned in by_owner.items():
        shares.forget(owned)
        body = {"op": "share_state.forget", "keys": [[group, str(topic_id), index] for group, topic_id, index in owned]}
        try:
            await view.ask(body, "share-group state", index=owner)
        except storage.StorageError as exc:
            log.warning("worker %d was not told that %d share-partition(s) were reset: %s", owner, len(owned), exc)
