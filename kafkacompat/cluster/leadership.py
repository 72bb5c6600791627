"""One leader per partition, recorded in kc_partition_leaders with an epoch that only goes up.

Who should lead is a pure function of the registered node ids (live or
lapsed: a broker killed or stopped keeps its row until it comes back), the live ones
and the partition (`wanted_leader`), so every broker computes the same
spread. Changing a row is always one conditional UPDATE (`... WHERE leader
= old AND epoch = old`), so when two brokers race for the same move exactly
one wins and the epoch goes up by one. Moves happen in two ways:

* a leader whose lease lapsed: any live broker moves its partitions to
  another live broker;
* a live leader that is no longer wanted (a broker joined or came back):
  the leader itself stops serving the partition, then hands the row on — so
  two brokers never serve one partition at once on a planned move.

A broker's death or clean stop moves only the partitions it led, as on
Kafka: spreading over the live brokers alone moved most partitions of a
topic when one of three died (partitions whose leader lived were handed
over too, and clients waited for each hand-over). A clean stop keeps the
broker's registration for that reason: the stopping broker hands its
partitions on itself, planning as if it were gone (PostgresCluster.leave),
then ends its lease.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Collection, Iterable, Sequence

import asyncpg

from .membership import PartitionKey


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderRow:
    leader: int
    epoch: int


def preferred_leader(node_ids: Sequence[int], key: PartitionKey) -> int:
    """Which of `node_ids` should lead `key`: partitions of a topic go round the brokers, each
    topic starting at a place set by its name, as Kafka's replica placement spreads them."""
    stream, topic, index = key
    start = zlib.crc32(f"{stream}\0{topic}".encode())
    return node_ids[(start + index) % len(node_ids)]


_SELECT_ROWS = "SELECT stream, topic, partition, leader, epoch FROM kc_partition_leaders"


