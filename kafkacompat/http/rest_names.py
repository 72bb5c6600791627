"""Topic names as the REST API takes them: Kafka names, `stream:topic`, or MapR's stream paths.

MapR's Kafka REST addresses a topic of a stream as
`/streams/{url-encoded stream path}/topics/{topic}`, takes `/stream:topic`
anywhere a topic name goes, and puts bare names in a configurable default
stream (`rest_default_stream`; unset: the broker's own default stream).
"""

from __future__ import annotations

from aiohttp import web

from .common import BROKER


def kafka_name(request: web.Request, topic: str, stream: str | None = None) -> str:
    """The broker-side name of a topic named in a REST request."""
    if stream is None:
        stream = request.match_info.get("stream")
    if stream is not None:
        return f"{stream}:{topic}"
    if ":" in topic:
        return topic
    default = request.app[BROKER].config.rest_default_stream
    return f"{default}:{topic}" if default else topic
