"""The campaign's recovery figure against a hand-made history: a fault is judged by its slowest partition's
first acknowledgement of a write sent after it, and the report prints it with the plain duplicate rate."""

from __future__ import annotations

import io
from typing import Any

from kafkacompat.chaos.campaign import report
from kafkacompat.chaos.checker import check
from kafkacompat.chaos.recovery import percentile, recoveries

A = "chaos..a"


def event(i: int, t: float, type_: str, **fields: Any) -> dict[str, Any]:
    return {"i": i, "t": t, "type": type_, **fields}


def history() -> list[dict[str, Any]]:
    """A kill at t=10: partition 0 takes a write sent at 10.5 at 11.0, partition 1 one sent at 12 at 17 (and one sent at 13 at 18);
    a write sent before the kill and acknowledged late (at 20) is no sign of recovery."""
    out: list[dict[str, Any]] = []
    sends = [("idem.0", 0, 0, 9.0, 20.0), ("idem.0", 1, 0, 10.5, 11.0), ("plain.0", 0, 1, 12.0, 17.0),
             ("plain.0", 1, 1, 13.0, 18.0)]
    for producer, seq, partition, sent, acked in sends:
        kind = producer.split(".")[0].replace("idem", "idempotent")
        value = f"{producer}|{seq}|x"
        out.append(event(len(out) + 1, sent, "send", producer=producer, kind=kind, seq=seq, topic=A,
                         partition=partition, value=value))
        out.append(event(len(out) + 1, acked, "ack", producer=producer, kind=kind, seq=seq, topic=A,
                         partition=partition, offset=seq, value=value))
    out.append(event(len(out) + 1, 10.0, "fault", name="kill", phase="start", node=1))
    out.append(event(len(out) + 1, 25.0, "fault", name="pause", phase="start", node=2))  # nothing sent after it
    return sorted(out, key=lambda e: e["t"])


def test_a_fault_is_judged_by_its_slowest_partition() -> None:
    assert recoveries(history()) == {"kill": [7.0]}


def test_the_report_prints_recovery_and_the_plain_duplicate_rate() -> None:
    events = history()
    out = io.StringIO()
    report(check(events), events, out)
    text = out.getvalue()
    assert "kill" in text and "n 1, p50 7.0 s, p99 7.0 s, max 7.0 s" in text
    assert "of plain sends" in text and "0 of 2 (0.00%)" in text


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile([3.0], 99)) == (50.0, 99.0, 3.0)
