"""Streams group bookkeeping without a broker: internal topic sizes, task assignment, reconciliation steps."""

from __future__ import annotations

from kafkacompat.groups.streams_group import (
    ACTIVE,
    STANDBY,
    MemberState,
    StreamsGroup,
    StreamsMember,
    assign_tasks,
    reconcile,
)
from kafkacompat.groups.streams_topology import InternalTopic, Subtopology, Topology, configure


def test_repartition_chains_take_the_size_of_the_subtopology_writing_them() -> None:
    topology = Topology(0, (
        Subtopology("0", source_topics=("in",), repartition_sinks=("a",)),
        Subtopology("1", repartition_sinks=("b",), repartition_sources=(InternalTopic("a", 0),),
                    changelogs=(InternalTopic("c1", 0, (("cleanup.policy", "compact"),)),)),
        Subtopology("2", repartition_sources=(InternalTopic("b", 0),)),
        Subtopology("3", source_topics=("in",), repartition_sources=(InternalTopic("fixed", 7),)),
    ))
    configured = configure(topology, {"in": 4}.get)
    assert configured.tasks == {"0": 4, "1": 4, "2": 4, "3": 7}
    assert configured.to_create == {"a": (4, {}), "b": (4, {}), "c1": (4, {"cleanup.policy": "compact"}),
                                    "fixed": (7, {})}
    assert configure(topology, {"in": 4, "a": 4, "b": 4, "c1": 4, "fixed": 7}.get).ready
    assert configure(topology, {}.get).missing_sources == ("in",)


def _members(*processes: str) -> dict[str, StreamsMember]:
    return {f"m{i}": StreamsMember(f"m{i}", process_id=p) for i, p in enumerate(processes)}


def test_active_tasks_stay_where_they_were_and_standbys_avoid_the_active_process() -> None:
    members = _members("p0", "p1", "p1")
    previous = {"m0": frozenset({(ACTIVE, "0", 0), (ACTIVE, "0", 1), (ACTIVE, "0", 2), (ACTIVE, "0", 3)})}
    target = assign_tasks(members, {"0": 6}, previous, standbys=1)
    actives = {m: {p for r, _, p in tasks if r == ACTIVE} for m, tasks in target.items()}
    assert sorted(len(a) for a in actives.values()) == [2, 2, 2]
    assert actives["m0"] <= {0, 1, 2, 3}  # sticky: kept two of its four
    for m, tasks in target.items():
        for role, sub, p in tasks:
            if role == STANDBY:
                owner = next(o for o, a in actives.items() if p in a)
                assert members[owner].process_id != members[m].process_id


def test_a_member_revokes_before_it_moves_on_and_waits_for_tasks_others_still_hold() -> None:
    group = StreamsGroup("g", 0)
    a = StreamsMember("a", member_epoch=1, assigned=frozenset({(ACTIVE, "0", 0), (ACTIVE, "0", 1)}))
    b = StreamsMember("b", member_epoch=0)
    group.put(a)
    group.put(b)
    a2 = reconcile(group, a, 2, frozenset({(ACTIVE, "0", 0)}), owned=a.assigned)
    assert a2.state is MemberState.UNREVOKED_TASKS and a2.member_epoch == 1
    group.put(a2)
    b2 = reconcile(group, b, 2, frozenset({(ACTIVE, "0", 1)}), owned=frozenset())
    assert b2.state is MemberState.UNRELEASED_TASKS and b2.assigned == frozenset()
    a3 = reconcile(group, a2, 2, frozenset({(ACTIVE, "0", 0)}), owned=frozenset({(ACTIVE, "0", 0)}))
    assert a3.state is MemberState.STABLE and a3.member_epoch == 2
    group.put(a3)
    b3 = reconcile(group, b2, 2, frozenset({(ACTIVE, "0", 1)}), owned=frozenset())
    assert b3.state is MemberState.STABLE and b3.assigned == frozenset({(ACTIVE, "0", 1)})