class LeaderTable:
    """A broker's copy of kc_partition_leaders, brought up to date by reading only the rows written
    since its last read: while topics were being created, every heartbeat fetched every row (issue
    32: 100,000 rows, a good part of each second on the event loop at 60,000 topics).

    Each row names the transaction that last wrote it (`written`, set on insert and by `move`). A
    read also takes its snapshot's xmin, the oldest transaction still running then: whatever an
    older transaction wrote was committed or rolled back before the read, so it was seen. The next
    read asks for the rows written by that transaction or a later one, which takes in a row
    committed after a newer one. The table's count and epoch sum (read_fingerprint), read in the same
    snapshot, check the copy; one that disagrees (a row deleted by hand) is read again in full."""

    def __init__(self) -> None:
        self.rows: dict[PartitionKey, LeaderRow] = {}
        self._epochs = 0  # the sum of the copy's epochs
        self._horizon: int | None = None  # the last read's snapshot xmin; None: read every row next time

    async def refresh(self, conn: asyncpg.Connection) -> tuple[tuple[int, int], list[PartitionKey]]:
        """(the table's fingerprint, the keys whose row is new, changed or gone since the last refresh)."""
        fingerprint, changed = await self._read(conn, self._horizon)
        if fingerprint != (len(self.rows), self._epochs):
            fingerprint, more = await self._read(conn, None)
            changed += more
        return fingerprint, changed

    async def _read(self, conn: asyncpg.Connection, since: int | None) -> tuple[tuple[int, int], list[PartitionKey]]:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            horizon = await conn.fetchval("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
            fingerprint = await read_fingerprint(conn)
            if since is None:
                records = await conn.fetch(_SELECT_ROWS)
            else:
                records = await conn.fetch(_SELECT_ROWS + " WHERE written >= $1::text::xid8", str(since))
        read = {(r["stream"], r["topic"], r["partition"]): LeaderRow(r["leader"], r["epoch"]) for r in records}
        changed = [key for key, row in read.items() if self.rows.get(key) != row]
        if since is None:
            changed += [key for key in self.rows if key not in read]
            self.rows, self._epochs = read, sum(row.epoch for row in read.values())
        else:
            for key in changed:
                old = self.rows.get(key)
                self._epochs += read[key].epoch - (0 if old is None else old.epoch)
                self.rows[key] = read[key]
        self._horizon = int(horizon)
        return fingerprint, changed


async def read_fingerprint(conn: asyncpg.Connection) -> tuple[int, int]:
    """(rows, sum of their epochs): a new row adds to the first, a move raises the second (an
    epoch only goes up), so a heartbeat tells "nothing moved" without fetching every row (issue 32:
    100,000 rows fetched and planned every second held the event loop most of that second). A
    deleted row goes with its topic, which the broker's store reports by itself."""
    row = await conn.fetchrow("SELECT count(*), coalesce(sum(epoch), 0) FROM kc_partition_leaders")
    return int(row[0]), int(row[1])


def _stored_epoch(s: str, t: str, p: str) -> str:
    """SQL for the leader epoch the cloud store last stamped a batch of partition (s, t, p) with,
    0 for none: kc_partitions, in the same database when the cluster fences the store's appends."""
    return (f"coalesce((SELECT sp.leader_epoch FROM kc_topics st JOIN kc_partitions sp ON sp.topic_id = st.id "
            f"WHERE st.stream = {s} AND st.name = {t} AND sp.idx = {p}), 0)")


async def add_missing(conn: asyncpg.Connection, rows: dict[PartitionKey, int], store_epochs: bool = False) -> None:
    """Rows for partitions nobody leads yet (new topics); a row another broker wrote first wins.

    A row starts at epoch 0; with `store_epochs` (the store's tables share the database) at the
    epoch the store last stamped a batch of the partition with. A partition written before it had
    a row (by an earlier version, or with the leader table elsewhere) carries the store's own
    counter, and the store stamps a batch with the larger of that and the row's epoch: below it,
    batches would carry epochs above Metadata's, which Java consumers trust over Metadata's."""
    if not rows:
        return
    keys = list(rows)
    epoch = _stored_epoch("u.s", "u.t", "u.p") if store_epochs else "0"
    await conn.execute(
        f"""INSERT INTO kc_partition_leaders (stream, topic, partition, leader, epoch)
           SELECT s, t, p, l, {epoch} FROM unnest($1::text[], $2::text[], $3::int[], $4::int[]) AS u(s, t, p, l)
           ON CONFLICT DO NOTHING""",
        [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], [rows[k] for k in keys],
    )


async def move(conn: asyncpg.Connection, moves: Iterable[tuple[PartitionKey, LeaderRow, int]],
               store_epochs: bool = False, serving: Collection[int] = ()) -> int:
    """Move each (key, row as read, new leader) unless the row changed since it was read; returns how many moved.
    The new epoch is one above the row's, and with `store_epochs` above the store's too (add_missing).

    A move to a broker in `serving` (planned because its lease said it answers clients) is also made only
    if its lease still says so: a broker stopping cleanly says "not serving", then hands its partitions
    on; a tick that read the leases before that and the rows after planned them back to it (its preferred
    leader) and they stayed there until its lease ended."""
    moves = list(moves)
    if not moves:
        return 0
    old = f"greatest(l.epoch, {_stored_epoch('l.stream', 'l.topic', 'l.partition')})" if store_epochs else "l.epoch"
    keys = ([k[0] for k, _, _ in moves], [k[1] for k, _, _ in moves], [k[2] for k, _, _ in moves])
    async with conn.transaction():
        # Rows locked in key order first: the store's commit (kc_commit) takes them FOR SHARE in the
        # same order to fence appends by epoch, so a move and commits never deadlock.
        await conn.execute(
            """SELECT 1 FROM kc_partition_leaders l
               JOIN unnest($1::text[], $2::text[], $3::int[]) AS u(s, t, p)
                 ON l.stream = u.s AND l.topic = u.t AND l.partition = u.p
               ORDER BY l.stream, l.topic, l.partition FOR UPDATE OF l""", *keys)
        result = await conn.execute(
            f"""UPDATE kc_partition_leaders AS l SET leader = u.new_leader, epoch = {old} + 1,
                                                    written = pg_current_xact_id()
               FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::int[], $6::int[])
                    AS u(s, t, p, old_leader, old_epoch, new_leader)
               WHERE l.stream = u.s AND l.topic = u.t AND l.partition = u.p
                 AND l.leader = u.old_leader AND l.epoch = u.old_epoch
                 AND (NOT u.new_leader = ANY($7::int[])
                      OR EXISTS (SELECT 1 FROM kc_brokers b WHERE b.node_id = u.new_leader AND b.serving
                                                               AND b.lease_until > now()))""",
            *keys, [r.leader for _, r, _ in moves], [r.epoch for _, r, _ in moves], [n for _, _, n in moves],
            list(serving),
        )
    return int(result.rsplit(" ", 1)[-1])


def wanted_leader(registered: Sequence[int], live: Sequence[int], key: PartitionKey, current: int | None,
                  serving: Sequence[int] | None = None) -> int:
    """The partition's preferred leader among the registered brokers while it is live and serving
    (answering clients: a broker starting is handed nothing before it listens); else the live
    broker leading it now (`current`), so another broker's death does not move it; else its
    preferred leader among the live ones. `serving` None: every live broker serves."""
    first = preferred_leader(registered, key) if registered else None
    if first is not None and first in (live if serving is None else serving):
        return first
    if current is not None and current in live:
        return current
    return preferred_leader(serving or live, key)


def plan(
    me: int, live: Sequence[int], known: Iterable[PartitionKey], rows: dict[PartitionKey, LeaderRow],
    registered: Sequence[int] = (), serving: Sequence[int] | None = None,
) -> tuple[dict[PartitionKey, int], list[tuple[PartitionKey, LeaderRow, int]]]:
    """What this broker should write: (rows to add, moves). Pure, so tests can check the spread.

    `registered`: every node id with a row in kc_brokers, ascending (the live ones alone when
    empty). `serving`: the live ones answering clients (None: all), the only ones a live leader
    hands a partition on to. Moves are those of partitions whose leader is not live (anyone may
    make them) and those this broker leads but should not (only it may).
    """
    missing: dict[PartitionKey, int] = {}
    moves: list[tuple[PartitionKey, LeaderRow, int]] = []
    if not live:
        return missing, moves
    alive = set(live)
    for key in known:
        row = rows.get(key)
        want = wanted_leader(registered or live, live, key, None if row is None else row.leader, serving)
        if row is None:
            missing[key] = want
        elif row.leader != want and (row.leader not in alive or row.leader == me):
            moves.append((key, row, want))
    return missing, moves
