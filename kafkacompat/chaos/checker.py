"""The rules a campaign's history must obey, each a function over the events.

What an acknowledgement promises comes from the docs (docs/benchmarks.md, "What
an acknowledgement promises"; docs/operations.md, "Damaged storage"): a batch is in its partitionlet before any answer,
so killing or pausing the broker, filling its disk or damaging metadata files
loses nothing acknowledged under any fsync policy; damage to a partitionlet's
own bytes may lose what those bytes held, and the broker then quarantines the
range (never reusing its offsets). So an acknowledged write missing at the
end is allowed only when the broker reported a quarantined range holding it
and the nemesis damaged the partitionlet file holding that offset after the
write was sent (an acknowledgement may reach the client's callback after the
broker was stopped for the damage, so its own time proves nothing); such
losses are listed, never counted as verified.
A deleted or garbled `.cursors` file may likewise take committed offsets
back ("a deleted one starts the stream's groups afresh").
One loss docs/operations.md names as beyond detection: an active log cut exactly at
a batch boundary, past its manifest's checkpoint, while the broker was down
after a kill (the nemesis marks it `unnoticeable_from`, the first offset cut
off). The start reads it as a log that ended there, so from that offset on
acknowledged writes may be lost without a quarantine, offsets handed out
again, and a consumer group reset to the start may commit lower offsets;
each is listed as allowed, naming the cut, never counted as verified.
Without --skip-damaged, a consumer that stopped at a quarantined range must
have been told (an error event), never left stalling in silence.
The replication engine's own rules (the replica, carried cursors, failover)
are in replica_checker.py.

Events (see history.py for `i` and `t`):
  send/ack/send-failed   producer, kind (idempotent|plain|txn), seq, topic, partition, offset (ack), value
  txn                    producer, txn, outcome (committed|aborted|unknown), values
  read/final             reader, isolation, topic, partition, offset, value (final: the closing full read)
  read-error             reader, topic, partition, offset, code, error (an error event a consumer's poll gave)
  campaign               settings (skip_damaged: false when consumers must be told at a quarantined range);
                         consumers_stopping (when the consumers were told to stop)
  final-end              topic, partition, isolation, end (the end offset the final read reached), complete
  commit/committed       group, topic, partition, offset (committed: asked_at, when the fetch was sent)
  fault                  name, phase (start|end), damage {topic, partition, first, end[, unnoticeable_from]} for
                         partitionlet damage,
                         cursors (true when a stream's .cursors file was damaged)
  quarantine             topic, partition, first, last, line (the broker's log line)
  broker                 node, action (started|killed|stopped|start-failed|internal-error), rc, clean, line
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable

from .history import Event
from .replica_checker import replication_rules

IDEMPOTENT_KINDS = ("idempotent", "txn")  # librdkafka's transactional producer is idempotent too


@dataclasses.dataclass(frozen=True)
class Violation:
    kind: str
    message: str
    lines: tuple[int, ...]  # history line numbers that show it
    where: tuple[str, int, int] | None = None  # (topic, partition, offset) of an offset reused


@dataclasses.dataclass
class Verdict:
    operations: dict[str, int]
    faults: dict[str, int]
    acknowledged: int
    verified: int
    allowed_losses: list[Violation]  # acknowledged writes lost where docs/operations.md allows it
    allowed_other: list[Violation]  # committed offsets gone back, offsets reused, where docs/operations.md allows it
    violations: list[Violation]
    replicated: int = 0  # acknowledged writes found on every replica as the source keeps them (replication engine)
    plain_duplicates: int = 0  # extra copies of plain (acks=1, not idempotent) records: retries may store twice


def check(events: list[Event]) -> Verdict:
    """Every rule over one history."""
    ops: dict[str, int] = defaultdict(int)
    faults: dict[str, int] = defaultdict(int)
    for e in events:
        ops[e["type"]] += 1
        if e["type"] == "fault" and e["phase"] == "start":
            faults[e["name"] + (" (nothing to damage yet)" if e.get("skipped") else "")] += 1
    acked = acknowledged_writes(events)
    verified, allowed, lost = check_acknowledged(events, acked)
    reused, other = split_unseen_cuts(offsets_handed_out_twice(events), events)
    replicated, replica_violations = replication_rules(events, acked, Violation)
    violations = [*lost, *reused, *idempotent_order(events),
                  *committed_offsets_go_back(events, other), *aborted_reads(events), *broker_troubles(events),
                  *consumers_not_told(events), *replica_violations]
    return Verdict(dict(ops), dict(faults), len(acked), verified, allowed, other, violations, replicated,
                   plain_copies(events))


def acknowledged_writes(events: list[Event]) -> list[Event]:
    """Acks whose promise holds: plain and idempotent ones, and those of committed transactions."""
    committed = {(e["producer"], v) for e in events if e["type"] == "txn" and e["outcome"] == "committed"
                 for v in e["values"]}
    return [e for e in events if e["type"] == "ack"
            and (e["kind"] != "txn" or (e["producer"], e["value"]) in committed)]


def _finals(events: list[Event]) -> dict[tuple[str, int, int], Event]:
    return {(e["topic"], e["partition"], e["offset"]): e for e in events
            if e["type"] == "final" and e["isolation"] == "read_uncommitted"}


def _final_ends(events: list[Event]) -> dict[tuple[str, int], Event]:
    return {(e["topic"], e["partition"]): e for e in events
            if e["type"] == "final-end" and e["isolation"] == "read_uncommitted"}


def check_acknowledged(events: list[Event], acked: list[Event]) -> tuple[int, list[Violation], list[Violation]]:
    """(verified count, losses the docs allow, lost writes): each ack found at its offset in the final read."""
    finals, ends = _finals(events), _final_ends(events)
    quarantines = [e for e in events if e["type"] == "quarantine"]
    damages = [e for e in events if e["type"] == "fault" and e["phase"] == "start" and e.get("damage")]
    sent: dict[str, float] = {}
    for e in events:
        if e["type"] == "send":
            sent.setdefault(e["value"], e["t"])
    stored = {(e["topic"], e["partition"], e["value"]) for e in finals.values()}
    verified, allowed, lost = 0, [], []
    for ack in acked:
        if ack["offset"] is None:  # delivered, said librdkafka, because a later batch of its producer was
            if (ack["topic"], ack["partition"], ack["value"]) in stored:
                verified += 1
            else:
                lost.append(Violation("lost-write", f"acknowledged {short(ack['value'])} ({ack['kind']}) at {_tp(ack)}, "
                                      "with no offset (reported delivered because a later batch was), is lost: "
                                      "missing from the final read", (ack["i"],)))
            continue
        where = (ack["topic"], ack["partition"], ack["offset"])
        found = finals.get(where)
        if found is not None and found["value"] == ack["value"]:
            verified += 1
            continue
        after_send = [d for d in damages if d["t"] > sent.get(ack["value"], ack["t"])]
        cut = _unseen_cut(after_send, ack["topic"], ack["partition"], ack["offset"])
        if found is not None and cut is None:
            continue  # a different value at the offset: offsets_handed_out_twice reports it
        end = ends.get(where[:2])
        if end is None or (not end["complete"] and end["end"] <= ack["offset"]):
            lost.append(Violation("unverified", f"final read never reached {_tp(ack)} offset {ack['offset']}",
                                  (ack["i"],) + ((end["i"],) if end else ())))
            continue
        quarantine = _covering(quarantines, ack)
        if cut is not None and (found is not None or not quarantine):
            allowed.append(Violation("lost-to-unseen-cut", f"{short(ack['value'])} at {_tp(ack)} offset "
                                     f"{ack['offset']} was cut off at a batch boundary while the broker was down "
                                     f"({cut['detail']}), the loss docs/operations.md says a start cannot see",
                                     (ack["i"], cut["i"])))
            continue
        if quarantine:  # name the damage that the broker's finding followed
            after_send.sort(key=lambda d: (d["t"] > quarantine["t"], -d["t"]))
        damage = _covering(after_send, ack, key="damage")
        if quarantine and damage:
            allowed.append(Violation("lost-to-damage", f"{short(ack['value'])} at {_tp(ack)} offset {ack['offset']} was "
                                     f"in a partitionlet damaged by {damage['name']}; quarantined by the broker",
                                     (ack["i"], damage["i"], quarantine["i"])))
        else:
            why = ("quarantined, but no damage done after the ack covers it" if quarantine
                   else "missing from the final read, with no quarantined range reported")
            lost.append(Violation("lost-write", f"acknowledged {short(ack['value'])} ({ack['kind']}) at {_tp(ack)} offset "
                                  f"{ack['offset']} is lost: {why}",
                                  (ack["i"],) + ((quarantine["i"],) if quarantine else ())))
    return verified, allowed, lost


def _covering(spans: Iterable[Event], ack: Event, key: str | None = None) -> Event | None:
    for e in spans:
        span = e[key] if key else e
        if (span["topic"], span["partition"]) != (ack["topic"], ack["partition"]):
            continue
        last = span["last"] if "last" in span else (span["end"] - 1 if span["end"] is not None else None)
        if span["first"] <= ack["offset"] and (last is None or ack["offset"] <= last):
            return e
    return None


def _unseen_cut(damages: Iterable[Event], topic: str, partition: int, offset: int) -> Event | None:
    """A fault among `damages` that cut (topic, partition) at a batch boundary at or below `offset`."""
    for d in damages:
        span = d.get("damage") or {}
        if (span.get("topic"), span.get("partition")) == (topic, partition) and \
                span.get("unnoticeable_from") is not None and span["unnoticeable_from"] <= offset:
            return d
    return None


def split_unseen_cuts(reused: list[Violation], events: list[Event]) -> tuple[list[Violation], list[Violation]]:
    """(violations, allowed): an offset handed out again is allowed only from an unseen cut on, when the cut
    came between the first value's line and the second's."""
    cuts = [e for e in events if e["type"] == "fault" and e["phase"] == "start"
            and (e.get("damage") or {}).get("unnoticeable_from") is not None]
    out, allowed = [], []
    for v in reused:
        topic, partition, first = v.where
        cut = _unseen_cut([c for c in cuts if v.lines[0] < c["i"] < v.lines[-1]], topic, partition, first)
        if cut is None:
            out.append(v)
        else:
            allowed.append(Violation("offset-reused-after-unseen-cut", f"{v.message}, after {cut['name']} cut the "
                                     f"log at a batch boundary while the broker was down ({cut['detail']})",
                                     (*v.lines, cut["i"]), v.where))
    return out, allowed


def offsets_handed_out_twice(events: list[Event]) -> list[Violation]:
    """Two different values seen at one offset (acks, reads and the final read together); one violation per
    run of consecutive such offsets in a partition, with the history lines of its first offset."""
    seen: dict[tuple[str, int, int], dict[str, int]] = defaultdict(dict)
    for e in events:
        if e["type"] in ("ack", "read", "final") and e["offset"] is not None:
            seen[(e["topic"], e["partition"], e["offset"])].setdefault(e["value"], e["i"])
    twice = sorted(k for k, vals in seen.items() if len(vals) > 1)
    runs: list[list[tuple[str, int, int]]] = []
    for key in twice:
        if runs and runs[-1][-1][:2] == key[:2] and runs[-1][-1][2] + 1 == key[2]:
            runs[-1].append(key)
        else:
            runs.append([key])
    out = []
    for run in runs:
        (topic, partition, first), last = run[0], run[-1][2]
        values = seen[run[0]]
        span = f"offset {first}" if len(run) == 1 else f"offsets {first}..{last} ({len(run)} offsets; at {first}"
        out.append(Violation("offset-reused", f"{topic}/{partition} {span} handed out for {len(values)} values: "
                             f"{sorted(map(short, values))}" + (")" if len(run) > 1 else ""),
                             tuple(sorted(values.values())), (topic, partition, first)))
    return out


def idempotent_order(events: list[Event]) -> list[Violation]:
    """Each idempotent producer's records are stored once each, in the order it sent them, per partition."""
    out: list[Violation] = []
    kinds = {e["producer"]: e["kind"] for e in events if e["type"] == "send"}
    by_value: dict[str, list[Event]] = defaultdict(list)
    stream: dict[tuple[str, str, int], list[Event]] = defaultdict(list)
    for e in sorted(_finals(events).values(), key=lambda e: e["offset"]):
        producer, seq = parse_value(e["value"])
        if kinds.get(producer) in IDEMPOTENT_KINDS:
            by_value[e["value"]].append(e)
            stream[(producer, e["topic"], e["partition"])].append(e)
    for value, copies in by_value.items():
        if len(copies) > 1:
            out.append(Violation("duplicate", f"{short(value)} of an idempotent producer is stored {len(copies)} times "
                                 f"(offsets {[c['offset'] for c in copies]})", tuple(c["i"] for c in copies)))
    for (producer, topic, partition), records in stream.items():
        for before, after in zip(records, records[1:]):
            if parse_value(after["value"])[1] < parse_value(before["value"])[1]:  # equal: a duplicate
                out.append(Violation("reordered", f"{producer} on {topic}/{partition}: {short(after['value'])} stored "
                                     f"after {short(before['value'])}", (before["i"], after["i"])))
    return out


