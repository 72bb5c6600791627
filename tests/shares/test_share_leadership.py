"""A broker's share-partitions across leadership changes (kafkacompat/shares/manager.py).

In a cluster a share-partition lives with its topic partition's leader: a
broker that gains or loses the partition must not go on from what it kept in
memory (another leader may have written since), and a write it makes after
being deposed is refused and drops what it kept. The cluster end to end,
with the Java share consumer, is tests/cluster/test_share_failover.py.
"""

from __future__ import annotations

from kafkacompat.storage import open_store
from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.broker.cluster import Cluster
from kafkacompat.config import BrokerConfig
from kafkacompat.shares.manager import TABLE, state_key
from kafkacompat.shares.share_group import ShareHeartbeat


async def _cluster() -> tuple[Cluster, storage.TopicInfo]:
    store = open_store("memory://")
    await store.open()
    info = await store.create_topic(store.default_stream, "orders", 1)
    return Cluster(BrokerConfig(), store), info


async def test_a_leadership_change_reads_the_share_partition_from_the_store_again() -> None:
    cluster, info = await _cluster()
    shares, store = cluster.shares, cluster.store
    partition = store.partition(store.default_stream, "orders", 0)
    assert (await shares.share_partition("g", info.topic_id, 0, partition)).start_offset == 0
    # what another leader wrote meanwhile: five records accepted
    written = {"start_offset": 5, "written_start_offset": 5, "state_epoch": 0, "batches": []}
    await store.put_state(store.default_stream, TABLE, {state_key("g", info.topic_id, 0): written})
    assert (await shares.share_partition("g", info.topic_id, 0, partition)).start_offset == 0  # still leading
    shares.leadership_changed(store.default_stream, "orders", 0)
    assert (await shares.share_partition("g", info.topic_id, 0, partition)).start_offset == 5


async def test_a_deposed_leader_writes_nothing_and_forgets_the_share_partition() -> None:
    cluster, info = await _cluster()
    shares, store = cluster.shares, cluster.store
    partition = store.partition(store.default_stream, "orders", 0)
    await shares.share_partition("g", info.topic_id, 0, partition)
    assert await shares.flush() == set()  # the start offset, fixed at the first use
    stored = store.get_state(store.default_stream, TABLE)
    part = shares.partitions[("g", info.topic_id, 0)]
    part.reset(7)
    shares._changed(("g", info.topic_id, 0))
    cluster.view.leads = lambda key: False  # another broker leads the partition now
    assert await shares.flush() == {(info.topic_id, 0)}
    assert store.get_state(store.default_stream, TABLE) == stored
    assert shares.partitions == {}


async def test_share_groups_coordinated_elsewhere_are_unloaded() -> None:
    cluster, info = await _cluster()
    await cluster.ensure_offsets_topic()
    shares = cluster.shares
    joined = shares.groups.heartbeat(ShareHeartbeat(group_id="g", member_id="m1", member_epoch=0, rack_id=None,
                                                    subscribed_topic_names=("orders",), client_id="c",
                                                    client_host="/127.0.0.1"))
    assert joined.member_epoch > 0 and "g" in shares.groups.groups
    shares.leadership_changed(cluster.default_stream, "__consumer_offsets", 0)
    assert "g" in shares.groups.groups  # this broker still coordinates it
    cluster.coordinates = lambda group_id: False  # its __consumer_offsets partition moved to another broker
    shares.leadership_changed(cluster.default_stream, "__consumer_offsets", 0)
    assert shares.groups.groups == {}
    shares.groups.close()


async def test_only_the_coordinator_lists_and_deletes_a_share_group() -> None:
    cluster, info = await _cluster()
    store = cluster.store
    written = {"start_offset": 0, "written_start_offset": 0, "state_epoch": 0, "batches": []}
    await store.put_state(store.default_stream, TABLE, {state_key("g", info.topic_id, 0): written})
    assert cluster.shares.list_groups() == [("g", "share", "Empty", "share")]
    cluster.coordinates = lambda group_id: False  # another broker coordinates it
    assert cluster.shares.list_groups() == []
    assert await cluster.shares.delete_group("g") == ErrorCode.not_coordinator
    assert store.get_state(store.default_stream, TABLE) != {}
