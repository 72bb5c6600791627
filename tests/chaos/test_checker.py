"""The campaign's checker against hand-made histories: every kind of violation is caught, and what the
docs/operations.md allows (losses to damaged partitionlets the broker quarantined) is listed, not counted as a violation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkacompat.chaos.checker import check, duplicate_runs, short
from kafkacompat.chaos.history import History, load

A = "chaos..a"


class Story:
    """Builds a history the way a campaign records one."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = {"i": len(self.events) + 1, "t": float(len(self.events)), "type": type_, **fields}
        self.events.append(event)
        return event

    def write(self, producer: str, seq: int, offset: int, partition: int = 0, kind: str = "idempotent",
              topic: str = A, **extra: Any) -> str:
        value = f"{producer}|{seq}|x"
        self.add("send", producer=producer, kind=kind, seq=seq, topic=topic, partition=partition, value=value,
                 **extra)
        self.add("ack", producer=producer, kind=kind, seq=seq, topic=topic, partition=partition, offset=offset,
                 value=value, **extra)
        return value

    def final(self, offset: int, value: str, partition: int = 0, isolation: str = "read_uncommitted",
              topic: str = A) -> None:
        self.add("final", reader="final", isolation=isolation, topic=topic, partition=partition, offset=offset,
                 value=value)

    def end(self, offset: int, partition: int = 0, complete: bool = True, topic: str = A) -> None:
        self.add("final-end", topic=topic, partition=partition, isolation="read_uncommitted", end=offset,
                 complete=complete)

    def damage(self, partition: int, first: int, end: int | None, name: str = "flip-sealed") -> None:
        self.add("fault", name=name, phase="start",
                 damage={"topic": A, "partition": partition, "first": first, "end": end})

    def kinds(self) -> list[str]:
        return sorted(v.kind for v in check(self.events).violations)


def healthy() -> Story:
    s = Story()
    values = [s.write("idem.0", seq, offset=seq) for seq in range(3)]
    for offset, value in enumerate(values):
        s.final(offset, value)
    s.end(3)
    return s


def test_a_healthy_history_passes_and_every_ack_is_verified() -> None:
    verdict = check(healthy().events)
    assert verdict.violations == [] and verdict.acknowledged == verdict.verified == 3


def test_an_acknowledged_write_missing_without_a_quarantine_is_lost() -> None:
    s = healthy()
    s.write("plain.0", 0, offset=3, kind="plain")
    s.end(4)
    [violation] = check(s.events).violations
    assert violation.kind == "lost-write" and "plain.0|0 " in violation.message
    assert violation.lines == (s.events[-2]["i"],)  # the ack that was lost


def test_an_ack_without_an_offset_is_looked_for_by_value_and_is_not_an_offset_handed_out() -> None:
    """librdkafka reports a batch delivered with no offset when a later batch of its producer is stored
    while it has no answer for this one: found anywhere in the partition it is verified, missing it is a
    lost write (two such acks are not one offset handed out twice)."""
    s = healthy()
    kept = s.write("idem.0", 3, offset=None)  # type: ignore[arg-type]
    s.final(3, kept)
    s.write("idem.1", 0, offset=None)  # type: ignore[arg-type]
    s.end(4)
    verdict = check(s.events)
    assert [(v.kind, "idem.1|0 " in v.message) for v in verdict.violations] == [("lost-write", True)]
    assert verdict.verified == 4


def test_a_loss_in_a_damaged_quarantined_partitionlet_is_allowed_and_listed() -> None:
    s = healthy()
    lost = s.write("idem.0", 3, offset=3)
    s.damage(0, 3, None, name="flip-active")
    s.add("quarantine", topic=A, partition=0, first=3, last=3, line="... quarantine offsets 3..3")
    s.end(4)
    verdict = check(s.events)
    assert verdict.violations == []
    [allowed] = verdict.allowed_losses
    assert allowed.kind == "lost-to-damage" and short(lost) in allowed.message and verdict.verified == 3


def test_a_loss_of_a_write_sent_after_the_damage_is_a_violation_even_when_quarantined() -> None:
    """The shape of a known bug: after a quarantine, a later acknowledged batch is cut at the next restart."""
    s = healthy()
    s.damage(0, 0, None, name="flip-active")
    s.write("idem.0", 3, offset=3)
    s.add("quarantine", topic=A, partition=0, first=3, last=3, line="... quarantine offsets 3..3")
    s.end(4)
    assert s.kinds() == ["lost-write"]
    assert "no damage done after the ack" in check(s.events).violations[0].message


