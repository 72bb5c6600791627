"""Which creation of a topic a cluster holds, so a topic deleted and created again is told apart.

A topic's generation is [origin cluster UUID, origin topic id]: the cluster
where it was created and the id it got there. A topic created here is of
this cluster's own generation; one created by replication keeps its
source's, noted in the stream's state table `replica_topic_origins` under
the local topic id (so a topic deleted and created again here under the
same name is a new generation of this cluster, whatever the table held).

Links ship every topic's generation. When the generation of a name changes
at the source, the topic was deleted and created again there: a replica
holding the old generation does the same (`replaces`); a deletion removes
a replica's topic only if it is of the deleted generation; and a cluster
never creates again, from a peer that has not yet heard of the deletion, a
topic of its own generation it deleted. Rings and multi-master pairs thus
settle with every cluster holding the newest creation.

A replica's origin is noted just after its topic is created, so a link may
ship that topic once under the provisional generation of this cluster
([own UUID, local id]) before the origin lands. Learning the origin later
is not a recreation: only a change of the local topic (a new local id, or
another origin for the same one) is. A restart, which rereads both from the
store, therefore never looks like one.
"""

from __future__ import annotations

from kafkacompat.storage import Store, TopicInfo

ORIGINS_TABLE = "replica_topic_origins"

Generation = list[str]  # [origin cluster UUID, origin topic id (hex)]


def generation(store: Store, cluster_uuid: str, stream: str, info: TopicInfo) -> Generation:
    """The generation of a topic of this cluster (`cluster_uuid`)."""
    origin = store.get_state(stream, ORIGINS_TABLE).get(info.topic_id.hex)
    if origin is not None:
        return [origin["cluster"], origin["id"]]
    return [cluster_uuid, info.topic_id.hex]


def generations(store: Store, cluster_uuid: str, stream: str, topics: list[TopicInfo]) -> dict[str, Generation]:
    """The generation of each of `topics` by name, reading the origins table once."""
    origins = store.get_state(stream, ORIGINS_TABLE)
    out = {}
    for info in topics:
        origin = origins.get(info.topic_id.hex)
        out[info.name] = [origin["cluster"], origin["id"]] if origin is not None else [cluster_uuid, info.topic_id.hex]
    return out


def recreated(shipped: Generation | None, now: Generation, cluster_uuid: str, info: TopicInfo) -> bool:
    """Whether the topic `info`, now of generation `now`, is another creation than the one shipped as `shipped`.

    Not when nothing was shipped yet, nor when what was shipped is the
    provisional generation of this very topic (its origin noted since).
    """
    if shipped is None or shipped == now:
        return False
    return shipped != [cluster_uuid, info.topic_id.hex]


async def note_origin(store: Store, stream: str, info: TopicInfo, origin: Generation) -> None:
    """A topic just created by replication is of its source's generation."""
    await store.put_state(stream, ORIGINS_TABLE, {info.topic_id.hex: {"cluster": origin[0], "id": origin[1]}})


async def forget_origin(store: Store, stream: str, info: TopicInfo) -> None:
    if info.topic_id.hex in store.get_state(stream, ORIGINS_TABLE):
        await store.put_state(stream, ORIGINS_TABLE, {info.topic_id.hex: None})
