"""Brokers sharing one PostgreSQL database as one cluster (see leases.py and leadership.py).

Each heartbeat (one round trip per statement, on one connection of its
own) renews this broker's lease, reads the live brokers and the leader
table, writes the moves this broker is due to make, and swaps in the new
picture the handlers read. Leadership therefore moves at most one lease
plus one heartbeat after a broker dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

import asyncpg

from . import leadership
from .leases import BrokerLease, create_schema, live_members
from .membership import ClusterError, ClusterView, Member, PartitionKey

log = logging.getLogger(__name__)


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}{sep}{creds.split(':')[0]}@{host}" if at else url


class PostgresCluster(ClusterView):
    def __init__(
        self,
        me: Member,
        url: str,
        partitions: Callable[[], Iterable[PartitionKey]],
        lease_ms: int,
        heartbeat_ms: int,
    ) -> None:
        super().__init__(me)
        self._url = url
        self._partitions = partitions
        self._lease = BrokerLease(me, lease_ms)
        self._heartbeat_s = heartbeat_ms / 1000
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._live: list[Member] = []
        self._rows: dict[PartitionKey, leadership.LeaderRow] = {}
        self._led: dict[PartitionKey, int] = {}  # partitions this broker leads -> epoch
        self._yielding: set[PartitionKey] = set()  # handed on: refused from now, whatever the table said
        self._ticking = asyncio.Lock()  # one tick at a time: the heartbeat's or a settle's

    async def start(self) -> None:
        try:
            self._conn = await asyncpg.connect(self._url, timeout=10)
            await create_schema(self._conn)
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError) as exc:
            raise ClusterError(f"cannot reach the cluster database {redact(self._url)}: {exc}; start PostgreSQL "
                               "or fix --cluster-url") from exc
        await self._lease.register(self._conn, wait_s=2 * self._lease.lease_ms / 1000 + 1)
        await self._tick()
        self._task = asyncio.create_task(self._run(), name="cluster-heartbeat")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._led = {}
        if self._conn is not None:
            with contextlib.suppress(Exception):  # a dead database: the lease lapses by itself
                await self._lease.release(self._conn)
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    def live(self) -> list[Member]:
        return self._live if self._lease.valid() else []

    def leader_of(self, key: PartitionKey) -> tuple[int, int] | None:
        row = self._rows.get(key)
        if row is None:
            return None
        if not any(m.node_id == row.leader for m in self._live):
            return None
        return row.leader, row.epoch

    def knows(self, key: PartitionKey) -> bool:
        return key in self._rows

    async def settle(self, keys: Iterable[PartitionKey]) -> None:
        keys = list(keys)
        if all(key in self._rows for key in keys) or self._conn is None:
            return
        try:
            async with self._ticking:
                if not all(key in self._rows for key in keys):  # unless a tick it waited for saw them
                    await self._beat()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("could not place new partitions now (%s); the next heartbeat will", exc)

    def leads(self, key: PartitionKey) -> bool:
        return key in self._led and key not in self._yielding and self._lease.valid()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self._tick()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("cluster heartbeat failed (%s); leading nothing once the lease lapses", exc)
                await self._reconnect()

    async def _reconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            self._conn = await asyncpg.connect(self._url, timeout=self._heartbeat_s * 2)

    async def _tick(self) -> None:
        async with self._ticking:
            await self._beat()

    async def _beat(self) -> None:
        conn = self._conn
        if conn is None:
            await self._reconnect()
            return
        if not await self._lease.renew(conn):
            log.warning("broker %d lost its lease; registering again", self.me.node_id)
            await self._lose(self._led)
            self._led = {}
            await self._lease.register(conn, wait_s=self._lease.lease_ms / 1000)
        live = await live_members(conn)
        rows = await leadership.read_leaders(conn)
        missing, moves = leadership.plan(self.me.node_id, [m.node_id for m in live], self._partitions(), rows)
        handing_on = {key for key, row, _ in moves if row.leader == self.me.node_id}
        self._yielding |= handing_on  # stop serving before the row names the next leader
        if missing or moves:
            await leadership.add_missing(conn, missing)
            moved = await leadership.move(conn, moves)
            if moved:
                log.info("moved leadership of %d partition(s) among brokers %s", moved, [m.node_id for m in live])
            rows = await leadership.read_leaders(conn)
        led = {key: row.epoch for key, row in rows.items() if row.leader == self.me.node_id}
        gained = [key for key, epoch in led.items() if self._led.get(key) != epoch]
        for key in gained:  # served only once caught up with what the previous leader appended
            await self.on_leadership_gained(key)
        lost = [key for key in self._led if key not in led]
        self._live, self._rows, self._led = live, rows, led
        await self._lose(lost)
        self._yielding -= handing_on - set(led)
        self._yielding &= set(led)

    async def _lose(self, keys: Iterable[PartitionKey]) -> None:
        for key in list(keys):
            try:
                await self.on_leadership_lost(key)
            except Exception:  # noqa: BLE001 - the heartbeat must go on
                log.exception("letting go of %s failed", key)
