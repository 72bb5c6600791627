"""The HTTP server of `serve --workers N` (REST, console) works on every worker's partitions.

The HTTP server runs in worker 0, which opens only the partitions it owns.
Before stop 56, a REST produce to a partition of worker 1 failed with a 500
(NOT_LEADER_OR_FOLLOWER), REST listed one broker and named it the leader of
every partition, the console counted worker 0's partitions only, refused to
show worker 1's records, and its groups page failed (a 500) once a group had
committed an offset on worker 1. Each test fails on the code before.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.storage.disk.shared import owner_of

from tests.workers.test_workers import ROOT, Workers, create_topic, keys_coordinated_by

pytestmark = pytest.mark.slow

DEFAULT_STREAM = "/default"
V2 = "application/vnd.kafka.v2+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, workers: Workers, http: str) -> None:
        self.workers, self.http = workers, http
        self.cluster_id = requests.get(f"{http}/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    running = Workers(tmp_path / "data", 2, "--http-port", str(port), "--http-host", "127.0.0.1")
    try:
        http = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"{http}/health/ready", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the HTTP server never answered"
                time.sleep(0.2)
        yield Served(running, http)
    finally:
        running.kill()


def worker_1s(topic: str, partitions: int) -> list[int]:
    return [i for i in range(partitions) if owner_of(2, DEFAULT_STREAM, topic, i) == 1]


def test_rest_writes_and_reads_every_workers_partitions(served: Served) -> None:
    create_topic(served.workers.bootstrap, "rest", 4)
    assert worker_1s("rest", 4) and len(worker_1s("rest", 4)) < 4  # both workers own some
    records = f"{served.http}/v3/clusters/{served.cluster_id}/topics/rest/records"
    for index in range(4):
        answer = requests.post(records, json={"partition_id": index, "value": {"type": "JSON", "data": index}},
                               timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["offset"] == 0 and answer.json()["partition_id"] == index

    brokers = requests.get(f"{served.http}/v3/clusters/{served.cluster_id}/brokers", timeout=30).json()["data"]
    assert [(b["broker_id"], b["port"]) for b in brokers] == [(1, served.workers.ports[0]),
                                                               (2, served.workers.ports[1])]
    listed = requests.get(f"{served.http}/v3/clusters/{served.cluster_id}/topics/rest/partitions",
                          timeout=30).json()["data"]
    named = {p["partition_id"]: p["leader"]["related"].rsplit("/", 1)[1] for p in listed}
    metadata = Producer({"bootstrap.servers": served.workers.bootstrap}).list_topics("rest", timeout=30)
    assert named == {i: str(p.leader) for i, p in metadata.topics["rest"].partitions.items()}
    assert sorted(set(named.values())) == ["1", "2"]

    base = f"{served.http}/consumers/g/instances/c"
    assert requests.post(f"{served.http}/consumers/g", headers={"Content-Type": V2}, timeout=30, data=json.dumps(
        {"name": "c", "format": "json", "auto.offset.reset": "earliest"})).status_code == 200
    assert requests.post(f"{base}/subscription", headers={"Content-Type": V2}, timeout=30,
                         data=json.dumps({"topics": ["rest"]})).status_code == 204
    got: list[dict] = []
    deadline = time.monotonic() + 60
    while len(got) < 4:
        assert time.monotonic() < deadline, f"read only {got}"
        got += requests.get(f"{base}/records", headers={"Accept": "application/vnd.kafka.json.v2+json"},
                            timeout=30).json()
    assert sorted((r["partition"], r["value"]) for r in got) == [(i, i) for i in range(4)]


def test_the_console_counts_shows_and_lags_every_workers_partitions(served: Served) -> None:
    create_topic(served.workers.bootstrap, "seen", 4)
    producer = Producer({"bootstrap.servers": served.workers.bootstrap})
    for index in range(4):
        for n in range(index + 1):  # 1, 2, 3 and 4 records: 10 in all
            producer.produce("seen", value=f"p{index}-r{n}".encode(), partition=index)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": served.workers.bootstrap, "group.id": "lagging"})
    consumer.commit(offsets=[TopicPartition("seen", i, 0) for i in range(4)], asynchronous=False)
    consumer.close()

    shown = cli(served.workers, "topic", "info", "/default:seen", "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["messages"] == 10 and "unreadable" not in view, view
    assert {p["partition"]: p["high_watermark"] for p in view["partition_detail"]} == {0: 1, 1: 2, 2: 3, 3: 4}

    theirs = worker_1s("seen", 4)[0]
    page = requests.get(f"{served.http}/console/messages", timeout=30,
                        params={"stream": DEFAULT_STREAM, "topic": "seen", "partition": theirs})
    assert page.status_code == 200, page.text
    assert all(f"p{theirs}-r{n}" in page.text for n in range(theirs + 1))

    groups = requests.get(f"{served.http}/console/groups", timeout=30)
    assert groups.status_code == 200, groups.text
    cursors = cli(served.workers, "cursor", "list", DEFAULT_STREAM, "--group", "lagging", "--json")
    assert cursors.returncode == 0, cursors.stderr
    assert {c["partition"]: c["lag"] for c in json.loads(cursors.stdout)} == {0: 1, 1: 2, 2: 3, 3: 4}

    deleted = requests.post(f"{served.http}/console/topic/delete-records", timeout=30, allow_redirects=False,
                            params={"stream": DEFAULT_STREAM, "topic": "seen"}, headers={"Origin": served.http},
                            data={"partition": str(theirs), "offset": "1", "confirm": "on"})
    assert deleted.status_code == 303, deleted.text
    view = json.loads(cli(served.workers, "topic", "info", "/default:seen", "--json").stdout)
    assert {p["partition"]: p["log_start_offset"] for p in view["partition_detail"]}[theirs] == 1


def test_rest_and_the_console_list_the_live_groups_every_worker_coordinates(served: Served) -> None:
    # Each worker coordinates the groups of its __consumer_offsets partitions (stop 61); the HTTP server
    # runs in worker 0, which asks every worker's ListGroups, as Kafka's admin client asks every broker.
    create_topic(served.workers.bootstrap, "listed", 2)
    groups = keys_coordinated_by(2, "live")
    members = [Consumer({"bootstrap.servers": served.workers.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"}) for group in groups]
    try:
        for member in members:
            member.subscribe(["listed"])
        url = f"{served.http}/v3/clusters/{served.cluster_id}/consumer-groups"
        deadline = time.monotonic() + 60
        while True:
            for member in members:
                member.poll(0.2)  # joins; no offsets are committed, so only the coordinator knows the group
            listed = {g["consumer_group_id"]: g for g in requests.get(url, timeout=30).json()["data"]}
            if all(listed.get(group, {}).get("state") == "STABLE" for group in groups):
                break
            assert time.monotonic() < deadline, f"REST listed {listed}"
        coordinators = [listed[group]["coordinator"]["related"].rsplit("/", 1)[1] for group in groups]
        assert coordinators == ["1", "2"], "each group's coordinator is the worker that runs it"
        page = requests.get(f"{served.http}/console/groups", timeout=30)
        assert page.status_code == 200 and all(group in page.text for group in groups), page.text
    finally:
        for member in members:
            member.close()


def cli(workers: Workers, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server",
                           f"127.0.0.1:{workers.ports[0]}"], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_metrics_show_every_workers_figures_labelled_by_node_id(served: Served) -> None:
    create_topic(served.workers.bootstrap, "counted", 4)
    theirs = worker_1s("counted", 4)
    producer = Producer({"bootstrap.servers": served.workers.bootstrap})
    for index in theirs:
        for _ in range(5):
            producer.produce("counted", value=b"x", partition=index)
    assert producer.flush(30) == 0
    scraped = requests.get(f"{served.http}/metrics", timeout=30)
    assert scraped.status_code == 200, scraped.text
    figures = dict(line.rsplit(" ", 1) for line in scraped.text.splitlines() if line and not line.startswith("#"))
    assert float(figures['kafkacompat_messages_in_total{node_id="2"}']) == 5 * len(theirs)
    assert float(figures['kafkacompat_messages_in_total{node_id="1"}']) == 0
    assert scraped.text.count("# TYPE kafkacompat_messages_in_total counter") == 1


def test_the_console_charts_count_traffic_at_every_worker(served: Served) -> None:
    name = next(f"charted-{n}" for n in range(100) if worker_1s(f"charted-{n}", 1))  # worker 1's only partition
    create_topic(served.workers.bootstrap, name, 1)
    producer = Producer({"bootstrap.servers": served.workers.bootstrap})
    for n in range(100):
        producer.produce(name, value=b"%d" % n)
    assert producer.flush(30) == 0
    url = f"{served.http}/console/charts/data"
    deadline = time.monotonic() + 45  # the sampler takes one sample every 10 s: a rate needs two
    while True:
        charted = requests.get(url, params={"scope": "topic", "stream": DEFAULT_STREAM, "topic": name},
                               timeout=30).json()
        produced = [v for v in charted["series"].get("produced_msgs", []) if v]
        if produced:
            break
        assert time.monotonic() < deadline, f"no produce rate charted for {name}: {charted}"
        time.sleep(1)
    broker = requests.get(url, params={"scope": "broker"}, timeout=30).json()
    assert any(broker["series"]["produced_msgs"]), broker



def test_the_schema_registry_works_and_worker_1_validates_against_it(served: Served) -> None:
    """Every stream's `_schemas` is worker 0's (it serves the registry); worker 1 reads it through worker 0
    when a record names a schema id it has not seen. Before stop 56 /default's `_schemas` was worker 1's
    and every registry request was a 500."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    name = next(f"validated-{n}" for n in range(100) if worker_1s(f"validated-{n}", 1))
    schema = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
    registered = requests.post(f"{served.http}/subjects/{name}-value/versions", json={"schema": json.dumps(schema)},
                               headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}, timeout=30)
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    assert requests.get(f"{served.http}/subjects", timeout=30).json() == [f"{name}-value"]
    admin = AdminClient({"bootstrap.servers": served.workers.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"confluent.value.schema.validation": "true"})])[name].result(30)
    outcomes: list = []
    producer = Producer({"bootstrap.servers": served.workers.bootstrap})
    for framed_id in (schema_id, schema_id ^ 0x5555):
        producer.produce(name, b"\x00" + framed_id.to_bytes(4, "big") + b"\x00" * 8,
                         on_delivery=lambda error, message: outcomes.append(error))
        assert producer.flush(30) == 0
    assert outcomes[0] is None, outcomes
    assert outcomes[1] is not None and outcomes[1].code() == KafkaError.INVALID_RECORD, outcomes
