"""How long each fault kept the workload from writing: the failover figure the trust and cloud issues ask for.

A campaign's checker says whether promises held; an operator also wants to
know how long clients waited. For a fault that started at t0, one
partition's recovery is the time from t0 to the first acknowledgement of a
write sent to that partition at or after t0 (the definition the cloud
issue measured failover with: "until a message sent after the kill is
acknowledged on its partitions"). The fault's recovery is the slowest of
the partitions written after it, so a broker killed with two of six
partitions is judged by those two. Only plain and idempotent sends count:
a transactional send is acknowledged at its commit, which the workload
paces itself. Faults near the end, after which no send was acknowledged,
give no figure. The figures are wall-clock and include the clients' own
backoff and the host's load; they are printed, never asserted.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict

from .history import Event

COUNTED_KINDS = ("plain", "idempotent")


class _Partition:
    """One partition's acknowledged sends by send time, with the earliest ack at or after each."""

    def __init__(self, pairs: list[tuple[float, float]]) -> None:
        pairs.sort()
        self.sent = [s for s, _ in pairs]
        self.first_ack_from = [a for _, a in pairs]
        for i in range(len(pairs) - 2, -1, -1):
            self.first_ack_from[i] = min(self.first_ack_from[i], self.first_ack_from[i + 1])

    def recovery(self, t0: float) -> float | None:
        i = bisect.bisect_left(self.sent, t0)
        return None if i == len(self.sent) else self.first_ack_from[i] - t0


def recoveries(events: list[Event]) -> dict[str, list[float]]:
    """Fault name -> each of its starts' recovery in seconds (see the module's docstring)."""
    sent = {(e["producer"], e["seq"]): e["t"] for e in events
            if e["type"] == "send" and e.get("kind") in COUNTED_KINDS}
    pairs: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["type"] == "ack" and (e["producer"], e["seq"]) in sent:
            pairs[(e["topic"], e["partition"])].append((sent[(e["producer"], e["seq"])], e["t"]))
    partitions = [_Partition(p) for p in pairs.values()]
    out: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e["type"] == "fault" and e["phase"] == "start" and not e.get("skipped"):
            waits = [w for w in (p.recovery(e["t"]) for p in partitions) if w is not None]
            if waits:
                out[e["name"]].append(max(waits))
    return dict(out)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered), math.ceil(q / 100 * len(ordered))) - 1)]


def summary_rows(events: list[Event]) -> list[tuple[str, str]]:
    """The report's rows: per fault, how many, and p50 / p99 / max recovery in seconds."""
    rows = []
    for name, waits in sorted(recoveries(events).items()):
        rows.append((name, f"n {len(waits)}, p50 {percentile(waits, 50):.1f} s, p99 {percentile(waits, 99):.1f} s, "
                           f"max {max(waits):.1f} s"))
    return rows


def plain_sends(events: list[Event]) -> int:
    """How many records the plain (acks=1, not idempotent) producers sent: the duplicate rate's base."""
    return sum(1 for e in events if e["type"] == "send" and e.get("kind") == "plain")
