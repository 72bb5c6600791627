"""Every entry point is authorized: driven by the code's own registries, not by a list someone keeps up.

Every Kafka API in the handler registry (handlers.HANDLERS) and every route
of the HTTP application's router must have an entry in the expectation
tables below, which decide how it is authorized. An API or route added
later without an entry fails `test_..._has_a_decision`; one whose entry
says it is checked is run as bob (no grants: it must be refused, with an
audit line) and as carol (granted ALL on every resource: it must not be),
and a Kafka API also with exactly the grants its entry names (allowed) and
with each one of them missing (refused).
The Kafka APIs are run in-process through http.kafka_calls, the path the
REST proxy takes, which passes the same cluster gate as the Kafka port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from kafkacompat.protocol.messages import request_schema
from kafkacompat.protocol.versions import api_name

from kafkacompat.fuzz.seeds import sample_entity
from kafkacompat.handlers import HANDLERS
from kafkacompat.http import kafka_calls, principal
from kafkacompat.http.app import build_app
from kafkacompat.schemas.registry import content_id
from kafkacompat.security import acls
from kafkacompat.security.refusals import CLUSTER_GATES
from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(180)
USERS = {"admin": "admin-secret", "bob": "bob-secret", "carol": "carol-secret"}
SEED = "seed"  # the name sample requests give every topic, group and transactional id
DOOMED = "doomed"  # what the HTTP route deleting a topic deletes
DOOMED_BY_CONSOLE = "doomed-by-console"  # what the console's delete form deletes
STREAM = "/apps/front"  # /streams/{stream} routes name SEED in this stream
AUDIT = "kafkacompat.audit"


@dataclasses.dataclass(frozen=True)
class Unchecked:
    """Nothing to authorize; `why` says so (reviewed like code)."""

    why: str


@dataclasses.dataclass(frozen=True)
class Checked:
    """Needs exactly `needs` ("OPERATION RESOURCE_TYPE" on SEED, or on the cluster): refused without any one of them.

    `fix` adapts the sample request so it names a real resource.
    """

    needs: tuple[str, ...]
    fix: Callable[[Any, Any], Any]


def checked(*needs: str, fix: Callable[[Any, Any], Any] = lambda request, cluster: request) -> Checked:
    return Checked(needs, fix)


def _first(request: Any, array: str, **values: Any) -> Any:
    """The request with its first `array` element's fields replaced."""
    items = getattr(request, array)
    return dataclasses.replace(request, **{array: (dataclasses.replace(items[0], **values), *items[1:])})


