"""`python -m kafkacompat.chaos`: run one seeded campaign and exit 0 only if the checker found no violation.

Exit status: 0 no violation, 1 violations (each printed with its history
lines), 2 a bad argument, 3 the campaign could not run (one line on stderr),
130 stopped by SIGINT or SIGTERM (its brokers and servers stopped first).
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kafkacompat.testing.services import ServiceUnavailable

from ..chaos.campaign import ENGINES, SKIP_DAMAGED_FIXED, Plan, run
from ..chaos.nemesis import (
    ALL,
    CLOUD_HELD_BACK,
    CLOUD_SAFE,
    HELD_BACK,
    REPLICATION_SAFE,
    SAFE,
    WORKERS_HELD_BACK,
    WORKERS_SAFE,
)
from ..chaos.replication import NAMES, TOPOLOGIES


def parse(argv: Sequence[str] | None) -> argparse.ArgumentParser:
    held = "; ".join(f"{name} ({why})" for name, why in {**HELD_BACK, **CLOUD_HELD_BACK, **WORKERS_HELD_BACK}.items())
    p = argparse.ArgumentParser(
        prog="python -m kafkacompat.chaos",
        description="A seeded fault campaign: stock clients, a nemesis, a checker of what docs/operations.md promises.",
        epilog=f"fault mixes: safe = {', '.join((*SAFE, *CLOUD_SAFE, *REPLICATION_SAFE, *WORKERS_SAFE))}; all = safe plus the faults held back "
               f"from CI until known bugs are fixed: {held or 'none today'}")
    p.add_argument("--engine", choices=list(ENGINES), default="disk")
    p.add_argument("--minutes", type=float, default=2.0, help="how long the nemesis runs (default 2)")
    p.add_argument("--seed", type=int, help="chooses the faults, their targets and the workload (default: random)")
    p.add_argument("--faults", default="all", help="safe, all (default), or a comma-separated list of fault names")
    p.add_argument("--workdir", type=Path, help="where the history, the broker log and the store go "
                                                "(default: a new directory under /tmp)")
    p.add_argument("--no-skip-damaged", dest="skip_damaged", action="store_false",
                   help="disk: run the broker without --skip-damaged, so consumers reaching a quarantined range "
                        "must be told (an error event), not stall in silence; the final read restarts it with it")
    p.add_argument("--topology", choices=list(TOPOLOGIES),
                   help="replication: how the three clusters are linked, chain (a->b->c) or ring (a->b->c->a); "
                        "pair (a->b) is two clusters (default: the seed picks chain or ring)")
    p.add_argument("--workers-clusters", default="", metavar="NAMES",
                   help="replication: the clusters (a, b, c, comma-separated) run as `serve --workers 2`; a kill, "
                        "pause or restart of one acts on its supervisor and both workers (default: none)")
    p.add_argument("--rate", type=float, default=30.0, help="records a second per producer (default 30)")
    return p


def faults_of(text: str) -> tuple[str, ...]:
    if text in ("safe", "all"):
        return (*SAFE, *CLOUD_SAFE, *REPLICATION_SAFE, *WORKERS_SAFE) if text == "safe" else ALL
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in ALL]
    if unknown or not names:
        raise ValueError(f"unknown fault {', '.join(unknown) or '(none given)'}; known: {', '.join(ALL)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = parse(argv)
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60 or not 0 < args.rate <= 10_000:
        print("chaos: --minutes must be in (0, 1440] and --rate in (0, 10000]", file=sys.stderr)
        return 2
    if not args.skip_damaged and args.engine in SKIP_DAMAGED_FIXED:
        print("chaos: --no-skip-damaged is for the disk engine only", file=sys.stderr)
        return 2
    if args.topology is not None and args.engine != "replication":
        print("chaos: --topology is for the replication engine only", file=sys.stderr)
        return 2
    workers_clusters = tuple(n.strip() for n in args.workers_clusters.split(",") if n.strip())
    if workers_clusters and args.engine != "replication":
        print("chaos: --workers-clusters is for the replication engine only", file=sys.stderr)
        return 2
    if unknown := [n for n in workers_clusters if n not in NAMES.values()]:
        print(f"chaos: --workers-clusters names clusters {', '.join(NAMES.values())}, not {', '.join(unknown)}",
              file=sys.stderr)
        return 2
    try:
        faults = faults_of(args.faults)
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-"))
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        verdict = run(Plan(args.engine, args.minutes, seed, faults, workdir, args.rate, args.skip_damaged,
                           args.topology, workers_clusters), sys.stdout)
    except (OSError, subprocess.SubprocessError, ServiceUnavailable) as exc:
        print(f"chaos: the campaign could not run: {exc} (see {workdir})", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"chaos: stopped before the end; no verdict (see {workdir})", file=sys.stderr)
        return 130
    return 1 if verdict.violations else 0


def _interrupt(_signum: int, _frame: object) -> None:
    """SIGTERM stops a campaign as Ctrl-C does: the engine's `finally` stops its brokers, PostgreSQL and the
    S3 server (killed outright, they were left running)."""
    raise KeyboardInterrupt
