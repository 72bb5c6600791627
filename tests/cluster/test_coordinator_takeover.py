"""A broker that gains a __consumer_offsets partition takes over its groups from the state table.

In a cluster a broker can lead a partition of __consumer_offsets before its
store lists the topic (another broker created it a moment ago: the leader
table names the partition first). The group records are in the `groups`
state table, not in the topic: they are loaded all the same, so the members
heartbeat on at their generation instead of rejoining a group created afresh
(tests/cluster/test_group_failover.py sees that end to end).
"""

from __future__ import annotations

from kafkacompat import storage
from kafkacompat.broker.cluster import OFFSETS_TOPIC, Cluster
from kafkacompat.cluster.membership import coordinator_partition
from kafkacompat.config import BrokerConfig
from kafkacompat.groups import durable
from kafkacompat.groups.group import Group, GroupState, Member


def stable_group(group_id: str, generation: int) -> Group:
    group = Group(group_id, 1_000)
    group.add(Member(member_id="m-1", instance_id=None, client_id="c", client_host="/127.0.0.1",
                     session_timeout_ms=10_000, rebalance_timeout_ms=30_000, protocol_type="consumer",
                     protocols=[("range", b"\x00\x01")], assignment=b"\x00\x01A"))
    group.generation, group.protocol_name, group.leader_id = generation, "range", "m-1"
    group.state = GroupState.STABLE
    return group


async def test_a_gained_offsets_partition_loads_its_groups_while_the_store_does_not_list_the_topic() -> None:
    store = storage.open_store("memory://")
    await store.open()
    cluster = Cluster(BrokerConfig(data_dir="memory://", host="127.0.0.1", port=0), store)
    try:
        cluster.groups.owns_all = False  # as in a cluster: loaded per partition gained
        record = durable.classic_record(stable_group("g", 2))
        await store.put_state(store.default_stream, durable.TABLE, {"g": record})  # the last coordinator's write
        assert store.get_topic(store.default_stream, OFFSETS_TOPIC) is None
        index = coordinator_partition("g", cluster.config.offsets_topic_num_partitions)

        await cluster._leadership_gained((store.default_stream, OFFSETS_TOPIC, index))

        group = cluster.groups.groups.get("g")
        assert group is not None, "the group was not taken over: its members' next JoinGroup would start it afresh"
        assert (group.state, group.generation, list(group.members)) == (GroupState.STABLE, 2, ["m-1"])
    finally:
        await cluster.groups.close()
        await store.close()


async def test_offsets_partitions_gained_together_read_the_coordinators_tables_once() -> None:
    # each one's load read the groups' and transactions' whole tables again, one partition after another,
    # between the other partitions gained: 34 reads for 17 partitions taken back
    store = storage.open_store("memory://")
    await store.open()
    cluster = Cluster(BrokerConfig(data_dir="memory://", host="127.0.0.1", port=0), store)
    reads: list[str] = []
    reload_state = store.reload_state

    async def counted(stream: str, table: str) -> None:
        reads.append(table)
        await reload_state(stream, table)

    store.reload_state = counted  # type: ignore[method-assign]
    try:
        cluster.groups.owns_all = False  # as in a cluster: loaded per partition gained
        count = cluster.config.offsets_topic_num_partitions
        names = [f"g{n}" for n in range(40)]
        await store.put_state(store.default_stream, durable.TABLE,
                              {name: durable.classic_record(stable_group(name, 3)) for name in names})
        gained = sorted({coordinator_partition(name, count) for name in names})
        assert len(gained) > 5
        # a data partition of the same index, gained in the same tick before them, is no offsets partition
        keys = [(store.default_stream, "orders", gained[-1])] + [(store.default_stream, OFFSETS_TOPIC, index)
                                                                 for index in gained]

        await cluster._leadership_gaining(keys)
        for key in keys:
            await cluster._leadership_gained(key)

        assert sorted(reads) == ["groups", "transactions"]
        assert {name: cluster.groups.groups[name].generation for name in names} == dict.fromkeys(names, 3)
        await cluster._load_again(gained[0])  # a load tried again (the store was away) reads afresh
        assert sorted(reads) == ["groups", "groups", "transactions", "transactions"]
    finally:
        await cluster.groups.close()
        await store.close()
