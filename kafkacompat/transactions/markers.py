"""Writing one transaction marker into a partition, and what it changes there.

Two writers share this: the transaction coordinator ending a transaction,
and WriteTxnMarkers (an operator's `kafka-transactions.sh abort`, through
Admin.abortTransaction), which Kafka serves at the partition's leader. The
marker ends the producer's open transaction in the partition: its epoch and
coordinator epoch become the producer's there, an abort is listed for
read_committed consumers, and the last stable offset moves past it.
"""

from __future__ import annotations

from collections.abc import Awaitable

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType, build_marker

from ..catalog.producer_state import ProducerStates
from .metadata import PartitionKey
from .partition_state import PartitionTxnRegistry


async def append_marker(
    partitions: PartitionTxnRegistry, producers: ProducerStates, key: PartitionKey, producer_id: int,
    producer_epoch: int, control: ControlType, coordinator_epoch: int, timestamp: int, *,
    leader_epoch: int | None = None, fenced_by: storage.Partition | None = None,
) -> Awaitable[None]:
    """Append the marker and apply it to the partition's producer and transaction state; returns what to
    await for the stream's durability policy. `leader_epoch` and `fenced_by` fence the append as
    storage.Partition.append does (a leader's own append, or a coordinator's by its own partition)."""
    state = await partitions.get(*key)
    marker = build_marker(producer_id, producer_epoch, control, timestamp, coordinator_epoch)
    result = await state.partition.append(marker, 1, leader_epoch=leader_epoch, fenced_by=fenced_by)
    producers.end_marker(producer_id, producer_epoch, key, timestamp, coordinator_epoch, control == ControlType.ABORT)
    await state.marker_written(producer_id, result.base_offset, control)
    return state.partition.wait_durable(result.last_offset + 1)
