"""A real broker inside the test process, on an ephemeral loopback port.

    with Broker() as broker:            # sync tests: the broker runs on a thread
        broker.create_topic("orders", partitions=3)
        Producer({"bootstrap.servers": broker.bootstrap_servers}) ...
        assert [m.value for m in broker.consume("orders", count=1)] == [b"paid"]

    async with Broker() as broker:      # asyncio tests: on the running loop
        await broker.aproduce("orders", b"paid", key=b"42")

Every helper has a sync form (for a broker on its thread, from any thread
but the broker's) and an `a`-prefixed coroutine form (from any event loop).
`broker.faults` injects errors, delays and dropped connections that every
client sees on the wire.

The broker and its lifetime are in broker.py, what its helpers do on the
store in store_access.py; this package's names stay importable from here.
"""

from .broker import STOP_TIMEOUT, Broker
from .certificates import CertificateAuthority
from .services import cloud_store, test_store_engine
from .store_access import Data, Headers, Message

__all__ = [
    "STOP_TIMEOUT", "Broker", "CertificateAuthority", "Data", "Headers", "Message", "cloud_store",
    "test_store_engine",
]
