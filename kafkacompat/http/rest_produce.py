"""Confluent REST v3 produce: `POST /v3/clusters/{id}/topics/{topic}/records`, one record or a stream.

The body is one JSON object per record (`partition_id`, `headers`, `key`,
`value`, `timestamp`; key and value as `{"type": "JSON"|"BINARY"|"STRING",
"data": ...}`, or naming a registered schema: rest_schemas), or many objects one after another on one request. As
Confluent does, a streamed request (Transfer-Encoding: chunked) or one of
several records is answered 200 with one delivery report per record, in
order, each with its own `error_code` (200 when written), streamed as
records are written: the status is sent before the records are read. A
request of one record with a Content-Length is answered with its report
under the HTTP status of its error code (404 for 40403, 400 for bad JSON). Records that arrive together are written together:
one Produce request through the broker's produce handler, one batch per
partition, so the broker's validation, limits, quotas and metrics apply
as to any Kafka client. Confluent's REST producer uses acks=all, so does this.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import datetime
import functools
import json
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from aiohttp import web
from kio.schema.errors import ErrorCode

from kafkacompat.protocol.records import Record, build_batch

from ..broker.cluster import Cluster
from ..broker.partitioner import partition_for_key
from ..schemas.registry import registry_of
from .common import BROKER
from .kafka_calls import NO_TOPIC_ID, ask_leaders, build, call
from .rest_errors import (
    JSON_CONTENT,
    JsonLimitError,
    RestError,
    bad_request,
    bounded_raw_decode,
    invalid_payload,
    kafka_error,
    partition_not_found,
)
from .rest_names import kafka_name
from .rest_producer import RESET_ON, IdempotentProducer, PartitionKey
from .rest_schemas import SchemaFraming, names_a_schema
from .rest_v3 import METADATA, TIMEOUT, cluster_of

log = logging.getLogger(__name__)

PRODUCE = 0
ACKS_ALL = -1
BATCH_BYTES = 16_384  # Kafka's batch.size: records of one partition are cut into batches of about this much
FORMATS = ("BINARY", "JSON", "STRING")
SCHEMA_FORMATS = ("AVRO", "JSONSCHEMA", "PROTOBUF")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # as Jackson writes JSON


@dataclass(slots=True)
class Incoming:
    """One record of the request, serialized and validated, waiting for its partition."""

    partition: int | None
    record: Record
    key_type: str | None
    value_type: str | None
    size: int  # bytes this record adds to a batch, roughly: for cutting batches
    result: dict[str, Any] | None = dc_field(default=None)


def _serialize(part: Any, what: str, framing: SchemaFraming | None) -> tuple[bytes | None, str | None]:
    """(bytes, format) of a key or value object; (None, None) when absent."""
    if part is None:
        return None, None
    if not isinstance(part, dict):
        raise bad_request(f"{what} must be an object with 'type' and 'data'.")
    if framing is not None and names_a_schema(part) and "schema" not in part:
        return framing.encode(part, what)
    kind = part.get("type", "BINARY")
    if not isinstance(kind, str) or kind.upper() not in FORMATS + SCHEMA_FORMATS:
        raise bad_request(f"{what}.type={kind} is not one of {', '.join(FORMATS + SCHEMA_FORMATS)}.")
    kind = kind.upper()
    if kind in SCHEMA_FORMATS or any(k in part for k in ("schema", "schema_id", "schema_version", "subject")):
        raise bad_request(f"{what}: an inline schema is not taken here: register it, then name its schema_id, "
                          "schema_version or subject.")
    data = part.get("data")
    if data is None:
        return None, kind
    if kind == "BINARY":
        if not isinstance(data, str):
            raise bad_request(f"data={json.dumps(data)} is not a base64 string.")
        try:
            return base64.b64decode(data, validate=True), kind
        except (binascii.Error, ValueError):
            raise bad_request(f"data={data} is not a base64 string.") from None
    if kind == "STRING":
        if not isinstance(data, str):
            raise bad_request(f"data={json.dumps(data)} is not a string.")
        return data.encode(), kind
    return _COMPACT(data).encode(), kind


def _timestamp(value: Any) -> int:
    if value is None:
        return int(time.time() * 1000)
    if not isinstance(value, str):
        raise bad_request(f"timestamp={value} is not an ISO-8601 date-time.")
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise bad_request(f"timestamp={value} is not an ISO-8601 date-time.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def parse_record(obj: Any, framing: SchemaFraming | None = None) -> Incoming:
    """A produce request object as a record, or the 400 Confluent answers for it (schema framing by `framing`)."""
    if not isinstance(obj, dict):
        raise bad_request("Each record must be a JSON object.")
    partition = obj.get("partition_id")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise bad_request(f"partition_id={partition} is not an integer.")
    if partition is not None and not 0 <= partition < 2**31:
        raise partition_not_found()
    headers = []
    for header in obj.get("headers") or []:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise bad_request("Each header must be an object with a string 'name'.")
        value = header.get("value")
        try:
            headers.append((header["name"], None if value is None else base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError, TypeError):
            raise bad_request(f"header value={value} is not a base64 string.") from None
    key, key_type = _serialize(obj.get("key"), "key", framing)
    value, value_type = _serialize(obj.get("value"), "value", framing)
    record = Record(key, value, headers, _timestamp(obj.get("timestamp")))
    size = 32 + len(key or b"") + len(value or b"") + sum(len(n) + len(v or b"") + 8 for n, v in headers)
    return Incoming(partition, record, key_type, value_type, size)


@functools.lru_cache(maxsize=1024)
def _iso(ms: int) -> str:
    """A timestamp as Confluent's reports print it (ISO-8601, UTC, milliseconds); records of a batch share one."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class TopicTarget:
    """The topic a produce request writes to: its name, partition count, and the sticky partition of keyless records."""

    def __init__(self, cluster: Cluster, name: str, partitions: int, producer: IdempotentProducer,
                 topic_id: uuid.UUID = NO_TOPIC_ID) -> None:
        self.cluster, self.name, self.partitions, self.producer = cluster, name, partitions, producer
        self.topic_id = topic_id  # Produce v13+ names the topic by id, as Kafka 4.1's producer does
        self.stream, self.topic = cluster.split(name)

    @classmethod
    async def resolve(cls, request: web.Request, name: str) -> "TopicTarget":
        """Looked up as a producer does: a Metadata call that may auto-create the topic (stream policy permitting)."""
        cluster = cluster_of(request)
        topic_req = build(METADATA, "MetadataRequestTopic", name=name, topic_id=NO_TOPIC_ID)
        answer = await call(cluster, METADATA, build(METADATA, topics=(topic_req,), allow_auto_topic_creation=True,
                                                     include_topic_authorized_operations=False))
        (topic,) = answer.topics
        if topic.error_code == ErrorCode.leader_not_available.value:  # just auto-created: ask once more
            answer = await call(cluster, METADATA, build(METADATA, topics=(topic_req,),
                                                         allow_auto_topic_creation=False,
                                                         include_topic_authorized_operations=False))
            (topic,) = answer.topics
        if topic.error_code != 0:
            raise kafka_error(ErrorCode(topic.error_code))
        return cls(cluster, name, len(topic.partitions), request.app[PRODUCER], topic.topic_id)

    def place(self, items: list[Incoming]) -> dict[int, list[Incoming]]:
        """Each record's partition: asked for, by key (Kafka's murmur2), or one sticky pick for the keyless."""
        sticky = random.randrange(self.partitions)
        groups: dict[int, list[Incoming]] = {}
        for item in items:
            if item.partition is not None:
                index = item.partition
                if index >= self.partitions:
                    item.result = _error(partition_not_found())
                    continue
            elif item.record.key is not None:
                index = partition_for_key(item.record.key, self.partitions)
            else:
                index = sticky
            item.partition = index
            groups.setdefault(index, []).append(item)
        return groups

    async def write(self, items: list[Incoming]) -> None:
        """Write records (one Produce request), setting each one's delivery report."""
        groups = self.place(items)
        if not groups:
            return
        failed = await self._produce(groups)
        for index in failed:  # a refused batch refuses its partition's whole blob: retry record by record
            for item in groups[index]:
                await self._produce({index: [item]})

    async def _produce(self, groups: dict[int, list[Incoming]], again: bool = True) -> list[int]:
        """One Produce request for these partitions; the partitions whose batches were refused as a whole."""
        producer = self.producer
        keys = {index: (self.stream, self.topic, index) for index in groups}
        async with producer.partitions(keys.values()):
            await producer.ensure(self.cluster)
            used = producer.producer_id
            parts = tuple(build(PRODUCE, "PartitionProduceData", index=index,
                                records=_batches(group, producer, keys[index]))
                          for index, group in groups.items())
            answer = await call(self.cluster, PRODUCE, self._request(parts))
            results = await self._at_leaders(parts, answer.responses[0].partition_responses)
            for result in results:
                if result.error_code == 0:
                    producer.advance(keys[result.index], len(groups[result.index]))
        if again and any(r.error_code in RESET_ON for r in results):  # the broker forgot this producer
            producer.reset(used)
            return await self._produce({r.index: groups[r.index] for r in results if r.error_code in RESET_ON},
                                       again=False)
        failed = []
        for result in results:
            group = groups[result.index]
            if result.error_code != 0:
                if len(group) > 1:
                    failed.append(result.index)
                    continue
                group[0].result = _error(_produce_error(ErrorCode(result.error_code), result.error_message))
                continue
            appended = result.log_append_time
            for offset, item in enumerate(group, start=result.base_offset):
                when = int(appended.timestamp() * 1000) if isinstance(appended, datetime.datetime) else -1
                item.result = self._report(item, offset, when if when >= 0 else item.record.timestamp)
        return failed

    def _request(self, parts: tuple[Any, ...]) -> Any:
        return build(PRODUCE, transactional_id=None, acks=ACKS_ALL, timeout=TIMEOUT,
                     topic_data=(build(PRODUCE, "TopicProduceData", name=self.name, topic_id=self.topic_id,
                                       partition_data=parts),))

    async def _at_leaders(self, parts: tuple[Any, ...], results: tuple[Any, ...]) -> list[Any]:
        """`results` with the partitions this broker refused as led elsewhere (NOT_LEADER_OR_FOLLOWER,
        after the user's ACLs were checked here: nothing was written) answered by their leaders, each
        sent the same batches over its Kafka port, as a producer sends them to the partition's leader.
        A worker of `serve --workers N` or a cloud broker leads only some partitions; before stop 56
        REST writes to the others failed with a 500. One whose leader cannot be reached keeps the
        retriable error."""
        refused = {(self.name, r.index) for r in results if r.error_code == ErrorCode.not_leader_or_follower}
        if not refused:
            return list(results)
        by_index = {part.index: part for part in parts}
        answers = await ask_leaders(self.cluster, PRODUCE, refused, lambda led: self._request(
            tuple(by_index[index] for index in sorted(led[self.name]))))
        found = {r.index: r for answer in answers for r in answer.responses[0].partition_responses}
        return [found.get(r.index, r) for r in results]

    def _report(self, item: Incoming, offset: int, timestamp: int) -> dict[str, Any]:
        report: dict[str, Any] = {
            "error_code": 200, "cluster_id": self.cluster.cluster_id, "topic_name": self.name,
            "partition_id": item.partition, "offset": offset, "timestamp": _iso(timestamp),
        }
        if item.key_type is not None:
            report["key"] = {"type": item.key_type, "size": len(item.record.key) if item.record.key is not None else -1}
        if item.value_type is not None:
            report["value"] = {"type": item.value_type,
                               "size": len(item.record.value) if item.record.value is not None else -1}
        return report


