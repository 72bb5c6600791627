"""Small pieces every handler uses."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.admin_api import AdminMessageError, decode_request_body
from kafkacompat.protocol.messages import MalformedRequestError, RequestHeader, make, response_module

from ..services import Controller, Request

NO_THROTTLE = datetime.timedelta(0)
NO_RESPONSE = object()  # acks=0: the client expects no answer


class CloseConnection(Exception):
    """A request after which Kafka closes the connection (e.g. failed acks=0 produce)."""

# Authorized operations as Kafka 4.1 reports them with no authorizer: one bit per AclOperation code.
# Topic: READ(3) WRITE(4) CREATE(5) DELETE(6) ALTER(7) DESCRIBE(8) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11).
ALL_TOPIC_OPERATIONS = 0b1101_1111_1000
# Cluster: CREATE(5) ALTER(7) DESCRIBE(8) CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11) IDEMPOTENT_WRITE(12).
ALL_CLUSTER_OPERATIONS = 0b1_1111_1010_0000
UNSET_OPERATIONS = -(2**31)


def decode_json_request(header: RequestHeader, frame: bytes) -> dict[str, Any]:
    """The JSON object of a private request in the admin API's framing (StreamAdmin, WorkerState); a
    body that is not one closes the connection, as a malformed Kafka request does."""
    try:
        return decode_request_body(frame, header.body_offset)
    except AdminMessageError as exc:
        raise MalformedRequestError(str(exc)) from None


async def at_controller(ctx: Request[Controller], request: Any) -> Any | None:
    """The controller's answer to a change of the store's shared state (ACLs, SCRAM users, quotas, configs)
    that this broker may not write itself, a worker other than 0 of `serve --workers N`, with the change
    in force here before the answer; None where this broker makes it. As Kafka's brokers forward such
    changes to their controller: Java's admin client sends them to any broker. The controller judges the
    forwarding worker (the broker itself), so the caller checks the client's rights first."""
    return await ctx.cluster.view.forward_to_controller(ctx.header.api_key, ctx.version, request)


def schema_of(ctx: Request[object]) -> Any:
    """The kio module of this request's response version."""
    return response_module(ctx.header.api_key, ctx.header.api_version)


def leader_epoch_error(leader_epoch: int, current_epoch: int) -> ErrorCode:
    """Kafka's answer when a client names a leader epoch other than ours (-1: none named)."""
    if current_epoch < 0 or current_epoch == leader_epoch:
        return ErrorCode.none
    if current_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


STORAGE_ERRORS: dict[type[Exception], ErrorCode] = {
    storage.UnknownTopicError: ErrorCode.unknown_topic_or_partition,
    storage.UnknownStreamError: ErrorCode.unknown_topic_or_partition,
    storage.TopicExistsError: ErrorCode.topic_already_exists,
    storage.InvalidTopicNameError: ErrorCode.invalid_topic_exception,
    storage.InvalidPathError: ErrorCode.invalid_topic_exception,
    storage.InvalidPartitionsError: ErrorCode.invalid_partitions,
    storage.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    storage.NotLeaderError: ErrorCode.not_leader_or_follower,
    storage.TransactionEndedError: ErrorCode.invalid_txn_state,
    storage.RequesterGoneError: ErrorCode.network_exception,  # what the client itself makes of the closed connection
    storage.StorageFullError: ErrorCode.kafka_storage_error,
    storage.CorruptBatchError: ErrorCode.corrupt_message,
    storage.InvalidPolicyError: ErrorCode.invalid_config,
}


def storage_error_code(exc: Exception) -> ErrorCode:
    for kind, code in STORAGE_ERRORS.items():
        if isinstance(exc, kind):
            return code
    return ErrorCode.kafka_storage_error


def coordinator_storage_error_code(exc: Exception) -> ErrorCode:
    """A group or transaction coordinator's write the store refused, answered as Kafka's coordinators
    answer a failed append to their log (GroupCoordinatorService.handleOperationException,
    TransactionStateManager): KAFKA_STORAGE_ERROR and NOT_LEADER_OR_FOLLOWER become NOT_COORDINATOR,
    on which clients look the coordinator up again and retry. (KAFKA_STORAGE_ERROR itself is not an
    error clients expect from a coordinator: Java's consumer fails the commit for good on it.)"""
    code = storage_error_code(exc)
    if code in (ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower):
        return ErrorCode.not_coordinator
    return code


__all__ = ["CloseConnection", "ErrorCode", "coordinator_storage_error_code", "leader_epoch_error", "make",
           "NO_THROTTLE", "NO_RESPONSE", "schema_of", "storage_error_code"]
