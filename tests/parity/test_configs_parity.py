"""Config answers (what kafka-configs and kafka-features print) from kafkacompat and Kafka 4.1 alike.

Compared on the wire, which is all the tools print from, so one JVM (the
reference broker) serves every comparison; one Kafka tool run checks the
broker-logger path end to end.
"""

from __future__ import annotations

import time
import uuid

import kio.schema.api_versions.v4.request as av
import kio.schema.describe_configs.v4.request as dc
from kafkacompat.protocol.messages import make

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka
from tests.conftest import create_topic
from tests.test_broker_configs import alter, describe
from tests.wire import Wire

TOPIC, BROKER, GROUP = 2, 4, 32
# Topic configs whose value differs on purpose, with why:
DIFFERENT_BY_DESIGN = {
    "message.timestamp.after.max.ms",  # 3600000 once produce enforces it (the hostile-input work)
}


def _once_applied(wire: Wire, kind: int, name: str, key: str, value: str) -> dict:
    """The resource's configs once `key` shows `value` (Kafka applies changes through its metadata log)."""
    deadline = time.monotonic() + 15
    while True:
        configs = describe(wire, kind, name)[1]
        if configs[key][0] == value or time.monotonic() > deadline:
            return configs
        time.sleep(0.1)


def _both(ours: Broker, kafka41: ReferenceKafka) -> tuple[str, str]:
    return ours.bootstrap_servers, kafka41.bootstrap_servers


def test_topic_configs_sources_and_synonyms_match_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    def configs(bootstrap: str) -> dict:
        topic = create_topic(bootstrap, f"configs-{uuid.uuid4().hex[:8]}")
        with Wire(bootstrap) as wire:
            assert alter(wire, TOPIC, topic, ("retention.bytes", 0, "1000000"))[0] == 0
            return _once_applied(wire, TOPIC, topic, "retention.bytes", "1000000")

    mine, kafkas = (configs(b) for b in _both(ours, kafka41))
    assert sorted(mine) == sorted(kafkas) and len(mine) == 33
    differ = {name for name in mine if mine[name] != kafkas[name]}
    assert differ <= DIFFERENT_BY_DESIGN, {name: (mine[name], kafkas[name]) for name in differ}


def test_group_configs_match_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    def configs(bootstrap: str) -> dict:
        with Wire(bootstrap) as wire:
            assert alter(wire, GROUP, "parity-group", ("consumer.heartbeat.interval.ms", 0, "6000"))[0] == 0
            refused = alter(wire, GROUP, "parity-group", ("consumer.session.timeout.ms", 0, "1"))[0]
            return {"refused": refused,
                    **_once_applied(wire, GROUP, "parity-group", "consumer.heartbeat.interval.ms", "6000")}

    mine, kafkas = (configs(b) for b in _both(ours, kafka41))
    assert mine == kafkas


def test_feature_levels_are_those_kafka_lists(ours: Broker, kafka41: ReferenceKafka) -> None:
    """kafka-features describe prints these: the same features, and Kafka 4.1's metadata.version."""
    def features(bootstrap: str) -> tuple[dict, dict]:
        with Wire(bootstrap) as wire:
            answer = wire.request(18, 4, make(av.ApiVersionsRequest, client_software_name="t", client_software_version="1"))
        return ({f.name: (f.min_version, f.max_version) for f in answer.supported_features},
                {f.name: f.max_version_level for f in answer.finalized_features})

    (my_supported, my_finalized), (kafka_supported, kafka_finalized) = (features(b) for b in _both(ours, kafka41))
    assert set(my_supported) == set(kafka_supported)
    assert my_finalized["metadata.version"] == kafka_finalized["metadata.version"]
    assert my_supported["metadata.version"] == kafka_supported["metadata.version"]


def test_broker_configs_are_named_and_typed_as_kafka_names_them(ours: Broker, kafka41: ReferenceKafka) -> None:
    def typed(bootstrap: str) -> dict[str, tuple[int, bool]]:
        with Wire(bootstrap) as wire:
            response = wire.request(32, 4, make(dc.DescribeConfigsRequest, resources=(make(
                dc.DescribeConfigsResource, resource_type=BROKER, resource_name="1", configuration_keys=None),),
                include_synonyms=False, include_documentation=False))
        return {c.name: (c.config_type, c.read_only) for c in response.results[0].configs}

    mine, kafkas = (typed(b) for b in _both(ours, kafka41))
    assert set(mine) <= set(kafkas)
    assert {name: kind for name, (kind, _) in mine.items()} == {name: kafkas[name][0] for name in mine}
    alterable = {name for name, (_, read_only) in mine.items() if not read_only}
    assert alterable and all(not kafkas[name][1] for name in alterable)


def test_broker_loggers_with_kafka_configs(ours: Broker) -> None:
    from kafkacompat.testing.reference_kafka import unavailable

    if unavailable():
        import pytest

        pytest.skip(unavailable())
    server = ("--bootstrap-server", ours.bootstrap_servers)
    done = run_tool("kafka-configs", *server, "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
                    "--add-config", "kafkacompat.handlers.produce=DEBUG")
    assert done.returncode == 0, done.stderr
    with Wire(ours.bootstrap_servers) as wire:
        assert describe(wire, 8, "1")[1]["kafkacompat.handlers.produce"][0] == "DEBUG"
        assert alter(wire, 8, "1", ("kafkacompat.handlers.produce", 1, None))[0] == 0


