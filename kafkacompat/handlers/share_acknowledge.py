"""ShareAcknowledge (KIP-932): accept, release or reject records a member holds, outside a fetch.

Epoch 0 is refused (a session is opened by ShareFetch only); -1 closes the
session after the acknowledgements, and what the member still holds
becomes available. Answered once the new state is written.
"""

from __future__ import annotations

from typing import Any

from ..services import Request
from ..shares.manager import ShareSessionError
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .share_common import Leaders, Shares, acknowledge, deposed, refusal

# ShareAcknowledge v1
API = Api(79, (1, 1), changes())


def _answer(m: Any, error: ErrorCode, message: str | None, responses: tuple = (), node_endpoints: tuple = ()) -> Any:
    return make(m.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
                responses=responses, node_endpoints=node_endpoints)


async def handle(ctx: Request[Shares], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    refused = refusal(ctx, request.group_id, request.member_id)
    if refused is not None:
        return _answer(m, *refused)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    try:
        shares.acknowledge_session(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return _answer(m, exc.code, str(exc))
    acks = await acknowledge(ctx, group_id, member_id, request.topics)
    if epoch == -1:
        shares.end_sessions(group_id, member_id)
    deposed(acks, await shares.flush())
    leaders = Leaders(ctx, m)

    def answered(topic_id: Any, index: int) -> Any:
        error, message = acks.get((topic_id, index), (ErrorCode.none, None))
        return make(m.PartitionData, partition_index=index, error_code=error, error_message=message,
                    current_leader=leaders.current((topic_id, index), error))

    responses = tuple(
        make(m.ShareAcknowledgeTopicResponse, topic_id=topic.topic_id, partitions=tuple(
            answered(topic.topic_id, p.partition_index) for p in topic.partitions))
        for topic in request.topics
    )
    return _answer(m, ErrorCode.none, None, responses, leaders.endpoints())