def plain_copies(events: list[Event]) -> int:
    """Copies beyond the first of plain producers' records in the final read (allowed: a retry of a request
    whose answer was lost stores the batch again; the issue's target is under 0.1% of sends)."""
    return sum(n - 1 for n in _plain_copies(events).values())


def _plain_copies(events: list[Event]) -> dict[tuple[str, int, str], int]:
    """(topic, partition, value) -> how many times the final read holds each plain producer's record."""
    kinds = {e["producer"]: e["kind"] for e in events if e["type"] == "send"}
    copies: dict[tuple[str, int, str], int] = defaultdict(int)
    for e in _finals(events).values():
        if kinds.get(parse_value(e["value"])[0]) == "plain":
            copies[(e["topic"], e["partition"], e["value"])] += 1
    return copies


RUN_GAP_S = 5.0  # records sent further apart than this start another run of duplicates


def duplicate_runs(events: list[Event]) -> list[tuple[int, str, float]]:
    """Runs of plain records stored twice, largest first: (records, topic-partition, first send's t). A
    failure before the answers of a run of requests (a leader killed or paused, an outage) makes its
    producer resend the whole run; a few runs made most duplicates of a 60-minute campaign, each to be
    traced from its time (the campaign event's `clock` lines it up with broker.log and clients.log)."""
    sent = {e["value"]: e["t"] for e in events if e["type"] == "send" and e["kind"] == "plain"}
    times: dict[str, list[float]] = defaultdict(list)
    for (topic, partition, value), n in _plain_copies(events).items():
        if n > 1 and value in sent:
            times[f"{topic}-{partition}"].append(sent[value])
    runs: list[tuple[int, str, float]] = []
    for where, ts in times.items():
        ts.sort()
        start, count = ts[0], 1
        for before, t in zip(ts, ts[1:]):
            if t - before > RUN_GAP_S:
                runs.append((count, where, start))
                start, count = t, 0
            count += 1
        runs.append((count, where, start))
    return sorted(runs, key=lambda run: (-run[0], run[2]))