def _batches(group: list[Incoming], producer: IdempotentProducer, key: PartitionKey) -> bytes:
    """A partition's records as idempotent v2 batches of about BATCH_BYTES each, as a producer cuts them."""
    out, batch, size = [], [], 0
    sequence = producer.next_sequence(key)

    def cut() -> None:
        nonlocal sequence
        out.append(build_batch(batch, producer_id=producer.producer_id, producer_epoch=producer.epoch,
                               base_sequence=sequence))
        sequence = (sequence + len(batch)) % (2**31)

    for item in group:
        if batch and size + item.size > BATCH_BYTES:
            cut()
            batch, size = [], 0
        batch.append(item.record)
        size += item.size
    cut()
    return b"".join(out)


def _produce_error(code: ErrorCode, message: str | None) -> RestError:
    """A produce refusal as Confluent's REST producer reports it (a Kafka client exception, mapped)."""
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return RestError(500, 50002, "Kafka error: The request included a message larger than the max message "
                                     f"size the server will accept. {message or ''}".rstrip())
    return kafka_error(code, message)


def _error(error: RestError) -> dict[str, Any]:
    return error.body()


class JsonObjects:
    """JSON values read one after another from a request body as it arrives."""

    def __init__(self, limit: int) -> None:
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._limit = limit
        self.seen_any = False

    def feed(self, chunk: bytes, final: bool) -> list[Any]:
        """Whole values now available; at the end (final) a partial one is an error (raised as RestError)."""
        try:
            self._text += self._utf8.decode(chunk, final)
        except UnicodeDecodeError as exc:
            raise bad_request(f"Error processing JSON: {exc}") from None
        values, pos, text = [], 0, self._text
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos >= len(text):
                break
            self.seen_any = True
            try:
                value, pos = bounded_raw_decode(text, pos)
            except JsonLimitError as exc:
                self._text = ""
                values.append(bad_request(f"Error processing JSON: {exc}"))
                return values
            except json.JSONDecodeError as exc:
                if final:
                    self._text = ""
                    values.append(bad_request(f"Error processing JSON: {exc.msg} at character {exc.pos}"))
                    return values
                if len(text) - pos > self._limit:
                    self._text = ""
                    values.append(bad_request(f"Error processing message: a record over {self._limit} bytes"))
                    return values
                break
            values.append(value)
        self._text = text[pos:]
        return values