def _fetch_by_id(request: Any, cluster: Any) -> Any:
    return _first(request, "topics", topic_id=cluster.store.get_topic(cluster.default_stream, SEED).topic_id)


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
    32765: Unchecked("WorkerState: needs CLUSTER_ACTION on the cluster (tests/security/test_authorization::"
                     "test_share_state_kept_for_other_workers_needs_cluster_action)"),
    32767: Unchecked("StreamAdmin: checked per operation (test_stream_admin_operations_are_authorized below)"),
    0: checked("WRITE TRANSACTIONAL_ID"),  # produce (v13 names topics by id: the sample's is no topic)
    1: checked("READ TOPIC", fix=_fetch_by_id),  # fetch
    2: checked("DESCRIBE TOPIC"),  # list_offsets
    3: checked("DESCRIBE TOPIC", fix=_fetch_by_id),  # metadata (v12 asks by id when one is set, as Kafka)
    8: checked("READ GROUP", "READ TOPIC"),  # offset_commit
    9: checked("DESCRIBE GROUP", "DESCRIBE TOPIC"),  # offset_fetch
    10: checked("DESCRIBE GROUP"),  # find_coordinator
    11: checked("READ GROUP"),  # join_group
    12: checked("READ GROUP"),  # heartbeat
    13: checked("READ GROUP"),  # leave_group
    14: checked("READ GROUP"),  # sync_group
    15: checked("DESCRIBE GROUP"),  # describe_groups
    19: checked("CREATE TOPIC"),  # create_topics
    20: checked("DELETE TOPIC"),  # delete_topics (DELETE implies the DESCRIBE it asks first)
    21: checked("DELETE TOPIC"),  # delete_records
    22: checked("WRITE TRANSACTIONAL_ID"),  # init_producer_id
    23: checked("DESCRIBE TOPIC"),  # offset_for_leader_epoch
    24: checked("CLUSTER_ACTION CLUSTER", "WRITE TOPIC", "WRITE TRANSACTIONAL_ID"),  # add_partitions_to_txn
    25: checked("READ GROUP", "WRITE TRANSACTIONAL_ID"),  # add_offsets_to_txn
    26: checked("WRITE TRANSACTIONAL_ID"),  # end_txn
    27: checked("CLUSTER_ACTION CLUSTER"),  # write_txn_markers
    28: checked("READ GROUP", "READ TOPIC", "WRITE TRANSACTIONAL_ID"),  # txn_offset_commit
    29: checked("DESCRIBE CLUSTER"),  # describe_acls
    30: checked("ALTER CLUSTER"),  # create_acls
    31: checked("ALTER CLUSTER"),  # delete_acls
    32: checked("DESCRIBE_CONFIGS TOPIC", fix=_config_resource),  # describe_configs
    33: checked("ALTER_CONFIGS TOPIC", fix=_config_resource),  # alter_configs
    34: checked("ALTER CLUSTER"),  # alter_replica_log_dirs
    35: checked("DESCRIBE CLUSTER"),  # describe_log_dirs
    37: checked("ALTER TOPIC"),  # create_partitions
    42: checked("DELETE GROUP"),  # delete_groups
    43: checked("ALTER CLUSTER"),  # elect_leaders
    44: checked("ALTER_CONFIGS TOPIC", fix=_config_resource),  # incremental_alter_configs
    45: checked("ALTER CLUSTER"),  # alter_partition_reassignments
    46: checked("DESCRIBE CLUSTER"),  # list_partition_reassignments
    47: checked("DELETE GROUP"),  # offset_delete
    48: checked("DESCRIBE_CONFIGS CLUSTER"),  # describe_client_quotas
    49: checked("ALTER_CONFIGS CLUSTER"),  # alter_client_quotas
    50: checked("DESCRIBE CLUSTER"),  # describe_user_scram_credentials
    51: checked("ALTER CLUSTER"),  # alter_user_scram_credentials
    57: checked("ALTER CLUSTER"),  # update_features
    61: checked("READ TOPIC"),  # describe_producers
    55: checked("DESCRIBE CLUSTER"),  # describe_quorum
    64: checked("ALTER CLUSTER"),  # unregister_broker
    65: checked("DESCRIBE TRANSACTIONAL_ID"),  # describe_transactions
    68: checked("DESCRIBE TOPIC", "READ GROUP"),  # consumer_group_heartbeat
    69: checked("DESCRIBE GROUP"),  # consumer_group_describe
    74: checked("DESCRIBE_CONFIGS CLUSTER"),  # list_config_resources
    75: checked("DESCRIBE TOPIC"),  # describe_topic_partitions
    76: checked("DESCRIBE TOPIC", "READ GROUP"),  # share_group_heartbeat
    77: checked("DESCRIBE GROUP"),  # share_group_describe
    78: checked("READ GROUP"),  # share_fetch
    79: checked("READ GROUP"),  # share_acknowledge
    90: checked("DESCRIBE GROUP"),  # describe_share_group_offsets
    88: checked("DESCRIBE TOPIC", "READ GROUP"),  # streams_group_heartbeat
    89: checked("DESCRIBE GROUP"),  # streams_group_describe
    91: checked("READ GROUP"),  # alter_share_group_offsets
    92: checked("DELETE GROUP"),  # delete_share_group_offsets
}


def auth(user: str | None) -> dict[str, str]:
    if user is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()}


