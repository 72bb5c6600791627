"""Worker 0 keeps a bounded number of the other workers' partitions it reads through them.

Each partition of another worker that worker 0's console, links or schema
log read is kept as a PeerPartition (its last figures, its long poll). A
console browsing a million topics must not keep one for each.
"""

from __future__ import annotations

from types import SimpleNamespace

from kafkacompat.storage.disk.shared import owner_of

from kafkacompat.cluster.membership import Member
from kafkacompat.workers.role import WorkerRole
from kafkacompat.workers.view import PEERS_KEPT, WorkerView


def test_the_partitions_read_lately_are_kept_and_the_oldest_forgotten() -> None:
    view = WorkerView(Member(1, "127.0.0.1", 9092), WorkerRole(0, 2, 1, (9092, 9093)),
                      SimpleNamespace(default_stream="/default"), "/nonexistent")
    theirs = [("/default", f"t{n}", 0) for n in range(3 * PEERS_KEPT)
              if owner_of(2, "/default", f"t{n}", 0) == 1][:PEERS_KEPT + 1]
    assert view.peer_partition(("/default", "_schemas", 0)) is None  # worker 0's own
    first, second = view.peer_partition(theirs[0]), view.peer_partition(theirs[1])
    assert first is not None and view.peer_partition(theirs[0]) is first  # kept, and now the latest used
    for key in theirs[2:]:
        view.peer_partition(key)
    assert view.peer_partition(theirs[0]) is first  # used lately: kept
    assert view.peer_partition(theirs[1]) is not second  # the least lately used: forgotten, made again
