"""Every entry point is authorized: driven by the code's own registries, not by a list someone keeps up.

Every Kafka API in the handler registry (handlers.HANDLERS) and every route
of the HTTP application's router must have an entry in the expectation
tables below, which decide how it is authorized. An API or route added
later without an entry fails `test_..._have_a_decision`; one whose entry
says it is checked is run as bob (no grants: it must be refused, with an
audit line) and as carol (granted ALL on every resource: it must not be).
The Kafka APIs are run in-process through http.kafka_calls, the path the
REST proxy takes, which passes the same cluster gate as the Kafka port.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from kafkacompat.fuzz.seeds import sample_entity
from kafkacompat.handlers import HANDLERS
from kafkacompat.http import kafka_calls, principal
from kafkacompat.http.app import build_app
from kafkacompat.protocol.messages import request_schema
from kafkacompat.protocol.versions import api_name
from kafkacompat.security import acls
from kafkacompat.security.refusals import CLUSTER_GATES
from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(180)
USERS = {"admin": "admin-secret", "bob": "bob-secret", "carol": "carol-secret"}
SEED = "seed"  # the name sample requests give every topic, group and transactional id
AUDIT = "kafkacompat.audit"


@dataclasses.dataclass(frozen=True)
class Unchecked:
    """Nothing to authorize; `why` says so (reviewed like code)."""

    why: str


@dataclasses.dataclass(frozen=True)
class Checked:
    """Refused without a grant, allowed with one; `fix` adapts the sample request so it names a real resource."""

    fix: Callable[[Any, Any], Any] = lambda request, cluster: request


def _first(request: Any, array: str, **values: Any) -> Any:
    """The request with its first `array` element's fields replaced."""
    items = getattr(request, array)
    return dataclasses.replace(request, **{array: (dataclasses.replace(items[0], **values), *items[1:])})


def _topic_id(cluster: Any) -> Any:
    return cluster.store.get_topic(cluster.default_stream, SEED).topic_id


def _config_resource(request: Any, cluster: Any) -> Any:
    return _first(request, "resources", resource_type=2, resource_name=SEED)  # TOPIC


# How each Kafka API is authorized. Gates: refusals.CLUSTER_GATES (the connection, and kafka_calls, ask first).
KAFKA_APIS: dict[int, Unchecked | Checked] = {
    17: Unchecked("SaslHandshake: before login, there is no principal yet"),
    18: Unchecked("ApiVersions: before login, as Kafka answers it to anyone"),
    36: Unchecked("SaslAuthenticate: the login itself"),
    60: Unchecked("DescribeCluster: Kafka answers it to any principal (only authorized operations need DESCRIBE)"),
    16: Unchecked("ListGroups: lists only the groups the principal may describe (tests/security/test_authorization)"),
    66: Unchecked("ListTransactions: lists only the transactional ids the principal may describe"),
    38: Unchecked("CreateDelegationToken: a principal's own token needs no grant, as in Kafka "
                  "(tests/security/test_delegation_tokens)"),
    39: Unchecked("RenewDelegationToken: holding the token's HMAC is the authorization, as in Kafka"),
    40: Unchecked("ExpireDelegationToken: holding the token's HMAC is the authorization, as in Kafka"),
    41: Unchecked("DescribeDelegationToken: lists only the tokens the principal owns or may describe"),
    32766: Unchecked("StreamReplicate: needs the destination stream's copy permission "
                     "(tests/security/test_authorization::test_replication_into_a_stream_needs_its_copy_permission)"),
    32767: Unchecked("StreamAdmin: checked per operation (test_stream_admin_operations_are_authorized below)"),
    1: Checked(lambda request, cluster: _first(request, "topics", topic_id=_topic_id(cluster))),
    32: Checked(_config_resource),
    33: Checked(_config_resource),
    44: Checked(_config_resource),
    **{key: Checked() for key in (0, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
                                  30, 31, 37, 42, 47, 61, 65, 68, 69, 75, 76, 77, 78, 79, 90, 91, 92)},
    **{key: Checked() for key in CLUSTER_GATES},
}


