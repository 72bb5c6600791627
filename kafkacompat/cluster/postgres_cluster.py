"""Brokers sharing one PostgreSQL database as one cluster (see leases.py and leadership.py).

Two tasks, each on a connection of its own. One renews this broker's lease
every heartbeat and does nothing else, so nothing the broker does on
becoming a leader can make it late. The other, every heartbeat, reads the
live brokers and the rows of the leader table written since its last read
(leadership.LeaderTable), plans the partitions that changed (all of them
when the brokers did), writes the moves this broker is due to
make, swaps in the new picture the handlers read, and catches up each
partition it gained (a tail scan that may read objects, group and
transaction takeovers) before serving it. Leadership therefore moves at most
one lease plus one heartbeat after a broker dies, however long the new
leader takes to catch up: a renewal that waited for that work let the lease
lapse under load, and leadership bounced between brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable

import asyncpg

from ..storage.cloud.outage import database_errors
from ..storage.cloud.statistics import TableStatistics
from . import leadership
from .leases import BrokerLease, create_schema, end_departed, members, unregister
from .membership import ClusterError, ClusterView, Member, PartitionKey

log = logging.getLogger(__name__)
LOOK_AGAIN_S = 0.05
# How long a request for a partition this broker does not serve waits for a heartbeat to look
# again (and to catch the partition up when it was handed here) before it is refused.
LOOK_AGAIN_WAIT_S = 2.0
# How long a clean stop waits for its lease to say "not serving" and for the tick that hands its
# partitions on (leave) before it goes on stopping without: a database out of reach.
LEAVE_WAIT_S = 2.0
# A heartbeat that finds nothing changed since a tick that wrote nothing skips reading every row and
# planning every partition (`_quiet`); at least this often it reads and plans them all anyway.
QUIET_AT_MOST_S = 30.0
# What the database raises when it cannot be reached or ended the session, InternalClientError
# included: asyncpg raises it ("cannot switch to state 12; another operation (2) is in progress")
# for a session the server ended mid-statement, and the heartbeat that did not expect it died, so
# the broker led nothing until restarted and then exited 1 re-raising it.
DATABASE_ERRORS = database_errors()


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}{sep}{creds.split(':')[0]}@{host}" if at else url


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """What a tick that ended planned: the brokers as it saw them, the partitions (and the stamp they
    were listed at), those to plan again, and when every partition was last planned."""

    brokers: tuple[object, ...]
    stamp: object
    known: frozenset[PartitionKey]
    again: set[PartitionKey]  # planned again next time: those it wrote, those written meanwhile
    full_at: float


class PostgresCluster(ClusterView):
    def __init__(
        self,
        me: Member,
        url: str,
        partitions: Callable[[], Iterable[PartitionKey]],
        lease_ms: int,
        heartbeat_ms: int,
        partitions_stamp: Callable[[], object] | None = None,
    ) -> None:
        """`partitions_stamp`: a value that changes whenever `partitions()` would (a store's change
        stamp and partition count); without it, the list itself is compared."""
        super().__init__(me)
        self._url = url
        self._partitions = partitions
        self._partitions_stamp = partitions_stamp or (lambda: tuple(partitions()))
        # What a tick that changed nothing saw (partitions, brokers, leader table, registration),
        # and since when: a heartbeat seeing the same skips the rows and the plan (QUIET_AT_MOST_S)
        self._quiet: tuple[object, float] | None = None
        self._lease = BrokerLease(me, lease_ms)
        self._heartbeat_s = heartbeat_ms / 1000
        self._heartbeat_ms = heartbeat_ms
        self._connect_timeout_s = max(2 * heartbeat_ms, lease_ms / 2) / 1000
        self._conn: asyncpg.Connection | None = None  # the leader table's
        self._lease_conn: asyncpg.Connection | None = None  # the lease's alone: never waits behind the table's
        self._task: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._registration = 0  # counts registrations: leadership gained under an earlier one is void
        self._live: list[Member] = []
        self._rows: dict[PartitionKey, leadership.LeaderRow] = {}
        self._table = leadership.LeaderTable()  # kc_partition_leaders as last read
        self._planned: Planned | None = None  # what the last tick that ended planned, for the next (_to_plan)
        self._led: dict[PartitionKey, int] = {}  # partitions this broker leads -> epoch
        self._yielding: set[PartitionKey] = set()  # handed on: refused from now, whatever the table said
        # Partitions this broker led and saw move to another broker -> the epoch of that move: requests
        # for them are refused at once while the table still says so (look_again)
        self._moved_away: dict[PartitionKey, int] = {}
        self._ticking = asyncio.Lock()  # one tick at a time: the heartbeat's or a settle's
        self.statistics = TableStatistics("kc_partition_leaders")  # when to ANALYZE the rows add_missing writes
        self._renew_now = asyncio.Event()  # set by serving: renew without waiting for the heartbeat
        self._wake = asyncio.Event()  # set by look_again: the heartbeat ticks now rather than a heartbeat later
        # (ticks started, ticks that read the table or failed): look_again waits for one started after it asked
        self._beats = (0, 0)
        self._pulse = asyncio.Event()  # set, and replaced, whenever a tick ends or a partition is served
        # This broker lost the database and is back: until then (monotonic), it takes no partition from a
        # broker whose lease lapsed and ends no lease (`_grace`); None: no outage of its own to allow for
        self._grace_until: float | None = None
        self._lost_database = False
        self._leaving = False  # a clean stop began (leave): plan as if this broker were gone
        self._renewed = asyncio.Event()  # set by each renewal written: leave waits for the one saying "not serving"

    async def start(self) -> None:
        try:
            self._conn = await asyncpg.connect(self._url, timeout=10)
            self._lease_conn = await asyncpg.connect(self._url, timeout=10)
            await create_schema(self._conn)
        except DATABASE_ERRORS as exc:
            await self.close()
            raise ClusterError(f"cannot reach the cluster database {redact(self._url)}: {exc}; start PostgreSQL "
                               "or fix --cluster-url") from exc
        self._lease.serving = False  # until the listeners are open (serving)
        await self._lease.register(self._lease_conn, wait_s=2 * self._lease.lease_ms / 1000 + 1)
        self._registration += 1
        self._renewing = asyncio.create_task(self._renew_forever(), name="cluster-lease")
        try:
            await self._tick()  # the first picture: catching up its partitions may outlast a lease
        except BaseException:
            await self.close()
            raise
        self._task = asyncio.create_task(self._run(), name="cluster-heartbeat")

    async def close(self) -> None:
        for task in (self._task, self._renewing):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception:  # noqa: BLE001 - logged; stopping goes on (a clean stop exits 0)
                    log.exception("the cluster's %s task had failed", task.get_name())
        self._task = self._renewing = None
        self._led = {}
        if self._lease_conn is not None:
            with contextlib.suppress(Exception):  # a dead database: the lease lapses by itself
                await self._lease.release(self._lease_conn)
        for conn in (self._conn, self._lease_conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._conn = self._lease_conn = None
        self.peers.close()

    async def serving(self) -> None:
        """Say so in the database (the lease is renewed at once): the others hand this broker its
        partitions at their next heartbeat. Before, they did as soon as it registered, while it
        was still starting: clients were refused by the old leader and could not reach the new one."""
        self._lease.serving = True  # written by every renewal from now
        self._renew_now.set()

    async def leave(self) -> None:
        """Kafka's controlled shutdown. The lease says "not serving" first, so no broker hands a partition
        back; then one tick hands every partition this broker leads to its place among the serving
        others (the planned hand-over of `_look`: refused here from that moment, appends no commit took
        refused at once, the row moved). The requests in flight are then answered, "not the leader,
        ask broker N", within the stop's grace. Before, a stopping broker led its partitions through
        the grace while it read no request, kept storing what its clients had sent, and closed the
        connections still owed answers: their producers resent what had been stored (the cloud
        campaign's plain duplicates at restarts); and its partitions moved a grace and a heartbeat
        late. Alone (no serving broker else), it keeps them and commits what it was given."""
        if self._task is None or self._leaving:
            return
        self._leaving = True
        self._lease.serving = False
        self._renewed.clear()
        self._renew_now.set()
        deadline = time.monotonic() + LEAVE_WAIT_S
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._renewed.wait(), LEAVE_WAIT_S)
        try:
            await asyncio.wait_for(self._tick(), max(0.1, deadline - time.monotonic()))
        except (asyncio.TimeoutError, *DATABASE_ERRORS) as exc:
            log.warning("could not hand this broker's partitions on before stopping (%s); they move once its "
                        "lease ends", exc)

    def live(self) -> list[Member]:
        """The brokers of the last picture of the table, also while this broker cannot reach the
        database (as a Kafka broker cut off from its controller serves its last metadata). Naming
        only itself then, as it did, made librdkafka drop the other brokers and fail the requests
        in flight there, whose batches the brokers then stored as well as their retries."""
        return self._live

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
        except DATABASE_ERRORS as exc:
            log.warning("could not place new partitions now (%s); the next heartbeat will", exc)

    async def look_again(self, key: PartitionKey) -> None:
        """A hand-over names this broker in the row before its next heartbeat reads it: the old
        leader refuses the partition's produce at once naming this broker (KIP-951), and a producer
        sent here then met a refusal naming the old leader, back and forth. The request waits
        (up to LOOK_AGAIN_WAIT_S) for a tick started after it asked to read the table, and when
        that names this broker, until the partition is caught up and served; the heartbeat ticks
        at once when asked (at most every LOOK_AGAIN_S). A tick already under way when it asked
        may have read the table before the hand-over: the request was refused, and the partition
        taken at the next heartbeat, after the catch-up of whatever that tick had gained.

        A partition this broker saw move away from it, still led where it moved, is refused at
        once: its requests are a client's from before the move. A producer without idempotence
        has hundreds of them in flight on one connection, and each waited for a tick of its own
        there (a connection answers in order), so a broker that had handed a partition back to a
        restarted one left its other partitions' requests behind that queue for up to 20 s: the
        kill loop's failover, measured on partitions this broker had just gained, took 13 s in CI."""
        if self._conn is None or self._task is None or self._moved_on(key):
            return
        wanted = self._beats[0] + 1  # the next tick to start reads the table after this request came
        self._wake.set()
        deadline = time.monotonic() + LOOK_AGAIN_WAIT_S
        while not self.leads(key) and (self._beats[1] < wanted or self.catching_up(key)):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._pulse.wait(), left)

    async def unregister(self, node_id: int) -> bool:
        """Delete the broker's row. A dead one's partitions have moved already; a live one finds
        its lease gone at its next renewal, lets go of its partitions and registers again, as a
        Kafka broker unregistered while running is fenced until it registers again."""
        async with self._ticking:  # the leader table's connection runs one query at a time
            if self._conn is None:
                self._conn = await self._reconnect(None)
            try:
                if self._conn is not None:
                    return await unregister(self._conn, node_id)
            except DATABASE_ERRORS as exc:
                raise ClusterError(f"the cluster database {redact(self._url)} failed: {exc}") from exc
            raise ClusterError(f"the cluster database {redact(self._url)} is out of reach")

    def _moved_on(self, key: PartitionKey) -> bool:
        """Whether the table, as last read, still names the broker this one saw the partition move to."""
        row = self._rows.get(key)
        return row is not None and row.leader != self.me.node_id and self._moved_away.get(key) == row.epoch

    def leads(self, key: PartitionKey) -> bool:
        return key in self._led and key not in self._yielding and self._lease.valid()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._heartbeat_s)
            if self._wake.is_set():  # asked by look_again: tick now, but not more often than LOOK_AGAIN_S
                await asyncio.sleep(LOOK_AGAIN_S)
                self._wake.clear()
            async with self._ticking:  # the leader table's connection runs one statement at a time
                try:
                    await self._beat()
                except DATABASE_ERRORS as exc:
                    log.warning("reading the cluster's leader table failed (%s); trying again", exc)
                    self._lost_database = True
                    self._conn = await self._reconnect(self._conn)
                except Exception:  # noqa: BLE001 - a broker whose heartbeat ends leads nothing until restarted
                    log.exception("the cluster heartbeat failed; trying again")

    async def _renew_forever(self) -> None:
        again = False  # renew at once on a new connection: the others count a broker dead whose alive
        while True:    # lock is gone and whose lease went unrenewed for DEPARTED_HEARTBEATS (leases.py)
            if not again:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._renew_now.wait(), self._heartbeat_s)
                self._renew_now.clear()
            try:
                await self._renew()
                again = False
                self._renewed.set()
            except DATABASE_ERRORS as exc:
                log.warning("renewing the cluster lease failed (%s); leading nothing once it lapses", exc)
                self._lease_conn = await self._reconnect(self._lease_conn)
                again = self._lease_conn is not None and not again
            except ClusterError as exc:  # another broker took this node id meanwhile
                log.error("broker %d leaves the cluster: %s", self.me.node_id, exc)
                return
            except Exception:  # noqa: BLE001 - a lease no longer renewed: the broker would lead nothing
                log.exception("renewing the cluster lease failed; trying again")

    async def _renew(self) -> None:
        if self._lease_conn is None:  # renews on the new connection at once: its alive lock is gone
            self._lease_conn = await self._reconnect(None)
            if self._lease_conn is None:
                return
        conn = self._lease_conn
        if await self._lease.renew(conn):
            return
        log.warning("broker %d lost its lease; registering again", self.me.node_id)
        self._registration += 1  # a tick catching up partitions now serves none of them
        lost, self._led = self._led, {}
        await self._lose(lost)
        await self._lease.register(conn, wait_s=self._lease.lease_ms / 1000)
        self._registration += 1

    async def _reconnect(self, conn: asyncpg.Connection | None) -> asyncpg.Connection | None:
        """A fresh connection in place of `conn` (closed), or None while the database is out of reach.

        A connection may take up to half a lease to open. Two heartbeats, as before, was 0.4 s
        with the tests' heartbeat: where sessions took longer to open (a loaded database host;
        PostgreSQL forks a backend for each), every attempt timed out and the lease lapsed
        unrenewed although the database answered."""
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=self._heartbeat_s * 2)  # terminated after that
        with contextlib.suppress(*DATABASE_ERRORS):
            return await asyncpg.connect(self._url, timeout=self._connect_timeout_s)
        return None

    async def _tick(self) -> None:
        async with self._ticking:
            await self._beat()

    def catching_up(self, key: PartitionKey) -> bool:
        """Whether the table names this broker the partition's leader but it does not serve it yet."""
        found = self.leader_of(key)
        return found is not None and found[0] == self.me.node_id and key not in self._led

    def _looked(self) -> None:
        """A tick read the table (or failed to): look_again's waiters see what it read."""
        if self._beats[1] < self._beats[0]:
            self._beats = (self._beats[0], self._beats[0])
            self._signal()

    def _signal(self) -> None:
        """Wake every look_again waiting: a tick ended or a partition is served now."""
        pulse, self._pulse = self._pulse, asyncio.Event()
        pulse.set()

    async def _beat(self) -> None:
        self._beats = (self._beats[0] + 1, self._beats[1])
        try:
            await self._look()
        finally:
            self._looked()

    async def _look(self) -> None:
        conn = self._conn
        if conn is None:
            self._lost_database = True
            self._conn = await self._reconnect(None)
            return
        registration = self._registration
        grace = self._grace()
        if not grace:
            departed = await end_departed(conn, self.me.node_id, self._lease.lease_ms, self._heartbeat_ms)
            if departed:
                log.info("broker(s) %s are gone (their database sessions ended): their leases end now", departed)
        known = self._partitions_stamp()  # read before the rows: a change after it is seen next time
        live, registered, serving = await members(conn)
        planned, self._planned = self._planned, None  # kept again only by a tick that ends (or a quiet one)
        fingerprint, changed = await self._table.refresh(conn)
        seen = (known, [(m.node_id, m.host, m.port) for m in live], registered, serving,
                fingerprint, registration, self._leaving, grace)
        if not changed and self._quiet is not None and self._quiet[0] == seen \
                and time.monotonic() < self._quiet[1] + QUIET_AT_MOST_S:
            self._planned = planned
            return  # the same picture as a tick that changed nothing: it would plan nothing again
        self._quiet = None
        rows = self._table.rows
        candidates = [m.node_id for m in live]
        if self._leaving:  # stopping cleanly: every partition goes to the others serving, none comes here
            serving = [n for n in serving if n != self.me.node_id]
            candidates = serving
        brokers = (tuple(candidates), tuple(registered), tuple(serving), registration, self._leaving, grace)
        keys, known_keys, full = self._to_plan(planned, known, brokers, changed)
        missing, moves = leadership.plan(self.me.node_id, candidates, keys, rows, registered, serving)
        again: list[PartitionKey] = []
        if grace:  # the others lost the database too: a lease to take up their registrations again
            lapsed = set(registered) - {m.node_id for m in live}
            moves = [move for move in moves if move[1].leader not in lapsed]
            live = live + [m for m in self._live if m.node_id in lapsed]  # still named to clients meanwhile
        handing_on = {key for key, row, _ in moves if row.leader == self.me.node_id}
        self._yielding |= handing_on  # stop serving before the row names the next leader
        self._stop_serving(handing_on)
        if missing or moves:
            await leadership.add_missing(conn, missing, self.store_epochs)
            if self.statistics.added(len(missing), len(rows) + len(missing)):  # kc_commit joins the table
                await self.statistics.analyze(conn)
            moved = await leadership.move(conn, moves, self.store_epochs, serving)
            if moved:
                log.info("moved leadership of %d partition(s) among brokers %s", moved, [m.node_id for m in live])
            _, again = await self._table.refresh(conn)  # the rows written, and any another broker wrote meanwhile
            rows = self._table.rows
        led = {key: row.epoch for key, row in rows.items() if row.leader == self.me.node_id}
        gained = [key for key, epoch in led.items() if self._led.get(key) != epoch]
        lost = [key for key in self._led if key not in led]
        # Stop serving what moved away (or came back under a new epoch) before anything else. A
        # partition gained is named as led here (Metadata) at once, as the other brokers name it,
        # and served once caught up: its requests wait for that in look_again. Named the old
        # leader here meanwhile, clients went back and forth between the two, refused by both.
        before = self._rows
        self._live, self._rows = live, dict(rows)
        self._looked()
        self._led = {key: epoch for key, epoch in self._led.items() if led.get(key) == epoch}
        self._note_moved_away(lost, rows)
        await self._lose(lost)
        if gained:
            await self.on_leadership_gaining(gained)
        for key in gained:  # each served once caught up with what the previous leader appended
            await self.on_leadership_gained(key)
            if self._registration != registration:  # the lease lapsed meanwhile: the rows read are stale
                await self._lose([key])
                if key in before:
                    self._rows[key] = before[key]
                continue
            self._led[key] = led[key]
            self._signal()
        self._yielding -= handing_on - set(led)
        self._yielding &= set(led)
        if not (missing or moves or grace) and self._registration == registration:  # every gain served
            self._quiet = (seen, time.monotonic())  # planned nothing: the same picture needs no plan
        if not grace and self._registration == registration:  # in grace, moves are held back: plan them all
            full_at = time.monotonic() if full or planned is None else planned.full_at
            self._planned = Planned(brokers, known, known_keys, {*missing, *(key for key, _, _ in moves), *again},
                                    full_at)

    def _to_plan(self, planned: Planned | None, stamp: object, brokers: tuple[object, ...],
                 changed: list[PartitionKey]) -> tuple[list[PartitionKey], frozenset[PartitionKey], bool]:
        """(the partitions to plan, every partition, whether those are all).

        A partition's plan depends on nothing but its row and the brokers (leadership.plan): with
        the brokers as the last tick that ended saw them, only the partitions new since, those whose
        row changed and those that tick wrote are planned; the others would plan nothing again
        (issue 32: planning 100,000 partitions took a fifth of a second, every heartbeat while
        topics were created). At least every QUIET_AT_MOST_S all are."""
        if planned is not None and planned.stamp == stamp:
            known_keys = planned.known
        else:
            known_keys = frozenset(self._partitions())
        if planned is None or planned.brokers != brokers or time.monotonic() > planned.full_at + QUIET_AT_MOST_S:
            return list(known_keys), known_keys, True
        keys = (known_keys - planned.known) | planned.again | {key for key in changed if key in known_keys}
        return list(keys), known_keys, False

    def _note_moved_away(self, lost: Iterable[PartitionKey], rows: dict[PartitionKey, leadership.LeaderRow]) -> None:
        """Remember where the partitions this broker stopped leading went (look_again refuses their
        requests at once); forget those it leads again."""
        for key in lost:
            row = rows.get(key)
            if row is not None and row.leader != self.me.node_id:
                self._moved_away[key] = row.epoch
        for key in [key for key in self._moved_away if key not in rows or rows[key].leader == self.me.node_id]:
            del self._moved_away[key]

    def _grace(self) -> bool:
        """Whether this broker is within a lease of reaching the database again after losing it.

        An outage of the database longer than the lease lapses every broker's lease at once, and
        ends every session, alive locks and all. The first broker back used to end the others'
        leases at once and take all their partitions, which moved back a heartbeat later: every
        partition changed leader twice, refusing what was in flight, and librdkafka, told a
        broker was gone, dropped the requests it had sent there (plain producers' duplicates
        clustered at database outages in the cloud campaign). As a KRaft controller gives every
        broker a new session timeout when it takes over, a broker back from an outage waits a
        lease before it takes anyone's partitions: long enough for each to register again. A
        broker that died meanwhile is seen a lease later than otherwise."""
        now = time.monotonic()
        if self._lost_database:
            self._lost_database = False
            self._grace_until = now + self._lease.lease_ms / 1000
            log.info("broker %d reached the database again: no partition of a lapsed lease moves for %d ms",
                     self.me.node_id, self._lease.lease_ms)
        return self._grace_until is not None and now < self._grace_until

    def _stop_serving(self, keys: Iterable[PartitionKey]) -> None:
        for key in keys:
            try:
                self.on_stop_serving(key)
            except Exception:  # noqa: BLE001 - the heartbeat must go on
                log.exception("refusing the pending appends of %s failed", key)

    async def _lose(self, keys: Iterable[PartitionKey]) -> None:
        keys = list(keys)
        self._stop_serving(keys)
        for key in keys:
            try:
                await self.on_leadership_lost(key)
            except Exception:  # noqa: BLE001 - the heartbeat must go on
                log.exception("letting go of %s failed", key)
