"""One campaign, start to verdict: broker up, workload and nemesis together, heal, drain, restart, read, check.

After the nemesis's time is up every fault is healed, the producers flush
and stop, the consumers stop, and the broker is stopped with SIGTERM and
started once more, so what the final read finds is what a restart keeps.
The history is checked from its file, as anyone could re-check it later.
That closing phase has a deadline (FINAL_PHASE_S): a client wedged in
librdkafka (seen once after an idempotent producer's fatal error, every
client thread stopping at once) must end the campaign with a clear failure
and every thread's stack, never leave it hanging.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import io
import json
import logging
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .checker import Verdict, Violation, check, duplicate_runs
from .cloud import CloudEngine
from .disk import DiskEngine
from .engine import Engine
from .history import Event, History, load
from .nemesis import Nemesis
from .process import kill_all
from .recovery import plain_sends, summary_rows
from .replication import ReplicationEngine, topology_of
from .workers import WorkersEngine
from .workload import CLIENT_LOG, Workload, final_read

ENGINES: dict[str, Callable[["Plan", History], Engine]] = {
    "disk": lambda plan, history: DiskEngine(plan.workdir, history, skip_damaged=plan.skip_damaged),
    "cloud": lambda plan, history: CloudEngine(plan.workdir, history),
    "replication": lambda plan, history: ReplicationEngine(plan.workdir, history,
                                                           topology_of(plan.seed, plan.topology),
                                                           plan.workers_clusters),
    "workers": lambda plan, history: WorkersEngine(plan.workdir, history, skip_damaged=plan.skip_damaged),
}
SKIP_DAMAGED_FIXED = ("cloud", "replication")  # engines without the --no-skip-damaged mode (no damage on disk)
# drain, restart, final read and checks: normally under a minute (CI allows 400 s a run). The closing phase is
# stuck when nothing was recorded for this long: a 60-minute cloud run's final read, records arriving all along,
# took longer than that in all, and was failed as stuck with no verdict
FINAL_PHASE_S = 330.0
EXIT_STUCK = 4  # the campaign gave up on its own stuck threads (1: violations, 2: bad arguments, 3: could not run)


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
    workers_clusters: tuple[str, ...] = ()  # replication: the clusters run as `serve --workers 2`


def run(plan: Plan, out: TextIO) -> Verdict:
    """Run the campaign `plan` describes, print its summary to `out`, return the verdict."""
    plan.workdir.mkdir(parents=True, exist_ok=True)
    history = History(plan.workdir / "history.jsonl")
    client_log = logging.FileHandler(plan.workdir / "clients.log")
    # stamped as the brokers' lines are, so a client's timeout lines up with broker.log
    client_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
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
          + (f" --topology {plan.topology}" if plan.topology else "")
          + (f" --workers-clusters {','.join(plan.workers_clusters)}" if plan.workers_clusters else ""),
          file=out, flush=True)
    return verdict


def drive(plan: Plan, engine: Engine, history: History, out: TextIO) -> None:
    settings = engine.setup(random.Random(f"{plan.seed}:setup"))
    nemesis = Nemesis(engine, history, random.Random(f"{plan.seed}:nemesis"), plan.faults)
    # `clock`: the wall-clock time at t=0, to line events up with the stamped lines of broker.log and clients.log
    history.record("campaign", engine=plan.engine, seed=plan.seed, minutes=plan.minutes, faults=nemesis.names,
                   unavailable=nemesis.unavailable, clock=round(time.time() - history.now(), 3), **settings)
    print(f"chaos: {', '.join(f'{k} {v}' for k, v in settings.items())}; faults: {', '.join(nemesis.names)}"
          + (f"; not offered here: {', '.join(nemesis.unavailable)}" if nemesis.unavailable else ""),
          file=out, flush=True)
    workload = Workload(engine.bootstrap, history, random.Random(f"{plan.seed}:workload"), plan.rate)
    workload.start()
    nemesis.run(plan.minutes * 60, threading.Event())
    finished = watch(FINAL_PHASE_S + engine.final_checks_s, engine, out, lambda: history.last_at)
    try:
        final_phase(engine, nemesis, workload, history)
    finally:
        finished.set()
        faulthandler.cancel_dump_traceback_later()


def final_phase(engine: Engine, nemesis: Nemesis, workload: Workload, history: History) -> None:
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


def watch(seconds: float, engine: Engine, out: TextIO,
          progress: Callable[[], float] | None = None) -> threading.Event:
    """Give up on the campaign if the returned event is not set while `seconds` pass with no progress
    (`progress()`: the monotonic time something last happened, such as a history event; none: from now):
    print why with every thread's stack, kill the brokers and exit with EXIT_STUCK. A thread does it while
    the others wait on locks or in librdkafka; should one hold the interpreter's lock itself, faulthandler's
    own thread dumps the stacks and exits a minute after the last progress it saw (the brokers then die
    with their closed log pipe or stay: named)."""
    finished = threading.Event()
    stream = out if _has_fileno(out) else sys.stderr
    started = time.monotonic()

    def idle() -> float:
        return time.monotonic() - max(started, progress() if progress is not None else started)

    def give_up() -> None:
        while (left := seconds - idle()) > 0:
            if finished.wait(min(left, 5.0)):
                return
            faulthandler.dump_traceback_later(seconds - idle() + 60, exit=True, file=stream)
        if finished.is_set():
            return
        print(f"chaos: FAIL: the campaign's closing phase made no progress for {seconds:.0f} s (clients or the "
              "final read stuck); the stack of every thread follows, then the brokers are killed", file=stream,
              flush=True)
        faulthandler.dump_traceback(file=stream, all_threads=True)
        kill_all()
        closing = threading.Thread(target=engine.close, daemon=True)
        closing.start()
        closing.join(30)
        stream.flush()
        os._exit(EXIT_STUCK)

    threading.Thread(target=give_up, name="chaos-watchdog", daemon=True).start()
    faulthandler.dump_traceback_later(seconds + 60, exit=True, file=stream)
    return finished


def _has_fileno(out: TextIO) -> bool:
    try:
        out.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
    return True


def report(verdict: Verdict, events: list[Event], out: TextIO) -> None:
    """The summary table, then every violation with the history lines that show it."""
    by_line = {e["i"]: e for e in events}
    rows = [("operations", "")] + sorted(verdict.operations.items())
    rows += [("faults injected", "")] + sorted(verdict.faults.items())
    rows += [("checks", ""), ("acknowledged writes", verdict.acknowledged), ("verified", verdict.verified),
             ("lost to damage (allowed)", len(verdict.allowed_losses)),
             ("other findings allowed", len(verdict.allowed_other)),
             ("plain acks=1 records stored twice (allowed)", verdict.plain_duplicates),
             ("  of plain sends", _rate(verdict.plain_duplicates, plain_sends(events)))]
    runs = duplicate_runs(events)
    if runs:
        rows += [("  largest runs (records, partition, first send t)",
                  "; ".join(f"{n} {where} @{t:.1f}" for n, where, t in runs[:3]))]
    if any(e["type"] == "replica-final" for e in events):
        rows += [("verified on every replica", verdict.replicated)]
    rows += [("violations", len(verdict.violations))]
    rows += sorted(Counter(f"  {v.kind}" for v in verdict.violations).items())
    rows += [("recovery: a fault's start to its slowest partition's first ack of a write sent after it", "")]
    rows += summary_rows(events)
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


def _rate(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.2f}%)" if whole else "no plain sends"


def print_finding(title: str, item: Violation, by_line: dict[int, Event], out: TextIO) -> None:
    print(f"{title} {item.kind}: {item.message}", file=out)
    for i in item.lines:
        print(f"    history line {i}: {json.dumps(by_line.get(i), separators=(',', ':'))}", file=out)
