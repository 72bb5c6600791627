"""The rules of a replication campaign: what docs/replication.md promises, checked from the history alone.

Every replica (b, then c of a chain a -> b -> c or a ring a -> b -> c -> a; the workload writes to a) is
judged against the source by the same rules, since the docs promise every cluster the same offsets whatever
the topology. The promises, in the words of docs/replication.md, and the rule that holds each:
- "every message at the same offset in every cluster", shipped "byte for byte, with their offsets":
  each record acknowledged by the source and kept by it is on each replica at the same offset with the same
  key, value, headers and timestamp (`replica-lost-write`), and each replica's partitions, read whole at
  both isolation levels, hold exactly what the source's do, in order, no duplicate, no gap
  (`replica-differs`; "A read_committed consumer of a replica therefore reads exactly what it reads at the
  source, as far as the replica has caught up");
- "a link never ships a batch to a cluster on its path, so rings and meshes deliver each message exactly
  once everywhere": in a ring the link back to the source brings nothing twice (the source's own records
  are judged by checker.py: a record shipped back would be a duplicate there, or `replica-differs`) and is
  not `broken` once every replica caught up (`link-broken`, which also holds every chain link);
- "A link resumes after a restart of either side from where the destination ends: nothing is lost,
  nothing is appended twice": once the campaign is over and every cluster up, each replica's end offsets
  reach the source's within the engine's wait (`replica-behind`);
- "Cursors (committed offsets with their metadata) are shipped once the messages they point at are on the
  replica, newest commit winning": a carried cursor never points past its replica's end, during the run
  or after it (`cursor-past-end`) and, once caught up, equals the source's (`cursor-not-carried`);
- "a consumer group moved to another cluster's bootstrap address resumes at its last commit: nothing
  skipped": the group's consumer switched to the last replica of the chain reads every acknowledged
  record from its carried cursor on (`failover-skipped`).
The operator's `stream replica pause` and `resume` (the nemesis's link fault) answer status 0 while the
link's source cluster is up (`link-command-failed`).
The source's own records are judged by checker.py's rules, as on the disk engine; a record the source lost
where docs/operations.md allows it is then no promise a replica must keep.

Events (besides checker.py's); those of a replica name it as `cluster`:
  replica-final/-end      as final/final-end, read from a replica (with key, headers, timestamp)
  replica-end             topic, partition, source, replica (end offsets after the wait), waited
  replica-cursor          group, topic, partition, source, replica (committed, -1: none), replica_end
  replica-observed        group, topic, partition, cursor, end: during the run, a replica's cursor, then its end
  failover-read           group, topic, partition, offset, value (the group's consumer on the last replica)
  failover-end            group, complete (every partition read to its end)
  link                    link (pause|resume), between (a->b), rc, said: the operator's command and its answer
  link-state              between, state, reason: `stream replica list` on the link's source, all caught up
"""

from __future__ import annotations

from collections import defaultdict

from .history import Event

Record = tuple[object, ...]
COMPARED = ("value", "key", "headers", "timestamp")


REPLICA_EVENTS = ("replica-final", "replica-final-end", "replica-end", "replica-cursor", "replica-observed",
                  "failover-read", "failover-end")  # each names its `cluster`


def replication_rules(events: list[Event], acknowledged: list[Event], violation: type) -> tuple[int, list]:
    """(acknowledged writes verified on every replica, violations made by `violation`, checker.py's type, which
    imports this module); nothing for a run of another engine. Each replica is judged against the source
    alone, by the same rules: a chain or a ring owes the last cluster what it owes the first replica."""
    if not any(e["type"] == "campaign" and e.get("engine") == "replication" for e in events):
        return 0, []
    source = _records(events, "final")
    clusters = sorted({e["cluster"] for e in events if e["type"] in REPLICA_EVENTS})
    everywhere: set[int] | None = None
    out: list = []
    for cluster in clusters:
        seen = [e for e in events if e["type"] not in REPLICA_EVENTS or e["cluster"] == cluster]
        verified, found = _replica_rules(seen, acknowledged, source, cluster, violation)
        everywhere = verified if everywhere is None else everywhere & verified
        out += found
    out += [violation("link-command-failed", f"`stream replica {e['link']}` of link {e['between']} failed with "
                      f"status {e['rc']}: {e['said']}", (e["i"],)) for e in events if e["type"] == "link"
            and e["rc"] != 0]
    out += [violation("link-broken", f"link {e['between']} is {e['state'] or 'not listed'} after every replica "
                      f"caught up: {e['reason']}", (e["i"],)) for e in events if e["type"] == "link-state"
            and e["state"] in (None, "broken")]
    return len(everywhere or ()), out


