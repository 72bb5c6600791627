"""Confluent REST Proxy v2: consumer instances, topic metadata and produce, plus MapR's stream paths.

Consumers: `POST /consumers/{group}` creates an instance (format json,
binary or string); its subscription, assignments, positions (seek to an
offset, the beginning or the end), records and offsets live under
`/consumers/{group}/instances/{name}`. Records come back as
`application/vnd.kafka.{format}.v2+json`. Topics: `GET /topics`,
`GET /topics/{topic}`, `POST /topics/{topic}` (and `/partitions/{p}`) with
`{"records": [...]}`. The same topic routes are served under MapR's
`/streams/{url-encoded stream path}/topics/...`.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from aiohttp import web
from kio.schema.errors import ErrorCode

from .common import BROKER
from .consumer_instances import ConsumerInstance, ConsumerRegistry, InstanceConfig, Partition
from .rest_errors import (
    INT64,
    JsonLimitError,
    RestError,
    bad_request,
    bounded_loads,
    field,
    int_field,
    invalid_payload,
    kafka_error,
    partition_not_found,
    read_json,
    topic_not_found,
)
from .rest_names import kafka_name
from .rest_produce import Incoming, TopicTarget, parse_record
from .rest_v3 import cluster_of, topic_configs, topic_metadata

V2_JSON = "application/vnd.kafka.v2+json"
FORMATS = ("binary", "json", "string")
CONSUMERS: web.AppKey[ConsumerRegistry] = web.AppKey("rest consumers", ConsumerRegistry)
EARLIEST, LATEST = -2, -1
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def v2(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=V2_JSON)


def _instance(request: web.Request) -> ConsumerInstance:
    return request.app[CONSUMERS].get(request.match_info["group"], request.match_info["instance"])


async def _optional_json(request: web.Request) -> Any:
    """A body that may be empty (commit without offsets): None then."""
    if not (await request.read()).strip():
        return None
    return await read_json(request)


def _partitions(request: web.Request, items: Any, name: str = "partitions") -> list[Partition]:
    out = []
    for item in field({name: items}, name, list, required=True):
        out.append((kafka_name(request, field(item, "topic", str, required=True)),
                    int_field(item, "partition", required=True)))
    return out


# --- consumer instances --------------------------------------------------------------------------


async def create_instance(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = request.match_info["group"]
    body = await _optional_json(request) or {}
    name = field(body, "id", str, None) or field(body, "name", str, None) or f"rest-consumer-{uuid.uuid4()}"
    fmt = str(field(body, "format", str, "binary")).lower()
    if fmt not in FORMATS:
        raise RestError(422, 42204, f"Invalid consumer configuration: format {fmt} is not one of "
                                    f"{', '.join(FORMATS)} (schema formats need a Schema Registry)")
    reset = str(field(body, "auto.offset.reset", str, "latest")).lower()
    if reset not in ("earliest", "latest", "none"):
        raise RestError(422, 42204, f"Invalid consumer configuration: auto.offset.reset={reset}")
    auto_commit = str(field(body, "auto.commit.enable", (str, bool), "true")).lower() == "true"
    min_bytes = _int_setting(body, "fetch.min.bytes", 1)
    timeout = _int_setting(body, "consumer.request.timeout.ms", 1000)
    config = InstanceConfig(fmt, reset, auto_commit, min_bytes, timeout)
    request.app[CONSUMERS].add(ConsumerInstance(cluster, group, name, config))
    base = f"{request.url.origin()}/consumers/{group}/instances/{name}"
    return v2({"instance_id": name, "base_uri": base})


def _int_setting(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RestError(422, 42204, f"Invalid consumer configuration: {name}={value}") from None
    if number < 0:
        raise RestError(422, 42204, f"Invalid consumer configuration: {name}={value}")
    return number


async def delete_instance(request: web.Request) -> web.Response:
    await request.app[CONSUMERS].remove(request.match_info["group"], request.match_info["instance"])
    return web.Response(status=204)


async def subscribe(request: web.Request) -> web.Response:
    instance = _instance(request)
    body = await read_json(request)
    pattern = field(body, "topic_pattern", str, None)
    topics = [kafka_name(request, t) for t in field(body, "topics", list, [])]
    if not topics and pattern is None:
        raise invalid_payload("A subscription needs 'topics' or 'topic_pattern'.")
    if any(not isinstance(t, str) for t in field(body, "topics", list, [])):
        raise invalid_payload("Field 'topics' must be a list of strings.")
    if instance.manual is not None:
        raise RestError(409, 40903, "Illegal state: Subscription to topics, partitions and pattern are "
                                    "mutually exclusive")
    async with instance.lock:
        await instance.subscribe(topics, pattern)
    return web.Response(status=204)


async def get_subscription(request: web.Request) -> web.Response:
    return v2({"topics": _instance(request).topics})


async def unsubscribe(request: web.Request) -> web.Response:
    instance = _instance(request)
    async with instance.lock:
        await instance.unsubscribe()
    return web.Response(status=204)


async def assign(request: web.Request) -> web.Response:
    instance = _instance(request)
    partitions = _partitions(request, field(await read_json(request), "partitions", list, required=True))
    if instance.topics or instance.pattern:
        raise RestError(409, 40903, "Illegal state: Subscription to topics, partitions and pattern are "
                                    "mutually exclusive")
    async with instance.lock:
        await instance.assign(partitions)
    return web.Response(status=204)


async def get_assignments(request: web.Request) -> web.Response:
    instance = _instance(request)
    return v2({"partitions": [{"topic": t, "partition": p} for t, p in instance.assigned]})


async def seek(request: web.Request) -> web.Response:
    instance = _instance(request)
    offsets = {}
    for item in field(await read_json(request), "offsets", list, required=True):
        tp = (kafka_name(request, field(item, "topic", str, required=True)),
              int_field(item, "partition", required=True))
        offsets[tp] = int_field(item, "offset", bounds=INT64, required=True)
    async with instance.lock:
        instance.seek(offsets)
    return web.Response(status=204)


async def _seek_to(request: web.Request, timestamp: int) -> web.Response:
    instance = _instance(request)
    partitions = _partitions(request, field(await read_json(request), "partitions", list, required=True))
    async with instance.lock:
        await instance.seek_to(partitions, timestamp)
    return web.Response(status=204)


async def seek_beginning(request: web.Request) -> web.Response:
    return await _seek_to(request, EARLIEST)


async def seek_end(request: web.Request) -> web.Response:
    return await _seek_to(request, LATEST)


def _accepted_format(request: web.Request) -> str | None:
    """The embedded format the Accept header asks for (None: any)."""
    for part in request.headers.get("Accept", "").split(","):
        media = part.split(";")[0].strip().lower()
        if media.startswith("application/vnd.kafka.") and media.endswith(".v2+json") and media != V2_JSON:
            return media[len("application/vnd.kafka."):-len(".v2+json")]
    return None


def _embedded(fmt: str, data: bytes | None) -> Any:
    """A key or value as the instance's format embeds it; JSON that does not parse is Confluent's 40801."""
    if data is None:
        return None
    if fmt == "binary":
        return base64.b64encode(data).decode()
    if fmt == "string":
        return data.decode("utf-8", "replace")
    try:
        return bounded_loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, JsonLimitError) as exc:
        raise RestError(408, 40801, f"Error deserializing JSON message: {exc}") from None


async def records(request: web.Request) -> web.Response:
    instance = _instance(request)
    fmt = instance.config.format
    wanted = _accepted_format(request)
    if wanted is not None and wanted != fmt:
        raise RestError(406, 40601, "The requested embedded data format does not match the deserializer for "
                                    "this consumer instance")
    try:
        timeout = int(request.query.get("timeout", instance.config.request_timeout_ms))
        max_bytes = int(request.query.get("max_bytes", DEFAULT_MAX_BYTES))
    except ValueError:
        raise bad_request("timeout and max_bytes must be integers") from None
    if timeout < 0 or max_bytes <= 0:
        raise bad_request("timeout must be >= 0 and max_bytes > 0")
    async with instance.lock:
        before = dict(instance.positions)
        fetched = await instance.poll(min(timeout, instance.config.request_timeout_ms), max_bytes)
        try:
            body = [{"topic": topic, "key": _embedded(fmt, r.key), "value": _embedded(fmt, r.value),
                     "partition": index, "offset": r.offset} for topic, index, r in fetched]
        except RestError:
            # as KafkaConsumer's RecordDeserializationException: the position stays at the record that
            # failed, so nothing is skipped silently (seek past it to go on)
            instance.positions = before
            raise
    return web.Response(text=json.dumps(body), content_type=f"application/vnd.kafka.{fmt}.v2+json")


async def commit(request: web.Request) -> web.Response:
    instance = _instance(request)
    body = await _optional_json(request)
    async with instance.lock:
        if body is None or not field(body, "offsets", list, []):
            offsets = dict(instance.positions)
        else:
            offsets = {}
            for item in field(body, "offsets", list, required=True):
                tp = (kafka_name(request, field(item, "topic", str, required=True)),
                      int_field(item, "partition", required=True))
                offsets[tp] = int_field(item, "offset", bounds=INT64, required=True)
        await instance.commit(offsets)
    return v2({"offsets": [{"topic": t, "partition": p, "consumed": o, "committed": o}
                           for (t, p), o in sorted(offsets.items())]})


async def committed_offsets(request: web.Request) -> web.Response:
    instance = _instance(request)
    partitions = _partitions(request, field(await read_json(request), "partitions", list, required=True))
    async with instance.lock:
        found = await instance.committed(partitions)
    return v2({"offsets": [{"topic": t, "partition": p, "offset": found[t, p][0], "metadata": found[t, p][1] or ""}
                           for t, p in partitions if (t, p) in found]})


# --- topics: metadata and produce ----------------------------------------------------------------


async def list_topic_names(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    stream = request.match_info.get("stream")
    names = sorted(t.name for t in await topic_metadata(cluster, None) if t.error_code == 0 and not t.is_internal)
    if stream is not None:
        prefix = f"{stream}:"
        names = [n[len(prefix):] for n in names if n.startswith(prefix)]
    return v2(names)


async def _v2_topic(request: web.Request) -> Any:
    cluster = cluster_of(request)
    (topic,) = await topic_metadata(cluster, [kafka_name(request, request.match_info["topic"])])
    if topic.error_code == ErrorCode.topic_authorization_failed:  # 403 as Confluent answers, not "not found"
        raise kafka_error(ErrorCode(topic.error_code))
    if topic.error_code != 0:
        raise topic_not_found()
    return topic


async def get_topic(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    topic = await _v2_topic(request)
    configs = {c.name: c.value for c in await topic_configs(cluster, topic.name) if not c.is_sensitive}
    partitions = [{"partition": p.partition_index, "leader": cluster.node_id,
                   "replicas": [{"broker": cluster.node_id, "leader": True, "in_sync": True}]}
                  for p in sorted(topic.partitions, key=lambda p: p.partition_index)]
    return v2({"name": request.match_info["topic"], "configs": configs, "partitions": partitions})


def _produce_format(request: web.Request) -> str:
    kind = request.content_type.lower()
    if kind.startswith("application/vnd.kafka.") and kind.endswith(".v2+json") and kind != V2_JSON:
        fmt = kind[len("application/vnd.kafka."):-len(".v2+json")]
        if fmt not in FORMATS:
            raise RestError(415, 415, f"Unsupported Media Type: {kind} (schema formats need a Schema Registry)")
        return fmt
    return "json" if kind in ("application/json", V2_JSON) else "binary"


async def produce(request: web.Request) -> web.Response:
    """v2 produce: `{"records": [{"key", "value", "partition"}]}`, answered with the offsets of each."""
    cluster_of(request)  # the broker is up
    fmt = _produce_format(request).upper()
    body = await read_json(request)
    fixed = request.match_info.get("partition")
    items: list[Incoming | RestError] = []
    for record in field(body, "records", list, required=True):
        if not isinstance(record, dict):
            raise invalid_payload("Each record must be an object.")
        spec = {"partition_id": int(fixed) if fixed is not None and fixed.isdigit() else record.get("partition")}
        for part in ("key", "value"):
            if part in record:
                spec[part] = {"type": fmt, "data": record[part]}
        try:
            items.append(parse_record(spec))
        except RestError as exc:
            items.append(exc)
    if fixed is not None and not fixed.isdigit():
        raise partition_not_found()
    try:  # looked up as a producer does: auto-created where the stream's policy allows
        target = await TopicTarget.resolve(request, kafka_name(request, request.match_info["topic"]))
    except RestError as exc:
        raise topic_not_found() if exc.code == 40403 else exc from None
    if fixed is not None and int(fixed) >= target.partitions:
        raise partition_not_found()
    await target.write([i for i in items if isinstance(i, Incoming)])
    offsets = []
    for item in items:
        report = item.body() if isinstance(item, RestError) else item.result or {}
        if report.get("error_code") == 200:
            offsets.append({"partition": report["partition_id"], "offset": report["offset"], "error_code": None,
                            "error": None})
        else:
            offsets.append({"partition": None, "offset": None, "error_code": report.get("error_code"),
                            "error": report.get("message")})
    return v2({"key_schema_id": None, "value_schema_id": None, "offsets": offsets})


async def _start(app: web.Application) -> None:
    app[CONSUMERS] = ConsumerRegistry(app[BROKER].config.rest_consumer_instance_timeout_ms)


async def _stop(app: web.Application) -> None:
    await app[CONSUMERS].close()


INSTANCE = "/consumers/{group}/instances/{instance}"


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    r = app.router
    r.add_post("/consumers/{group}", create_instance)
    r.add_delete(INSTANCE, delete_instance)
    r.add_post(INSTANCE + "/subscription", subscribe)
    r.add_get(INSTANCE + "/subscription", get_subscription)
    r.add_delete(INSTANCE + "/subscription", unsubscribe)
    r.add_post(INSTANCE + "/assignments", assign)
    r.add_get(INSTANCE + "/assignments", get_assignments)
    r.add_post(INSTANCE + "/positions", seek)
    r.add_post(INSTANCE + "/positions/beginning", seek_beginning)
    r.add_post(INSTANCE + "/positions/end", seek_end)
    r.add_get(INSTANCE + "/records", records)
    r.add_post(INSTANCE + "/offsets", commit)
    r.add_get(INSTANCE + "/offsets", committed_offsets)
    for base in ("", "/streams/{stream}"):
        r.add_get(base + "/topics", list_topic_names)
        r.add_get(base + "/topics/{topic}", get_topic)
        r.add_post(base + "/topics/{topic}", produce)
        r.add_post(base + "/topics/{topic}/partitions/{partition}", produce)
