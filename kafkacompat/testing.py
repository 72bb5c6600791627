"""A real broker inside the test process, on an ephemeral loopback port.

    with Broker() as broker:            # sync tests: the broker runs on a thread
        Producer({"bootstrap.servers": broker.bootstrap_servers})
    async with Broker() as broker:      # asyncio tests: on the running loop
        ...
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import tempfile
import threading
from typing import Any

from storage import Store

from .config import BrokerConfig
from .server import BrokerServer


class Broker:
    def __init__(self, data_dir: str | None = None, store: Store | None = None, **settings: Any) -> None:
        """`data_dir=None` keeps data in memory; "tmp" uses a fresh temporary directory.

        `store` runs the broker on a store built by the test (e.g. with volume
        caps or a fast retention pass); the broker opens and closes it.
        """
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir == "tmp":
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkacompat-")
            data_dir = self._tmp.name
        settings.setdefault("host", "127.0.0.1")
        settings.setdefault("port", 0)
        self.config = BrokerConfig(data_dir=data_dir or "memory://", **settings)
        self.server = BrokerServer(self.config, store)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    # asyncio use: the broker runs on the caller's loop
    async def __aenter__(self) -> "Broker":
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()
        self._cleanup()

    # sync use: the broker runs on a loop of its own thread
    def start(self) -> "Broker":
        started: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the starter
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="kafkacompat-broker", daemon=True)
        self._thread.start()
        started.result(timeout=30)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop = None
            self._thread = None
        self._cleanup()

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the broker's loop from a sync test and return its result."""
        assert self._loop is not None, "call() needs a broker started with start() or `with`"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