def test_a_quarantine_without_damage_to_that_partitionlet_does_not_excuse_a_loss() -> None:
    s = healthy()
    s.write("idem.0", 3, offset=3)
    s.damage(1, 0, None)  # another partition
    s.damage(0, 0, 3)  # this partition, but a partitionlet ending before offset 3
    s.add("quarantine", topic=A, partition=0, first=3, last=3, line="... quarantine offsets 3..3")
    s.end(4)
    assert s.kinds() == ["lost-write"]


def test_a_final_read_that_stopped_short_is_unverified() -> None:
    s = healthy()
    s.write("idem.0", 3, offset=3)
    s.end(3, complete=False)
    assert s.kinds() == ["unverified"]


def test_an_offset_handed_out_twice_is_caught() -> None:
    s = healthy()
    s.write("plain.0", 0, offset=2, kind="plain")  # offset 2 already went to idem.0|2
    assert "offset-reused" in s.kinds()
    s = healthy()
    s.add("read", reader="rc-reader", isolation="read_committed", topic=A, partition=0, offset=1,
          value="plain.0|9|x")  # seen once at offset 1 during the run, another value there at the end
    assert s.kinds() == ["offset-reused"]


def test_offsets_handed_out_twice_in_a_row_are_one_violation_naming_the_run() -> None:
    s = healthy()
    for seq in range(3):
        s.write("plain.0", seq, offset=seq, kind="plain")  # offsets 0..2 again
    [violation] = check(s.events).violations
    assert violation.kind == "offset-reused" and "offsets 0..2 (3 offsets" in violation.message
    assert violation.lines == (2, 12)  # offset 0's first ack (idem.0|0) and the second one (plain.0|0)


def unseen_cut(s: Story, from_offset: int | None) -> None:
    """truncate-active after a kill -9; at a batch boundary past the checkpoint when `from_offset` is given."""
    damage = {"topic": A, "partition": 0, "first": 0, "end": None}
    if from_offset is not None:
        damage["unnoticeable_from"] = from_offset
    s.add("fault", name="truncate-active", phase="start", stopped_by="kill", detail="truncated from 300 to 200 bytes",
          damage=damage)


def test_a_cut_the_broker_cannot_see_allows_loss_and_reuse_from_that_offset_on_listed_not_silent() -> None:
    """The one exception docs/operations.md names: an active log cut at a batch boundary while the broker is down."""
    def story(from_offset: int | None) -> Story:
        s = healthy()
        s.add("commit", group="g", member="m", topic=A, partition=0, offset=3)
        unseen_cut(s, from_offset)
        s.write("plain.0", 0, offset=1, kind="plain")  # offset 1 again: idem.0|1 and idem.0|2 are gone
        asked = s.add("committed", group="g", topic=A, partition=0, offset=0, asked_at=0.0)  # the group reset
        asked["asked_at"] = asked["t"]
        s.events = [e for e in s.events if e["type"] not in ("final", "final-end") or e.get("offset") == 0]
        s.final(1, "plain.0|0|x")
        s.end(2)
        return s

    assert story(None).kinds() == ["commit-regressed", "lost-write", "offset-reused"]
    verdict = check(story(1).events)
    assert verdict.violations == [] and verdict.verified == 2  # idem.0|0, plain.0|0
    assert [a.kind for a in verdict.allowed_losses] == ["lost-to-unseen-cut"] * 2  # idem.0|1 and idem.0|2
    assert verdict.verified + len(verdict.allowed_losses) == verdict.acknowledged
    assert sorted(a.kind for a in verdict.allowed_other) == ["commit-lost-to-damage", "offset-reused-after-unseen-cut"]
    assert all("truncated from 300 to 200 bytes" in a.message for a in verdict.allowed_losses)