async def produce(request: web.Request) -> web.StreamResponse:
    cluster_of(request)  # 404 for another cluster id, before reading the body
    name = kafka_name(request, request.match_info["topic"])
    limit = request.app[BROKER].config.socket_request_max_bytes
    objects = JsonObjects(limit)
    if request.content_length is not None and request.content_length <= limit:  # a whole body, not a stream
        values = objects.feed(await request.content.read(), True)
        if len(values) == 1:
            return await _one(request, name, values[0])
        arrivals = _arrived(values)
    else:
        arrivals = _arriving(request, objects)
    response: web.StreamResponse | None = None
    target: TopicTarget | RestError | None = None
    try:
        async for values, final in arrivals:
            if final and not objects.seen_any:
                raise invalid_payload("Request body is empty. Data is required.")
            if values:
                if target is None:
                    target = await _target(request, name)
                if response is None:
                    response = web.StreamResponse(status=200, headers={"Content-Type": JSON_CONTENT})
                    await response.prepare(request)
                try:
                    stop = await _answer(target, values, response)
                except ConnectionResetError:
                    raise
                except Exception:  # the answer has begun: the failure is the stream's last report
                    log.exception("REST produce to %s failed", name)
                    await response.write(b'{"error_code":500,"message":"Internal Server Error"}\n')
                    break
                if stop:
                    break
        assert response is not None
        await response.write_eof()
    except ConnectionResetError:  # what arrived whole was written and answered; the rest is gone with the client
        log.info("REST produce to %s: the client went away mid-stream", name)
        return response or web.Response(status=400)
    return response


