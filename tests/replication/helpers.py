"""Several brokers as separate clusters, and what a test compares between them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafkacompat.admin.client import AdminClient
from kafkacompat.replication.receiver import split_batches
from kafkacompat.testing import Broker


def admin(broker: Broker) -> AdminClient:
    return AdminClient(broker.bootstrap_servers, timeout=30)


def replica(broker: Broker, path: str) -> str:
    return f"127.0.0.1:{broker.port}{path}"


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `check` until it returns something true; TimeoutError naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} not reached within {timeout}s (last: {value!r})")


def batches(broker: Broker, stream: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    """(base offset, bytes but partitionLeaderEpoch) of every stored batch of a partition."""

    async def read() -> list[tuple[int, bytes]]:
        part = broker.server.store.partition(stream, topic, partition)
        out = []
        offset = part.log_start_offset
        while offset < part.high_watermark:
            found = split_batches(await part.read(offset, 1 << 20))
            for base, batch in found:
                data = bytes(batch)
                out.append((base, data[:12] + data[16:]))
                offset = base + int.from_bytes(data[23:27], "big", signed=True) + 1
        return out

    return broker.call(read())


def end_offset(broker: Broker, stream: str, topic: str, partition: int = 0) -> int:
    store = broker.server.store
    if store.get_topic(stream, topic) is None:
        return -1
    return store.partition(stream, topic, partition).high_watermark


def link_state(broker: Broker, path: str) -> list[dict[str, Any]]:
    return admin(broker).call("replica.list", path=path)


def values(broker: Broker, name: str, partition: int | None = None) -> list[tuple[int, bytes | None]]:
    return [(m.offset, m.value) for m in broker.consume(name, partition=partition)]
