"""One front door: the console, its forms and live tail, and /metrics ask the same authorizer as the Kafka port.

The testers' broker: ACLs on, users admin (super user), alice (READ and
WRITE on one topic) and bob (no grants). `secured` needs HTTP logins, as
every broker with an authorizer does by default; `open_port` serves the
HTTP port without logins on purpose (http_open), so its requests are
User:ANONYMOUS, authorized like any other principal. Plain HTTP requests:
what a browser or curl would get.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka import Producer

from kafkacompat.security import acls
from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(120)
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TOPIC = "sec-" + uuid.uuid4().hex[:6]
GROUP = "sec-readers-" + uuid.uuid4().hex[:6]
RECORDS = 20
AUDIT = "kafkacompat.audit"


def prepare(broker: Broker) -> None:
    """The topic with RECORDS records, alice's READ and WRITE on it, and a group that committed offsets."""
    broker.create_topic(TOPIC, partitions=1)
    producer = Producer({**broker.client_config("admin"), "linger.ms": 0})
    for n in range(RECORDS):
        producer.produce(TOPIC, f"secret-{n}".encode())
    assert producer.flush(15) == 0
    broker.call(broker.server.cluster.authorizer.acls.add([
        acls.AclBinding(acls.ResourceType.TOPIC, TOPIC, acls.PatternType.LITERAL, "User:alice", "*", operation,
                        acls.Permission.ALLOW) for operation in (acls.Operation.READ, acls.Operation.WRITE)]))
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({**broker.client_config("admin"), "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
    consumer.close()


def secure(**settings: object) -> Broker:
    return Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0"], authorizer=True,
                  super_users=["User:admin"], http_port=0, **settings)


@pytest.fixture(scope="module")
def secured() -> Iterator[Broker]:
    with secure() as running:
        prepare(running)
        yield running


@pytest.fixture(scope="module")
def open_port() -> Iterator[Broker]:
    with secure(http_open=True) as running:
        prepare(running)
        yield running


def auth(user: str | None) -> dict[str, str]:
    if user is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()}


def topic_query(broker: Broker) -> str:
    return f"stream={broker.server.cluster.default_stream}&topic={TOPIC}"


def tail(broker: Broker, user: str | None) -> tuple[int, list[str]]:
    """(status, values of the records) of the live tail from the beginning, read until all RECORDS arrived."""
    url = f"{broker.http_url}/console/tail/events?{topic_query(broker)}&from=beginning"
    with requests.get(url, headers=auth(user), stream=True, timeout=20) as answer:
        values: list[str] = []
        if answer.status_code != 200:
            return answer.status_code, values
        for line in answer.iter_lines(decode_unicode=True):
            if line.startswith("data: ") and '"offset"' in line:
                values.append(line)
                if len(values) == RECORDS:
                    break
        return answer.status_code, values


def end_offset(broker: Broker) -> tuple[int, int]:
    partition = broker.server.cluster.store.partition(broker.server.cluster.default_stream, TOPIC, 0)
    return partition.log_start_offset, partition.high_watermark


def test_the_live_tail_needs_read_on_the_topic(secured: Broker, open_port: Broker) -> None:
    assert tail(open_port, None) == (403, [])  # anonymous, on a port served open
    assert tail(secured, None)[0] == 401  # no login
    assert tail(secured, "bob") == (403, [])
    status, records = tail(secured, "alice")
    assert status == 200 and len(records) == RECORDS and "secret-0" in records[0]


def post(broker: Broker, path: str, form: dict[str, str], user: str | None) -> int:
    return requests.post(broker.http_url + path, data=form, headers=auth(user), allow_redirects=False,
                         timeout=15).status_code