def short(value: str) -> str:
    """`producer|seq` of a workload value, for messages (the history lines have it whole)."""
    return value.rsplit("|", 1)[0]


def parse_value(value: str) -> tuple[str, int]:
    """(producer, sequence number) of a workload value `producer|seq|padding`."""
    producer, seq, _ = value.split("|", 2)
    return producer, int(seq)


def committed_offsets_go_back(events: list[Event], allowed: list[Violation]) -> list[Violation]:
    """A committed offset read back is never below one acknowledged before the read was asked,
    unless a .cursors file was damaged in between, or the partition's log was cut below the committed
    offset where a start cannot see it (its consumers then start again from the beginning): then the
    step back is listed as allowed."""
    out: list[Violation] = []
    faults = [e for e in events if e["type"] == "fault" and e["phase"] == "start"]
    cursor_damage = [e for e in faults if e.get("cursors")]
    commits: dict[tuple[str, str, int], list[Event]] = defaultdict(list)
    for e in events:
        key = (e.get("group"), e.get("topic"), e.get("partition"))
        if e["type"] == "commit":
            commits[key].append(e)
        elif e["type"] == "committed":
            before = [c for c in commits[key] if c["t"] < e["asked_at"]]
            if not before:
                continue
            top = max(before, key=lambda c: c["offset"])
            if e["offset"] >= top["offset"]:
                continue
            damage = [d for d in cursor_damage if top["t"] < d["t"] < e["t"]]
            cut = _unseen_cut([d for d in faults if top["t"] < d["t"] < e["t"]], key[1], key[2], top["offset"] - 1)
            damage += [cut] if cut is not None else []
            v = Violation("commit-regressed" if not damage else "commit-lost-to-damage",
                          f"group {key[0]} {key[1]}/{key[2]}: committed offset read back as {e['offset']} after "
                          f"{top['offset']} was acknowledged", (top["i"], e["i"], *(d["i"] for d in damage)))
            (allowed if damage else out).append(v)
    return out


