"""Destructive actions on a topic's page, each behind a confirmation: delete the topic, delete records before an offset.

Each is one Kafka request (DeleteTopics, DeleteRecords) through the
broker's own handler as the request's principal, so it needs DELETE on the
topic and is checked, logged and answered exactly as for kafka-topics.sh
or kafka-delete-records.sh. Deleting a topic asks the user to type its
name; deleting records to tick a box that says what is lost.
"""

from __future__ import annotations

import datetime
from urllib.parse import urlencode

from aiohttp import web
from kio.schema.errors import ErrorCode

from ...security.acls import Operation
from ...topic_names import canonical_name
from ..kafka_calls import NO_TOPIC_ID, ask_leaders, build, call
from .pages import cluster_of, topic_asked
from .pages import topic as topic_page
from .permission import form_refusal

DELETE_TOPICS, DELETE_RECORDS = 20, 21
TIMEOUT = datetime.timedelta(seconds=30)
MAX_FORM_BYTES = 64 * 1024


async def _form(request: web.Request) -> dict[str, str]:
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    return {k: v for k, v in (await request.post()).items() if isinstance(v, str)}


def _failure(code: int, message: str | None) -> str | None:
    if code == 0:
        return None
    return f"{ErrorCode(code).name}: {message}" if message else ErrorCode(code).name


async def delete_topic(request: web.Request) -> web.Response:
    """POST /console/topic/delete?stream=&topic= with confirm=<the topic's name>."""
    info, missing = topic_asked(request, Operation.DELETE)
    if info is None:
        return missing
    form = await _form(request)
    name = canonical_name(info.stream, info.name, cluster_of(request).default_stream)
    denied = await form_refusal(request, info.stream)
    if denied is None and form.get("confirm", "").strip() != name:
        denied = f"type the topic's name, {name}, to delete it"
    if denied is not None:
        return await topic_page(request, error=denied, status=403 if "type the" not in denied else 400)
    state = build(DELETE_TOPICS, "DeleteTopicState", name=name, topic_id=NO_TOPIC_ID)
    answer = await call(cluster_of(request), DELETE_TOPICS,
                        build(DELETE_TOPICS, topics=(state,), timeout=TIMEOUT))
    (result,) = answer.responses
    failed = _failure(result.error_code, result.error_message)
    if failed is not None:
        return await topic_page(request, error=f"the topic was not deleted: {failed}", status=400)
    raise web.HTTPSeeOther("/console/stream?" + urlencode({"path": info.stream, "deleted": name}))


async def delete_records(request: web.Request) -> web.Response:
    """POST /console/topic/delete-records?stream=&topic= with partition, offset and confirm=on."""
    info, missing = topic_asked(request, Operation.DELETE)
    if info is None:
        return missing
    form = await _form(request)
    denied = await form_refusal(request, info.stream)
    if denied is not None:
        return await topic_page(request, error=denied, status=403)
    partition, offset = form.get("partition", "").strip(), form.get("offset", "").strip()
    if not partition.isdigit() or not offset.lstrip("-").isdigit():
        return await topic_page(request, error="give a partition and an offset (whole numbers; -1: the end)",
                                status=400)
    if form.get("confirm") != "on":
        return await topic_page(request, error="tick the box to confirm the records are to be deleted", status=400)
    cluster = cluster_of(request)
    name = canonical_name(info.stream, info.name, cluster.default_stream)
    part = build(DELETE_RECORDS, "DeleteRecordsPartition", partition_index=int(partition), offset=int(offset))
    deletion = build(DELETE_RECORDS, topics=(build(DELETE_RECORDS, "DeleteRecordsTopic", name=name, partitions=(part,)),),
                     timeout=TIMEOUT)
    result = (await call(cluster, DELETE_RECORDS, deletion)).topics[0].partitions[0]
    if result.error_code == ErrorCode.not_leader_or_follower:  # another worker's (or broker's) partition: its leader's
        for answer in await ask_leaders(cluster, DELETE_RECORDS, {(name, int(partition))}, lambda led: deletion):
            result = answer.topics[0].partitions[0]
    failed = _failure(result.error_code, None)
    if failed is not None:
        return await topic_page(request, error=f"no records were deleted: {failed}", status=400)
    raise web.HTTPSeeOther("/console/topic?" + urlencode({"stream": info.stream, "topic": info.name,
                                                          "low": result.low_watermark}))
