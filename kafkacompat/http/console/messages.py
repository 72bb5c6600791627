"""The message browser: one partition's records a page at a time, and a form that produces one record.

A page starts where the user seeks (the log start, an offset, the first
record at or after a time as ListOffsets finds it, or the last page before
the end) and reads forward in READ_BYTES chunks until it has PER_PAGE
records that pass the filters (key, header and value substrings, on what
is shown), reaches the end, or has scanned SCAN_BYTES or decoded
DECODES_MAX schema-framed payloads: a page never reads a whole partition,
and says where it stopped so the next page goes on from there. Values that are JSON are shown indented; keys and values framed for
a schema registry (magic byte 0 and a 4-byte schema id) are decoded with
the broker's own registry (decoding.py) and shown as JSON beside their
schema's id, subject and version. The key and value filters match the text
shown: the decoded JSON of a framed key or value, else the raw bytes.

Reading needs READ on the topic (as a consumer's Fetch, and the live tail),
decoding nothing more (the registry is read in-process);
producing needs WRITE and goes through the REST proxy's producer
(rest_produce.TopicTarget), i.e. one Produce request through the broker's
own handler, authorized as the request's principal.
"""

from __future__ import annotations

import base64
import datetime
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from kafkacompat import storage
from kafkacompat.protocol.records import Record, iter_records

from ...schemas.registry import registry_of
from ...security.acls import Operation
from ...topic_names import canonical_name
from ..rest_errors import RestError
from ..rest_produce import TopicTarget, parse_record
from ..schema_registry import READ, may
from .decoding import Decoder, framed
from .pages import cluster_of, topic_asked
from .permission import authorizing, form_refusal, may_topic
from .render import render
from .tail import batches_end
from .units import parse_time

PER_PAGE = 50
READ_BYTES = 256 * 1024
SCAN_BYTES = 8 * 1024 * 1024
DECODES_MAX = 20_000  # about a second of Avro decoding (45 µs a small record): a filtered page stops there
SHOWN_BYTES = 10_000  # a longer key or value is cut on the page
SEEKS = ("beginning", "offset", "timestamp", "end")
MAX_FORM_BYTES = 1024 * 1024


@dataclass
class Query:
    """What the user asked for: where to start and which records to keep."""

    partition: int = 0
    seek: str = "beginning"
    at: str = ""
    key: str = ""
    header: str = ""
    value: str = ""

    @classmethod
    def of(cls, query: Any, partitions: int) -> "Query":
        asked = cls(**{name: query.get(name, "").strip() for name in ("seek", "at", "key", "header", "value")})
        asked.seek = asked.seek if asked.seek in SEEKS else "beginning"
        text = query.get("partition", "0").strip() or "0"
        if not text.isdigit() or int(text) >= partitions:
            raise ValueError(f"partition {text!r} is not one of 0..{partitions - 1}")
        asked.partition = int(text)
        return asked

    def matches(self, record: Record, decoder: Decoder) -> bool:
        if self.header:
            name, _, wanted = self.header.partition("=")
            if not any(key == name and (not wanted or (value is not None and wanted.encode() in value))
                       for key, value in record.headers):
                return False
        return _contains(self.key, record.key, decoder, "key") and _contains(self.value, record.value, decoder, "value")

    def filtered(self) -> bool:
        return bool(self.key or self.header or self.value)

    def link(self, **changes: Any) -> str:
        fields = {"partition": self.partition, "seek": self.seek, "at": self.at, "key": self.key,
                  "header": self.header, "value": self.value, **changes}
        return urlencode({k: v for k, v in fields.items() if v != ""})


def _contains(wanted: str, data: bytes | None, decoder: Decoder, what: str) -> bool:
    """Whether a key or value holds `wanted`: in its decoded JSON (indented or compact) when framed, else its bytes."""
    if not wanted:
        return True
    if data is None:
        return False
    if framed(data):
        seen = decoder.decoded(data, what)
        if seen["kind"] == "schema":
            return wanted in seen["text"] or wanted in seen["compact"]
    return wanted.encode() in data


@dataclass
class Page:
    rows: list[dict[str, Any]] = field(default_factory=list)
    start: int = 0
    next: int = 0  # where the next page starts
    scanned: int = 0  # records looked at
    at_end: bool = False


async def start_offset(partition: storage.ReadablePartition, asked: Query) -> int:
    low, high = partition.log_start_offset, partition.high_watermark
    if asked.seek == "end":
        return max(high - PER_PAGE, low)
    if asked.seek == "offset":
        if not asked.at.lstrip("-").isdigit():
            raise ValueError(f"offset {asked.at!r} is not a whole number")
        return min(max(int(asked.at), low), high)
    if asked.seek == "timestamp":
        hit = await partition.offset_for_timestamp(parse_time(asked.at))
        return high if hit is None else max(hit.offset, low)
    return low


async def read_page(partition: storage.ReadablePartition, asked: Query, decoder: Decoder) -> Page:
    """The records of one page: at most PER_PAGE matches, after at most SCAN_BYTES read."""
    position = await start_offset(partition, asked)
    page = Page(start=position, next=position)
    read = 0
    while len(page.rows) < PER_PAGE and read < SCAN_BYTES and position < partition.high_watermark \
            and decoder.decoded_count < DECODES_MAX:
        position = max(position, partition.log_start_offset)
        data = await partition.read(position, READ_BYTES)
        end = batches_end(data)
        if end is None or end <= position:
            break
        read += len(data)
        for record in iter_records(data):
            if record.offset < position:
                continue
            page.scanned += 1
            page.next = record.offset + 1
            await decoder.ready(record.key, record.value)
            if asked.matches(record, decoder):
                page.rows.append(row(record, decoder))
            if len(page.rows) == PER_PAGE or decoder.decoded_count >= DECODES_MAX:
                break
        else:
            page.next = end
        position = page.next
    page.at_end = page.next >= partition.high_watermark
    return page