def aborted_reads(events: list[Event]) -> list[Violation]:
    """A read_committed reader never sees a record of an aborted transaction."""
    aborted = {v: e for e in events if e["type"] == "txn" and e["outcome"] == "aborted" for v in e["values"]}
    return [Violation("aborted-read", f"{e['reader']} (read_committed) read {short(e['value'])} of an aborted transaction",
                      (aborted[e["value"]]["i"], e["i"]))
            for e in events if e["type"] in ("read", "final") and e["isolation"] == "read_committed"
            and e["value"] in aborted]


def broker_troubles(events: list[Event]) -> list[Violation]:
    """The broker must start after every fault, stop cleanly (status 0, clean marker) on SIGTERM, and never
    close a connection over an internal error (it answers a named Kafka error instead). On a full disk a
    stop is status 0 but may leave the marker out (docs/operations.md, "Damaged storage": a manifest it could not save
    makes the next start check every tail as after a crash)."""
    out = []
    full = False
    for e in events:
        if e["type"] == "fault" and e["name"] == "full-disk-sigterm":
            full = e["phase"] == "start"
        if e["type"] != "broker":
            continue
        if e["action"] == "start-failed":
            out.append(Violation("start-failed", f"the broker did not start: {e.get('reason')}", (e["i"],)))
        elif e["action"] == "internal-error":
            out.append(Violation("internal-error", f"the broker logged: {e['line'][:300]}", (e["i"],)))
        elif e["action"] == "stopped" and (e["rc"] != 0 or not (e["clean"] or full)):
            out.append(Violation("unclean-stop", f"SIGTERM: exit status {e['rc']}, clean marker "
                                 f"{'written' if e['clean'] else 'missing'}", (e["i"],)))
    return out


