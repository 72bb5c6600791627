"""The transaction coordinator: Kafka's KIP-98 protocol over the stream store.

A broker alone coordinates every transactional id; brokers of one cluster
each coordinate the ids placed on the __consumer_offsets partitions they
lead and take them over from the store when they gain one (take_over), as
Kafka's next coordinator loads __transaction_state. Each id's metadata
(producer id and epoch, state, partitions, pending group offsets) is
written to the default stream's `transactions` state table before the
answer goes out; markers are written to every partition of a transaction
(and the pending offsets committed or dropped) while EndTxn is answered,
so a client that hears "committed" finds the markers in place.

After a restart, transactions caught between PrepareCommit/PrepareAbort
and Complete* are finished at once; transactions still Ongoing are
aborted when their timeout passes, counted from their original start, so
nothing stays half visible.

As on Kafka, a transactional id with no open transaction is forgotten
`transactional.id.expiration.ms` after its last update: an application
that stopped using it does not keep its state forever, and a producer
that comes back later starts with a new producer id.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType

from ..catalog.producer_state import COORDINATOR_EPOCH, ProducerStates
from ..config import BrokerConfig
from ..groups import GroupCoordinator
from .markers import append_marker
from .metadata import PREPARING, PartitionKey, PendingOffset, TransactionMetadata, TxnState
from .partition_state import PartitionTxnRegistry

log = logging.getLogger(__name__)

TRANSACTIONS_TABLE = "transactions"
# Offsets a transaction's group coordinator staged on another broker than the transaction's
# (a cluster): JSON [transactional id, group id] -> {"pid": producer id, "offsets": [PendingOffset...]}
STAGED_TABLE = "txn_offsets"
MAX_EPOCH = 2**15 - 1
TV2 = 2  # transaction.version of KIP-890 part 2: the epoch is bumped at every EndTxn
EXPIRABLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
FINISH_WAIT_S = 30  # how long a coordinator that took ids over waits to serve them before leaving them to the next


# How the produce path reports what the coordinator answered its implicit AddPartitionsToTxn
_PRODUCE_ERRORS = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,  # the implicit add was not stored: retriable
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
}
COMPLETE_RETRY_MAX_S = 5.0  # the longest pause between tries to finish a transaction the store refused


def _unfinished(meta: TransactionMetadata) -> bool:
    """Decided but not finished: Prepare* stored, or a fence whose abort is not (its markers are owed)."""
    return meta.state in PREPARING or meta.state is TxnState.PREPARE_EPOCH_FENCE


async def _coordinates_every_id(txn_id: str) -> ErrorCode:
    return ErrorCode.none  # alone


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        store: storage.Store,
        producers: ProducerStates,
        groups: GroupCoordinator,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.store = store
        self.producers = producers
        self.groups = groups
        self.partitions = PartitionTxnRegistry(store)
        self.transactions: dict[str, TransactionMetadata] = {}
        self._locks: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)
        self._clock = clock
        self._sweeps: list[asyncio.Task[None]] = []
        # Set by a cluster whose store fences appends (kafkacompat/broker/cluster.py): the partition and
        # leader epoch a marker of a transactional id is fenced by; None: not fenced.
        self.marker_fence: Callable[[str], tuple[storage.Partition, int] | None] = lambda txn_id: None
        # Set by the same cluster: what a write of an id's state is fenced by (Cluster.coordinator_fence, as
        # the group coordinator's offset commits are); None: not fenced. Raises NotLeaderError once deposed.
        self.state_fence: Callable[[str], storage.StateFence | None] = lambda txn_id: None
        # Brokers of one cluster each coordinate the ids placed on the __consumer_offsets partitions they
        # lead (others answer NOT_COORDINATOR) and load them as they gain those partitions (take_over).
        self.owns: Callable[[str], bool] = lambda txn_id: True
        # NONE, or the retriable refusal of a request for an id this broker does not coordinate (yet):
        # in a cluster, Cluster.coordinator_error, which first waits out a hand-over to this broker
        self.coordinator_error: Callable[[str], Awaitable[ErrorCode]] = _coordinates_every_id
        self.owns_all = True
        # Set by a worker of `serve --workers N` (kafkacompat/workers/txn_forward.py): asks the worker that
        # coordinates the id whether a partition is in the producer's open transaction (True: join it first)
        self.verify_remotely: Callable[[str, int, int, PartitionKey, bool], Awaitable[ErrorCode]] | None = None
        # Set by a worker of `serve --workers N`: which partitions' markers it writes itself, and how the
        # others' owners are asked to write them (StorageError when one cannot be now: retried)
        self.leads: Callable[[PartitionKey], bool] = lambda key: True
        self.markers_elsewhere: Callable[[int, int, ControlType, list[PartitionKey]], Awaitable[None]] | None = None
        self._finishing: set[asyncio.Task[None]] = set()
        self._completing: set[int] = set()  # id() of each metadata a _keep_completing task finishes

    # lifetime -------------------------------------------------------------------
    async def start(self) -> None:
        """Load every transactional id (alone; in a cluster, take_over loads them as their partitions
        are gained); finish what a stop left between prepare and complete."""
        if self.owns_all:
            for meta in self._load(lambda txn_id: True):
                try:
                    await self._finish(meta)
                except storage.StorageError as exc:  # a full disk: the broker starts; the markers follow
                    self._complete_later(meta, exc)
        loop = asyncio.get_running_loop()
        self._sweeps = [
            loop.create_task(self._every(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                                         self.abort_timed_out), name="transaction timeouts"),
            loop.create_task(self._every(self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                                         self.remove_expired), name="transactional id expiration"),
        ]

    def _load(self, owned: Callable[[str], bool]) -> list[TransactionMetadata]:
        """Take the stored state of the ids `owned` selects; returns those left between prepare and complete."""
        stored = self.store.get_state(self.store.default_stream, TRANSACTIONS_TABLE)
        loaded = [TransactionMetadata.from_json(txn_id, data) for txn_id, data in stored.items() if owned(txn_id)]
        for meta in loaded:
            self.transactions[meta.transactional_id] = meta
        return [meta for meta in loaded if _unfinished(meta)]

    async def _finish(self, meta: TransactionMetadata) -> None:
        """Complete what the last coordinator (or this one before a stop) left half done."""
        async with self._locks[meta.transactional_id]:
            if self.transactions.get(meta.transactional_id) is not meta:
                return  # unloaded meanwhile: another broker coordinates it
            if meta.state in PREPARING:
                log.info("transaction %s was %s when its coordinator stopped: finishing it", meta.transactional_id,
                         meta.state.value)
                await self._complete(meta)
            elif meta.state is TxnState.PREPARE_EPOCH_FENCE:
                await self._abort_fenced(meta)

    async def take_over(self, owned: Callable[[str], bool], reload: bool = True) -> None:
        """This broker became the coordinator of the ids `owned` selects (it gained their
        __consumer_offsets partition): load what the last coordinator wrote before each of its
        answers, as Kafka's next coordinator loads __transaction_state. Prepare* states are
        completed as soon as this broker serves the partition (its markers are fenced by it); an
        Ongoing transaction goes on (its producer may still commit it here) or is aborted when its
        timeout, counted from its start, passes. The table is read afresh from the store, unless the
        caller did that a moment ago (`reload` False)."""
        self.unload(owned)  # whatever is in memory from an earlier term is stale
        if reload:
            await self.read_stored()
        unfinished = self._load(owned)
        log.info("took over the transactional ids of a partition, %d to finish", len(unfinished))
        if unfinished:
            task = asyncio.get_running_loop().create_task(self._finish_when_owned(unfinished))
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)

    async def read_stored(self) -> None:
        """Read the transactions' table afresh, as other brokers may have written it (StorageError: not read)."""
        await self.store.reload_state(self.store.default_stream, TRANSACTIONS_TABLE)

    async def _finish_when_owned(self, unfinished: list[TransactionMetadata]) -> None:
        """The partition is gained before it is served: finish each transaction once this broker
        coordinates its id, or give up on it when another broker does first. A try the store
        refuses is retried in the background: left in Prepare*, the id answered every EndTxn retry
        and InitProducerId CONCURRENT_TRANSACTIONS until its coordinator moved again."""
        deadline = asyncio.get_running_loop().time() + FINISH_WAIT_S
        while unfinished:
            for meta in list(unfinished):
                if self.transactions.get(meta.transactional_id) is not meta:
                    unfinished.remove(meta)
                elif self.owns(meta.transactional_id):
                    unfinished.remove(meta)
                    try:
                        await self._finish(meta)
                    except storage.NotLeaderError as exc:  # deposed again: the next coordinator finishes it
                        log.warning("cannot finish transaction %s: %s", meta.transactional_id, exc)
                    except storage.StorageError as exc:  # the store is away: retried, as after an EndTxn
                        self._complete_later(meta, exc)
            if unfinished:
                if asyncio.get_running_loop().time() > deadline:
                    log.warning("%d transaction(s) taken over were never served here; the next coordinator "
                                "finishes them", len(unfinished))
                    return
                await asyncio.sleep(0.05)

    def unload(self, owned: Callable[[str], bool]) -> None:
        """Forget the ids `owned` selects: another broker coordinates them now."""
        for txn_id in [t for t in self.transactions if owned(t)]:
            del self.transactions[txn_id]

    async def close(self) -> None:
        for task in self._finishing:
            task.cancel()
        for task in self._sweeps:
            task.cancel()
        for task in self._sweeps:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._sweeps = []

    async def forget_all(self) -> None:
        """Delete every transactional id (the test broker's reset)."""
        gone = {txn_id: None for txn_id in self.store.get_state(self.store.default_stream, TRANSACTIONS_TABLE)}
        if gone:
            await self.store.put_state(self.store.default_stream, TRANSACTIONS_TABLE, gone)
        self.transactions.clear()

    async def _persist(self, meta: TransactionMetadata, durable: bool = True) -> None:
        """Store the transition; one the store refuses is not made (`meta` goes back to what the store
        holds), as Kafka's coordinator applies a transition only once its log append succeeded. In a
        cluster the write is fenced by the id's __consumer_offsets partition (`state_fence`): a deposed
        coordinator's late transition is refused, NotLeaderError, instead of landing after its
        successor loaded the id and leaving the two disagreeing (an AddPartitionsToTxn stored by the old
        one, unseen by the new, could make the producer's commit INVALID_TXN_STATE there)."""
        meta.update_ms = self._clock()
        try:
            await self.store.put_state(
                self.store.default_stream, TRANSACTIONS_TABLE, {meta.transactional_id: meta.to_json()}, durable=durable,
                fence=self.state_fence(meta.transactional_id),
            )
        except storage.StorageError as exc:
            self._restore(meta)
            if _unfinished(meta):
                # what the store holds is decided: this write (or an earlier one) was stored though its
                # writer was told it failed (a session ended after the commit). Nothing else would finish it.
                self._complete_later(meta, exc)
            raise

    def _restore(self, meta: TransactionMetadata) -> None:
        stored = self.store.get_state(self.store.default_stream, TRANSACTIONS_TABLE).get(meta.transactional_id)
        if stored is None:  # never stored: the id is unknown again
            if self.transactions.get(meta.transactional_id) is meta:
                del self.transactions[meta.transactional_id]
            return
        kept = TransactionMetadata.from_json(meta.transactional_id, stored)
        for field in dataclasses.fields(meta):
            setattr(meta, field.name, getattr(kept, field.name))

    @staticmethod
    def _refused(txn_id: str, exc: storage.StorageError) -> ErrorCode:
        """The answer to a request whose write the store refused: NOT_COORDINATOR, as Kafka's
        coordinator answers a failed append to __transaction_state (the client finds the
        coordinator again and retries)."""
        if isinstance(exc, storage.NotLeaderError):  # deposed: the next coordinator goes on
            log.info("transactional id %s: %s", txn_id, exc)
        else:  # the cause was logged by the store (a warning, at most one line per 10 s of an outage)
            log.info("transactional id %s: state not written, answering NOT_COORDINATOR", txn_id)
        return ErrorCode.not_coordinator

    # InitProducerId -----------------------------------------------------------
    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): a new epoch fences every older producer of this id."""
        try:
            return await self._init_producer_id(txn_id, timeout_ms, producer_id, producer_epoch)
        except storage.StorageError as exc:  # deposed, or the store is away, while aborting or bumping
            return self._refused(txn_id, exc), -1, -1

    async def _init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        if not txn_id:
            return ErrorCode.invalid_request, -1, -1
        refused = await self.coordinator_error(txn_id)
        if refused is not ErrorCode.none:
            return refused, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        async with self._locks[txn_id]:
            meta = self.transactions.get(txn_id)
            if meta is None:
                meta = TransactionMetadata(txn_id, self.producers.new_producer_id(), -1, timeout_ms)
                self.transactions[txn_id] = meta
            elif producer_id >= 0 and not self._same_producer(meta, producer_id, producer_epoch):
                return ErrorCode.producer_fenced, -1, -1
            if _unfinished(meta):
                return ErrorCode.concurrent_transactions, -1, -1
            if meta.state is TxnState.ONGOING:
                # Fence the open transaction's producer and abort it; the client retries.
                await self._abort_fenced(meta)
                return ErrorCode.concurrent_transactions, -1, -1
            if producer_id >= 0 and producer_epoch == meta.last_producer_epoch and producer_epoch >= 0 \
                    and producer_id == meta.producer_id and meta.producer_epoch == producer_epoch + 1:
                return ErrorCode.none, meta.producer_id, meta.producer_epoch  # a retried bump
            self._bump_epoch(meta)
            meta.timeout_ms = timeout_ms
            meta.state = TxnState.EMPTY
            meta.partitions.clear()
            meta.groups.clear()
            meta.offsets.clear()
            meta.start_ms = -1
            await self._persist(meta)
            return ErrorCode.none, meta.producer_id, meta.producer_epoch

    @staticmethod
    def _same_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """KIP-360: a producer asking to bump its epoch must hold the current (or just bumped) one."""
        return producer_id == meta.producer_id and epoch in (meta.producer_epoch, meta.last_producer_epoch)

    def _bump_epoch(self, meta: TransactionMetadata) -> None:
        if meta.producer_epoch >= MAX_EPOCH - 1:
            meta.producer_id = self.producers.new_producer_id()
            meta.last_producer_epoch = -1
            meta.producer_epoch = 0
        else:
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1

    # checks shared by the transactional APIs ------------------------------------
    def _check_producer(self, txn_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if epoch != meta.producer_epoch:
            return ErrorCode.producer_fenced, None
        if _unfinished(meta):
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, meta

    def _begin(self, meta: TransactionMetadata, client_version: int) -> None:
        meta.client_version = client_version
        if meta.state is not TxnState.ONGOING:
            meta.state = TxnState.ONGOING
            meta.start_ms = self._clock()
            meta.partitions.clear()
            meta.groups.clear()
            meta.offsets.clear()

    # AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------
    async def add_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Sequence[PartitionKey], client_version: int = 0
    ) -> ErrorCode:
        """Add partitions to the open transaction, opening one if none is (client_version 2: a Produce v12)."""
        return await self._add(txn_id, producer_id, epoch, client_version,
                               lambda meta: all(p in meta.partitions for p in partitions),
                               lambda meta: meta.partitions.update(partitions))

    async def _add(
        self, txn_id: str, producer_id: int, epoch: int, client_version: int,
        present: Callable[[TransactionMetadata], bool], add: Callable[[TransactionMetadata], None],
    ) -> ErrorCode:
        """What AddPartitionsToTxn and AddOffsetsToTxn share: `add` to the open transaction (opening
        one if none is) and persist it, unless it is ongoing and `present` says nothing is new."""
        refused = await self.coordinator_error(txn_id)
        if refused is not ErrorCode.none:
            return refused
        async with self._locks[txn_id]:
            error, meta = self._check_producer(txn_id, producer_id, epoch)
            if meta is None:
                return error
            if meta.state is TxnState.ONGOING and present(meta):
                return ErrorCode.none
            self._begin(meta, client_version)
            add(meta)
            try:
                await self._persist(meta)
            except storage.StorageError as exc:
                return self._refused(txn_id, exc)
            return ErrorCode.none

    def verify_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Sequence[PartitionKey]
    ) -> dict[PartitionKey, ErrorCode]:
        """AddPartitionsToTxn's verify_only form: which partitions are in the open transaction."""
        error, meta = self._check_producer(txn_id, producer_id, epoch)
        if meta is None:
            return {p: error for p in partitions}
        ongoing = meta.state is TxnState.ONGOING
        return {p: ErrorCode.none if ongoing and p in meta.partitions else ErrorCode.invalid_txn_state
                for p in partitions}

    def _known(self, txn_id: str) -> TransactionMetadata | None:
        """The id's metadata: this coordinator's own, or for an id another broker of the cluster
        coordinates, what that one last wrote before answering (a partition's leader verifies a
        transactional batch against it, where Kafka's asks the coordinator)."""
        if self.owns(txn_id):
            return self.transactions.get(txn_id)
        data = self.store.get_state(self.store.default_stream, TRANSACTIONS_TABLE).get(txn_id)
        return None if data is None else TransactionMetadata.from_json(txn_id, data)

    def verify_produce(self, txn_id: str, producer_id: int, epoch: int, partition: PartitionKey) -> ErrorCode:
        """A transactional batch may be appended only inside its open transaction (KIP-890 part 1)."""
        meta = self._known(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < meta.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if epoch != meta.producer_epoch or meta.state is not TxnState.ONGOING or partition not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    async def admit_produce(
        self, txn_id: str, producer_id: int, epoch: int, partition: PartitionKey, implicit_add: bool
    ) -> ErrorCode:
        """May a transactional batch be appended? With KIP-890 part 2 (Produce v12+) its partition joins the
        transaction here, as Kafka's broker adds it through AddPartitionsToTxn before appending.

        Errors are the ones Kafka's produce path answers: a stale epoch is
        INVALID_PRODUCER_EPOCH, and a transaction still completing is the
        retriable NOT_ENOUGH_REPLICAS (also when the store cannot be read or written now).
        """
        try:
            return await self._admit_produce(txn_id, producer_id, epoch, partition, implicit_add)
        except storage.StorageError as exc:
            return _PRODUCE_ERRORS[self._refused(txn_id, exc)]

    async def _admit_produce(
        self, txn_id: str, producer_id: int, epoch: int, partition: PartitionKey, implicit_add: bool
    ) -> ErrorCode:
        if not self.owns(txn_id) and self.verify_remotely is not None:
            return await self._verified_remotely(txn_id, producer_id, epoch, partition, implicit_add)
        if not self.owns(txn_id):  # the coordinator is another broker: as it last wrote, read afresh if need be
            error = self.verify_produce(txn_id, producer_id, epoch, partition)
            if error != ErrorCode.none:  # its AddPartitionsToTxn may not have reached this broker's view yet
                await self.store.reload_state(self.store.default_stream, TRANSACTIONS_TABLE)
                error = self.verify_produce(txn_id, producer_id, epoch, partition)
            return error
        meta = self.transactions.get(txn_id)
        if (not implicit_add or (meta is not None and meta.producer_id == producer_id
                                 and meta.producer_epoch == epoch and meta.state is TxnState.ONGOING
                                 and partition in meta.partitions)):
            return self.verify_produce(txn_id, producer_id, epoch, partition)
        error = await self.add_partitions(txn_id, producer_id, epoch, [partition], TV2)
        return _PRODUCE_ERRORS.get(error, error)

    async def _verified_remotely(
        self, txn_id: str, producer_id: int, epoch: int, partition: PartitionKey, implicit_add: bool
    ) -> ErrorCode:
        """As Kafka's partition leader (KIP-890 part 1): a producer's first transactional write to the
        partition in a transaction is verified with the coordinator; once its transaction is open here
        (until the marker), its later batches of that epoch are not."""
        state = await self.partitions.get(*partition)
        if (state.first_offset_of(producer_id) is not None
                and self.producers.epoch_of(producer_id, partition) == epoch):
            return ErrorCode.none
        assert self.verify_remotely is not None
        error = await self.verify_remotely(txn_id, producer_id, epoch, partition, implicit_add)
        return _PRODUCE_ERRORS.get(error, error)

    async def add_offsets(
        self, txn_id: str, producer_id: int, epoch: int, group_id: str, client_version: int = 0
    ) -> ErrorCode:
        """Add a group's offsets to the transaction (AddOffsetsToTxn, or implicitly TxnOffsetCommit v5)."""
        return await self._add(txn_id, producer_id, epoch, client_version,
                               lambda meta: group_id in meta.groups, lambda meta: meta.groups.add(group_id))

    # TxnOffsetCommit ----------------------------------------------------------
    async def stage_offsets(
        self, txn_id: str, producer_id: int, epoch: int, group_id: str, offsets: Sequence[PendingOffset]
    ) -> ErrorCode:
        """Keep offsets with the transaction: they become the group's at commit, vanish at abort.

        TxnOffsetCommit reaches the group's coordinator, which in a cluster may be another
        broker than the transaction's: it checks the transaction as that one last wrote it and
        stages the offsets in the store, where the transaction's coordinator takes them at its end."""
        if not self.owns(txn_id):
            try:
                return await self._stage_elsewhere(txn_id, producer_id, epoch, group_id, offsets)
            except storage.StorageError as exc:
                return self._refused(txn_id, exc)
        async with self._locks[txn_id]:
            meta = self.transactions.get(txn_id)
            if meta is None or meta.producer_id != producer_id:
                return ErrorCode.invalid_producer_id_mapping
            if epoch != meta.producer_epoch:
                return ErrorCode.producer_fenced
            if meta.state is not TxnState.ONGOING or group_id not in meta.groups:
                return ErrorCode.invalid_txn_state
            table = meta.offsets.setdefault(group_id, {})
            for row in offsets:
                table[row[0], row[1], row[2]] = row
            try:
                await self._persist(meta)
            except storage.StorageError as exc:
                return self._refused(txn_id, exc)
            return ErrorCode.none

    async def _stage_elsewhere(
        self, txn_id: str, producer_id: int, epoch: int, group_id: str, offsets: Sequence[PendingOffset]
    ) -> ErrorCode:
        for attempt in range(2):  # the second after reading the transaction afresh
            meta = self._known(txn_id)
            if meta is None or meta.producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif epoch != meta.producer_epoch:
                error = ErrorCode.producer_fenced
            elif meta.state is not TxnState.ONGOING or group_id not in meta.groups:
                error = ErrorCode.invalid_txn_state
            else:
                error = ErrorCode.none
            if error == ErrorCode.none or attempt:
                break
            await self.store.reload_state(self.store.default_stream, TRANSACTIONS_TABLE)
        if error != ErrorCode.none:
            return error
        async with self._locks[txn_id]:
            key = json.dumps([txn_id, group_id])
            await self.store.reload_state(self.store.default_stream, STAGED_TABLE)
            staged = self.store.get_state(self.store.default_stream, STAGED_TABLE).get(key)
            rows = {tuple(r[:3]): list(r) for r in staged["offsets"]} if staged and staged["pid"] == producer_id else {}
            rows.update({tuple(r[:3]): list(r) for r in offsets})
            await self.store.put_state(self.store.default_stream, STAGED_TABLE,
                                       {key: {"pid": producer_id, "offsets": list(rows.values())}})
        return ErrorCode.none

    async def _take_staged(self, meta: TransactionMetadata) -> list[str]:
        """Offsets of this transaction that its groups' coordinators staged on other brokers: into the
        transaction (kept at commit, dropped at abort); the keys to delete once it has ended."""
        if self.owns_all:
            return []
        await self.store.reload_state(self.store.default_stream, STAGED_TABLE)
        taken = []
        for key, rec in self.store.get_state(self.store.default_stream, STAGED_TABLE).items():
            txn_id, group_id = json.loads(key)
            if txn_id != meta.transactional_id:
                continue
            taken.append(key)
            if rec["pid"] in (meta.producer_id, meta.prev_producer_id):
                table = meta.offsets.setdefault(group_id, {})
                for r in rec["offsets"]:
                    table[r[0], r[1], r[2]] = (r[0], r[1], r[2], r[3], r[4], r[5])
        return taken

    def pending_offsets(self, group_id: str) -> set[tuple[str, str, int]]:
        """(stream, topic, partition) with offsets of an open transaction (OffsetFetch require_stable)."""
        pending: set[tuple[str, str, int]] = set()
        for meta in self.transactions.values():
            if meta.state is not TxnState.EMPTY:
                pending.update(meta.offsets.get(group_id, {}))
        for key, rec in self.store.get_state(self.store.default_stream, STAGED_TABLE).items():
            if json.loads(key)[1] == group_id:
                pending.update((r[0], r[1], r[2]) for r in rec["offsets"])
        return pending

    # EndTxn ---------------------------------------------------------------------
    async def end_txn(
        self, txn_id: str, producer_id: int, epoch: int, commit: bool, client_version: int = 0
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): commit or abort. From EndTxn v5 (client_version 2) the epoch is bumped
        and the new producer id and epoch are answered, as Kafka's KIP-890 part 2. A coordinator deposed
        while writing the markers answers NOT_COORDINATOR: the client finds the next one, which finishes
        the transaction from its Prepare* state and answers the retried EndTxn."""
        try:
            return await self._end_txn(txn_id, producer_id, epoch, commit, client_version)
        except storage.StorageError as exc:
            return self._refused(txn_id, exc), -1, -1

    async def _end_txn(
        self, txn_id: str, producer_id: int, epoch: int, commit: bool, client_version: int
    ) -> tuple[ErrorCode, int, int]:
        refused = await self.coordinator_error(txn_id)
        if refused is not ErrorCode.none:
            return refused, -1, -1
        async with self._locks[txn_id]:
            if client_version >= TV2:
                return await self._end_txn_v2(txn_id, producer_id, epoch, commit)
            meta = self.transactions.get(txn_id)
            if meta is None or meta.producer_id != producer_id:
                return ErrorCode.invalid_producer_id_mapping, -1, -1
            if epoch != meta.producer_epoch:
                return ErrorCode.producer_fenced, -1, -1
            wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if meta.state is wanted:
                return ErrorCode.none, meta.producer_id, meta.producer_epoch  # a retry of the EndTxn that finished it
            if _unfinished(meta):
                # A retry while it is being finished, or the next transaction's end (an abort) while the last
                # one's markers are still owed: Kafka's coordinator answers any EndTxn while its transition to
                # Complete* is pending so (TransactionCoordinator.endTransaction). INVALID_TXN_STATE here was
                # fatal to the producer whose commit the store's outage held in PrepareCommit.
                return ErrorCode.concurrent_transactions, -1, -1
            if meta.state is not TxnState.ONGOING:
                return self._invalid_end(meta, commit), -1, -1
            meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            await self._persist(meta)
            await self._complete_or_later(meta)
            return ErrorCode.none, meta.producer_id, meta.producer_epoch

    async def _end_txn_v2(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> tuple[ErrorCode, int, int]:
        """Kafka's TV2 EndTxn: the request's epoch is the one before the bump when it is a retry.

        An abort is allowed with no transaction open (it still bumps the
        epoch); a commit then is INVALID_TXN_STATE. A retry of the EndTxn
        that finished the transaction is answered with the bumped epoch.
        """
        meta = self.transactions.get(txn_id)
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping, -1, -1
        retry_on_overflow = (meta.prev_producer_id == producer_id and epoch == MAX_EPOCH - 1
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == epoch + 1
        complete = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        if meta.state in PREPARING:
            valid = retry_on_bump
        elif meta.state in complete:
            valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        else:
            valid = epoch == meta.producer_epoch
        retry = retry_on_bump or retry_on_overflow
        if meta.producer_id != producer_id and not retry_on_overflow:
            return ErrorCode.invalid_producer_id_mapping, -1, -1
        if not valid:
            return ErrorCode.producer_fenced, -1, -1
        if _unfinished(meta):
            return ErrorCode.concurrent_transactions, -1, -1
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state in complete and retry:
            if meta.state is finished:
                return ErrorCode.none, meta.producer_id, meta.producer_epoch
            return self._invalid_end(meta, commit), -1, -1
        if commit and meta.state is not TxnState.ONGOING:
            return self._invalid_end(meta, commit), -1, -1
        if meta.state is not TxnState.ONGOING:  # an abort with nothing open: still a new epoch
            meta.start_ms = self._clock()
            meta.partitions.clear()
            meta.groups.clear()
            meta.offsets.clear()
        if meta.producer_epoch >= MAX_EPOCH - 1:  # exhausted: the markers take the last epoch, then a new id
            meta.next_producer_id = self.producers.new_producer_id()
        meta.last_producer_epoch = meta.producer_epoch
        meta.producer_epoch += 1
        meta.client_version = TV2
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        await self._persist(meta)
        await self._complete_or_later(meta)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    @staticmethod
    def _invalid_end(meta: TransactionMetadata, commit: bool) -> ErrorCode:
        """INVALID_TXN_STATE, logged, as Kafka answers it: the client takes it as fatal. The fault
        campaign's cases are aborts of a transaction this coordinator never saw open (state CompleteCommit
        or Empty): librdkafka sends EndTxn once an AddPartitionsToTxn is sent, even while a paused
        broker or a database outage still holds it unanswered (librdkafka#4849)."""
        log.info("transactional id %s: EndTxn %s in state %s (producer %d, epoch %d): INVALID_TXN_STATE",
                 meta.transactional_id, "commit" if commit else "abort", meta.state.value, meta.producer_id,
                 meta.producer_epoch)
        return ErrorCode.invalid_txn_state

    async def _complete_or_later(self, meta: TransactionMetadata) -> None:
        """Finish a transaction whose Prepare* is stored. Once it is, the outcome is decided: a
        failure to write the markers or the outcome (the store is away) does not undo it, and the
        EndTxn is answered; the coordinator keeps trying in the background, as Kafka's marker
        channel retries, and a retried EndTxn meanwhile is answered CONCURRENT_TRANSACTIONS."""
        try:
            await self._complete(meta)
        except storage.NotLeaderError:
            raise  # deposed: the next coordinator finishes it from its Prepare*
        except storage.StorageError as exc:
            self._complete_later(meta, exc)

    def _complete_later(self, meta: TransactionMetadata, exc: storage.StorageError) -> None:
        """Finish `meta` in the background, unless a task already does (one per metadata object: a
        take-over's fresh object for the id gets its own)."""
        if id(meta) in self._completing:
            return
        log.warning("transaction %s is decided but not yet finished (%s); retrying in the background",
                    meta.transactional_id, exc)
        self._completing.add(id(meta))
        task = asyncio.get_running_loop().create_task(self._keep_completing(meta))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)
        task.add_done_callback(lambda _: self._completing.discard(id(meta)))

    async def _keep_completing(self, meta: TransactionMetadata) -> None:
        pause = 0.1
        while True:
            await asyncio.sleep(pause)
            pause = min(pause * 2, COMPLETE_RETRY_MAX_S)
            txn_id = meta.transactional_id
            if self.transactions.get(txn_id) is not meta or not self.owns(txn_id):
                return  # let go of: the next coordinator finishes it
            async with self._locks[txn_id]:
                if not _unfinished(meta):
                    return
                try:
                    if meta.state is TxnState.PREPARE_EPOCH_FENCE:  # fenced, its abort not stored yet
                        meta.state = TxnState.PREPARE_ABORT
                        await self._persist(meta)
                    await self._complete(meta)
                    log.info("transaction %s finished after the store came back", txn_id)
                    return
                except storage.NotLeaderError:
                    return
                except storage.StorageError as exc:
                    log.warning("transaction %s still not finished: %s", txn_id, exc)

    async def _complete(self, meta: TransactionMetadata) -> None:
        """Write the markers, settle the offsets and record the outcome (from Prepare*)."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        control = ControlType.COMMIT if commit else ControlType.ABORT
        await self._write_markers(meta, control)
        staged = await self._take_staged(meta)
        if commit:
            for group_id, table in meta.offsets.items():
                cursors = [(s, storage.Cursor(t, p, o, e, m)) for s, t, p, o, e, m in table.values()]
                if cursors:
                    await self.groups.commit(group_id, cursors, coordinated_by=meta.transactional_id)
        if staged:  # after they are the group's: a coordinator dying before finds them again
            await self.store.put_state(self.store.default_stream, STAGED_TABLE, dict.fromkeys(staged))
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.next_producer_id >= 0:  # the epoch overflowed at this EndTxn v5
            meta.prev_producer_id, meta.producer_id = meta.producer_id, meta.next_producer_id
            meta.producer_epoch, meta.next_producer_id = 0, -1
        meta.partitions.clear()
        meta.groups.clear()
        meta.offsets.clear()
        meta.start_ms = -1
        # Not waited for: lost in a crash, the start finds Prepare* and writes the markers again.
        await self._persist(meta, durable=False)
        log.debug("transaction %s %s (transactions v%d)", meta.transactional_id, "committed" if commit else "aborted",
                  2 if meta.client_version >= TV2 else 1)

    async def _write_markers(self, meta: TransactionMetadata, control: ControlType) -> None:
        timestamp = self._clock()
        durable = []
        guard, epoch = self.marker_fence(meta.transactional_id) or (None, None)
        elsewhere: set[PartitionKey] = set()
        if self.markers_elsewhere is not None:  # their owners write them, as Kafka's leaders do
            elsewhere = {key for key in meta.partitions if not self.leads(key)}
            if elsewhere:  # first: an owner away (restarting) fails this try before any marker is written
                # here, so the retry (_complete_later) does not append this broker's markers a second time
                await self.markers_elsewhere(meta.producer_id, meta.producer_epoch, control, sorted(elsewhere))
        for stream, topic, index in sorted(meta.partitions):
            if self.store.get_topic(stream, topic) is None or (stream, topic, index) in elsewhere:
                continue  # deleted meanwhile: nothing left to mark; or written by its owner
            refusal = self.producers.marker_refusal(meta.producer_id, meta.producer_epoch, (stream, topic, index),
                                                    COORDINATOR_EPOCH)
            if refusal != ErrorCode.none:
                # An operator's WriteTxnMarkers wrote a marker of a newer epoch there, and the leader refuses
                # this one. Kafka's coordinator then stops sending markers and leaves the transaction in
                # Prepare* until its __transaction_state partition is loaded again (where it is refused
                # again); this one ends it without the marker there, so its producer id is not stuck.
                log.info("transaction %s: no marker in %s:%s/%d (%s)", meta.transactional_id, stream, topic, index,
                         refusal.name)
                continue
            durable.append(await append_marker(
                self.partitions, self.producers, (stream, topic, index), meta.producer_id, meta.producer_epoch,
                control, COORDINATOR_EPOCH, timestamp, leader_epoch=epoch, fenced_by=guard))
        await asyncio.gather(*durable)

    async def _abort_fenced(self, meta: TransactionMetadata) -> None:
        """Bump the epoch (fencing the producer) and abort its open transaction.

        One bump, at transaction.version 2 too (as Kafka 4.1 does): the
        markers carry it, and a v2 producer's late EndTxn with the epoch
        before it reads as a retry of an abort, so a commit is answered
        INVALID_TXN_STATE rather than PRODUCER_FENCED.
        """
        meta.state = TxnState.PREPARE_EPOCH_FENCE
        self._bump_epoch(meta)
        await self._persist(meta)
        meta.state = TxnState.PREPARE_ABORT
        try:
            await self._persist(meta)
        except storage.NotLeaderError:
            raise
        except storage.StorageError as exc:  # the producer is fenced (stored); the abort follows
            self._complete_later(meta, exc)
            return
        await self._complete_or_later(meta)

    # timeouts -------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort (fencing their producers) transactions open longer than their timeout."""
        now = self._clock()
        aborted = 0
        for meta in list(self.transactions.values()):
            if meta.state is not TxnState.ONGOING or now - meta.start_ms < meta.timeout_ms \
                    or not self.owns(meta.transactional_id):
                continue
            async with self._locks[meta.transactional_id]:
                if meta.state is TxnState.ONGOING and now - meta.start_ms >= meta.timeout_ms:
                    log.info("transaction %s timed out after %d ms: aborting it", meta.transactional_id,
                             now - meta.start_ms)
                    await self._abort_fenced(meta)
                    aborted += 1
        return aborted

    async def remove_expired(self) -> int:
        """Forget transactional ids idle past transactional.id.expiration.ms with nothing open.

        Only ids whose last transaction is finished (Empty, CompleteCommit,
        CompleteAbort) expire, as on Kafka: an open or preparing one is
        first aborted by its timeout, which counts as an update.

        In a cluster a deletion is fenced as the id's other writes are
        (`state_fence`): a coordinator deposed but not yet told still holds
        the id as it last saw it, idle, while its successor has loaded it and
        may have written it since; unfenced, its sweep deleted the successor's
        row. An id whose coordinator moved is left to the successor's sweep.

        Each id's lock is held until its deletion is stored, and only then is
        it forgotten here: an InitProducerId for it meanwhile waits, and then
        starts it afresh. Forgotten before the write, the id was made again
        and stored by such a request, and the sweep's late deletion removed
        that row (a producer in a transaction the store no longer knew, so
        the next coordinator would never end it); and a store that refused
        the deletion left the id stored but forgotten here.
        """
        cutoff = self._clock() - self.config.transactional_id_expiration_ms
        by_fence: dict[storage.StateFence | None, list[TransactionMetadata]] = collections.defaultdict(list)
        async with contextlib.AsyncExitStack() as held:
            for meta in list(self.transactions.values()):
                if meta.state not in EXPIRABLE or meta.update_ms > cutoff:
                    continue
                lock = self._locks[meta.transactional_id]
                await lock.acquire()
                if self.transactions.get(meta.transactional_id) is not meta or meta.state not in EXPIRABLE \
                        or meta.update_ms > cutoff:
                    lock.release()
                    continue
                try:
                    fence = self.state_fence(meta.transactional_id)
                except storage.NotLeaderError:
                    lock.release()
                    continue  # its coordinator moved: the successor expires it
                held.callback(lock.release)
                by_fence[fence].append(meta)
            return await self._delete_expired(by_fence)

    async def _delete_expired(self, by_fence: dict[storage.StateFence | None, list[TransactionMetadata]]) -> int:
        """Store the deletions, each group under its fence; forget here the ids whose deletion was stored."""
        expired = 0
        for fence, metas in by_fence.items():
            try:
                await self.store.put_state(self.store.default_stream, TRANSACTIONS_TABLE,
                                           dict.fromkeys(meta.transactional_id for meta in metas), fence=fence)
            except storage.NotLeaderError:  # deposed meanwhile: the ids stay where the store has them
                log.info("%d expired transactional id(s) not removed here: their coordinator moved", len(metas))
                continue
            for meta in metas:
                if self.transactions.get(meta.transactional_id) is meta:  # not let go of meanwhile
                    del self.transactions[meta.transactional_id]
            expired += len(metas)
        if expired:
            log.info("removed %d expired transactional ids", expired)
        return expired

    @staticmethod
    async def _every(interval_ms: int, sweep: Callable[[], Awaitable[int]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await sweep()
            except storage.StorageError as exc:  # the store is away (logged there): the next run tries again
                log.warning("transaction sweep %s stopped: %s", sweep.__name__, exc)
            except Exception:  # noqa: BLE001 - keep sweeping; the next run may succeed
                log.exception("transaction sweep %s failed", sweep.__name__)

    # admin ------------------------------------------------------------------------
    def describe(self, txn_id: str) -> TransactionMetadata | None:
        return self.transactions.get(txn_id)

    def list(
        self, states: Sequence[str], producer_ids: Sequence[int], min_duration_ms: int, pattern: str | None
    ) -> list[TransactionMetadata]:
        now = self._clock()
        regex = re.compile(pattern) if pattern else None
        found = []
        for meta in self.transactions.values():
            if states and meta.state.value not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state is not TxnState.ONGOING or now - meta.start_ms < min_duration_ms):
                continue
            if regex is not None and not regex.fullmatch(meta.transactional_id):
                continue
            found.append(meta)
        return found
