"""The stream store: namespace, partitionlets, indexes, cursors, retention.

Knows nothing of the Kafka protocol. Engines are chosen by URL:
`memory://` (tests, the in-process test broker) or a data directory
(`file:///var/lib/kafkacompat` or a plain path) for the on-disk store.
"""

from .api import (
    AppendResult,
    Cursor,
    FsyncPolicy,
    Partition,
    PartitionletInfo,
    PermissionEntries,
    Store,
    StreamInfo,
    StreamPolicy,
    TimestampHit,
    TopicInfo,
)
from .errors import *  # noqa: F401,F403
from .engines import open_store
from .compaction import RecordCodec
from .namespace import cleanup_policy

__all__ = [
    "AppendResult",
    "Cursor",
    "FsyncPolicy",
    "Partition",
    "PartitionletInfo",
    "PermissionEntries",
    "RecordCodec",
    "Store",
    "StreamInfo",
    "StreamPolicy",
    "TimestampHit",
    "TopicInfo",
    "cleanup_policy",
    "open_store",
]
