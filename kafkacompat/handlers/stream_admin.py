"""StreamAdmin (private, unadvertised): the admin CLI's stream, topic and cursor operations.

Kafka has no API for streams or cursors, so the command line sends one JSON
request per operation (see protocol/admin_api.py) and gets JSON back. The
operations themselves are kafkacompat/operations/streams.py (the console runs
them too); this module decodes the request and answers their errors.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage
from kafkacompat.protocol.admin_api import (
    STREAM_ADMIN_KEY,
    STREAM_ADMIN_VERSION,
    encode_response_body,
)

from ..broker.cluster import TopicError
from ..operations.streams import AdminError, Caller, run
from ..replication.admin_ops import ReplicaOpError
from .common import ErrorCode, decode_json_request, storage_error_code
from .registry import Api

# The admin CLI's stream API: private, never advertised to stock clients
API = Api(STREAM_ADMIN_KEY, (STREAM_ADMIN_VERSION, STREAM_ADMIN_VERSION), None, advertised=False)


_STORE_CODES = {
    storage.StreamExistsError: ErrorCode.topic_already_exists,
    storage.UnknownStreamError: ErrorCode.unknown_topic_or_partition,
}


decode = decode_json_request


async def handle(ctx: Caller, request: dict[str, Any]) -> bytes:
    try:
        result = await run(ctx, request)
    except AdminError as exc:
        return encode_response_body(exc.code.value, str(exc), None)
    except ReplicaOpError as exc:
        return encode_response_body(ErrorCode.invalid_request.value, str(exc), None)
    except TopicError as exc:
        return encode_response_body(exc.code.value, str(exc), None)
    except storage.StorageError as exc:
        code = _STORE_CODES.get(type(exc)) or storage_error_code(exc)
        return encode_response_body(code.value, str(exc), None)
    return encode_response_body(ErrorCode.none.value, None, result)
