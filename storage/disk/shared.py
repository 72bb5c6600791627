"""One disk store opened by several worker processes of one broker (`kafkacompat serve --workers N`).

A worker appends only to the partitions it owns (`owner_of`, the same pure
function in every worker), so no two processes ever write one partition's
files. The topic catalog and store.json have one writer: worker 0, the
controller, as Kafka forwards catalog changes to its controller. The others
read the catalog (never repairing it: the controller may be appending) and
pick up its changes by re-reading it when it grows. The other per-stream
logs shared by all partitions, cursors and state tables, are written by
every worker: each coordinates the groups and transactional ids of the
__consumer_offsets partitions it owns and writes their cursors and state
itself, appending under the file's lock and following what the others
append (storage/disk/catalog.py).

The supervisor holds the data dir's lock for all of them and gives each
worker start a leader epoch above every earlier one, so a restarted worker
leads its partitions under a new epoch as a new Kafka leader would.
"""

from __future__ import annotations

import dataclasses
import zlib

SCHEMAS_TOPIC = "_schemas"  # each stream's Schema Registry records (kafkacompat/schemas/log.py)


def owner_of(count: int, stream: str, topic: str, index: int) -> int:
    """Which of `count` workers owns a partition: a topic's partitions go round the workers from a
    place set by its name (as the cloud engine's preferred leader); __consumer_offsets' partitions
    too, so the group and transaction coordinators are spread as on Kafka. Every stream's `_schemas`
    belongs to worker 0, as the Schema Registry (served by worker 0's HTTP port) writes it. Before
    stop 56 /default's `_schemas` was worker 1's, and every registry request through worker 0
    failed (500)."""
    if count <= 1 or topic == SCHEMAS_TOPIC:
        return 0
    start = zlib.crc32(f"{stream}\0{topic}".encode())
    return (start + index) % count


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerShare:
    """This process's part of the store: worker `index` of `count`, leading under `epoch`."""

    index: int
    count: int
    epoch: int

    @property
    def controller(self) -> bool:
        return self.index == 0

    def owns(self, stream: str, topic: str, index: int) -> bool:
        return owner_of(self.count, stream, topic, index) == self.index