def test_client_quotas_are_described_as_kafka_describes_them(ours: Broker, kafka41: ReferenceKafka) -> None:
    from tests.test_client_quotas import quotas, set_quota

    def described(bootstrap: str) -> list:
        with Wire(bootstrap) as wire:
            refused = set_quota(wire, {"ip": "10.0.0.1", "user": "u"}, producer_byte_rate=1.0)
            assert set_quota(wire, {"user": None}, consumer_byte_rate=2000.0)[0] == 0
            assert set_quota(wire, {"user": "parity", "client-id": None}, producer_byte_rate=3000.0)[0] == 0
            deadline = time.monotonic() + 15
            while len(found := quotas(wire, ("user", 2, None))) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            return [refused, sorted(found, key=repr), quotas(wire, ("user", 1, None), strict=True)]  # Kafka's order is a hash's

    try:
        assert described(ours.bootstrap_servers) == described(kafka41.bootstrap_servers)
    finally:  # the reference broker serves the whole session: leave no quota behind
        for bootstrap in (ours.bootstrap_servers, kafka41.bootstrap_servers):
            with Wire(bootstrap) as wire:
                set_quota(wire, {"user": None}, consumer_byte_rate=None)
                set_quota(wire, {"user": "parity", "client-id": None}, producer_byte_rate=None)


CLEANUP_STEPS = [  # (operation, value, what describe then shows)
    ("SUBTRACT", "delete", ""),  # from the default: nothing left, which Kafka keeps as ''
    ("APPEND", "compact", "compact"),
    ("DELETE", "", "delete"),  # back to the default
    ("APPEND", "compact", "delete,compact"),  # onto the default, as Kafka appends
    ("SUBTRACT", "compact,delete", ""),
    ("SET", "", ""),
    ("SET", "bogus", ""),  # refused: the last value stays
]