def _replica_rules(events: list[Event], acknowledged: list[Event], source: dict, cluster: str, violation: type
                   ) -> tuple[set[int], list]:
    """(the history lines of the acks verified on replica `cluster`, its violations)."""
    replica = _records(events, "replica-final")
    replicated, out = _acknowledged_on_replica(acknowledged, source, replica, cluster, violation)
    reported = {(v.where[0], v.where[1], v.where[2]) for v in out if v.where}
    out += _differences(source, replica, reported, _stable_bounds(events), cluster, violation)
    out += [violation("replica-behind", f"{e['topic']}/{e['partition']}: replica {cluster} ends at {e['replica']}, "
                      f"the source at {e['source']}, {e['waited']} s after all were up", (e["i"],))
            for e in events if e["type"] == "replica-end" and e["replica"] != e["source"]]
    out += [violation("replica-unverified", f"the final read of replica {cluster} never reached {e['topic']}/"
                      f"{e['partition']}'s end ({e['isolation']})", (e["i"],))
            for e in events if e["type"] == "replica-final-end" and not e["complete"]]
    out += _cursor_rules(events, cluster, violation)
    out += _failover_rules(events, acknowledged, cluster, violation)
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


def _acknowledged_on_replica(acknowledged: list[Event], source: dict, replica: dict, cluster: str,
                             violation: type) -> tuple[set[int], list]:
    verified: set[int] = set()
    out = []
    for ack in acknowledged:
        key = ("read_uncommitted", ack["topic"], ack["partition"])
        kept = source.get(key, {}).get(ack["offset"])
        if kept is None or kept["value"] != ack["value"]:
            continue  # not kept by the source: checker.py's rules judge that
        there = replica.get(key, {}).get(ack["offset"])
        if there is not None and _same(kept, there):
            verified.add(ack["i"])
            continue
        how = "missing" if there is None else f"holds {there['value'].rsplit('|', 1)[0]} instead"
        out.append(violation("replica-lost-write", f"acknowledged {ack['value'].rsplit('|', 1)[0]} at "
                             f"{ack['topic']}/{ack['partition']} offset {ack['offset']}, kept by the source, is "
                             f"{how} on replica {cluster}", (ack["i"], kept["i"]) + ((there["i"],) if there else ()),
                             (ack["topic"], ack["partition"], ack["offset"])))
    return verified, out


def _stable_bounds(events: list[Event]) -> dict[tuple[str, int], int]:
    """Per partition, the lower of the source's and the replica's last stable offsets as their read_committed
    reads ended: a transaction the coordinator ended between the two reads (its timeout) moves the second on."""
    ends: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in events:
        if e["type"] in ("final-end", "replica-final-end") and e["isolation"] == "read_committed":
            ends[(e["topic"], e["partition"])].append(e["end"])
    return {tp: min(found) for tp, found in ends.items()}


def _differences(source: dict, replica: dict, reported: set, stable: dict[tuple[str, int], int], cluster: str,
                 violation: type) -> list:
    """One violation per run of consecutive offsets where the source's and replica `cluster`'s final reads differ
    (read_committed: below both reads' last stable offset)."""
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
            what = ("only on the source" if b is None else f"only on replica {cluster}" if a is None
                    else f"differs: {', '.join(k for k in COMPARED if a.get(k) != b.get(k))}")
            span = f"offset {first}" if len(run) == 1 else f"offsets {first}..{run[-1]}"
            out.append(violation("replica-differs", f"{topic}/{partition} ({isolation}) {span} of replica "
                                 f"{cluster}: at {first} the record {what}", tuple(e["i"] for e in (a, b) if e is not None)))
    return out


def _cursor_rules(events: list[Event], cluster: str, violation: type) -> list:
    out = [violation("cursor-past-end", f"group {e['group']} {e['topic']}/{e['partition']}: the cursor of replica "
                     f"{cluster} was "
                     f"{e['cursor']} while it ended at {e['end']} (asked after the cursor)", (e["i"],))
           for e in events if e["type"] == "replica-observed" and e["cursor"] > e["end"]]
    for e in events:
        if e["type"] != "replica-cursor":
            continue
        where = f"group {e['group']} {e['topic']}/{e['partition']} on replica {cluster}"
        if e["replica"] > e["replica_end"]:
            out.append(violation("cursor-past-end", f"{where}: the carried cursor {e['replica']} points past the "
                                 f"replica's end {e['replica_end']}", (e["i"],)))
        elif e["replica"] != e["source"]:
            out.append(violation("cursor-not-carried", f"{where}: committed {e['source']} on the source, "
                                 f"{e['replica']} on the replica after it caught up", (e["i"],)))
    return out


def _failover_rules(events: list[Event], acknowledged: list[Event], cluster: str, violation: type) -> list:
    """Every acknowledged record at or past the carried cursor is read by the group's consumer failed over to
    replica `cluster`, if it was (read_committed: so only acks whose promise holds, which `acknowledged` are)."""
    cursors = {(e["topic"], e["partition"]): e for e in events if e["type"] == "replica-cursor"}
    end = next((e for e in events if e["type"] == "failover-end"), None)
    if not cursors or end is None:
        return []
    read = {(e["topic"], e["partition"], e["offset"]): e["value"] for e in events if e["type"] == "failover-read"}
    out = []
    if not end["complete"]:
        out.append(violation("failover-unverified", f"the consumer failed over to replica {cluster} did not reach the end "
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
        out.append(violation("failover-skipped", f"group {cursor['group']} failed over to replica {cluster} at {topic}/"
                             f"{partition} cursor {cursor['replica']} and did not read {len(acks)} acknowledged "
                             f"records from offset {acks[0]['offset']} on", (cursor["i"], acks[0]["i"], end["i"])))
    return out
