"""Broker leases in PostgreSQL: a broker is live while its row's lease_until is in the future.

Every time is the database's clock (now()), so brokers on hosts whose
clocks disagree still agree on who is live. A broker renews its lease every
heartbeat; one that stops renewing (killed, paused, cut off) drops out of
the live list `lease` after its last renewal. Its own process counts the
same lease on its monotonic clock from before it sent the renewal, so it
stops acting as a leader no later than the others stop counting it live.

A lease alone kept a killed broker's partitions unserved for a whole lease
(6 s by default) before anyone moved them. So a broker also holds a session advisory
lock on its lease connection: PostgreSQL drops it the moment the process
dies (the kernel closes its socket). A broker whose lock is gone and whose
lease has not been renewed for DEPARTED_HEARTBEATS is dead; any other
broker ends its lease at once (`end_departed`). A live broker that only
lost its connection (a database restart, a terminated session) connects
again and renews at once, taking the lock again; one cut off from the
database that long cannot commit anyway (every append is fenced by the
leader epoch in kc_commit).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import asyncpg

from .membership import ClusterError, Member

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS kc_brokers (
    node_id      integer PRIMARY KEY,
    host         text NOT NULL,
    port         integer NOT NULL,
    incarnation  uuid NOT NULL,
    lease_until  timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS kc_partition_leaders (
    stream     text NOT NULL,
    topic      text NOT NULL,
    partition  integer NOT NULL,
    leader     integer NOT NULL,
    epoch      integer NOT NULL,
    PRIMARY KEY (stream, topic, partition)
);
ALTER TABLE kc_brokers ADD COLUMN IF NOT EXISTS serving boolean NOT NULL DEFAULT true;
-- the transaction that last wrote the row (leadership.LeaderTable reads the rows written since its last
-- read). Added only where missing: ALTER TABLE locks the table first, and a broker starting would make
-- every commit (kc_commit reads the rows) wait behind the longest transaction on it.
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'kc_partition_leaders'::regclass
                   AND attname = 'written' AND NOT attisdropped) THEN
        ALTER TABLE kc_partition_leaders ADD COLUMN written xid8 NOT NULL DEFAULT pg_current_xact_id();
        CREATE INDEX kc_partition_leaders_written ON kc_partition_leaders (written);
    END IF;
END $$;
"""
_SCHEMA_LOCK = 0x6B63_636C  # pg_advisory_xact_lock key: brokers starting together create the tables once
_ALIVE_LOCK = 0x6B63_6C76  # pg_advisory_lock(_ALIVE_LOCK, node id): held by the broker's lease session
DEPARTED_HEARTBEATS = 3  # unrenewed this long with its alive lock gone: the broker's process is dead


class NodeIdTaken(ClusterError):
    """Another live broker is registered under this node id."""