@contextlib.contextmanager
def secured_broker() -> Iterator[Broker]:
    """HTTP logins needed (the default with an authorizer); SEED exists; carol is granted ALL on everything."""
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


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with secured_broker() as running:
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
    for key, operation in CLUSTER_GATES.items():  # the gate the connection applies is the whole of it
        assert KAFKA_APIS[key] == checked(f"{operation.name} CLUSTER", fix=KAFKA_APIS[key].fix), api_name(key)


async def _as(cluster: Any, key: int, who: str, fix: Callable[[Any, Any], Any]) -> None:
    if cluster.store.get_topic(cluster.default_stream, SEED) is None:  # an earlier DeleteTopics took it
        await cluster.settle([await cluster.store.create_topic(cluster.default_stream, SEED, 1, {})])
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


def _grant(broker: Broker, who: str, needs: tuple[str, ...]) -> None:
    bindings = []
    for need in needs:
        operation, kind = need.split()
        name = "kafka-cluster" if kind == "CLUSTER" else SEED
        bindings.append(acls.AclBinding(acls.ResourceType[kind], name, acls.PatternType.LITERAL, who, "*",
                                        acls.Operation[operation], acls.Permission.ALLOW))
    broker.call(broker.server.cluster.authorizer.acls.add(bindings))


@pytest.mark.parametrize("key", sorted(key for key, rule in KAFKA_APIS.items() if isinstance(rule, Checked)),
                         ids=api_name)
def test_each_checked_kafka_api_needs_exactly_its_grants(broker: Broker, denials: Denials, key: int) -> None:
    """Allowed with the table's grants (a principal of its own), refused when any one of them is missing."""
    rule = KAFKA_APIS[key]
    assert isinstance(rule, Checked)
    cluster = broker.server.cluster
    for missing in (None, *rule.needs):
        who = f"User:{api_name(key)}-{'all' if missing is None else missing.replace(' ', '-')}"
        _grant(broker, who, tuple(need for need in rule.needs if need != missing))
        denials.lines.clear()
        broker.call(_as(cluster, key, who, rule.fix))
        refused = [line for line in denials.lines if f"principal={who} " in line]
        if missing is None:
            assert refused == [], f"{api_name(key)} refused with {rule.needs} granted: {refused}"
        else:
            assert refused, f"{api_name(key)} allowed without {missing}"


def test_stream_admin_operations_are_authorized(broker: Broker, denials: Denials) -> None:
    from kafkacompat.operations import streams as stream_admin

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


# --- HTTP routes ---------------------------------------------------------------------------------------------
# How each route of the HTTP application is authorized (HEAD follows GET). Requests fill {cluster_id}, {topic},
# {group}, {stream}, {instance} ... with SEED's; a Checked route's request must be refused to bob and allowed to carol.

@dataclasses.dataclass(frozen=True)
class Public:
    """Served without a login: `why`."""

    why: str


@dataclasses.dataclass(frozen=True)
class Login:
    """Needs a login, then shows nothing a grant would hide: `why`."""

    why: str


@dataclasses.dataclass(frozen=True)
class Listing:
    """Lists only what the principal may describe: bob's answer does not name `named`, carol's does."""

    query: str = ""
    named: str = SEED


@dataclasses.dataclass(frozen=True)
class Http:
    """Refused to bob, allowed to carol: the request to make (query string and body)."""

    query: str = ""
    json: Any = None
    form: dict[str, str] | None = None


@dataclasses.dataclass(frozen=True)
class Owned:
    """A REST consumer instance's route: another principal's request is 404, its creator's is not."""

    json: Any = None


CONSOLE_TOPIC = "stream={default}&topic=" + SEED
ACL_FORM = {"resource_type": "TOPIC", "resource_name": "made-by-console", "pattern": "LITERAL",
            "principal": "User:dave", "host": "*", "operation": "READ", "permission": "ALLOW"}
