"""A transaction whose partitions belong to several workers, as Kafka's brokers run one.

Each worker coordinates the transactional ids of the __consumer_offsets
partitions it owns; the other workers own some of the partitions a
transaction writes. As on Kafka, the partition's leader
asks the coordinator before a producer's first transactional write there
(AddPartitionsToTxn v4 verify_only, KIP-890 part 1; v5 adds the partition
for a Produce v12 of transactions v2), and the coordinator has each
partition's leader write the commit or abort marker (WriteTxnMarkers).
Without this, a worker other than 0 did not know the producer id worker
0's coordinator gave out and refused the produce, and the marker could not
be written by worker 0 into a partition whose files only its owner opens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import kio.schema.add_partitions_to_txn.v4.request as add_v4
import kio.schema.add_partitions_to_txn.v5.request as add_v5
import kio.schema.write_txn_markers.v1.request as markers_v1
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TransactionalId

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType
from kafkacompat.protocol.messages import make

from ..catalog.producer_state import COORDINATOR_EPOCH
from ..cluster.membership import PartitionKey
from ..cluster.peers import Peers
from ..topic_names import canonical_name
from .forward import ForwardError, forward
from .view import WorkerView

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
VERIFY_VERSION = 4  # the batched form with verify_only (KIP-890 part 1)
ADD_VERSION = 5  # a Produce v12's implicit add: the partition joins a transactions v2 transaction
# An owner's answers that end its part of the markers: written, or refused for good as the coordinator's
# own marker_refusal check would (a newer epoch's marker is there), or the topic is gone
FINAL = frozenset({ErrorCode.none, ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced,
                   ErrorCode.unknown_topic_or_partition})


async def verify_at_coordinator(host: str, port: int, txn_id: str, producer_id: int, epoch: int, name: str,
                                index: int, add: bool, peers: Peers) -> ErrorCode:
    """The coordinator's verdict on one partition of the producer's open transaction (`add`: join it first)."""
    schema = add_v5 if add else add_v4
    topic = make(schema.AddPartitionsToTxnTopic, name=name, partitions=(index,))
    txn = make(schema.AddPartitionsToTxnTransaction, transactional_id=TransactionalId(txn_id),
               producer_id=ProducerId(producer_id), producer_epoch=epoch, verify_only=not add, topics=(topic,))
    request = make(schema.AddPartitionsToTxnRequest, transactions=(txn,))
    answer = await forward(host, port, ADD_PARTITIONS_TO_TXN, ADD_VERSION if add else VERIFY_VERSION, request,
                           peers)
    if answer.error_code != ErrorCode.none:
        return ErrorCode(answer.error_code)
    for result in answer.results_by_transaction:
        for topic_result in result.topic_results:
            for partition in topic_result.results_by_partition:
                return ErrorCode(partition.partition_error_code)
    return ErrorCode.unknown_server_error  # an answer about no partition: not a verdict


async def write_markers_at(host: str, port: int, producer_id: int, epoch: int, commit: bool,
                           partitions: Sequence[tuple[str, int]], coordinator_epoch: int,
                           peers: Peers) -> dict[tuple[str, int], ErrorCode]:
    """Have the worker at host:port write the marker into its `partitions` (Kafka names, index); its
    answer per partition."""
    by_name: dict[str, list[int]] = {}
    for name, index in partitions:
        by_name.setdefault(name, []).append(index)
    marker = make(markers_v1.WritableTxnMarker, producer_id=ProducerId(producer_id), producer_epoch=epoch,
                  transaction_result=commit, coordinator_epoch=coordinator_epoch,
                  topics=tuple(make(markers_v1.WritableTxnMarkerTopic, name=name, partition_indexes=tuple(indexes))
                               for name, indexes in by_name.items()))
    answer = await forward(host, port, WRITE_TXN_MARKERS, 1, make(markers_v1.WriteTxnMarkersRequest,
                                                                  markers=(marker,)), peers)
    return {(topic.name, p.partition_index): ErrorCode(p.error_code)
            for result in answer.markers for topic in result.topics for p in topic.partitions}


class WorkerTransactions:
    """What a worker's transaction coordinator and produce path ask of the other workers."""

    def __init__(self, view: WorkerView, coordinator_of: Callable[[str], int]) -> None:
        self.view = view
        self._coordinator_of = coordinator_of  # which worker coordinates a transactional id

    def _name(self, key: PartitionKey) -> str:
        return canonical_name(key[0], key[1], self.view.store.default_stream)

    async def verify(self, txn_id: str, producer_id: int, epoch: int, key: PartitionKey, add: bool) -> ErrorCode:
        """The coordinating worker's verdict on the partition in the producer's open transaction;
        NOT_ENOUGH_REPLICAS (retriable: the producer sends again) while it cannot be reached."""
        view = self.view
        coordinator = self._coordinator_of(txn_id)
        try:
            return await verify_at_coordinator(view.controller_host, view.role.ports[coordinator], txn_id, producer_id,
                                               epoch, self._name(key), key[2], add, view.peers)
        except ForwardError as exc:
            log.warning("worker %d: cannot verify transactional id %r with worker %d: %s", view.role.index, txn_id,
                        coordinator, exc)
            return ErrorCode.not_enough_replicas

    async def write_markers(self, producer_id: int, epoch: int, control: ControlType,
                            keys: Sequence[PartitionKey]) -> None:
        """Have each partition's owner write the marker; StorageError (the coordinator retries the
        transaction's markers) when an owner cannot be reached or cannot write it now."""
        by_owner: dict[int, list[PartitionKey]] = {}
        for key in keys:
            by_owner.setdefault(self.view.owner(key), []).append(key)
        await asyncio.gather(*(self._write_at(owner, producer_id, epoch, control, owned)
                               for owner, owned in by_owner.items()))

    async def _write_at(self, owner: int, producer_id: int, epoch: int, control: ControlType,
                        keys: list[PartitionKey]) -> None:
        view = self.view
        try:
            errors = await write_markers_at(view.controller_host, view.role.ports[owner], producer_id, epoch,
                                            control is ControlType.COMMIT, [(self._name(k), k[2]) for k in keys],
                                            COORDINATOR_EPOCH, view.peers)
        except ForwardError as exc:
            raise storage.StorageError(f"markers of producer {producer_id} not written by worker {owner}: {exc}") \
                from None
        for (name, index), error in errors.items():
            if error in FINAL:
                if error != ErrorCode.none:
                    log.info("producer %d: no marker in %s/%d (%s)", producer_id, name, index, error.name)
                continue
            raise storage.StorageError(f"worker {owner} did not write the marker of producer {producer_id} "
                                       f"in {name}/{index}: {error.name}")
