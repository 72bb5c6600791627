"""Whole-request refusals: the APIs Kafka answers with CLUSTER_AUTHORIZATION_FAILED without a cluster operation.

The connection asks `cluster_gate` before dispatching, so the handlers of
these APIs carry no check of their own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat.protocol.error_answers import ErrorAnswer, error_answer

from .acls import Operation
from .authorizer import CLUSTER_DENIED

# APIs Kafka refuses as a whole without one operation on the cluster (KafkaApis / ControllerApis).
CLUSTER_GATES: dict[int, Operation] = {
    34: Operation.ALTER,  # AlterReplicaLogDirs
    35: Operation.DESCRIBE,  # DescribeLogDirs
    43: Operation.ALTER,  # ElectLeaders
    45: Operation.ALTER,  # AlterPartitionReassignments
    46: Operation.DESCRIBE,  # ListPartitionReassignments
    48: Operation.DESCRIBE_CONFIGS,  # DescribeClientQuotas
    49: Operation.ALTER_CONFIGS,  # AlterClientQuotas
    74: Operation.DESCRIBE_CONFIGS,  # ListConfigResources
    50: Operation.DESCRIBE,  # DescribeUserScramCredentials
    51: Operation.ALTER,  # AlterUserScramCredentials
    55: Operation.DESCRIBE,  # DescribeQuorum (ControllerApis)
    57: Operation.ALTER,  # UpdateFeatures (ControllerApis)
    64: Operation.ALTER,  # UnregisterBroker (ControllerApis)
}


def cluster_gate(ctx: Any, request: Any, shape: ErrorAnswer | None) -> Any | None:
    """The CLUSTER_AUTHORIZATION_FAILED answer of a cluster-wide API the principal may not use, else None.

    Called once per request by the connection, so handlers of these APIs need no check of their own;
    `shape` is the error answer the API's handler module declares.
    """
    key = ctx.header.api_key
    operation = CLUSTER_GATES.get(key)
    if operation is None or ctx.cluster.authorizer.cluster(ctx, operation):
        return None
    answer = error_answer(shape, key, ctx.header.api_version, request, ErrorCode.cluster_authorization_failed)
    return _with_message(answer, CLUSTER_DENIED)


def _with_message(entity: Any, message: str | None) -> Any:
    """A response whose error messages say what Kafka's ClusterAuthorizationException says."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_message":
            changes[f.name] = message
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(_with_message(item, message) for item in value)
    return dataclasses.replace(entity, **changes)