async def create_schema(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
        await conn.execute(SCHEMA)


class BrokerLease:
    """This broker's row in kc_brokers: registered once, renewed every heartbeat."""

    def __init__(self, me: Member, lease_ms: int) -> None:
        self.me = me
        self.lease_ms = lease_ms
        self.incarnation = uuid.uuid4()  # tells this process's registration from an earlier one's
        self.valid_until = 0.0  # time.monotonic() after which this broker must not act as leader
        # False while the broker is not answering clients yet: the others hand it no partition
        # until a renewal says it is; it is live (listed, its own partitions kept) meanwhile
        self.serving = True
        self._locked: asyncpg.Connection | None = None  # the session holding the alive lock

    async def register(self, conn: asyncpg.Connection, wait_s: float) -> None:
        """Take the node id; waits up to `wait_s` for an earlier holder's lease to lapse (a restart after kill -9)."""
        deadline = time.monotonic() + wait_s
        while True:
            sent = time.monotonic()
            row = await conn.fetchrow(
                """INSERT INTO kc_brokers (node_id, host, port, incarnation, lease_until, serving)
                   VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::float8 / 1000), $6)
                   ON CONFLICT (node_id) DO UPDATE
                     SET host = excluded.host, port = excluded.port, incarnation = excluded.incarnation,
                         lease_until = excluded.lease_until, serving = excluded.serving
                     WHERE kc_brokers.lease_until < now()
                   RETURNING node_id""",
                self.me.node_id, self.me.host, self.me.port, self.incarnation, self.lease_ms, self.serving,
            )
            if row is not None:
                self.valid_until = sent + self.lease_ms / 1000
                await self._hold_alive_lock(conn)
                log.info("registered broker %d at %s:%d (lease %d ms)", self.me.node_id, self.me.host,
                         self.me.port, self.lease_ms)
                return
            holder = await conn.fetchrow(
                "SELECT host, port, extract(epoch FROM lease_until - now()) AS left_s FROM kc_brokers "
                "WHERE node_id = $1", self.me.node_id)
            if time.monotonic() >= deadline:
                where = f" at {holder['host']}:{holder['port']}" if holder else ""
                raise NodeIdTaken(f"node id {self.me.node_id} is held by a live broker{where}; "
                                  "give each broker its own --node-id")
            left = float(holder["left_s"]) if holder else 0.1
            await asyncio.sleep(min(max(left, 0.05), max(deadline - time.monotonic(), 0.05)))

    async def renew(self, conn: asyncpg.Connection) -> bool:
        """Extend the lease; False when this registration was lost (the lease lapsed and the id was taken)."""
        sent = time.monotonic()
        renewed = await conn.fetchval(
            """UPDATE kc_brokers SET lease_until = now() + make_interval(secs => $3::float8 / 1000), serving = $4
               WHERE node_id = $1 AND incarnation = $2 AND lease_until > now() RETURNING true""",
            self.me.node_id, self.incarnation, self.lease_ms, self.serving,
        )
        if renewed:
            self.valid_until = sent + self.lease_ms / 1000
            await self._hold_alive_lock(conn)
            return True
        self.valid_until = 0.0
        return False

    async def _hold_alive_lock(self, conn: asyncpg.Connection) -> None:
        """Hold the alive lock in `conn`'s session (once per connection: a new one after a reconnect)."""
        if self._locked is not conn and await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, $2)", _ALIVE_LOCK, self.me.node_id):
            self._locked = conn

    def valid(self) -> bool:
        return time.monotonic() < self.valid_until

    async def release(self, conn: asyncpg.Connection) -> None:
        """Leave at once (a clean stop): the lease ends now, so the others take this broker's partitions at
        their next heartbeat. The row stays, as a killed broker's does: the spread over the registered
        brokers is unchanged, so only this broker's partitions move, and they come back when it returns,
        as on Kafka. Deleting it moved partitions between the live brokers at every restart, and the
        clients of each moved partition were refused and resent (`unregister` retires a node id)."""
        self.valid_until = 0.0
        await conn.execute("UPDATE kc_brokers SET lease_until = now() WHERE node_id = $1 AND incarnation = $2",
                           self.me.node_id, self.incarnation)


async def members(conn: asyncpg.Connection) -> tuple[list[Member], list[int], list[int]]:
    """(the live brokers, the node ids of every broker registered, its lease lapsed or not, the node
    ids of the live brokers answering clients already), by node id."""
    rows = await conn.fetch(
        "SELECT node_id, host, port, lease_until > now() AS live, serving FROM kc_brokers ORDER BY node_id")
    live = [r for r in rows if r["live"]]
    return ([Member(r["node_id"], r["host"], r["port"]) for r in live], [r["node_id"] for r in rows],
            [r["node_id"] for r in live if r["serving"]])


async def end_departed(conn: asyncpg.Connection, me: int, lease_ms: int, heartbeat_ms: int) -> list[int]:
    """End at once the lease of every broker whose process is gone: its alive lock is not held (its
    database session ended) and it has not renewed its lease for DEPARTED_HEARTBEATS. Returns their node ids."""
    rows = await conn.fetch(
        """UPDATE kc_brokers b SET lease_until = now()
           WHERE b.node_id <> $1 AND b.lease_until > now()
             AND b.lease_until < now() + make_interval(secs => $3::float8 / 1000)
             AND NOT EXISTS (SELECT 1 FROM pg_locks l
                             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                               AND l.classid::bigint = $2 AND l.objid::bigint = b.node_id)
           RETURNING b.node_id""",
        me, _ALIVE_LOCK, lease_ms - DEPARTED_HEARTBEATS * heartbeat_ms)
    return [r["node_id"] for r in rows]


async def unregister(conn: asyncpg.Connection, node_id: int) -> bool:
    """Remove a broker's registration, live or not; False when it has none."""
    return await conn.fetchval("DELETE FROM kc_brokers WHERE node_id = $1 RETURNING true", node_id) is not None
