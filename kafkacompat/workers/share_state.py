"""Share-group state across the workers of `serve --workers N`: an admin reset reaches the owners.

A worker leads the share-partitions of the topic partitions it owns and
writes their state (the SPSO, each in-flight record's delivery state and
count) into the store's `share_state` table itself, which every worker
appends to and follows (storage/disk/catalog.py), so a restarted worker
goes on from what was acknowledged. Before stop 54 only worker 0 wrote the
table and another worker's members were never answered; from stop 54 to 60
the others sent each write to worker 0 (a WorkerState round trip).

A share group's coordinator (the worker that owns its __consumer_offsets
partition) answers AlterShareGroupOffsets and DeleteShareGroupOffsets by
writing the state; `forget_at_owners` then has each owner drop the
share-partitions it holds, which it reads again from the table at their
next use. Before, the owner went on from what it held: an empty group
reset to offset 0 read nothing again, and the owner's next write put the
old start offset back.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafkacompat import storage

from .view import WorkerView

log = logging.getLogger(__name__)
ShareKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


async def forget_at_owners(view: WorkerView, shares: Any, keys: set[ShareKey]) -> None:
    """After the group's coordinator had these share-partitions' state written for an admin request: each
    is dropped here if another worker owns its partition (the coordinator would otherwise answer
    DescribeShareGroupOffsets from a copy that worker's acknowledgements leave behind), and that worker
    is told to drop it. An owner that cannot be reached is restarting, and holds nothing yet."""
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