def test_a_cut_the_broker_cannot_see_excuses_nothing_below_it_nor_before_it() -> None:
    s = healthy()
    unseen_cut(s, 2)
    s.events = [e for e in s.events if not (e["type"] == "final" and e["offset"] == 1)]  # offset 1 < the cut
    assert s.kinds() == ["lost-write"]
    s = healthy()
    unseen_cut(s, 2)
    s.write("idem.0", 3, offset=3)  # sent after the cut: nothing excuses its loss
    s.end(4)
    assert s.kinds() == ["lost-write"]
    s = Story()
    unseen_cut(s, 0)
    s.write("idem.0", 0, offset=0)
    s.write("plain.0", 0, offset=0, kind="plain")  # both after the cut: a plain reuse
    assert "offset-reused" in s.kinds()


def test_an_idempotent_producer_record_stored_twice_is_a_duplicate_but_a_plain_one_is_not() -> None:
    s = healthy()
    s.final(3, "idem.0|2|x")
    s.end(4)
    assert s.kinds() == ["duplicate"]
    s = healthy()
    plain = s.write("plain.0", 0, offset=3, kind="plain")
    s.final(3, plain)
    s.final(4, plain)  # acks=1 without idempotence: a retry may store it twice, as on Kafka
    s.end(5)
    assert s.kinds() == []


def test_an_idempotent_producer_reordered_is_caught() -> None:
    s = Story()
    first, second = s.write("idem.0", 0, offset=1), s.write("idem.0", 1, offset=0)
    s.final(0, second)
    s.final(1, first)
    s.end(2)
    assert s.kinds() == ["reordered"]


def test_committed_offsets_going_back_are_caught_unless_cursors_were_damaged() -> None:
    def story(damaged: bool) -> Story:
        s = healthy()
        s.add("commit", group="g", member="m", topic=A, partition=0, offset=3)
        if damaged:
            s.add("fault", name="delete-metadata", phase="start", file="streams/chaos/.cursors", cursors=True)
        asked = s.add("committed", group="g", topic=A, partition=0, offset=1, asked_at=0.0)
        asked["asked_at"] = asked["t"]
        return s

    assert story(False).kinds() == ["commit-regressed"]
    verdict = check(story(True).events)
    assert verdict.violations == [] and [a.kind for a in verdict.allowed_other] == ["commit-lost-to-damage"]


def test_a_committed_offset_asked_before_the_commit_was_acknowledged_may_be_older() -> None:
    s = healthy()
    asked_at = s.add("send", producer="x", kind="plain", seq=0, topic=A, partition=1, value="x|0|x")["t"]
    s.add("commit", group="g", member="m", topic=A, partition=0, offset=3)
    s.add("committed", group="g", topic=A, partition=0, offset=1, asked_at=asked_at)
    assert s.kinds() == []


def test_read_committed_showing_an_aborted_transaction_is_caught_and_its_loss_is_no_loss() -> None:
    s = healthy()
    aborted = s.write("txn.0", 0, offset=3, kind="txn", txn=1)
    s.add("txn", producer="txn.0", txn=1, outcome="aborted", values=[aborted])
    s.end(4)  # not in the final read: it was never promised
    assert s.kinds() == []
    s.add("read", reader="rc-reader", isolation="read_committed", topic=A, partition=0, offset=3, value=aborted)
    assert s.kinds() == ["aborted-read"]


def test_a_committed_transaction_must_survive() -> None:
    s = healthy()
    value = s.write("txn.0", 0, offset=3, kind="txn", txn=1)
    s.add("txn", producer="txn.0", txn=1, outcome="committed", values=[value])
    s.end(4)
    assert s.kinds() == ["lost-write"]


def test_a_broker_that_does_not_start_or_stop_cleanly_is_a_violation() -> None:
    s = healthy()
    s.add("broker", action="stopped", rc=1, clean=False)
    s.add("broker", action="start-failed", reason="exit status 4")
    s.add("broker", action="stopped", rc=0, clean=True)
    s.add("broker", action="internal-error", line="ERROR closing connection from 127.0.0.1:1 after an internal error")
    assert s.kinds() == ["internal-error", "start-failed", "unclean-stop"]


