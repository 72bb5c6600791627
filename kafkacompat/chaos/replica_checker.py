"""The rules of a replication campaign: what docs/replication.md promises, checked from the history alone.

The promises, in the words of docs/replication.md, and the rule that holds each:
- "every message at the same offset in every cluster", shipped "byte for byte, with their offsets":
  each record acknowledged by the source and kept by it is on the replica at the same offset with the same
  key, value, headers and timestamp (`replica-lost-write`), and the replica's partitions, read whole at
  both isolation levels, hold exactly what the source's do, in order, no duplicate, no gap
  (`replica-differs`; "A read_committed consumer of a replica therefore reads exactly what it reads at the
  source, as far as the replica has caught up");
- "A link resumes after a restart of either side from where the destination ends: nothing is lost,
  nothing is appended twice": once the campaign is over and both clusters up, the replica's end offsets
  reach the source's within the engine's wait (`replica-behind`);
- "Cursors (committed offsets with their metadata) are shipped once the messages they point at are on the
  replica, newest commit winning": a carried cursor never points past the replica's end, during the run
  or after it (`cursor-past-end`) and, once caught up, equals the source's (`cursor-not-carried`);
- "a consumer group moved to another cluster's bootstrap address resumes at its last commit: nothing
  skipped": the group's consumer switched to the replica reads every acknowledged record from its carried
  cursor on (`failover-skipped`).
The operator's `stream replica pause` and `resume` (the nemesis's link fault) answer status 0 while the
source cluster is up (`link-command-failed`).
The source's own records are judged by checker.py's rules, as on the disk engine; a record the source lost
where docs/operations.md allows it is then no promise the replica must keep.

Events (besides checker.py's):
  replica-final/-end      as final/final-end, read from the replica (with key, headers, timestamp)
  replica-end             topic, partition, source, replica (end offsets after the wait), waited
  replica-cursor          group, topic, partition, source, replica (committed, -1: none), replica_end
  replica-observed        group, topic, partition, cursor, end: during the run, the replica's cursor, then its end
  failover-read           group, topic, partition, offset, value (the group's consumer on the replica)
  failover-end            group, complete (every partition read to its end)
  link                    link (pause|resume), rc, said: the operator's command and its answer
"""

from __future__ import annotations

from collections import defaultdict

from .history import Event

Record = tuple[object, ...]
COMPARED = ("value", "key", "headers", "timestamp")


def replication_rules(events: list[Event], acknowledged: list[Event], violation: type) -> tuple[int, list]:
    """(acknowledged writes verified on the replica, violations made by `violation`, checker.py's type, which
    imports this module); nothing for a run of another engine."""
    if not any(e["type"] == "campaign" and e.get("engine") == "replication" for e in events):
        return 0, []
    out: list = []
    source, replica = _records(events, "final"), _records(events, "replica-final")
    replicated, lost = _acknowledged_on_replica(acknowledged, source, replica, violation)
    out += lost
    reported = {(v.where[0], v.where[1], v.where[2]) for v in lost if v.where}
    out += _differences(source, replica, reported, _stable_bounds(events), violation)
    out += [violation("replica-behind", f"{e['topic']}/{e['partition']}: the replica ends at {e['replica']}, the "
                      f"source at {e['source']}, {e['waited']} s after both were up", (e["i"],))
            for e in events if e["type"] == "replica-end" and e["replica"] != e["source"]]
    out += [violation("replica-unverified", f"the replica's final read never reached {e['topic']}/{e['partition']}'s "
                      f"end ({e['isolation']})", (e["i"],))
            for e in events if e["type"] == "replica-final-end" and not e["complete"]]
    out += [violation("link-command-failed", f"`stream replica {e['link']}` failed with status {e['rc']}: "
                      f"{e['said']}", (e["i"],)) for e in events if e["type"] == "link" and e["rc"] != 0]
    out += _cursor_rules(events, violation)
    out += _failover_rules(events, acknowledged, violation)
    return replicated, out


def _records(events: list[Event], kind: str) -> dict[tuple[str, str, int], dict[int, Event]]:
    """{(isolation, topic, partition): {offset: event}} of one cluster's final read."""
    out: dict[tuple[str, str, int], dict[int, Event]] = defaultdict(dict)
    for e in events:
        if e["type"] == kind:
            out[(e["isolation"], e["topic"], e["partition"])][e["offset"]] = e
    return out


def _same(a: Event, b: Event) -> bool:
    return all(a.get(k) == b.get(k) for k in COMPARED)


def _acknowledged_on_replica(acknowledged: list[Event], source: dict, replica: dict, violation: type
                             ) -> tuple[int, list]:
    verified, out = 0, []
    for ack in acknowledged:
        key = ("read_uncommitted", ack["topic"], ack["partition"])
        kept = source.get(key, {}).get(ack["offset"])
        if kept is None or kept["value"] != ack["value"]:
            continue  # not kept by the source: checker.py's rules judge that
        there = replica.get(key, {}).get(ack["offset"])
        if there is not None and _same(kept, there):
            verified += 1
            continue
        how = "missing" if there is None else f"holds {there['value'].rsplit('|', 1)[0]} instead"
        out.append(violation("replica-lost-write", f"acknowledged {ack['value'].rsplit('|', 1)[0]} at "
                             f"{ack['topic']}/{ack['partition']} offset {ack['offset']}, kept by the source, is "
                             f"{how} on the replica", (ack["i"], kept["i"]) + ((there["i"],) if there else ()),
                             (ack["topic"], ack["partition"], ack["offset"])))
    return verified, out


