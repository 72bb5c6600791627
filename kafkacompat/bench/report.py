"""The printed tables, the --vs ratios against the peer, and the JSON file."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Sequence
from typing import Any

from .runner import Row, Settings


@dataclasses.dataclass(slots=True)
class Ratio:
    """Ours / peer for one pair of rows run back to back."""

    round: int
    workload: str
    size: int
    partitions: int
    acks: int | None
    metric: str  # msg/s, or p99 ms for latency
    ours: float | None
    peer: float | None
    ratio: float | None
    cpu_ratio: float | None  # broker CPU per message, ours / peer: lower is leaner
    target: str  # e.g. ">= 1.0x", "" when none is set
    met: bool | None
    note: str  # failures of either side


# (workload, size or None for any) -> (comparison, threshold)
TARGETS: dict[tuple[str, int | None], tuple[str, float]] = {
    ("produce", 16 * 1024): (">=", 1.0),
    ("produce", 100): (">=", 0.7),
    ("consume", None): (">=", 1.0),
    ("latency", None): ("<=", 1.5),
}
# against Apache Kafka 4.1 (issue 12): every size at least Kafka's throughput, p99 within 1.5x
TARGETS_VS_KAFKA: dict[tuple[str, int | None], tuple[str, float]] = {
    ("produce", None): (">=", 1.0),
    ("consume", None): (">=", 1.0),
    ("latency", None): ("<=", 1.5),
}


def _target(workload: str, size: int, peer: str = "tansu") -> tuple[str, float] | None:
    targets = TARGETS_VS_KAFKA if peer == "kafka" else TARGETS
    return targets.get((workload, size)) or targets.get((workload, None))


def _acks(acks: int | None) -> str:
    return "-" if acks is None else ("all" if acks == -1 else str(acks))


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def _num(value: float | None, digits: int = 1, grouped: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if grouped else f"{value:.{digits}f}"


def _table(header: Sequence[str], lines: Sequence[Sequence[str]], left: int) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left or i == len(cells) - 1 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *(fmt(line) for line in lines)])


def rows_table(rows: Sequence[Row]) -> str:
    header = ["broker", "rnd", "workload", "size", "parts", "acks", "msg/s", "MB/s", "p50 ms", "p99 ms",
              "p99.9 ms", "cpu s", "cpu us/msg", "rss MiB", "status"]
    lines = [
        [r.broker, str(r.round), r.workload, _size(r.size), str(r.partitions), _acks(r.acks),
         _num(r.msg_per_s, 0, grouped=True), _num(r.mb_per_s), _num(r.p50_ms, 2), _num(r.p99_ms, 2),
         _num(r.p999_ms, 2), _num(r.cpu_s, 2), _num(r.cpu_us_per_msg, 2), _num(r.peak_rss_mib, 0), r.status]
        for r in rows
    ]
    return _table(header, lines, left=3)


def ratios(rows: Sequence[Row], ours: str, peer: str) -> list[Ratio]:
    """Pair each of our rows with the peer's row of the same round and workload."""
    theirs = {r.key: r for r in rows if r.broker == peer}
    out = []
    for mine in (r for r in rows if r.broker == ours):
        other = theirs.get(mine.key)
        if other is None:
            continue
        latency = mine.workload == "latency"
        metric = "p99 ms" if latency else "msg/s"
        a, b = (mine.p99_ms, other.p99_ms) if latency else (mine.msg_per_s, other.msg_per_s)
        ratio = a / b if a is not None and b else None
        target = _target(mine.workload, mine.size, peer)
        met = None
        if target is not None and ratio is not None:
            met = ratio >= target[1] if target[0] == ">=" else ratio <= target[1]
        notes = [f"{side.broker}: {side.status}" for side in (mine, other) if not side.ok]
        cpu_ratio = None
        if mine.cpu_us_per_msg is not None and other.cpu_us_per_msg:
            cpu_ratio = mine.cpu_us_per_msg / other.cpu_us_per_msg
        out.append(Ratio(
            mine.round, mine.workload, mine.size, mine.partitions, mine.acks, metric, a, b, ratio, cpu_ratio,
            f"{target[0]} {target[1]:.1f}x" if target else "", met, "; ".join(notes),
        ))
    return out


def ratios_table(pairs: Sequence[Ratio], ours: str, peer: str) -> str:
    header = ["rnd", "workload", "size", "parts", "acks", "metric", ours, peer, "ratio", "target", "met",
              "cpu/msg ratio", "note"]
    lines = [
        [str(p.round), p.workload, _size(p.size), str(p.partitions), _acks(p.acks), p.metric,
         _num(p.ours, 2 if p.metric != "msg/s" else 0, grouped=True),
         _num(p.peer, 2 if p.metric != "msg/s" else 0, grouped=True),
         "-" if p.ratio is None else f"{p.ratio:.2f}x", p.target or "-",
         {None: "-", True: "yes", False: "NO"}[p.met],
         "-" if p.cpu_ratio is None else f"{p.cpu_ratio:.2f}x", p.note]
        for p in pairs
    ]
    return _table(header, lines, left=2)


def median_ratios(pairs: Sequence[Ratio], peer: str = "tansu") -> list[dict[str, Any]]:
    """Across rounds: the median ratio of each workload (for the summary and the targets)."""
    groups: dict[tuple[str, int, int, int | None], list[Ratio]] = {}
    for p in pairs:
        groups.setdefault((p.workload, p.size, p.partitions, p.acks), []).append(p)
    out = []
    for (workload, size, partitions, acks), items in groups.items():
        values = [p.ratio for p in items if p.ratio is not None]
        target = _target(workload, size, peer)
        median = statistics.median(values) if values else None
        met = None
        if target is not None and median is not None:
            met = median >= target[1] if target[0] == ">=" else median <= target[1]
        out.append({"workload": workload, "size": size, "partitions": partitions, "acks": acks,
                    "median_ratio": median, "pairs": len(items), "pairs_with_figures": len(values),
                    "target": f"{target[0]} {target[1]:.1f}x" if target else None, "met": met})
    return out


def write_json(path: str, settings: Settings, brokers: dict[str, str], rows: Sequence[Row],
               pairs: Sequence[Ratio], peer: str = "") -> None:
    doc = {
        "settings": dataclasses.asdict(settings),
        "brokers": brokers,
        "rows": [dataclasses.asdict(r) for r in rows],
        "ratios": [dataclasses.asdict(p) for p in pairs],
        "peer": peer,
        "median_ratios": median_ratios(pairs, peer),
    }
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