async def _arriving(request: web.Request, objects: JsonObjects) -> AsyncIterator[tuple[list[Any], bool]]:
    """(whole JSON values, is this the end) as a streamed body arrives."""
    while True:
        chunk = await request.content.readany()
        final = not chunk
        yield objects.feed(chunk, final), final
        if final:
            return


async def _arrived(values: list[Any]) -> AsyncIterator[tuple[list[Any], bool]]:
    yield values, True


async def _target(request: web.Request, name: str) -> "TopicTarget | RestError":
    try:
        return await TopicTarget.resolve(request, name)
    except RestError as exc:
        return exc


async def _one(request: web.Request, name: str, value: Any) -> web.Response:
    """A request of one record: its report, under the HTTP status its error code starts with."""
    [report], _ = await _reports(await _target(request, name), [value])
    code = report["error_code"]
    return web.json_response(report, status=code if code < 1000 else code // 100, dumps=_COMPACT)


async def _reports(target: "TopicTarget | RestError", values: list[Any]) -> tuple[list[dict[str, Any]], bool]:
    """Write the records among `values`: their reports in order, and whether an error ends the stream."""
    items: list[Incoming | dict[str, Any]] = []
    stop = False
    framing = await _framing(target, values)
    for value in values:
        if isinstance(value, RestError):  # bad JSON: the stream cannot be followed past it
            items.append(_error(value))
            stop = True
            break
        if isinstance(target, RestError):
            items.append(_error(target))
            continue
        try:
            items.append(parse_record(value, framing))
        except RestError as exc:
            items.append(_error(exc))
    pending = [item for item in items if isinstance(item, Incoming)]
    if pending:
        assert isinstance(target, TopicTarget)
        await target.write(pending)
    return [item.result if isinstance(item, Incoming) else item for item in items], stop


async def _framing(target: "TopicTarget | RestError", values: list[Any]) -> SchemaFraming | None:
    """The registry's framing for this topic when a record names a schema (read up to date once per request)."""
    if isinstance(target, RestError) or not any(
            isinstance(v, dict) and (names_a_schema(v.get("key")) or names_a_schema(v.get("value"))) for v in values):
        return None
    registry = registry_of(target.cluster)
    await registry.refresh()
    return SchemaFraming(registry, target.name)


async def _answer(target: "TopicTarget | RestError", values: list[Any], response: web.StreamResponse) -> bool:
    """Write the records among `values` and stream their reports in order; True after a stream-ending error."""
    reports, stop = await _reports(target, values)
    await response.write("".join(_COMPACT(report) + "\n" for report in reports).encode())
    return stop


PRODUCER: web.AppKey[IdempotentProducer] = web.AppKey("rest producer", IdempotentProducer)


def add_routes(app: web.Application) -> None:
    app[PRODUCER] = IdempotentProducer()
    app.router.add_post("/v3/clusters/{cluster_id}/topics/{topic}/records", produce)