def _stable_bounds(events: list[Event]) -> dict[tuple[str, int], int]:
    """Per partition, the lower of the two clusters' last stable offsets as their read_committed reads ended:
    a transaction the coordinator ended between the two reads (its timeout) moves the second one on."""
    ends: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in events:
        if e["type"] in ("final-end", "replica-final-end") and e["isolation"] == "read_committed":
            ends[(e["topic"], e["partition"])].append(e["end"])
    return {tp: min(found) for tp, found in ends.items()}


def _differences(source: dict, replica: dict, reported: set, stable: dict[tuple[str, int], int],
                 violation: type) -> list:
    """One violation per run of consecutive offsets where the two clusters' final reads differ (read_committed:
    below both reads' last stable offset)."""
    out = []
    for key in sorted(set(source) | set(replica)):
        isolation, topic, partition = key
        mine, theirs = source.get(key, {}), replica.get(key, {})
        bound = stable.get((topic, partition), 0) if isolation == "read_committed" else None
        bad = sorted(o for o in set(mine) | set(theirs)
                     if (topic, partition, o) not in reported and (bound is None or o < bound)
                     and (o not in mine or o not in theirs or not _same(mine[o], theirs[o])))
        runs: list[list[int]] = []
        for o in bad:
            if runs and runs[-1][-1] + 1 == o:
                runs[-1].append(o)
            else:
                runs.append([o])
        for run in runs:
            first = run[0]
            a, b = mine.get(first), theirs.get(first)
            what = ("only on the source" if b is None else "only on the replica" if a is None
                    else f"differs: {', '.join(k for k in COMPARED if a.get(k) != b.get(k))}")
            span = f"offset {first}" if len(run) == 1 else f"offsets {first}..{run[-1]}"
            out.append(violation("replica-differs", f"{topic}/{partition} ({isolation}) {span}: at {first} the "
                                 f"record {what}", tuple(e["i"] for e in (a, b) if e is not None)))
    return out


def _cursor_rules(events: list[Event], violation: type) -> list:
    out = [violation("cursor-past-end", f"group {e['group']} {e['topic']}/{e['partition']}: the replica's cursor was "
                     f"{e['cursor']} while it ended at {e['end']} (asked after the cursor)", (e["i"],))
           for e in events if e["type"] == "replica-observed" and e["cursor"] > e["end"]]
    for e in events:
        if e["type"] != "replica-cursor":
            continue
        where = f"group {e['group']} {e['topic']}/{e['partition']}"
        if e["replica"] > e["replica_end"]:
            out.append(violation("cursor-past-end", f"{where}: the carried cursor {e['replica']} points past the "
                                 f"replica's end {e['replica_end']}", (e["i"],)))
        elif e["replica"] != e["source"]:
            out.append(violation("cursor-not-carried", f"{where}: committed {e['source']} on the source, "
                                 f"{e['replica']} on the replica after it caught up", (e["i"],)))
    return out


def _failover_rules(events: list[Event], acknowledged: list[Event], violation: type) -> list:
    """Every acknowledged record at or past the carried cursor is read by the group's consumer on the replica
    (read_committed: so only acks whose promise holds, which `acknowledged` already are)."""
    cursors = {(e["topic"], e["partition"]): e for e in events if e["type"] == "replica-cursor"}
    end = next((e for e in events if e["type"] == "failover-end"), None)
    if not cursors or end is None:
        return []
    read = {(e["topic"], e["partition"], e["offset"]): e["value"] for e in events if e["type"] == "failover-read"}
    out = []
    if not end["complete"]:
        out.append(violation("failover-unverified", f"the consumer failed over to the replica did not reach the end "
                             f"of every partition (reached: {', '.join(end['at_end']) or 'none'})", (end["i"],)))
    skipped: dict[tuple[str, int], list[Event]] = defaultdict(list)
    for ack in acknowledged:
        cursor = cursors.get((ack["topic"], ack["partition"]))
        if cursor is None or ack["offset"] < max(cursor["replica"], 0):
            continue
        if read.get((ack["topic"], ack["partition"], ack["offset"])) != ack["value"]:
            skipped[(ack["topic"], ack["partition"])].append(ack)
    for (topic, partition), acks in skipped.items():
        cursor = cursors[(topic, partition)]
        out.append(violation("failover-skipped", f"group {cursor['group']} failed over to the replica at {topic}/"
                             f"{partition} cursor {cursor['replica']} and did not read {len(acks)} acknowledged "
                             f"records from offset {acks[0]['offset']} on", (cursor["i"], acks[0]["i"], end["i"])))
    return out
