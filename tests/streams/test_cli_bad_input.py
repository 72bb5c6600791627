"""Bad input to the admin CLI: one line on stderr, a non-zero exit, nothing changed."""

from __future__ import annotations

import socket

import pytest

from .conftest import run_cli

STREAM = "/tests/bad_input"
TOPIC = f"{STREAM}:Pressure"


@pytest.fixture(scope="module", autouse=True)
def namespace(broker):
    """One stream with a three-partition topic, made once for every case."""
    for args in (("stream", "create", STREAM, "--ttl", "1h"), ("topic", "create", TOPIC, "--partitions", "3")):
        assert run_cli(broker.bootstrap_servers, *args).returncode == 0


def snapshot(admin) -> object:
    """Everything a user could see change: streams with their policies, topics, cursors."""
    return [
        (stream, admin.call("topic.list", path=stream["path"]), admin.call("cursor.list", path=stream["path"]))
        for stream in admin.call("stream.list")
    ]


CASES = {
    "relative path": (["stream", "create", "apps/iot"], "must be absolute"),
    "dot in path": (["stream", "create", "/apps/iot.metrics"], "may use only letters, digits, '_' and '-'"),
    "empty component": (["stream", "create", "/apps//iot"], "may use only letters, digits, '_' and '-'"),
    "stream exists": (["stream", "create", STREAM], "already exists"),
    "nested stream": (["stream", "create", f"{STREAM}/inner"], "streams may not nest"),
    "unknown stream": (["stream", "edit", "/tests/missing", "--ttl", "1d"], "stream /tests/missing does not exist"),
    "ttl with bad unit": (["stream", "create", "/tests/ttl_a", "--ttl", "7x"], "invalid duration '7x'"),
    "negative ttl": (["stream", "edit", STREAM, "--ttl", "-5"], "invalid duration '-5'"),
    "ttl words": (["stream", "create", "/tests/ttl_b", "--ttl", "forever"], "invalid duration 'forever'"),
    "bad size": (["stream", "edit", STREAM, "--partitionlet-size", "64XB"], "invalid size '64XB'"),
    "tiny partitionlets": (["stream", "edit", STREAM, "--partitionlet-size", "100"], "argument --partitionlet-size: must be at least 4 KiB, not 100"),
    "bad autocreate": (["stream", "edit", STREAM, "--autocreate", "maybe"], "'maybe' is neither true nor false"),
    "negative default partitions": (["stream", "create", "/tests/neg", "--partitions", "-3"], "at least 1, not -3"),
    "zero topic partitions": (["topic", "create", f"{STREAM}:Zero", "--partitions", "0"], "at least 1, not 0"),
    "bad topic name": (["topic", "create", f"{STREAM}:bad*name"],
                       "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    "topic name '..'": (["topic", "create", f"{STREAM}:.."], "is not allowed"),
    "topic in missing stream": (["topic", "create", "/tests/missing:Pressure"], "stream /tests/missing does not exist"),
    "topic exists": (["topic", "create", TOPIC], "already exists"),
    "shrinking partitions": (["topic", "edit", TOPIC, "--partitions", "2"], "can only be added, not set to 2"),
    "same partitions": (["topic", "edit", TOPIC, "--partitions", "3"], "can only be added, not set to 3"),
    "unknown topic config": (["topic", "edit", TOPIC, "--config", "retention.hours=1"], "Unknown topic config name"),
    "growth with a bad config": (["topic", "edit", TOPIC, "--partitions", "5", "--config", "retention.ms=soon"],
                                 "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    "unknown topic": (["topic", "info", f"{STREAM}:Nope"], "topic Nope does not exist in stream"),
    "default stream kept": (["stream", "delete", "/default"], "cannot be deleted"),
    "cursor partition without topic": (["cursor", "delete", STREAM, "--group", "g", "--partition", "0"],
                                       "a partition needs its topic"),
}


@pytest.mark.parametrize("args, message", CASES.values(), ids=CASES.keys())
def test_refused_with_one_line_and_nothing_changed(broker, admin, args, message):
    before = snapshot(admin)
    done = run_cli(broker.bootstrap_servers, *args)
    assert done.returncode != 0
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("kafkacompat")
    assert message in done.stderr
    assert snapshot(admin) == before


def test_unreachable_broker_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: connections are refused
        done = run_cli(address, "stream", "list")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == f"kafkacompat: error: cannot reach a broker ({address}: Connection refused)\n"
