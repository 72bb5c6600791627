"""What the store's log cleaner needs to see inside batches, from the protocol layer.

The store never imports the Kafka protocol; the broker (and the cleaner's
benchmark and tests) hand it this one codec.
"""

from __future__ import annotations

from kafkacompat.protocol.control_records import ControlType, marker_type
from kafkacompat.protocol.records import rebuild_batch, split_records
from kafkacompat.storage import RecordCodec


def _is_abort_marker(batch: bytes | memoryview) -> bool:
    return marker_type(batch) is ControlType.ABORT


CLEANER_CODEC = RecordCodec(split_records, rebuild_batch, _is_abort_marker)
