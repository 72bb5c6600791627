"""The replication rules of the checker against hand-made histories: each promise of docs/replication.md that
a campaign checks (same records at the same offsets, the replica catching up, cursors carried and never past
the replica's end, a failover that skips nothing) fails a history that breaks it, and passes one that keeps it."""

from __future__ import annotations

from typing import Any

from kafkacompat.chaos.checker import check
from kafkacompat.chaos.replica_checker import REPLICA_EVENTS

A = "chaos..a"


class Story:
    """A replication campaign's history: acks at the source, the replicas' final reads, cursors, a failover.
    A replica's events name `cluster` (b unless told)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.cluster = "b"
        self.add("campaign", engine="replication", seed=1)

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        if type_ in REPLICA_EVENTS:
            fields.setdefault("cluster", self.cluster)
        event = {"i": len(self.events) + 1, "t": float(len(self.events)), "type": type_, **fields}
        self.events.append(event)
        return event

    def write(self, seq: int) -> dict[str, Any]:
        value = f"idem.0|{seq}|x"
        self.add("send", producer="idem.0", kind="idempotent", seq=seq, topic=A, partition=0, value=value)
        return self.add("ack", producer="idem.0", kind="idempotent", seq=seq, topic=A, partition=0, offset=seq,
                        value=value)

    def record(self, kind: str, offset: int, value: str, **changed: Any) -> None:
        for isolation in ("read_uncommitted", "read_committed"):
            self.add(kind, reader=kind, isolation=isolation, topic=A, partition=0, offset=offset, value=value,
                     **{"key": value[:8], "headers": [["seq", "30"]], "timestamp": [1, 1000 + offset], **changed})

    def ends(self, kind: str, end: int) -> None:
        for isolation in ("read_uncommitted", "read_committed"):
            self.add(f"{kind}-end", topic=A, partition=0, isolation=isolation, end=end, complete=True)

    def kinds(self) -> list[str]:
        return sorted(v.kind for v in check(self.events).violations)


def replicated(count: int = 4, cursor: int = 2, replica_cursor: int | None = None, failover_from: int | None = None,
               replica_end: int | None = None) -> Story:
    """`count` acknowledged records kept by both clusters; the group committed `cursor` on the source."""
    s = Story()
    acks = [s.write(seq) for seq in range(count)]
    for ack in acks:
        s.record("final", ack["offset"], ack["value"])
    s.ends("final", count)
    for ack in acks[:replica_end]:
        s.record("replica-final", ack["offset"], ack["value"])
    s.ends("replica-final", count if replica_end is None else replica_end)
    end = count if replica_end is None else replica_end
    s.add("replica-end", topic=A, partition=0, source=count, replica=end, waited=0.5)
    carried = cursor if replica_cursor is None else replica_cursor
    s.add("replica-cursor", group="g", topic=A, partition=0, source=cursor, replica=carried, replica_end=end)
    for ack in acks[carried if failover_from is None else failover_from:end]:
        s.add("failover-read", group="g", topic=A, partition=0, offset=ack["offset"], value=ack["value"])
    s.add("failover-end", group="g", complete=True, at_end=[f"{A}/0"])
    return s


def test_a_replica_identical_to_its_source_passes_and_counts_every_ack_as_replicated() -> None:
    s = replicated()
    verdict = check(s.events)
    assert verdict.violations == [] and verdict.verified == 4 and verdict.replicated == 4


def test_a_history_of_another_engine_is_not_judged_by_the_replication_rules() -> None:
    s = replicated(replica_end=2)
    s.events[0]["engine"] = "disk"
    assert s.kinds() == [] and check(s.events).replicated == 0


def test_an_acknowledged_record_missing_on_the_replica_is_lost_and_the_replica_behind() -> None:
    s = replicated(replica_end=3)
    kinds = s.kinds()
    assert kinds.count("replica-lost-write") == 1 and "replica-behind" in kinds
    lost = next(v for v in check(s.events).violations if v.kind == "replica-lost-write")
    assert "offset 3" in lost.message and "missing on replica b" in lost.message


def test_a_record_with_other_headers_or_at_another_offset_on_the_replica_differs() -> None:
    s = Story()
    ack = s.write(0)
    s.record("final", 0, ack["value"])
    s.record("replica-final", 0, ack["value"], headers=[["seq", "31"]])
    assert "replica-lost-write" in s.kinds()  # the acknowledged record is not there as the source keeps it
    s = Story()
    ack = s.write(0)
    s.record("final", 0, ack["value"])
    s.record("replica-final", 0, ack["value"])
    s.record("replica-final", 1, ack["value"])  # appended twice: a duplicate at the next offset
    s.ends("final", 1)
    s.ends("replica-final", 2)
    [found] = [v for v in check(s.events).violations if v.kind == "replica-differs"]
    assert "offset 1" in found.message and "only on replica b" in found.message


def test_an_unacknowledged_record_the_source_kept_must_be_on_the_replica_too() -> None:
    s = replicated()
    s.record("final", 4, "plain.0|9|x")  # stored, its ack never came: still a record the replica must hold
    assert s.kinds() == ["replica-differs"]  # read_uncommitted; read_committed only below both stable offsets


def test_read_committed_reads_must_agree_below_both_clusters_last_stable_offsets() -> None:
    s = replicated()
    s.add("replica-final", reader="replica-final", isolation="read_committed", topic=A, partition=0, offset=1,
          value="txn.0|7|x", key=None, headers=[], timestamp=[1, 1])  # an aborted record shown on the replica
    [v] = check(s.events).violations
    assert v.kind == "replica-differs" and "(read_committed) offset 1" in v.message
    s = replicated()
    for e in s.events:
        if e["type"] == "replica-final-end" and e["isolation"] == "read_committed":
            e["end"] = 3  # the replica's read ended at an open transaction the source's coordinator then ended
    s.add("final", reader="final", isolation="read_committed", topic=A, partition=0, offset=5, value="txn.0|8|x",
          key=None, headers=[], timestamp=[1, 1])
    assert s.kinds() == []


def test_a_cursor_past_the_replica_end_and_a_cursor_not_carried_are_caught() -> None:
    assert "cursor-past-end" in replicated(replica_cursor=5, failover_from=4).kinds()
    assert replicated(replica_cursor=1).kinds() == ["cursor-not-carried"]


def test_a_failover_consumer_that_skips_an_acknowledged_record_is_caught() -> None:
    s = replicated(cursor=1, failover_from=2)
    [v] = check(s.events).violations
    assert v.kind == "failover-skipped" and "from offset 1 on" in v.message
    assert replicated(cursor=2, failover_from=0).kinds() == []  # reading again what was read is no skip


def test_a_cursor_seen_past_the_replica_end_during_the_run_is_caught() -> None:
    s = replicated()
    s.add("replica-observed", group="g", topic=A, partition=0, cursor=2, end=2)
    assert s.kinds() == []
    s.add("replica-observed", group="g", topic=A, partition=0, cursor=3, end=2)
    assert s.kinds() == ["cursor-past-end"]


def test_a_link_command_that_fails_is_caught() -> None:
    s = replicated()
    s.add("link", link="resume", between="a->b", rc=0, said="in-sync")
    assert s.kinds() == []
    s.add("link", link="pause", between="b->c", rc=1, said="kafkacompat: cannot reach 127.0.0.1:9092")
    [v] = check(s.events).violations
    assert v.kind == "link-command-failed" and "link b->c" in v.message


def test_every_replica_of_a_chain_is_judged_and_only_acks_on_all_of_them_count_as_replicated() -> None:
    s = replicated()
    s.cluster = "c"  # the far end of a -> b -> c: it lost offset 3 that b holds
    acks = [e for e in s.events if e["type"] == "ack"]
    for ack in acks[:3]:
        s.record("replica-final", ack["offset"], ack["value"])
    s.ends("replica-final", 3)
    s.add("replica-end", topic=A, partition=0, source=4, replica=3, waited=120.0)
    verdict = check(s.events)
    assert sorted(v.kind for v in verdict.violations) == ["replica-behind", "replica-lost-write"]
    assert all("replica c" in v.message for v in verdict.violations)
    assert verdict.verified == 4 and verdict.replicated == 3


def test_a_link_broken_or_missing_once_every_replica_caught_up_is_caught() -> None:
    s = replicated()
    s.add("link-state", between="a->b", state="in-sync", reason="")
    assert s.kinds() == []
    s.add("link-state", between="c->a", state="broken", reason="topic chaos..a partition 0 holds other data at 3")
    s.add("link-state", between="b->c", state=None, reason="")
    found = check(s.events).violations
    assert [v.kind for v in found] == ["link-broken", "link-broken"]
    assert "c->a is broken" in found[0].message and "b->c is not listed" in found[1].message