def test_a_stop_on_a_full_disk_may_leave_the_clean_marker_out_but_must_exit_0() -> None:
    s = healthy()
    s.add("fault", name="full-disk-sigterm", phase="start", filled=1 << 20, free=0)
    s.add("broker", action="stopped", rc=0, clean=False)  # a manifest could not be saved: docs/operations.md allows it
    s.add("broker", action="stopped", rc=1, clean=False)
    s.add("fault", name="full-disk-sigterm", phase="end")
    s.add("broker", action="stopped", rc=0, clean=False)  # room again: the marker is owed
    assert s.kinds() == ["unclean-stop", "unclean-stop"]
    assert [v.lines for v in check(s.events).violations] == [(s.events[-3]["i"],), (s.events[-1]["i"],)]


def stalled_at_damage(told: bool, skip_damaged: bool = False, lagging: bool = False) -> Story:
    """rc-reader read offsets 0..1 of three; offset 2 was quarantined; the consumers stopped 20 s later."""
    s = healthy()
    s.add("campaign", skip_damaged=skip_damaged)
    for offset in range(1 if lagging else 2):
        s.add("read", reader="rc-reader", isolation="read_committed", topic=A, partition=0, offset=offset,
              value=f"idem.0|{offset}|x")
    s.add("quarantine", topic=A, partition=0, first=2, last=9, line="... quarantine offsets 2..9")
    if told:
        s.add("read-error", reader="rc-reader", topic=A, partition=0, offset=2, code="INVALID_MSG",
              error="Fetch from broker 1 failed at offset 2: Broker: Invalid message")
    s.add("campaign", consumers_stopping=True)["t"] += 20
    for offset in range(2):
        s.final(offset, f"idem.0|{offset}|x", isolation="read_committed")
    return s


def test_without_skip_damaged_a_consumer_stalled_at_a_quarantined_range_must_have_been_told() -> None:
    assert stalled_at_damage(told=False).kinds() == ["not-told"]
    assert "rc-reader stopped at chaos..a/0 offset 2" in check(stalled_at_damage(told=False).events).violations[0].message
    assert stalled_at_damage(told=True).kinds() == []
    assert stalled_at_damage(told=False, lagging=True).kinds() == []  # offset 1 unread: it never got there
    assert stalled_at_damage(told=False, skip_damaged=True).kinds() == []  # reads step over the range
    s = stalled_at_damage(told=True)  # told at 2..9, where it stays; a later range is not where it stopped
    at = next(k for k, e in enumerate(s.events) if e.get("consumers_stopping"))
    s.events.insert(at, {"i": 99, "t": s.events[at - 1]["t"], "type": "quarantine", "topic": A, "partition": 0,
                         "first": 10, "last": 20, "line": "... quarantine offsets 10..20"})
    assert s.kinds() == []


def test_the_history_file_round_trips(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl")
    history.record("send", producer="p", value="p|0|x")
    history.record("fault", name="kill", phase="start")
    history.close()
    events = load(tmp_path / "h.jsonl")
    assert [(e["i"], e["type"]) for e in events] == [(1, "send"), (2, "fault")]
    assert events[0]["t"] <= events[1]["t"]


def test_a_plain_record_stored_twice_is_counted_not_failed() -> None:
    s = Story()
    value = s.write("plain.0", 0, offset=0, kind="plain")
    s.final(0, value)
    s.final(1, value)  # a retry of a request whose answer was lost
    s.end(2)
    verdict = check(s.events)
    assert verdict.violations == [] and verdict.plain_duplicates == 1
    assert check(healthy().events).plain_duplicates == 0


def test_plain_records_stored_twice_are_grouped_in_runs_by_partition_and_send_time() -> None:
    """A failure before the answers of a run of requests makes the producer resend the whole run: the report
    names the runs, largest first, with the time of their first send, to trace each one."""
    s = Story()
    offset = 0
    for seq in range(5):  # a run of three on partition 0, and a lone one 10 s later
        value = s.write("plain.0", seq, offset=offset, kind="plain")
        s.events[-2]["t"] = [1.0, 1.5, 2.0, 12.0, 13.0][seq]
        copies = 1 if seq == 4 else 2
        for _ in range(copies):
            s.final(offset, value)
            offset += 1
    value = s.write("plain.0", 5, offset=0, kind="plain", partition=1)
    s.events[-2]["t"] = 3.0
    s.final(0, value, partition=1)
    s.final(1, value, partition=1)
    assert duplicate_runs(s.events) == [(3, f"{A}-0", 1.0), (1, f"{A}-1", 3.0), (1, f"{A}-0", 12.0)]
    assert duplicate_runs(healthy().events) == []