RECORD = {"value": {"type": "STRING", "data": "x"}}
V3 = "/v3/clusters/{cluster_id}"
INSTANCE = "/consumers/{group}/instances/{instance}"
SUBJECT = SEED + "-value"  # the registry's subject of SEED's values (TopicNameStrategy)
SCHEMA = {"schema": '"string"'}
SCHEMA_ID = content_id("AVRO", '"string"', ())  # what the web fixture registers under SUBJECT
ROUTES: dict[tuple[str, str], Public | Login | Listing | Http | Owned] = {
    ("GET", "/health/live"): Public("orchestrators' liveness probe: says nothing about the data"),
    ("GET", "/health/ready"): Public("orchestrators' readiness probe: says nothing about the data"),
    ("GET", "/openapi.json"): Login("the API's description, the same for everyone"),
    ("GET", "/console/static"): Login("the console's stylesheet and script"),
    ("GET", "/console/vendor/uplot/{name}"): Login("the chart library's script and stylesheet"),
    ("GET", "/metrics"): Http(),  # DESCRIBE on the cluster
    ("GET", "/"): Listing(named=STREAM),  # streams
    ("GET", "/console/stream"): Http("path={default}"),  # one of the stream's permissions, as `stream info`
    ("GET", "/console/topic"): Http(CONSOLE_TOPIC),
    ("GET", "/console/groups"): Listing(),
    ("GET", "/console/group"): Http("id=" + SEED),
    ("GET", "/console/tail"): Http(CONSOLE_TOPIC),
    ("GET", "/console/charts/data"): Http("scope=topic&" + CONSOLE_TOPIC),  # DESCRIBE, as the topic's page
    ("GET", "/console/messages"): Http(CONSOLE_TOPIC),  # READ, as a consumer's Fetch
    ("POST", "/console/group/reset"): Http("id=" + SEED, form={"mode": "earliest"}),  # READ on group and topics
    ("GET", "/console/acls"): Http(),  # DESCRIBE on the cluster, as DescribeAcls
    ("POST", "/console/acls/add"): Http(form=ACL_FORM),  # ALTER on the cluster, as CreateAcls
    ("POST", "/console/acls/remove"): Http(form=ACL_FORM),  # ALTER on the cluster, as DeleteAcls
    ("GET", "/console/users"): Http(),  # DESCRIBE on the cluster, as DescribeUserScramCredentials
    ("POST", "/console/users/add"): Http(form={"user": "erin", "password": "erin-secret",
                                               "mechanism": "SCRAM-SHA-256"}),  # ALTER on the cluster
    ("POST", "/console/users/remove"): Http(form={"user": "erin", "mechanism": "SCRAM-SHA-256"}),
    ("POST", "/console/topic/delete-records"): Http(CONSOLE_TOPIC, form={"partition": "0", "offset": "0",
                                                                         "confirm": "on"}),  # DELETE
    ("POST", "/console/topic/delete"): Http("stream={default}&topic=" + DOOMED_BY_CONSOLE,
                                            form={"confirm": DOOMED_BY_CONSOLE}),  # DELETE, on a topic of its own
    ("POST", "/console/messages/produce"): Http(CONSOLE_TOPIC, form={"value": "from the console"}),  # WRITE
    ("GET", "/console/tail/events"): Http(CONSOLE_TOPIC + "&partition=0"),
    ("POST", "/console/stream/create"): Http(form={"path": "/apps/made-by-form"}),
    ("POST", "/console/stream/edit"): Http("path={default}", form={"ttl_seconds": "604800"}),
    ("POST", "/console/topic/create"): Http("path={default}", form={"topic": "made-by-form"}),
    # the stream's admin permission, as `stream replica pause` (carol: 400, the stream has no such link)
    ("POST", "/console/stream/replica"): Http("path={default}", form={"action": "pause",
                                                                     "replica": "127.0.0.1:1/elsewhere"}),
    ("POST", "/console/topic/edit"): Http(CONSOLE_TOPIC, form={"config": "retention.ms", "value": "604800000"}),
    ("GET", "/v3/clusters"): Login("the cluster's id, as Metadata gives any client"),
    ("GET", V3): Login("the cluster's id and controller, as Metadata gives any client"),
    ("GET", V3 + "/brokers"): Login("the brokers' addresses, as Metadata gives any client"),
    ("GET", V3 + "/brokers/{broker_id}"): Login("a broker's address, as Metadata gives any client"),
    ("GET", V3 + "/topics"): Listing(),
    ("POST", V3 + "/topics"): Http(json={"topic_name": "made-by-rest", "partitions_count": 1}),
    ("GET", V3 + "/topics/{topic}"): Http(),
    ("DELETE", V3 + "/topics/{topic}"): Http("doomed"),  # (a query names DOOMED instead of SEED, below)
    ("PATCH", V3 + "/topics/{topic}"): Http(json={"partitions_count": 2}),
    ("GET", V3 + "/topics/{topic}/partitions"): Http(),
    ("GET", V3 + "/topics/{topic}/partitions/{partition_id}"): Http(),
    ("GET", V3 + "/topics/{topic}/configs"): Http(),
    ("POST", V3 + "/topics/{topic}/configs:alter"): Http(json={"data": [{"name": "retention.ms",
                                                                         "value": "604800000"}]}),
    ("GET", V3 + "/topics/{topic}/configs/{name}"): Http(),
    ("PUT", V3 + "/topics/{topic}/configs/{name}"): Http(json={"value": "604800000"}),
    ("DELETE", V3 + "/topics/{topic}/configs/{name}"): Http(),
    ("GET", V3 + "/consumer-groups"): Listing(),
    ("GET", V3 + "/consumer-groups/{group}"): Http(),
    ("GET", V3 + "/consumer-groups/{group}/consumers"): Http(),
    ("GET", V3 + "/consumer-groups/{group}/consumers/{consumer}"): Http(),
    ("GET", V3 + "/consumer-groups/{group}/consumers/{consumer}/assignments"): Http(),
    ("GET", V3 + "/consumer-groups/{group}/lags"): Http(),
    ("GET", V3 + "/consumer-groups/{group}/lag-summary"): Http(),
    ("POST", V3 + "/topics/{topic}/records"): Http(json=RECORD),
    ("POST", "/consumers/{group}"): Login("makes an instance whose every Kafka call is authorized as its creator"),
    ("DELETE", INSTANCE): Owned(),
    ("POST", INSTANCE + "/subscription"): Owned({"topics": [SEED]}),
    ("GET", INSTANCE + "/subscription"): Owned(),
    ("DELETE", INSTANCE + "/subscription"): Owned(),
    ("POST", INSTANCE + "/assignments"): Owned({"partitions": [{"topic": SEED, "partition": 0}]}),
    ("GET", INSTANCE + "/assignments"): Owned(),
    ("POST", INSTANCE + "/positions"): Owned({"offsets": [{"topic": SEED, "partition": 0, "offset": 0}]}),
    ("POST", INSTANCE + "/positions/beginning"): Owned({"partitions": [{"topic": SEED, "partition": 0}]}),
    ("POST", INSTANCE + "/positions/end"): Owned({"partitions": [{"topic": SEED, "partition": 0}]}),
    ("GET", INSTANCE + "/records"): Owned(),
    ("POST", INSTANCE + "/offsets"): Owned({"offsets": [{"topic": SEED, "partition": 0, "offset": 0}]}),
    ("GET", INSTANCE + "/offsets"): Owned({"partitions": [{"topic": SEED, "partition": 0}]}),
    ("GET", "/topics"): Listing(),
    ("GET", "/topics/{topic}"): Http(),
    ("POST", "/topics/{topic}"): Http(json={"records": [{"value": "x"}]}),
    ("POST", "/topics/{topic}/partitions/{partition}"): Http(json={"records": [{"value": "x"}]}),
    ("GET", "/streams/{stream}/topics"): Listing(),
    ("GET", "/streams/{stream}/topics/{topic}"): Http(),
    ("POST", "/streams/{stream}/topics/{topic}"): Http(json={"records": [{"value": "x"}]}),
    ("POST", "/streams/{stream}/topics/{topic}/partitions/{partition}"): Http(json={"records": [{"value": "x"}]}),
    # the Schema Registry: subject SEED-value is authorized as topic SEED, the global config and mode as the cluster
    ("GET", "/schemas/types"): Login("the schema formats served, the same for everyone"),
    ("GET", "/schemas/ids/{id}"): Http(),
    ("GET", "/schemas/ids/{id}/schema"): Http(),
    ("GET", "/schemas/ids/{id}/subjects"): Http(),
    ("GET", "/schemas/ids/{id}/versions"): Http(),
    ("GET", "/subjects"): Listing(named=SUBJECT),
    ("POST", "/subjects/{subject}"): Http(json=SCHEMA),
    ("DELETE", "/subjects/{subject}"): Http("doomed"),
    ("GET", "/subjects/{subject}/versions"): Http(),
    ("POST", "/subjects/{subject}/versions"): Http(json=SCHEMA),
    ("GET", "/subjects/{subject}/versions/{version}"): Http(),
    ("DELETE", "/subjects/{subject}/versions/{version}"): Http("doomed"),
    ("GET", "/subjects/{subject}/versions/{version}/schema"): Http(),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): Http(),
    ("POST", "/compatibility/subjects/{subject}/versions"): Http(json=SCHEMA),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): Http(json=SCHEMA),
    ("GET", "/config"): Login("the global compatibility level, the same for everyone"),
    ("PUT", "/config"): Http(json={"compatibility": "BACKWARD"}),  # ALTER on the cluster
    ("DELETE", "/config"): Http(),
    ("GET", "/config/{subject}"): Http("defaultToGlobal=true"),
    ("PUT", "/config/{subject}"): Http(json={"compatibility": "BACKWARD"}),
    ("DELETE", "/config/{subject}"): Http(),
    ("GET", "/mode"): Login("the global mode, the same for everyone"),
    ("PUT", "/mode"): Http(json={"mode": "READWRITE"}),
    ("GET", "/mode/{subject}"): Http("defaultToGlobal=true"),
    ("PUT", "/mode/{subject}"): Http(json={"mode": "READWRITE"}),
    ("DELETE", "/mode/{subject}"): Http(),
    ("GET", "/console/schemas"): Http("subject=" + SUBJECT),  # the console's page of one subject
}


