"""Kafka 4.1's own tools address stream topics by their Kafka-legal alias (path..topic).

They find a topic by listing all topics and matching the name they were
given, and read answers keyed by the name they asked with; `/path:topic`
trips their own parsing (kafka-configs refuses it, get-offsets and
consumer-groups split at ':'), so the alias is the form they must accept.
"""

from __future__ import annotations

import pytest

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import unavailable

STREAM = "/apps/iot/pumps"
ALIAS = "apps.iot.pumps..pressure"


@pytest.fixture(autouse=True)
def _kafka_tools() -> None:
    if unavailable():
        pytest.skip(unavailable())


def _ok(tool: str, *args: str, stdin: str | None = None) -> str:
    done = run_tool(tool, *args, stdin=stdin)
    assert done.returncode == 0, f"{tool} {args}: {done.stderr[-2000:]}"
    return done.stdout


def test_kafka_tools_describe_alter_consume_and_delete_an_aliased_stream_topic(ours: Broker) -> None:
    server = ("--bootstrap-server", ours.bootstrap_servers)
    ours.create_topic(f"{STREAM}:pressure", 2)

    described = _ok("kafka-topics", *server, "--describe", "--topic", ALIAS)
    assert f"Topic: {ALIAS}\tTopicId:" in described and "PartitionCount: 2" in described

    _ok("kafka-configs", *server, "--alter", "--entity-type", "topics", "--entity-name", ALIAS,
        "--add-config", "retention.ms=1000000")
    configs = _ok("kafka-configs", *server, "--describe", "--entity-type", "topics", "--entity-name", ALIAS)
    assert f"Dynamic configs for topic {ALIAS} are:" in configs and "retention.ms=1000000" in configs

    _ok("kafka-console-producer", *server, "--topic", ALIAS, "--property", "parse.key=true",
        stdin="k1\tone\nk1\ttwo\nk1\tthree\n")
    assert _ok("kafka-get-offsets", *server, "--topic", ALIAS).split() in (
        [f"{ALIAS}:0:3", f"{ALIAS}:1:0"], [f"{ALIAS}:0:0", f"{ALIAS}:1:3"])
    consumed = _ok("kafka-console-consumer", *server, "--topic", ALIAS, "--group", "spellings",
                   "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000")
    assert consumed.split() == ["one", "two", "three"]
    groups = _ok("kafka-consumer-groups", *server, "--describe", "--group", "spellings")
    rows = [line.split() for line in groups.splitlines() if line.startswith("spellings")]
    # all three records share a key, so one partition holds them; the console consumer commits both
    assert sorted((row[1], row[3]) for row in rows) == [(ALIAS, "0"), (ALIAS, "3")], groups

    _ok("kafka-topics", *server, "--delete", "--topic", ALIAS)
    assert ALIAS not in _ok("kafka-topics", *server, "--list").split()
    assert ours.server.store.get_topic(STREAM, "pressure") is None
