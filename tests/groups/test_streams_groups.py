"""KIP-1071 Streams groups on the wire: StreamsGroupHeartbeat as Kafka Streams 4.1 sends it.

A member joins with a word-count-like topology (a source topic, a
repartition topic between two subtopologies, a changelog): the broker
creates the internal topics with derived partition counts and assigns every
task. A second member joining takes half the active tasks, but only after
the first has revoked them (never two owners of an active task), and
standby tasks land on another process than their active task.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import unavailable
from tests.groups.helpers import GROUP_SETTINGS
from tests.wire import Wire, request_class

HEARTBEAT = 88
PARTITIONS = 3


def _topology(app: str, source: str) -> Any:
    cls = request_class(HEARTBEAT, 0)
    mod = __import__(cls.__module__, fromlist=["x"])
    repartition = mod.TopicInfo(name=f"{app}-words-repartition", partitions=0, replication_factor=-1,
                                topic_configs=(mod.KeyValue(key="cleanup.policy", value="delete"),))
    changelog = mod.TopicInfo(name=f"{app}-counts-changelog", partitions=0, replication_factor=-1,
                              topic_configs=(mod.KeyValue(key="cleanup.policy", value="compact"),))
    return mod.Topology(epoch=0, subtopologies=(
        mod.Subtopology(subtopology_id="0", source_topics=(source,), state_changelog_topics=(),
                        repartition_sink_topics=(repartition.name,), repartition_source_topics=(),
                        copartition_groups=()),
        mod.Subtopology(subtopology_id="1", source_topics=(), state_changelog_topics=(changelog,),
                        repartition_sink_topics=(), repartition_source_topics=(repartition,), copartition_groups=()),
    ))


def _tasks(ids: Any) -> set[tuple[str, int]] | None:
    if ids is None:
        return None
    return {(t.subtopology_id, p) for t in ids for p in t.partitions}


def _task_ids(tasks: set[tuple[str, int]]) -> tuple[Any, ...]:
    mod = __import__(request_class(HEARTBEAT, 0).__module__, fromlist=["x"])
    subs = sorted({s for s, _ in tasks})
    return tuple(mod.TaskIds(subtopology_id=s, partitions=tuple(sorted(p for t, p in tasks if t == s))) for s in subs)


class _Member:
    def __init__(self, wire: Wire, group: str, topology: Any, process: str | None = None) -> None:
        self.wire, self.group, self.topology = wire, group, topology
        self.member_id = uuid.uuid4().hex
        self.process = process or str(uuid.uuid4())
        self.epoch = 0
        self.active: set[tuple[str, int]] = set()
        self.standby: set[tuple[str, int]] = set()

    def heartbeat(self, owned: bool = True) -> Any:
        joining = self.epoch == 0
        request = make(
            request_class(HEARTBEAT, 0), group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            endpoint_information_epoch=0, rebalance_timeout=datetime.timedelta(seconds=30),
            topology=self.topology if joining else None, process_id=self.process if joining else None,
            active_tasks=_task_ids(self.active) if owned else None,
            standby_tasks=_task_ids(self.standby) if owned else None,
            warmup_tasks=() if owned else None, client_tags=() if joining else None,
            task_offsets=None, task_end_offsets=None,
        )
        response = self.wire.request(HEARTBEAT, 0, request)
        assert response.error_code == ErrorCode.none, response.error_message
        self.epoch = response.member_epoch
        if response.active_tasks is not None:  # a member applies what it is given (revoking what is gone)
            self.active = _tasks(response.active_tasks) or set()
            self.standby = _tasks(response.standby_tasks) or set()
        return response


def _setup(broker: Broker) -> tuple[str, Any]:
    app = f"wc-{uuid.uuid4().hex[:8]}"
    source = f"{app}-lines"
    broker.create_topic(source, partitions=PARTITIONS)
    return app, _topology(app, source)


@pytest.fixture(scope="module")
def broker_with_standby() -> Iterator[Broker]:
    with Broker(group_streams_num_standby_replicas=1, **GROUP_SETTINGS) as running:
        yield running


ALL_ACTIVE = {(s, p) for s in ("0", "1") for p in range(PARTITIONS)}


def test_one_member_gets_every_task_and_the_internal_topics_are_created(broker: Broker) -> None:
    app, topology = _setup(broker)
    with Wire(broker.bootstrap_servers) as wire:
        member = _Member(wire, app, topology)
        response = member.heartbeat()
        assert response.member_epoch > 0
        assert not response.status  # nothing missing: the internal topics were created before the answer
        assert member.active == ALL_ACTIVE and member.standby == set()
        assert member.heartbeat().active_tasks is None  # unchanged: not repeated
    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics
    for name in (f"{app}-words-repartition", f"{app}-counts-changelog"):
        assert name in topics and len(topics[name].partitions) == PARTITIONS, name


def test_missing_source_topic_is_reported_and_no_task_assigned(broker: Broker) -> None:
    app = f"wc-{uuid.uuid4().hex[:8]}"
    with Wire(broker.bootstrap_servers) as wire:
        member = _Member(wire, app, _topology(app, f"{app}-absent"))
        response = member.heartbeat()
        assert [s.status_code for s in response.status] == [1]  # MISSING_SOURCE_TOPICS
        assert member.active == set()


def test_a_second_member_gets_tasks_only_after_the_first_revoked_them(broker: Broker) -> None:
    app, topology = _setup(broker)
    with Wire(broker.bootstrap_servers) as w1, Wire(broker.bootstrap_servers) as w2:
        first, second = _Member(w1, app, topology), _Member(w2, app, topology)
        first.heartbeat()
        second.heartbeat()
        assert second.active == set()  # the first still owns everything
        before = first.epoch
        first.heartbeat(owned=True)  # told to revoke: it keeps its epoch and drops the tasks
        assert first.epoch == before and len(first.active) == 3
        second.heartbeat()
        assert second.active == set()  # the first has not yet confirmed the revocation
        first.heartbeat()  # now it reports owning only the three it kept: it moves to the new epoch
        assert first.epoch > before
        second.heartbeat()
        assert len(second.active) == 3 and not (second.active & first.active)
        assert first.active | second.active == ALL_ACTIVE


def test_standby_tasks_go_to_another_process(broker_with_standby: Broker) -> None:
    app, topology = _setup(broker_with_standby)
    with Wire(broker_with_standby.bootstrap_servers) as w1, Wire(broker_with_standby.bootstrap_servers) as w2:
        first, second = _Member(w1, app, topology), _Member(w2, app, topology)
        first.heartbeat()
        assert first.standby == set()  # one process: nowhere else to keep a copy
        second.heartbeat()
        for _ in range(3):
            first.heartbeat()
            second.heartbeat()
        assert first.active | second.active == ALL_ACTIVE
        assert first.standby == second.active and second.standby == first.active


def test_a_consumer_group_member_cannot_join_a_streams_group_nor_the_reverse(broker: Broker) -> None:
    app, topology = _setup(broker)
    with Wire(broker.bootstrap_servers) as wire:
        _Member(wire, app, topology).heartbeat()
        consumer = wire.request(68, 1, make(
            request_class(68, 1), group_id=app, member_id=uuid.uuid4().hex, member_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(f"{app}-lines",),
            topic_partitions=(), server_assignor=None))
        assert consumer.error_code == ErrorCode.group_id_not_found
        assert consumer.error_message == f"Group {app} is not a consumer group."
        other = f"cg-{uuid.uuid4().hex[:8]}"
        assert wire.request(68, 1, make(
            request_class(68, 1), group_id=other, member_id=uuid.uuid4().hex, member_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(f"{app}-lines",),
            topic_partitions=(), server_assignor=None)).error_code == ErrorCode.none
        request = make(
            request_class(HEARTBEAT, 0), group_id=other, member_id=uuid.uuid4().hex, member_epoch=0,
            endpoint_information_epoch=0, rebalance_timeout=datetime.timedelta(seconds=30), topology=topology,
            process_id=str(uuid.uuid4()), active_tasks=(), standby_tasks=(), warmup_tasks=(), client_tags=(),
            task_offsets=None, task_end_offsets=None)
        assert wire.request(HEARTBEAT, 0, request).error_code == ErrorCode.group_id_not_found


def _converge(*members: _Member) -> None:
    for _ in range(3):
        for member in members:
            member.heartbeat()


def _describe(wire: Wire, group: str) -> tuple[int, int, dict[str, tuple[int, set, set]]]:
    """(group epoch, assignment epoch, member id -> (member epoch, active, standby)) as StreamsGroupDescribe shows."""
    (described,) = wire.request(89, 0, make(request_class(89, 0), group_ids=(group,),
                                            include_authorized_operations=False)).groups
    assert described.error_code == ErrorCode.none
    members = {m.member_id: (m.member_epoch, _tasks(m.assignment.active_tasks), _tasks(m.assignment.standby_tasks))
               for m in described.members}
    return described.group_epoch, described.assignment_epoch, members


def test_a_streams_group_keeps_its_epochs_and_tasks_across_a_broker_restart(tmp_path) -> None:
    """As consumer groups: the group's state is in the store, so after a clean restart the members
    heartbeat with their epochs and keep their tasks (no rejoin, no task moved)."""
    first = Broker(data_dir=str(tmp_path), group_streams_num_standby_replicas=1, **GROUP_SETTINGS).start()
    port = first.port
    try:
        app, topology = _setup(first)
        with Wire(first.bootstrap_servers) as w1, Wire(first.bootstrap_servers) as w2:
            members = _Member(w1, app, topology), _Member(w2, app, topology)
            _converge(*members)
            before = _describe(w1, app)
    finally:
        first.stop()
    held = [(m.epoch, set(m.active), set(m.standby)) for m in members]
    assert held[0][1] | held[1][1] == ALL_ACTIVE and held[0][2] == held[1][1]
    with Broker(data_dir=str(tmp_path), port=port, group_streams_num_standby_replicas=1, **GROUP_SETTINGS) as second:
        with Wire(second.bootstrap_servers) as w1, Wire(second.bootstrap_servers) as w2:
            assert _describe(w1, app) == before
            for member, wire in zip(members, (w1, w2)):
                member.wire = wire
                response = member.heartbeat()  # its old epoch is accepted: UNKNOWN_MEMBER_ID if the group were lost
                assert response.active_tasks is None  # nothing to change
            assert [(m.epoch, m.active, m.standby) for m in members] == held
            assert _describe(w1, app) == before


@pytest.mark.slow
def test_kafka_configs_sets_a_groups_standby_replicas_and_the_assignor_uses_it(broker: Broker) -> None:
    """streams.num.standby.replicas per group (kafka-configs --entity-type groups, Kafka's GroupConfig):
    set on a running group, its next heartbeats bring a new group epoch with standby tasks; the group's
    streams.heartbeat.interval.ms is the interval its members are told."""
    if unavailable():
        pytest.skip(unavailable())
    app, topology = _setup(broker)
    server = ("--bootstrap-server", broker.bootstrap_servers)
    with Wire(broker.bootstrap_servers) as w1, Wire(broker.bootstrap_servers) as w2:
        members = first, second = _Member(w1, app, topology), _Member(w2, app, topology)
        _converge(*members)
        assert first.standby == second.standby == set()  # the broker's default: none
        epoch = _describe(w1, app)[0]
        done = run_tool("kafka-configs", *server, "--alter", "--entity-type", "groups", "--entity-name", app,
                        "--add-config", "streams.num.standby.replicas=1,streams.heartbeat.interval.ms=6000")
        assert done.returncode == 0, done.stderr
        _converge(*members)
        assert _describe(w1, app)[0] > epoch
        assert first.standby == second.active and second.standby == first.active
        assert first.heartbeat().heartbeat_interval == datetime.timedelta(seconds=6)
    done = run_tool("kafka-configs", *server, "--describe", "--entity-type", "groups", "--entity-name", app)
    assert done.returncode == 0, done.stderr
    assert "streams.num.standby.replicas=1" in done.stdout and "streams.heartbeat.interval.ms=6000" in done.stdout


def test_the_brokers_group_streams_settings_default_and_bound_a_groups_own() -> None:
    """group.streams.heartbeat.interval.ms is what members are told (not group.consumer.*'s), and
    group.streams.max.standby.replicas bounds a group's streams.num.standby.replicas, which the assignor uses."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    with Broker(group_streams_max_standby_replicas=3, group_streams_heartbeat_interval_ms=700,
                **GROUP_SETTINGS) as broker:
        app, topology = _setup(broker)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

        def set_standbys(value: str) -> str:
            change = ConfigResource(ResourceType.GROUP, app, incremental_configs=[
                ConfigEntry("streams.num.standby.replicas", value, incremental_operation=AlterConfigOpType.SET)])
            try:
                admin.incremental_alter_configs([change])[change].result(10)
                return "ok"
            except Exception as exc:  # noqa: BLE001 - the refusal is the answer looked at
                return exc.args[0].str()

        assert set_standbys("4") == ("streams.num.standby.replicas must be less than or equal to "
                                     "group.streams.max.standby.replicas")
        assert set_standbys("3") == "ok"
        described = admin.describe_configs([ConfigResource(ResourceType.GROUP, app)])
        configs = next(iter(described.values())).result(10)
        assert configs["streams.heartbeat.interval.ms"].value == "700" and configs["streams.heartbeat.interval.ms"].is_default
        brokers = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        shown = next(iter(brokers.values())).result(10)  # kafka-configs --describe --all --entity-type brokers
        assert {name: (shown[name].value, shown[name].is_read_only) for name in (
            "group.streams.heartbeat.interval.ms", "group.streams.max.standby.replicas")} == {
            "group.streams.heartbeat.interval.ms": ("700", True), "group.streams.max.standby.replicas": ("3", True)}
        with Wire(broker.bootstrap_servers) as wire:
            members = [_Member(wire, app, topology) for _ in range(4)]
            assert members[0].heartbeat().heartbeat_interval == datetime.timedelta(milliseconds=700)
            _converge(*members)
            _converge(*members)
            standbys = [task for member in members for task in member.standby]
            assert sorted(set(standbys)) == sorted(ALL_ACTIVE) and len(standbys) == 3 * len(ALL_ACTIVE)


def test_a_left_then_deleted_streams_group_stays_so_across_restarts(tmp_path) -> None:
    """What the store keeps follows the group to its end: a member's leave, then the group's deletion."""
    brokers = [Broker(data_dir=str(tmp_path), **GROUP_SETTINGS).start()]
    port = brokers[0].port

    def restart() -> Broker:
        brokers[-1].stop()
        brokers.append(Broker(data_dir=str(tmp_path), port=port, **GROUP_SETTINGS).start())
        return brokers[-1]

    try:
        app, topology = _setup(brokers[0])
        with Wire(brokers[0].bootstrap_servers) as wire:
            member = _Member(wire, app, topology)
            _converge(member)
            assert wire.request(HEARTBEAT, 0, make(
                request_class(HEARTBEAT, 0), group_id=app, member_id=member.member_id, member_epoch=-1,
                endpoint_information_epoch=0, rebalance_timeout=datetime.timedelta(seconds=-0.001), topology=None,
                process_id=None, active_tasks=None, standby_tasks=None, warmup_tasks=None, client_tags=None,
                task_offsets=None, task_end_offsets=None)).error_code == ErrorCode.none
            epoch = _describe(wire, app)[0]
        with Wire(restart().bootstrap_servers) as wire:
            (described,) = wire.request(89, 0, make(request_class(89, 0), group_ids=(app,),
                                                    include_authorized_operations=False)).groups
            assert (described.group_state, described.group_epoch, described.members) == ("Empty", epoch, ())
        admin = AdminClient({"bootstrap.servers": brokers[-1].bootstrap_servers})
        admin.delete_consumer_groups([app])[app].result(timeout=15)
        with Wire(restart().bootstrap_servers) as wire:
            (described,) = wire.request(89, 0, make(request_class(89, 0), group_ids=(app,),
                                                    include_authorized_operations=False)).groups
            assert described.error_code == ErrorCode.group_id_not_found
    finally:
        brokers[-1].stop()