# routes whose sample request names a file rather than SEED
FIXED_PATHS = {"/console/static": "/console/static/console.css",
               "/console/vendor/uplot/{name}": "/console/vendor/uplot/uPlot.min.css"}


def served_routes(broker: Broker) -> set[tuple[str, str]]:
    """(method, route) of every route the broker's HTTP application serves; HEAD goes with GET."""
    return {(route.method, route.resource.canonical) for route in build_app(broker.server).router.routes()
            if route.method != "HEAD" and route.resource is not None}


def test_every_http_route_has_a_decision(broker: Broker) -> None:
    served = served_routes(broker)
    assert not served - set(ROUTES), f"HTTP routes without an authorization decision in ROUTES: {served - set(ROUTES)}"
    assert not set(ROUTES) - served, f"ROUTES names routes no longer served: {set(ROUTES) - served}"


def _url(broker: Broker, route: str, query: str = "", **extra: str) -> str:
    from urllib.parse import quote

    cluster = broker.server.cluster
    values = {"cluster_id": cluster.cluster_id, "topic": SEED, "partition_id": "0", "partition": "0",
              "broker_id": str(broker.server.config.node_id), "name": "retention.ms", "group": SEED,
              "consumer": "nobody", "stream": quote(STREAM, safe=""), "instance": "none", "subject": SUBJECT,
              "id": str(SCHEMA_ID), "version": "1", **extra}
    path = FIXED_PATHS.get(route) or route.format(**values)
    return broker.http_url + path + ("?" + query.format(default=cluster.default_stream) if query else "")


