"""A store failure that escaped a handler answered as Kafka would, never as a closed connection.

Handlers catch the store's errors where they can answer per partition or
per group. The cloud engine's store reaches PostgreSQL on many read paths
(a leader epoch's end, a cold group's offsets, a producer's state), and one
that forgot to catch StorageError closed the client's connection over an
"internal error" during a database outage, which clients see as a broken
broker rather than a retriable condition. Here, in one place, such an
error becomes the answer Kafka gives when its log cannot be read or
written: KAFKA_STORAGE_ERROR (or the error's own code, e.g.
NOT_LEADER_OR_FOLLOWER) for a partition's data, NOT_COORDINATOR for a
coordinator's state (clients look the coordinator up again and retry),
LEADER_NOT_AVAILABLE for Metadata, every item of the request named.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.error_answers import error_answer
from kafkacompat.protocol.versions import api_name

from ..handlers import ERROR_ANSWERS
from ..handlers.common import coordinator_storage_error_code, storage_error_code

log = logging.getLogger(__name__)

# Group and transaction coordinators' APIs (Kafka answers a failed append to their logs NOT_COORDINATOR).
COORDINATOR_APIS = frozenset({8, 9, 11, 12, 13, 14, 15, 16, 22, 24, 25, 26, 28, 42, 47, 65, 66, 68, 69, 76, 77,
                              79, 90, 91, 92})
FIND_COORDINATOR = 10
METADATA = 3
LOG_EVERY_S = 10.0
_logged_at = float("-inf")


def error_for(api_key: int, exc: storage.StorageError) -> ErrorCode:
    """The retriable error Kafka answers this API with when its log fails as `exc` says."""
    if api_key == METADATA:
        return ErrorCode.leader_not_available
    if api_key == FIND_COORDINATOR:
        return ErrorCode.coordinator_not_available
    if api_key in COORDINATOR_APIS:
        return coordinator_storage_error_code(exc)
    return storage_error_code(exc)


def refusal(api_key: int, version: int, request: Any, exc: storage.StorageError) -> Any:
    """The whole request answered with error_for's code, naming each topic, partition or group it named."""
    global _logged_at
    error = error_for(api_key, exc)
    now = time.monotonic()
    if now - _logged_at >= LOG_EVERY_S:  # an outage fails every request at once: one line now and then
        _logged_at = now
        log.warning("%s v%d answered %s: %s", api_name(api_key), version, error.name.upper(), exc)
    return error_answer(ERROR_ANSWERS.get(api_key), api_key, version, request, error)