TOLD_WITHIN = 15.0  # seconds a consumer at a quarantined range gets to receive its error event


def consumers_not_told(events: list[Event], reader: str = "rc-reader") -> list[Violation]:
    """Without --skip-damaged, a consumer that reached a quarantined range is told (an error event from its
    poll, CORRUPT_MESSAGE) instead of stalling in silence (docs/operations.md, "Damaged storage"). Checked for the
    reader assigned every partition: where it stopped at a range (it read every committed record before the
    range, none after) with time to have fetched there, it must have had an error event for that partition."""
    if not any(e["type"] == "campaign" and e.get("skip_damaged") is False for e in events):
        return []
    stopping = next((e["t"] for e in events if e["type"] == "campaign" and e.get("consumers_stopping")), None)
    if stopping is None:
        return []
    reads: dict[tuple[str, int], list[Event]] = defaultdict(list)
    told: dict[tuple[str, int], list[Event]] = defaultdict(list)
    committed: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in events:
        if e["type"] == "read" and e["reader"] == reader:
            reads[(e["topic"], e["partition"])].append(e)
        elif e["type"] == "read-error" and e["reader"] == reader:
            told[(e["topic"], e["partition"])].append(e)
        elif e["type"] == "final" and e["isolation"] == "read_committed":
            committed[(e["topic"], e["partition"])].append(e["offset"])
    out, ranges = [], defaultdict(dict)
    for q in events:
        if q["type"] == "quarantine" and q["t"] < stopping:
            ranges[(q["topic"], q["partition"])].setdefault((q["first"], q["last"]), q)
    for tp, spans in ranges.items():
        topic, partition = tp
        last_read = max(reads[tp], key=lambda e: e["offset"], default=None)
        position = last_read["offset"] + 1 if last_read else 0
        ahead = sorted(s for s in spans if s[1] >= position)  # the first one holds or follows the position
        if not ahead:
            continue
        first, last = min(ahead, key=lambda s: (not s[0] <= position, s[0]))
        q = spans[(first, last)]
        if any(position <= o < first for o in committed[tp]):
            continue  # not there yet
        since = max(q["t"], last_read["t"] if last_read else 0.0)
        if stopping - since < TOLD_WITHIN:
            continue
        if not any(first <= e["offset"] <= last or e["offset"] < 0 for e in told[tp]):
            out.append(Violation("not-told", f"{reader} stopped at {topic}/{partition} offset {position}, in the "
                                 f"quarantined range {first}..{last}, without an error event", (q["i"],)
                                 + ((last_read["i"],) if last_read else ())))
    return out


def _tp(e: Event) -> str:
    return f"{e['topic']}/{e['partition']}"
