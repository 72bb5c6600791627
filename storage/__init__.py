"""The stream store: namespace, partitionlets, indexes, cursors, retention.

Knows nothing of the Kafka protocol. Engines are chosen by URL:
`memory://` (tests, the in-process test broker) or a data directory
(`file:///var/lib/kafkacompat` or a plain path) for the on-disk store.

The names below are imported when first used, not with the package:
readers outside the broker (Spark's Python workers, which import
`storage.disk.reader` afresh for every query) would otherwise load every
engine, asyncio and all, to read a few files.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from .errors import *  # noqa: F401,F403  (errors.py imports nothing)

if TYPE_CHECKING:
    from .api import (
        AppendResult,
        Cursor,
        FsyncPolicy,
        NewTopic,
        Partition,
        PartitionFigures,
        PartitionletInfo,
        PermissionEntries,
        ReadablePartition,
        StateFence,
        Store,
        StreamInfo,
        StreamPolicy,
        TimestampHit,
        TopicInfo,
    )
    from .compaction import RecordCodec
    from .engines import open_store
    from .namespace import cleanup_policy

_LAZY = {
    **dict.fromkeys(
        ("AppendResult", "Cursor", "FsyncPolicy", "NewTopic", "Partition", "PartitionFigures", "PartitionletInfo",
         "PermissionEntries",
         "ReadablePartition", "StateFence", "Store", "StreamInfo", "StreamPolicy", "TimestampHit", "TopicInfo"), ".api"),
    "RecordCodec": ".compaction",
    "open_store": ".engines",
    "cleanup_policy": ".namespace",
}

__all__ = [
    "AppendResult",
    "Cursor",
    "FsyncPolicy",
    "NewTopic",
    "Partition",
    "PartitionFigures",
    "PartitionletInfo",
    "PermissionEntries",
    "ReadablePartition",
    "RecordCodec",
    "StateFence",
    "Store",
    "StreamInfo",
    "StreamPolicy",
    "TimestampHit",
    "TopicInfo",
    "cleanup_policy",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # a submodule (storage.names), as before
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