def row(record: Record, decoder: Decoder) -> dict[str, Any]:
    moment = datetime.datetime.fromtimestamp(record.timestamp / 1000, tz=datetime.timezone.utc)
    return {"offset": record.offset, "timestamp": record.timestamp,
            "time": moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC",
            "key": shown(record.key, decoder, "key"), "value": shown(record.value, decoder, "value"),
            "headers": [(name, shown(value)) for name, value in record.headers],
            "size": len(record.key or b"") + len(record.value or b"")}


def shown(data: bytes | None, decoder: Decoder | None = None, what: str = "header") -> dict[str, Any] | None:
    """Bytes for the page: schema-framed keys and values decoded, JSON indented, text as is, binary as base64;
    cut at SHOWN_BYTES (headers are never decoded with a schema)."""
    if data is None:
        return None
    if decoder is not None and framed(data):
        seen = decoder.decoded(data, what)
        return seen | {"text": seen["text"][:SHOWN_BYTES], "cut": len(seen["text"]) > SHOWN_BYTES}
    cut = len(data) > SHOWN_BYTES
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": "base64", "text": base64.b64encode(data[:SHOWN_BYTES]).decode(), "cut": cut}
    if text[:1] in ("{", "[") and not cut:
        try:
            return {"kind": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False), "cut": False}
        except ValueError:
            pass
    return {"kind": "text", "text": text[:SHOWN_BYTES], "cut": cut}


async def browse(request: web.Request, error: str | None = None, form: dict[str, str] | None = None,
                 status: int = 200) -> web.Response:
    """GET /console/messages?stream=&topic=&partition=&seek=&at=&key=&header=&value=: one page of records."""
    info, missing = topic_asked(request, Operation.READ)
    if info is None:
        return missing
    cluster = cluster_of(request)
    name = canonical_name(info.stream, info.name, cluster.default_stream)
    context: dict[str, Any] = {"stream": info.stream, "topic": info.name, "name": name, "partitions": info.partitions,
                               "form": form or {}, "error": error, "page": None, "asked": Query(),
                               "may_produce": await _may_produce(request, info)}
    decoder = Decoder(registry_of(cluster), {name, info.name}, lambda subject: may(request, READ, subject, audit=False))
    try:
        asked = context["asked"] = Query.of(request.query, info.partitions)
        partition = await cluster.readable_partition(info.stream, info.name, asked.partition)
        context.update(page=await read_page(partition, asked, decoder), low=partition.log_start_offset,
                       high=partition.high_watermark, per_page=PER_PAGE)
    except ValueError as exc:
        context["error"], status = str(exc), 400
    except storage.StorageError as exc:
        context["error"], status = str(exc), 409
    return render(request, "messages.html", status=status, title=f"Messages of {name}", **context)


async def _may_produce(request: web.Request, info: storage.TopicInfo) -> bool:
    if authorizing(request):
        return may_topic(request, Operation.WRITE, info.stream, info.name, audit=False) and \
            await form_refusal(request, info.stream) is None
    return await form_refusal(request, info.stream) is None


def record_of(form: dict[str, str]) -> dict[str, Any]:
    """The REST v3 record a produce form describes (headers one `name: value` a line)."""
    record: dict[str, Any] = {"value": {"type": "STRING", "data": form.get("value", "")}}
    if form.get("key", ""):
        record["key"] = {"type": "STRING", "data": form["key"]}
    if form.get("partition", "").strip():
        text = form["partition"].strip()
        if not text.isdigit():
            raise ValueError(f"partition {text!r} is not a whole number")
        record["partition_id"] = int(text)
    headers = []
    for line in form.get("headers", "").splitlines():
        if line.strip():
            header, sep, value = line.partition(":")
            if not sep or not header.strip():
                raise ValueError(f"header line {line!r} is not `name: value`")
            headers.append({"name": header.strip(), "value": base64.b64encode(value.strip().encode()).decode()})
    if headers:
        record["headers"] = headers
    return record


async def produce(request: web.Request) -> web.Response:
    """POST /console/messages/produce?stream=&topic=: write one record, then show the page at it."""
    info, missing = topic_asked(request, Operation.WRITE)
    if info is None:
        return missing
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
    denied = await form_refusal(request, info.stream)
    if denied is not None:
        return await browse(request, error=denied, form=form, status=403)
    cluster = cluster_of(request)
    try:
        target = await TopicTarget.resolve(request, canonical_name(info.stream, info.name, cluster.default_stream))
        item = parse_record(record_of(form))
        await target.write([item])
    except ValueError as exc:
        return await browse(request, error=str(exc), form=form, status=400)
    except RestError as exc:
        return await browse(request, error=exc.message, form=form, status=exc.status)
    report = item.result or {}
    if report.get("error_code") != 200:
        code = int(report.get("error_code", 500))
        return await browse(request, error=str(report.get("message", report)), form=form,
                            status=code if code < 1000 else code // 100)
    where = urlencode({"stream": info.stream, "topic": info.name, "partition": report["partition_id"],
                       "seek": "offset", "at": report["offset"], "produced": report["offset"]})
    raise web.HTTPSeeOther(f"/console/messages?{where}")
