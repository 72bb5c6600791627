"""One campaign, start to verdict: broker up, workload and nemesis together, heal, drain, restart, read, check.

After the nemesis's time is up every fault is healed, the producers flush
and stop, the consumers stop, and the broker is stopped with SIGTERM and
started once more, so what the final read finds is what a restart keeps.
The history is checked from its file, as anyone could re-check it later.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .checker import Verdict, Violation, check
from .cloud import CloudEngine
from .disk import DiskEngine
from .engine import Engine
from .history import Event, History, load
from .nemesis import Nemesis
from .replication import ReplicationEngine, topology_of
from .workers import WorkersEngine
from .workload import CLIENT_LOG, Workload, final_read

ENGINES: dict[str, Callable[["Plan", History], Engine]] = {
    "disk": lambda plan, history: DiskEngine(plan.workdir, history, skip_damaged=plan.skip_damaged),
    "cloud": lambda plan, history: CloudEngine(plan.workdir, history),
    "replication": lambda plan, history: ReplicationEngine(plan.workdir, history,
                                                           topology_of(plan.seed, plan.topology)),
    "workers": lambda plan, history: WorkersEngine(plan.workdir, history, skip_damaged=plan.skip_damaged),
}
SKIP_DAMAGED_FIXED = ("cloud", "replication")  # engines without the --no-skip-damaged mode (no damage on disk)


@dataclasses.dataclass(frozen=True)
class Plan:
    engine: str
    minutes: float
    seed: int
    faults: tuple[str, ...]
    workdir: Path
    rate: float = 30.0  # records a second per producer
    skip_damaged: bool = True  # False: consumers must be told at a quarantined range (CORRUPT_MESSAGE)
    topology: str | None = None  # replication: pair, chain or ring (None: the seed picks chain or ring)


def run(plan: Plan, out: TextIO) -> Verdict:
    """Run the campaign `plan` describes, print its summary to `out`, return the verdict."""
    plan.workdir.mkdir(parents=True, exist_ok=True)
    history = History(plan.workdir / "history.jsonl")
    client_log = logging.FileHandler(plan.workdir / "clients.log")
    CLIENT_LOG.addHandler(client_log)
    CLIENT_LOG.propagate = False
    print(f"chaos: engine {plan.engine}, seed {plan.seed}, {plan.minutes:g} min, workdir {plan.workdir}",
          file=out, flush=True)
    started = time.monotonic()
    try:
        engine = ENGINES[plan.engine](plan, history)
        try:
            if engine.start():
                drive(plan, engine, history, out)
        finally:
            engine.close()
    finally:
        history.close()
        CLIENT_LOG.removeHandler(client_log)
        client_log.close()
    events = load(history.path)
    verdict = check(events)
    report(verdict, events, out)
    print(f"chaos: {'FAIL' if verdict.violations else 'PASS'} ({len(verdict.violations)} violations) in "
          f"{time.monotonic() - started:.0f} s; replay: python -m kafkacompat.chaos --engine {plan.engine} "
          f"--minutes {plan.minutes:g} --seed {plan.seed} --faults {','.join(plan.faults)}"
          + ("" if plan.skip_damaged else " --no-skip-damaged")
          + (f" --topology {plan.topology}" if plan.topology else ""), file=out, flush=True)
    return verdict


def drive(plan: Plan, engine: Engine, history: History, out: TextIO) -> None:
    settings = engine.setup(random.Random(f"{plan.seed}:setup"))
    nemesis = Nemesis(engine, history, random.Random(f"{plan.seed}:nemesis"), plan.faults)
    history.record("campaign", engine=plan.engine, seed=plan.seed, minutes=plan.minutes, faults=nemesis.names,
                   unavailable=nemesis.unavailable, **settings)
    print(f"chaos: {', '.join(f'{k} {v}' for k, v in settings.items())}; faults: {', '.join(nemesis.names)}"
          + (f"; not offered here: {', '.join(nemesis.unavailable)}" if nemesis.unavailable else ""),
          file=out, flush=True)
    workload = Workload(engine.bootstrap, history, random.Random(f"{plan.seed}:workload"), plan.rate,
                        engine.txn_partitions)
    workload.start()
    nemesis.run(plan.minutes * 60, threading.Event())
    up = not nemesis.broken and engine.start()
    stuck = workload.stop()
    if stuck:
        history.record("campaign", stuck_clients=stuck)
    if up:
        engine.stop()
        engine.prepare_final_read()
        if engine.start():
            final_read(engine.bootstrap, history)
            engine.final_checks()
            engine.stop()


def report(verdict: Verdict, events: list[Event], out: TextIO) -> None:
    """The summary table, then every violation with the history lines that show it."""
    by_line = {e["i"]: e for e in events}
    rows = [("operations", "")] + sorted(verdict.operations.items())
    rows += [("faults injected", "")] + sorted(verdict.faults.items())
    rows += [("checks", ""), ("acknowledged writes", verdict.acknowledged), ("verified", verdict.verified),
             ("lost to damage (allowed)", len(verdict.allowed_losses)),
             ("other findings allowed", len(verdict.allowed_other)),
             ("plain acks=1 records stored twice (allowed)", verdict.plain_duplicates)]
    if any(e["type"] == "replica-final" for e in events):
        rows += [("verified on every replica", verdict.replicated)]
    rows += [("violations", len(verdict.violations))]
    rows += sorted(Counter(f"  {v.kind}" for v in verdict.violations).items())
    width = max(len(str(name)) for name, _ in rows) + 2
    for name, value in rows:
        print(f"{name:<{width}}{value}" if value != "" else f"-- {name}", file=out)
    allowed: dict[tuple[int, ...], list[Violation]] = {}
    for item in verdict.allowed_losses + verdict.allowed_other:  # a paragraph per fault and finding, not record
        allowed.setdefault(item.lines[1:], []).append(item)
    for lines, items in allowed.items():
        print(f"allowed (the docs permit it) {items[0].kind}: {len(items)} like this one: {items[0].message}",
              file=out)
        for i in (items[0].lines[0], *lines):
            print(f"    history line {i}: {json.dumps(by_line.get(i), separators=(',', ':'))}", file=out)
    for item in verdict.violations[:100]:
        print_finding("VIOLATION", item, by_line, out)
    if len(verdict.violations) > 100:
        print(f"... and {len(verdict.violations) - 100} more violations", file=out)
    stuck = [name for e in events if e["type"] == "campaign" for name in e.get("stuck_clients", [])]
    if stuck:
        print(f"clients that did not stop within their time: {', '.join(stuck)}", file=out)


def print_finding(title: str, item: Violation, by_line: dict[int, Event], out: TextIO) -> None:
    print(f"{title} {item.kind}: {item.message}", file=out)
    for i in item.lines:
        print(f"    history line {i}: {json.dumps(by_line.get(i), separators=(',', ':'))}", file=out)