def _cleanup_policy_steps(bootstrap: str) -> list[tuple[str, str]]:
    """confluent-kafka's incremental_alter_configs on cleanup.policy, step by step: (outcome, value shown)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = create_topic(bootstrap, f"cleanup-{uuid.uuid4().hex[:6]}", 1)
    shown = []
    for op, value, expected in CLEANUP_STEPS:
        change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("cleanup.policy", value, incremental_operation=AlterConfigOpType[op])])
        try:
            admin.incremental_alter_configs([change])[change].result(20)
            outcome = "ok"
        except Exception as exc:  # noqa: BLE001 - the refusal is what is compared
            outcome = exc.args[0].str()
        deadline = time.monotonic() + 15  # Kafka applies the change through its metadata log
        while True:
            described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
            current = next(iter(described.values())).result(20)["cleanup.policy"].value
            if current == expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        shown.append((outcome, current))
    return shown


def test_cleanup_policy_may_be_left_empty_as_on_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    """SUBTRACT down to nothing (or SET '') leaves cleanup.policy '': neither deletion nor compaction."""
    mine = _cleanup_policy_steps(ours.bootstrap_servers)
    assert [value for _, value in mine] == [expected for _, _, expected in CLEANUP_STEPS]
    assert mine[-1][0].startswith("Invalid value bogus for configuration cleanup.policy")
    assert mine == _cleanup_policy_steps(kafka41.bootstrap_servers)


BROKER_CHANGES = [  # (name, value): Kafka 4.1's dynamic configs kafkacompat does not act on, its static ones,
    # bad values, names Kafka does not know, per-broker-only configs set cluster-wide
    ("sasl.kerberos.min.time.before.relogin", "60000"), ("sasl.kerberos.min.time.before.relogin", "abc"),
    ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"), ("listener.name.plaintext.ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
    ("num.io.threads", "4"), ("num.io.threads", "0"), ("log.cleaner.threads", "2"), ("log.cleanup.policy", "compact"),
    ("log.cleanup.policy", "compact,bogus"), ("log.retention.ms", "abc"), ("log.cleaner.min.cleanable.ratio", "2"),
    ("compression.type", "bogus"), ("unclean.leader.election.enable", "maybe"), ("sasl.jaas.config", "x"),
    ("ssl.client.auth", "required"), ("principal.builder.class", "x.Y"), ("no.such.config", "1"),
    ("auto.create.topics.enable", "false"), ("socket.send.buffer.bytes", "1024"), ("max.connections", "100"),
]


def _broker_answers(bootstrap: str) -> list[tuple[str, str, str, int, str | None]]:
    """IncrementalAlterConfigs SET of each change on broker 1 and cluster-wide, then DELETE when accepted."""
    out = []
    with Wire(bootstrap) as wire:
        for entity in ("1", ""):
            for name, value in BROKER_CHANGES:
                code, message = alter(wire, BROKER, entity, (name, 0, value))
                if code == 0:
                    assert alter(wire, BROKER, entity, (name, 1, None))[0] == 0
                    _wait_until_gone(wire, entity, name, value)
                out.append((entity, name, value, code, message))
    return out


def _wait_until_gone(wire: Wire, entity: str, name: str, value: str) -> None:
    """Kafka applies a change through its metadata log, after answering: the next change is judged against the
    broker's config as it then is (a listener's SSL settings against a still-set ssl.cipher.suites are refused)."""
    deadline = time.monotonic() + 15
    while _dynamically_set(describe(wire, BROKER, entity)[1].get(name), value):
        assert time.monotonic() < deadline, f"{name}={value} still set on broker {entity!r} 15 s after its delete"
        time.sleep(0.1)


def _dynamically_set(described: tuple[str | None, int, list] | None, value: str) -> bool:
    """Whether a described broker config still holds `value` as set at run time (source 2 DYNAMIC_BROKER_CONFIG or
    3 DYNAMIC_DEFAULT_BROKER_CONFIG, itself or as a synonym), not as its static or default value."""
    if described is None:
        return False
    found = [(described[0], described[1]), *((v, source) for _n, v, source in described[2])]
    return any(v == value and source in (2, 3) for v, source in found)


def test_broker_configs_kafka_changes_at_run_time_are_accepted_and_others_refused_alike(
    ours: Broker, kafka41: ReferenceKafka,
) -> None:
    mine = _broker_answers(ours.bootstrap_servers)
    assert ("1", "sasl.kerberos.min.time.before.relogin", "60000", 0, None) in mine
    assert mine == _broker_answers(kafka41.bootstrap_servers)


def test_a_kept_kafka_broker_config_is_described_and_its_secrets_hidden(ours: Broker) -> None:
    with Wire(ours.bootstrap_servers) as wire:
        assert alter(wire, BROKER, "1", ("sasl.kerberos.min.time.before.relogin", 0, "70000"),
                     ("sasl.jaas.config", 0, "secret"), ("no.such.config", 0, "1")) == (0, None)
        configs = describe(wire, BROKER, "1")[1]
        alter(wire, BROKER, "1", *((n, 1, None) for n in ("sasl.kerberos.min.time.before.relogin", "sasl.jaas.config",
                                                          "no.such.config")))
    assert configs["sasl.kerberos.min.time.before.relogin"][:2] == ("70000", 2)
    assert configs["sasl.jaas.config"][:2] == (None, 2) and configs["no.such.config"][:2] == (None, 2)


GROUP_BOUNDS = [("share.record.lock.duration.ms", "1000"), ("share.record.lock.duration.ms", "70000"),
                ("share.record.lock.duration.ms", "20000"), ("consumer.session.timeout.ms", "1000"),
                ("consumer.heartbeat.interval.ms", "20000"), ("share.heartbeat.interval.ms", "1"),
                ("share.record.lock.duration.ms", "400"), ("consumer.heartbeat.interval.ms", "0"),
                ("streams.session.timeout.ms", "1000"), ("streams.heartbeat.interval.ms", "16000"),
                ("streams.num.standby.replicas", "3"), ("streams.num.standby.replicas", "-1"),
                ("streams.num.standby.replicas", "2"), ("share.isolation.level", "nope"),
                ("share.auto.offset.reset", "nope")]


def test_group_configs_bounded_by_the_brokers_limits_as_on_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    """Each group config out of the broker's group.<kind>.min/max.* bounds is refused with Kafka's words."""
    def answers(bootstrap: str) -> list[tuple[int, str | None]]:
        group = f"bounds-{uuid.uuid4().hex[:6]}"
        with Wire(bootstrap) as wire:
            return [alter(wire, GROUP, group, (name, 0, value)) for name, value in GROUP_BOUNDS]

    mine = answers(ours.bootstrap_servers)
    assert mine[0][1] == "share.record.lock.duration.ms must be greater than or equal to " \
                         "group.share.min.record.lock.duration.ms"
    assert mine == answers(kafka41.bootstrap_servers)


def test_broker_configs_through_the_older_alter_configs_as_on_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    """AlterConfigs (which replaces a broker's dynamic set) accepts and refuses what Kafka 4.1 does."""
    import kio.schema.alter_configs.v2.request as ac

    def answers(bootstrap: str) -> list[tuple[int, str | None]]:
        out = []
        with Wire(bootstrap) as wire:
            for configs in ((("sasl.kerberos.min.time.before.relogin", "60000"),), (("num.io.threads", "0"),),
                            (("auto.create.topics.enable", "false"),), ()):
                answer = wire.request(33, 2, make(ac.AlterConfigsRequest, validate_only=False, resources=(make(
                    ac.AlterConfigsResource, resource_type=BROKER, resource_name="1",
                    configs=tuple(make(ac.AlterableConfig, name=n, value=v) for n, v in configs)),)))
                out.append((answer.responses[0].error_code, answer.responses[0].error_message))
        return out

    mine = answers(ours.bootstrap_servers)
    assert mine[0] == (0, None)
    assert mine == answers(kafka41.bootstrap_servers)
