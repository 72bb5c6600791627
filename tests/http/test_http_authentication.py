"""HTTP Basic and mTLS logins on the REST proxy and the console, mapped to the Kafka listeners' principals.

With http_authentication=basic, a request needs a SCRAM user's name and
password (the same users the SASL listeners log in); it then acts as
User:<name>, so Kafka ACLs decide what its REST calls may do, exactly as
for a Kafka client, and grants made with an AdminClient apply at once.
With mtls over HTTPS, the client certificate's subject names the user.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkacompat.testing import Broker

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(sasl=USERS, http_port=0, http_authentication="basic", authorizer=True,
                super_users=["User:admin"]) as running:
        yield running


def auth(user: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password or USERS[user]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def cluster_id(broker: Broker) -> str:
    answer = requests.get(f"{broker.http_url}/v3/clusters", headers=auth("admin"), timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"][0]["cluster_id"]


def produce(broker: Broker, user: str, topic: str, value: str) -> requests.Response:
    return requests.post(f"{broker.http_url}/v3/clusters/{cluster_id(broker)}/topics/{topic}/records",
                         json={"value": {"type": "STRING", "data": value}}, headers=auth(user), timeout=10)


def test_requests_without_valid_credentials_get_a_challenge_and_an_audit_line(broker, caplog):
    caplog.set_level(logging.WARNING, logger="kafkacompat.audit")
    for headers in ({}, auth("alice", "wrong"), {"Authorization": "Basic !!!"}, auth("mallory", "x")):
        answer = requests.get(f"{broker.http_url}/v3/clusters", headers=headers, timeout=10)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"].startswith("Basic realm=")
        assert answer.json()["error_code"] == 40101
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkacompat.audit"]
    assert len([line for line in lines if "mechanism=BASIC" in line]) >= 4
    assert not any("wrong" in line for line in lines)  # never the password
    assert requests.get(f"{broker.http_url}/health/live", timeout=10).status_code == 200  # probes stay open
    # /metrics names topics, groups and sizes: it needs DESCRIBE on the cluster, as every entry point decides
    assert requests.get(f"{broker.http_url}/metrics", headers=auth("alice"), timeout=10).status_code == 403
    assert requests.get(f"{broker.http_url}/metrics", headers=auth("admin"), timeout=10).status_code == 200


def test_rest_calls_are_authorized_as_the_logged_in_user(broker):
    topic = f"rest-auth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.client_config("admin"))
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    refused = produce(broker, "alice", topic, "from alice")
    assert refused.json()["error_code"] == 40301, refused.text  # in the record's report, as Confluent answers
    assert produce(broker, "admin", topic, "from admin").status_code == 200
    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([grant]).values():
        future.result(15)
    accepted = produce(broker, "alice", topic, "from alice")
    assert accepted.status_code == 200 and accepted.json()["error_code"] == 200, accepted.text
    consumer = Consumer({**broker.client_config("admin"), "group.id": topic, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, f"no end of {topic}: {values}"
        if msg.error():
            break
        values.append(msg.value())
    consumer.close()
    assert values == [b"from admin", b"from alice"]  # the refused record was never written


def test_console_changes_follow_the_users_permissions(broker):
    home = requests.get(f"{broker.http_url}/", headers=auth("alice"), timeout=10)
    assert home.status_code == 200 and "User:alice may not create streams" in home.text
    refused = requests.post(f"{broker.http_url}/console/stream/create", data={"path": "/alice/s"},
                            headers={**auth("alice"), "Origin": broker.http_url}, timeout=10)
    assert "User:alice may not create streams" in refused.text
    assert broker.server.cluster.store.get_stream("/alice/s") is None
    assert "may not create streams" not in requests.get(f"{broker.http_url}/", headers=auth("admin"),
                                                        timeout=10).text


def test_mtls_maps_the_client_certificate_to_the_principal_acls_name(tmp_path):
    with Broker(sasl=USERS, tls=True, http_port=0, http_tls=True, http_authentication="mtls", authorizer=True,
                super_users=["User:admin"],
                ssl_principal_mapping_rules="RULE:^CN=([a-z]+),OU=apps$/$1/,DEFAULT") as secure:
        ca = secure.certificates.location
        carol = secure.certificates.issue("carol", {"CN": "carol", "OU": "apps"})
        admin = AdminClient(secure.client_config("admin"))
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
        url = f"{secure.http_url}/v3/clusters"
        assert secure.http_url.startswith("https://")
        with pytest.raises(requests.exceptions.ConnectionError):  # no client certificate: TLS refuses it
            requests.get(url, verify=ca, timeout=10)
        clusters = requests.get(url, verify=ca, cert=(carol.certificate, carol.key), timeout=10)
        assert clusters.status_code == 200, clusters.text
        records = f"{url}/{clusters.json()['data'][0]['cluster_id']}/topics/{topic}/records"
        body = {"value": {"type": "STRING", "data": "from carol"}}
        refused = requests.post(records, json=body, verify=ca, cert=(carol.certificate, carol.key), timeout=10)
        assert refused.json()["error_code"] == 40301, refused.text
        grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        for future in admin.create_acls([grant]).values():
            future.result(15)
        accepted = requests.post(records, json=body, verify=ca, cert=(carol.certificate, carol.key), timeout=10)
        assert accepted.json()["error_code"] == 200, accepted.text


def test_a_changed_or_deleted_password_stops_working_at_once(broker):
    """Verified logins are remembered to spare PBKDF2, but never past a credential change."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(broker.client_config("admin"))

    def set_password(password: str) -> None:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("carol", info, password.encode())]).values():
            future.result(15)

    def status(password: str) -> int:
        return requests.get(f"{broker.http_url}/v3/clusters", headers=auth("carol", password), timeout=10).status_code

    set_password("first")
    assert [status("first"), status("first")] == [200, 200]  # the second is served from the remembered login
    set_password("second")
    assert (status("first"), status("second")) == (401, 200)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(15)
    assert status("second") == 401