def test_console_forms_change_nothing_without_the_grant(secured: Broker, open_port: Broker) -> None:
    for broker, user in ((open_port, None), (secured, "bob"), (secured, "alice")):
        default = broker.server.cluster.default_stream
        store = broker.server.cluster.store
        new_stream = "/apps/" + uuid.uuid4().hex[:8]
        before = end_offset(broker)
        assert post(broker, "/console/stream/create", {"path": new_stream}, user) == 403
        assert post(broker, f"/console/topic/create?path={default}", {"topic": "made-here"}, user) == 403
        assert post(broker, f"/console/topic/edit?{topic_query(broker)}",
                    {"config": "retention.ms", "value": "1"}, user) == 403
        assert post(broker, f"/console/stream/edit?path={default}", {"ttl_seconds": "1"}, user) == 403
        assert store.get_stream(new_stream) is None and store.get_topic(default, "made-here") is None
        assert store.get_stream(default).policy.ttl_seconds != 1
        assert "retention.ms" not in (store.get_topic(default, TOPIC).configs or {})
        assert end_offset(broker) == before == (0, RECORDS)
    # the super user may: the same form is done (303 to the new stream's page)
    assert post(secured, "/console/stream/create", {"path": "/apps/by-admin"}, "admin") == 303
    assert secured.server.cluster.store.get_stream("/apps/by-admin") is not None


def page(broker: Broker, path: str, user: str | None) -> tuple[int, str]:
    answer = requests.get(broker.http_url + path, headers=auth(user), timeout=15)
    return answer.status_code, answer.text


def test_pages_show_only_what_the_principal_may_describe(secured: Broker, open_port: Broker) -> None:
    for broker, user in ((open_port, None), (secured, "bob")):
        default = broker.server.cluster.default_stream
        for path in ("/", f"/console/stream?path={default}", "/console/groups"):
            status, text = page(broker, path, user)
            assert TOPIC not in text and GROUP not in text, (path, user)
        assert page(broker, f"/console/topic?{topic_query(broker)}", user)[0] == 403
        assert page(broker, f"/console/tail?{topic_query(broker)}", user)[0] == 403
        assert page(broker, f"/console/group?id={GROUP}", user)[0] == 403
        assert page(broker, "/metrics", user)[0] == 403
    status, text = page(secured, f"/console/topic?{topic_query(secured)}", "alice")  # READ implies DESCRIBE
    assert status == 200 and TOPIC in text
    assert GROUP not in page(secured, "/console/groups", "alice")[1]  # no grant on the group
    status, text = page(secured, "/console/groups", "admin")
    assert status == 200 and GROUP in text


def test_every_http_denial_is_one_audit_line_naming_the_route(secured: Broker,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=AUDIT):
        assert page(secured, f"/console/topic?{topic_query(secured)}", "bob")[0] == 403
        cluster = requests.get(f"{secured.http_url}/v3/clusters", headers=auth("bob"), timeout=10).json()
        records = f"{secured.http_url}/v3/clusters/{cluster['data'][0]['cluster_id']}/topics/{TOPIC}/records"
        requests.post(records, json={"value": {"type": "STRING", "data": "x"}}, headers=auth("bob"), timeout=10)
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT and "denied" in r.getMessage()]
    assert any(line.startswith("authorization denied: principal=User:bob client=127.0.0.1")
               and f"operation=DESCRIBE resource=TOPIC:{TOPIC} api=- entry=HTTP GET /console/topic" in line
               for line in lines), lines
    assert any(f"operation=DESCRIBE resource=TOPIC:{TOPIC} api=metadata "
               "entry=HTTP POST /v3/clusters/{cluster_id}/topics/{topic}/records" in line for line in lines), lines


def test_an_authorizer_broker_needs_http_logins_unless_served_open(secured: Broker,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    assert requests.get(f"{secured.http_url}/v3/clusters", timeout=10).status_code == 401
    assert requests.get(f"{secured.http_url}/", timeout=10).status_code == 401
    assert requests.get(f"{secured.http_url}/health/live", timeout=10).status_code == 200  # probes stay open
    with caplog.at_level(logging.WARNING, logger="kafkacompat.http.principal"):
        with secure(http_open=True) as opened:
            assert requests.get(f"{opened.http_url}/v3/clusters", timeout=10).status_code == 200
    assert any("the HTTP port is open (http_open)" in r.getMessage() for r in caplog.records)


def test_a_console_form_change_is_logged_once_with_its_principal_and_route(secured: Broker, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kafkacompat.admin")
    assert post(secured, "/console/stream/create", {"path": "/apps/logged-form"}, "admin") == 303
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkacompat.admin" and r.levelno == logging.INFO]
    assert len(lines) == 1, lines
    assert lines[0].startswith("StreamAdmin by User:admin from 127.0.0.1")
    assert "at HTTP POST /console/stream/create: " in lines[0]
    assert "stream.create path='/apps/logged-form'" in lines[0] and lines[0].endswith(": ok")
