"""GET /openapi.json: an OpenAPI 3.0 document of the REST API this server answers.

Written from the routes in rest_v3, rest_produce and rest_v2 (the tests
run schemathesis against it, so a route or answer that drifts from it
fails there). Every operation also declares Confluent's error JSON as its
`default` answer: that is the shape of every refusal.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .common import BROKER

V2 = "application/vnd.kafka.v2+json"
JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


STR, INT, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
NSTR = {"type": "string", "nullable": True}
RELATED = _obj(["related"], related=STR)


def _resource(*required: str, **props: Any) -> dict[str, Any]:
    return _obj(["kind", "metadata", *required], kind=STR, metadata=_ref("ResourceMetadata"), **props)


def _list_of(item: str) -> dict[str, Any]:
    return _obj(["kind", "metadata", "data"], kind=STR, metadata=_ref("ListMetadata"),
                data={"type": "array", "items": _ref(item)})


SCHEMAS: dict[str, Any] = {
    "Error": _obj(["error_code"], error_code=INT, message=NSTR),
    "ResourceMetadata": _obj(["self"], self=STR, resource_name=NSTR),
    "ListMetadata": _obj(["self"], self=STR, next=NSTR),
    "Related": RELATED,
    "Cluster": _resource("cluster_id", cluster_id=STR, controller=RELATED, acls=RELATED, brokers=RELATED,
                         broker_configs=RELATED, consumer_groups=RELATED, topics=RELATED,
                         partition_reassignments=RELATED),
    "Broker": _resource("cluster_id", "broker_id", cluster_id=STR, broker_id=INT, host=NSTR, port=INT, rack=NSTR,
                        configs=RELATED, partition_replicas=RELATED),
    "Topic": _resource("cluster_id", "topic_name", "partitions_count", cluster_id=STR, topic_name=STR,
                       is_internal=BOOL, replication_factor=INT, partitions_count=INT, partitions=RELATED,
                       configs=RELATED, partition_reassignments=RELATED,
                       authorized_operations={"type": "array", "items": STR}),
    "Partition": _resource("cluster_id", "topic_name", "partition_id", cluster_id=STR, topic_name=STR,
                           partition_id=INT, leader=RELATED, replicas=RELATED, reassignment=RELATED),
    "TopicConfig": _resource("cluster_id", "topic_name", "name", cluster_id=STR, topic_name=STR, name=STR,
                             value=NSTR, is_default=BOOL, is_read_only=BOOL, is_sensitive=BOOL, source=STR,
                             synonyms={"type": "array", "items": _obj(["name"], name=STR, value=NSTR, source=STR)}),
    "ConsumerGroup": _resource("cluster_id", "consumer_group_id", cluster_id=STR, consumer_group_id=STR,
                               is_simple=BOOL, partition_assignor=STR, state=STR, type=STR, coordinator=RELATED,
                               consumers=RELATED, lag_summary=RELATED),
    "Consumer": _resource("cluster_id", "consumer_group_id", "consumer_id", cluster_id=STR, consumer_group_id=STR,
                          consumer_id=STR, instance_id=NSTR, client_id=STR, assignments=RELATED),
    "ConsumerAssignment": _resource("topic_name", "partition_id", cluster_id=STR, consumer_group_id=STR,
                                    consumer_id=STR, topic_name=STR, partition_id=INT, partition=RELATED),
    "ConsumerLag": _resource("topic_name", "partition_id", "lag", cluster_id=STR, consumer_group_id=STR,
                             topic_name=STR, partition_id=INT, current_offset=INT, log_end_offset=INT, lag=INT,
                             consumer_id=STR, instance_id=NSTR, client_id=STR),
    "LagSummary": _resource("max_lag", "total_lag", cluster_id=STR, consumer_group_id=STR, max_lag_consumer_id=STR,
                            max_lag_instance_id=NSTR, max_lag_client_id=STR, max_lag_topic_name=STR,
                            max_lag_partition_id=INT, max_lag=INT, total_lag=INT, max_lag_consumer=RELATED,
                            max_lag_partition=RELATED),
    "CreateTopicRequest": _obj(["topic_name"], topic_name=STR, partitions_count=INT, replication_factor=INT,
                               validate_only=BOOL,
                               configs={"type": "array", "items": _obj(["name"], name=STR, value=NSTR)}),
    "UpdateTopicRequest": _obj(["partitions_count"], partitions_count=INT),
    "UpdateConfigRequest": _obj(["value"], value=NSTR),
    "AlterConfigsRequest": _obj(["data"], validate_only=BOOL, data={"type": "array", "items": _obj(
        ["name"], name=STR, value=NSTR, operation={"type": "string", "enum": ["SET", "DELETE"]})}),
    # a registered schema named by schema_id, or schema_version of subject (default <topic>-key/-value), or by
    # type alone (the subject's latest): data encoded with it and framed as Confluent's serializers frame it
    "ProduceData": _obj([], type={"type": "string", "enum": ["BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA",
                                                             "PROTOBUF"]},
                        data={}, schema_id=INT, schema_version=INT, subject=STR),
    "ProduceRequest": _obj([], partition_id={"type": "integer", "nullable": True},
                           headers={"type": "array", "items": _obj(["name"], name=STR, value=NSTR)},
                           key=_ref("ProduceData"), value=_ref("ProduceData"),
                           timestamp={"type": "string", "format": "date-time", "nullable": True}),
    "ProduceResponse": _obj(["error_code"], error_code=INT, message=NSTR, cluster_id=STR, topic_name=STR,
                            partition_id=INT, offset=INT, timestamp=STR,
                            key=_obj(["type"], type=STR, size=INT), value=_obj(["type"], type=STR, size=INT)),
    "CreateConsumerRequest": _obj([], name=STR, format={"type": "string", "enum": ["binary", "json", "string"]},
                                  **{"auto.offset.reset": {"type": "string", "enum": ["earliest", "latest", "none"]},
                                     "auto.commit.enable": {"type": "string", "enum": ["true", "false"]},
                                     "fetch.min.bytes": {"type": "integer", "minimum": 0},
                                     "consumer.request.timeout.ms": {"type": "integer", "minimum": 0,
                                                                     "maximum": 5000}}),
    "CreateConsumerResponse": _obj(["instance_id", "base_uri"], instance_id=STR, base_uri=STR),
    "TopicPartition": _obj(["topic", "partition"], topic=STR, partition=INT),
    "Partitions": _obj(["partitions"], partitions={"type": "array", "items": _ref("TopicPartition")}),
    "Subscription": _obj([], topics={"type": "array", "items": STR}, topic_pattern=STR),
    "Offsets": _obj(["offsets"], offsets={"type": "array", "items": _obj(
        ["topic", "partition", "offset"], topic=STR, partition=INT, offset=INT, metadata=STR)}),
    "CommitResponse": _obj(["offsets"], offsets={"type": "array", "items": _obj(
        ["topic", "partition"], topic=STR, partition=INT, consumed=INT, committed=INT)}),
    "ConsumerRecord": _obj(["topic", "partition", "offset"], topic=STR, key={"nullable": True},
                           value={"nullable": True}, partition=INT, offset=INT),
    "V2ProduceRequest": _obj(["records"], records={"type": "array", "items": _obj(
        [], key={"nullable": True}, value={"nullable": True}, partition={"type": "integer", "nullable": True})}),
    "V2ProduceResponse": _obj(["offsets"], key_schema_id={"type": "integer", "nullable": True},
                              value_schema_id={"type": "integer", "nullable": True},
                              offsets={"type": "array", "items": _obj(
                                  [], partition={"type": "integer", "nullable": True},
                                  offset={"type": "integer", "nullable": True},
                                  error_code={"type": "integer", "nullable": True}, error=NSTR)}),
    "V2Topic": _obj(["name", "configs", "partitions"], name=STR,
                    configs={"type": "object", "additionalProperties": NSTR},
                    partitions={"type": "array", "items": _obj(["partition"], partition=INT, leader=INT,
                                                               replicas={"type": "array", "items": {}})}),
}


def _param(name: str, where: str = "path", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema or STR}


def _with_cluster(paths: dict[str, Any], cluster_id: str) -> None:
    """The one cluster id this broker answers to, as the only value of {cluster_id}."""
    for item in paths.values():
        for op in item.values():
            for param in op["parameters"]:
                if param["name"] == "cluster_id":
                    param["schema"] = {"type": "string", "enum": [cluster_id]}


def _answer(status: str, schema: str | None, media: str = JSON, description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"description": description or status}
    if schema is not None:
        body = _ref(schema) if not schema.startswith("[") else {"type": "array", "items": _ref(schema[1:])}
        out["content"] = {media: {"schema": body}}
    return out


def _op(summary: str, params: list[str], status: str, schema: str | None, *, body: str | None = None,
        media: str = JSON, body_media: str | None = None, query: list[dict[str, Any]] | None = None,
        answer_media: list[str] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": [_param(p) for p in params] + (query or []),
        "responses": {"default": _answer("default", "Error", description="Confluent's error JSON")},
    }
    if answer_media:
        op["responses"][status] = {"description": status, "content": {
            m: {"schema": {"type": "array", "items": _ref(schema or "")}} for m in answer_media}}
    else:
        op["responses"][status] = _answer(status, schema, media)
    if body is not None:
        op["requestBody"] = {"required": True, "content": {body_media or media: {"schema": _ref(body)}}}
    return op


C, T, G = ["cluster_id"], ["cluster_id", "topic"], ["cluster_id", "group"]
I = ["group", "instance"]  # noqa: E741 - C, T, G, I: the path parameters of each route family
RECORD_MEDIA = [f"application/vnd.kafka.{f}.v2+json" for f in ("json", "binary", "string")]


def document(cluster_id: str | None = None) -> dict[str, Any]:
    """The document; with `cluster_id`, {cluster_id} is declared as that one value."""
    v3 = "/v3/clusters/{cluster_id}"
    paths: dict[str, Any] = {
        "/v3/clusters": {"get": _op("List clusters", [], "200", "ClusterList")},
        v3: {"get": _op("Get the cluster", C, "200", "Cluster")},
        v3 + "/brokers": {"get": _op("List brokers", C, "200", "BrokerList")},
        v3 + "/brokers/{broker_id}": {"get": _op("Get a broker", C + ["broker_id"], "200", "Broker")},
        v3 + "/topics": {"get": _op("List topics", C, "200", "TopicList"),
                         "post": _op("Create a topic", C, "201", "Topic", body="CreateTopicRequest")},
        v3 + "/topics/{topic}": {"get": _op("Get a topic", T, "200", "Topic"),
                                 "delete": _op("Delete a topic", T, "204", None),
                                 "patch": _op("Add partitions", T, "200", "Topic", body="UpdateTopicRequest")},
        v3 + "/topics/{topic}/partitions": {"get": _op("List partitions", T, "200", "PartitionList")},
        v3 + "/topics/{topic}/partitions/{partition_id}": {
            "get": _op("Get a partition", T + ["partition_id"], "200", "Partition")},
        v3 + "/topics/{topic}/configs": {"get": _op("List topic configs", T, "200", "TopicConfigList")},
        v3 + "/topics/{topic}/configs:alter": {
            "post": _op("Alter topic configs", T, "204", None, body="AlterConfigsRequest")},
        v3 + "/topics/{topic}/configs/{name}": {
            "get": _op("Get a topic config", T + ["name"], "200", "TopicConfig"),
            "put": _op("Set a topic config", T + ["name"], "204", None, body="UpdateConfigRequest"),
            "delete": _op("Reset a topic config", T + ["name"], "204", None)},
        v3 + "/topics/{topic}/records": {
            "post": _op("Produce records (one JSON object per record; a stream of them is answered one by one)",
                        T, "200", "ProduceResponse", body="ProduceRequest")},
        v3 + "/consumer-groups": {"get": _op("List consumer groups", C, "200", "ConsumerGroupList")},
        v3 + "/consumer-groups/{group}": {"get": _op("Get a consumer group", G, "200", "ConsumerGroup")},
        v3 + "/consumer-groups/{group}/consumers": {"get": _op("List consumers", G, "200", "ConsumerList")},
        v3 + "/consumer-groups/{group}/consumers/{consumer}": {
            "get": _op("Get a consumer", G + ["consumer"], "200", "Consumer")},
        v3 + "/consumer-groups/{group}/consumers/{consumer}/assignments": {
            "get": _op("List a consumer's assignments", G + ["consumer"], "200", "ConsumerAssignmentList")},
        v3 + "/consumer-groups/{group}/lags": {"get": _op("List consumer lags", G, "200", "ConsumerLagList")},
        v3 + "/consumer-groups/{group}/lag-summary": {"get": _op("Get the lag summary", G, "200", "LagSummary")},
        "/consumers/{group}": {"post": _op("Create a consumer instance", ["group"], "200", "CreateConsumerResponse",
                                           body="CreateConsumerRequest", media=V2)},
        "/consumers/{group}/instances/{instance}": {"delete": _op("Delete a consumer instance", I, "204", None)},
        "/consumers/{group}/instances/{instance}/subscription": {
            "post": _op("Subscribe", I, "204", None, body="Subscription", media=V2),
            "get": _op("Get the subscription", I, "200", "Subscription", media=V2),
            "delete": _op("Unsubscribe", I, "204", None)},
        "/consumers/{group}/instances/{instance}/assignments": {
            "post": _op("Assign partitions", I, "204", None, body="Partitions", media=V2),
            "get": _op("Get the assignment", I, "200", "Partitions", media=V2)},
        "/consumers/{group}/instances/{instance}/positions": {
            "post": _op("Seek to offsets", I, "204", None, body="Offsets", media=V2)},
        "/consumers/{group}/instances/{instance}/positions/beginning": {
            "post": _op("Seek to the beginning", I, "204", None, body="Partitions", media=V2)},
        "/consumers/{group}/instances/{instance}/positions/end": {
            "post": _op("Seek to the end", I, "204", None, body="Partitions", media=V2)},
        "/consumers/{group}/instances/{instance}/records": {
            "get": _op("Fetch records", I, "200", "ConsumerRecord", answer_media=RECORD_MEDIA, query=[
                _param("timeout", "query", {"type": "integer", "minimum": 0, "maximum": 2000}),
                _param("max_bytes", "query", {"type": "integer", "minimum": 1})])},
        "/consumers/{group}/instances/{instance}/offsets": {
            "post": _op("Commit offsets", I, "200", "CommitResponse", body="Offsets", media=V2),
            "get": _op("Get committed offsets", I, "200", "Offsets", body="Partitions", media=V2)},
    }
    for base, params in (("", []), ("/streams/{stream}", ["stream"])):
        paths[base + "/topics"] = {"get": {**_op("List topic names", params, "200", None), "responses": {
            "200": {"description": "names", "content": {V2: {"schema": {"type": "array", "items": STR}}}},
            "default": _answer("default", "Error")}}}
        paths[base + "/topics/{topic}"] = {
            "get": _op("Get a topic (v2)", params + ["topic"], "200", "V2Topic", media=V2),
            "post": _op("Produce records (v2)", params + ["topic"], "200", "V2ProduceResponse",
                        body="V2ProduceRequest", media=V2, body_media="application/vnd.kafka.json.v2+json")}
        paths[base + "/topics/{topic}/partitions/{partition}"] = {
            "post": _op("Produce records to a partition (v2)", params + ["topic", "partition"], "200",
                        "V2ProduceResponse", body="V2ProduceRequest", media=V2,
                        body_media="application/vnd.kafka.json.v2+json")}
    if cluster_id is not None:
        _with_cluster(paths, cluster_id)
    schemas = dict(SCHEMAS)
    for item in ("Cluster", "Broker", "Topic", "Partition", "TopicConfig", "ConsumerGroup", "Consumer",
                 "ConsumerAssignment", "ConsumerLag"):
        schemas[item + "List"] = _list_of(item)
    return {
        "openapi": "3.0.3",
        "info": {"title": "kafkacompat REST API", "version": "1",
                 "description": "Confluent REST Proxy v2/v3 compatible API of the kafkacompat broker."},
        "paths": paths,
        "components": {"schemas": schemas},
    }


async def openapi(request: web.Request) -> web.Response:
    cluster = request.app[BROKER].cluster
    return web.json_response(document(cluster.cluster_id if cluster is not None else None))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/openapi.json", openapi)