def _send(broker: Broker, method: str, route: str, rule: Any, user: str | None, **extra: str) -> requests.Response:
    query = getattr(rule, "query", "")
    if query == "doomed":  # a topic of its own, so deleting it takes nothing from the other routes' checks
        query, extra = "", {"topic": DOOMED, "subject": DOOMED + "-value", **extra}
    url = _url(broker, route, query, **extra)
    headers = auth(user)
    if route.startswith("/consumers") or (route.startswith(("/topics", "/streams")) and method == "POST"):
        headers["Content-Type"] = "application/vnd.kafka.json.v2+json"
    body = getattr(rule, "json", None)
    with requests.request(method, url, headers=headers, json=body, data=getattr(rule, "form", None),
                          allow_redirects=False, stream=True, timeout=20) as answer:
        if route.endswith("/events") and answer.status_code == 200:
            assert next(answer.iter_lines()) == b"event: ready"  # the stream opened; it would go on for ever
        else:
            answer.content  # noqa: B018 - read while the connection is open
        return answer


def refused(answer: requests.Response) -> bool:
    """A refusal as the user sees it: 403, or Confluent's 40301 in the body (v3 produce reports per record)."""
    if answer.status_code == 403:
        return True
    text = answer.text if answer.headers.get("Content-Type") != "text/event-stream" else ""
    return '"error_code": 40301' in text or '"error_code":40301' in text


