"""The REST proxy's idempotent producer: one producer id, a sequence per partition.

Confluent's REST Proxy produces through a KafkaProducer, idempotent by
default since Kafka 3.0; so does this proxy. InitProducerId gives it a
producer id and epoch once; every batch carries the partition's next
sequence, so the broker's idempotence rules (the same ProducerStates the
Kafka port keeps) check REST writes as they check any producer's. Batches
to one partition are sent one request at a time (a lock per partition),
as a producer with max.in.flight=1 would. When the broker no longer knows
the producer or its sequence (expiry, a restart), a new producer id is
taken and the records are sent again under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Iterable

from kio.schema.errors import ErrorCode

from ..broker.cluster import Cluster
from .kafka_calls import build, call
from .rest_errors import check

INIT_PRODUCER_ID = 22
PartitionKey = tuple[str, str, int]  # stream, topic, partition: what the broker keys producer state by
RESET_ON = {ErrorCode.out_of_order_sequence_number.value, ErrorCode.unknown_producer_id.value,
            ErrorCode.invalid_producer_epoch.value, ErrorCode.producer_fenced.value}


class IdempotentProducer:
    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._sequences: dict[PartitionKey, int] = {}
        self._locks: dict[PartitionKey, asyncio.Lock] = {}
        self._init = asyncio.Lock()

    async def ensure(self, cluster: Cluster) -> None:
        """A producer id and epoch from the broker, taken once (again after `reset`)."""
        async with self._init:
            if self.producer_id >= 0:
                return
            answer = await call(cluster, INIT_PRODUCER_ID, build(
                INIT_PRODUCER_ID, transactional_id=None, transaction_timeout=datetime.timedelta(minutes=1),
                producer_id=-1, producer_epoch=-1))
            check(answer.error_code)
            self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
            self._sequences.clear()

    def reset(self, producer_id: int) -> None:
        """Forget the producer id the broker refused (once: concurrent refusals of it reset nothing more)."""
        if producer_id == self.producer_id:
            self.producer_id, self.epoch = -1, -1

    @contextlib.asynccontextmanager
    async def partitions(self, keys: Iterable[PartitionKey]) -> AsyncIterator[None]:
        """Hold the partitions' locks (in one order, so two requests never wait on each other)."""
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                await stack.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            yield

    def next_sequence(self, key: PartitionKey) -> int:
        return self._sequences.get(key, 0)

    def advance(self, key: PartitionKey, count: int) -> None:
        """Records written: the partition's next sequence moves past them (wrapping as Kafka's does)."""
        self._sequences[key] = (self._sequences.get(key, 0) + count) % (2**31)