def auth(user: str | None) -> dict[str, str]:
    if user is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0"], authorizer=True,
                super_users=["User:admin"], http_port=0) as running:
        running.create_topic(SEED, partitions=1)
        everything = [(acls.ResourceType.CLUSTER, "kafka-cluster")] + [
            (kind, "*") for kind in (acls.ResourceType.TOPIC, acls.ResourceType.GROUP,
                                     acls.ResourceType.TRANSACTIONAL_ID, acls.ResourceType.DELEGATION_TOKEN)]
        running.call(running.server.cluster.authorizer.acls.add([
            acls.AclBinding(kind, name, acls.PatternType.LITERAL, "User:carol", "*", acls.Operation.ALL,
                            acls.Permission.ALLOW) for kind, name in everything]))
        yield running


class Denials(logging.Handler):
    """The audit lines of refusals, as they are written."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("authorization denied"):
            self.lines.append(record.getMessage())


@pytest.fixture
def denials() -> Iterator[Denials]:
    handler, audit = Denials(), logging.getLogger(AUDIT)
    audit.addHandler(handler)
    level = audit.level
    audit.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        audit.removeHandler(handler)
        audit.setLevel(level)


def test_every_kafka_api_has_a_decision() -> None:
    missing = sorted(api_name(key) for key in HANDLERS if key not in KAFKA_APIS)
    assert not missing, f"Kafka APIs without an authorization decision in KAFKA_APIS: {missing}"
    assert not set(KAFKA_APIS) - set(HANDLERS), "KAFKA_APIS names APIs the broker no longer serves"


async def _as(cluster: Any, key: int, who: str, fix: Callable[[Any, Any], Any]) -> None:
    principal._principal.set(who)  # what the HTTP middleware does for a logged-in request
    request = fix(sample_entity(request_schema(key, kafka_calls.version_of(key))), cluster)
    await asyncio.wait_for(kafka_calls.call(cluster, key, request), 10)


@pytest.mark.parametrize("key", sorted(key for key, rule in KAFKA_APIS.items() if isinstance(rule, Checked)),
                         ids=api_name)
def test_each_checked_kafka_api_refuses_bob_and_allows_a_grant(broker: Broker, denials: Denials, key: int) -> None:
    rule = KAFKA_APIS[key]
    assert isinstance(rule, Checked)
    cluster = broker.server.cluster
    broker.call(_as(cluster, key, "User:carol", rule.fix))
    assert [line for line in denials.lines if "principal=User:carol" in line] == []
    broker.call(_as(cluster, key, "User:bob", rule.fix))
    refused = [line for line in denials.lines if "principal=User:bob" in line]
    assert refused, f"{api_name(key)} did not refuse a principal without grants"
    assert all("entry=" in line for line in refused)


def test_stream_admin_operations_are_authorized(broker: Broker, denials: Denials) -> None:
    from kafkacompat.handlers import stream_admin

    cluster = broker.server.cluster
    async def run(who: str, op: dict[str, Any]) -> Any:
        principal._principal.set(who)
        ctx = principal.HttpCaller(cluster, who, "127.0.0.1:1 via test", "test")
        try:
            return await stream_admin.run(ctx, op)
        except stream_admin.AdminError as exc:
            return exc
    for op in ({"op": "stream.create", "path": "/apps/by-carol"}, {"op": "topic.list", "path": "/apps/by-carol"},
               {"op": "stream.edit", "path": "/apps/by-carol", "policy": {"ttl_seconds": 60}}):
        assert isinstance(broker.call(run("User:bob", op)), stream_admin.AdminError), op
        assert not isinstance(broker.call(run("User:carol", op)), stream_admin.AdminError), op
    assert len([line for line in denials.lines if "principal=User:bob" in line]) >= 3