@pytest.fixture(scope="module")
def web() -> Iterator[Broker]:
    """A broker of its own (the Kafka API checks above delete and alter SEED), with a group that committed."""
    from confluent_kafka import Consumer, TopicPartition

    with secured_broker() as running:
        running.create_topic(DOOMED, partitions=1)
        running.create_topic(DOOMED_BY_CONSOLE, partitions=1)
        running.create_topic(f"{STREAM}:{SEED}", partitions=1)
        consumer = Consumer({**running.client_config("admin"), "group.id": SEED, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(SEED, 0, 0)], asynchronous=False)
        consumer.close()
        registered = requests.post(running.http_url + f"/subjects/{SUBJECT}/versions", json=SCHEMA,
                                   headers=auth("admin"), timeout=10)
        assert registered.json() == {"id": SCHEMA_ID, "subject": SUBJECT, "version": 1, "schema": '"string"'}
        yield running


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_http_route_is_authorized_as_its_table_says(web: Broker, denials: Denials, route: tuple[str, str]) -> None:
    broker = web
    method, path = route
    rule = ROUTES[route]
    if isinstance(rule, Public):
        assert _send(broker, method, path, rule, None).status_code == 200
        return
    assert _send(broker, method, path, rule, None).status_code == 401  # no login, no answer
    if isinstance(rule, Login):
        assert _send(broker, method, path, rule, "bob").status_code < 400 if method == "GET" else True
    elif isinstance(rule, Listing):
        bob, carol = (_send(broker, method, path, rule, user) for user in ("bob", "carol"))
        assert bob.status_code == carol.status_code == 200
        assert rule.named not in bob.text and rule.named in carol.text
    elif isinstance(rule, Http):
        denials.lines.clear()
        bob = _send(broker, method, path, rule, "bob")
        assert refused(bob), f"bob was not refused: {bob.status_code} {bob.text[:300]}"
        assert any("principal=User:bob" in line and f"entry=HTTP {method} {path}" in line for line in denials.lines)
        carol = _send(broker, method, path, rule, "carol")
        assert not refused(carol) and carol.status_code < 500, carol.text[:300]  # (404: no such member)
        assert not any("principal=User:carol" in line for line in denials.lines)
    else:
        v2 = {**auth("carol"), "Content-Type": "application/vnd.kafka.v2+json"}
        instance = requests.post(_url(broker, "/consumers/{group}"), json={"format": "json"}, headers=v2,
                                 timeout=10).json()["instance_id"]
        if path.endswith(("/positions", "/beginning", "/end", "/records", "/offsets")):  # these need partitions
            assigned = requests.post(_url(broker, INSTANCE + "/assignments", instance=instance), headers=v2,
                                     json={"partitions": [{"topic": SEED, "partition": 0}]}, timeout=10)
            assert assigned.status_code == 204, assigned.text
        bob = _send(broker, method, path, rule, "bob", instance=instance)
        assert bob.status_code == 404 and bob.json()["error_code"] == 40403
        carol = _send(broker, method, path, rule, "carol", instance=instance)
        assert carol.status_code < 400, carol.text[:300]
