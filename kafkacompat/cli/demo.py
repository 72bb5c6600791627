"""The `kafkacompat demo` subcommand."""

from __future__ import annotations

import argparse

EPILOG = """\
example:
  kafkacompat demo oilrig --data-dir ./oilrig-data --output ./oilrig-out

Needs PySpark: pip install 'kafkacompat[spark]'. Spark's Kafka sink writes the
alerts when KAFKACOMPAT_SPARK_JARS names the connector jars; otherwise they go
through the broker's Kafka port. Read them afterwards with
  kafkacompat serve --data-dir ./oilrig-data &
  kafkacompat consume /apps/iot/oilpump_metrics:Warnings --from-beginning
"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run a demonstration pipeline",
                          description="Runnable demonstrations of kafkacompat with Spark.")
    kinds = demo.add_subparsers(dest="demo", metavar="DEMO", required=True)
    p = kinds.add_parser(
        "oilrig", help="pump sensors -> stream -> PySpark windowed aggregates -> alerts and Parquet",
        description="Simulated oil pumps produce Pressure and Temperature into /apps/iot/oilpump_metrics; "
                    "a PySpark Structured Streaming job reads the partitionlets directly "
                    "(format 'kafkacompat'), computes per-pump windowed aggregates into Parquet and "
                    "writes alerts to the Warnings topic.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    p.add_argument("--data-dir", metavar="DIR", required=True, help="the broker's data directory (created if new)")
    p.add_argument("--output", metavar="DIR", required=True, help="where Parquet aggregates and the checkpoint go")
    p.add_argument("--pumps", metavar="N", type=int, default=5, help="simulated pumps (default 5)")
    p.add_argument("--readings", metavar="N", type=int, default=120,
                   help="readings per pump and metric, one a second of simulated time (default 120)")
    p.add_argument("--pressure-limit", metavar="PSI", type=float, default=180.0,
                   help="alert when a window's peak pressure exceeds it (default 180)")
    p.add_argument("--temperature-limit", metavar="C", type=float, default=95.0,
                   help="alert when a window's peak temperature exceeds it (default 95)")
    p.set_defaults(func=_oilrig)


def _oilrig(args: argparse.Namespace) -> int:
    from ..demo.oilrig import Settings, run

    for name in ("pumps", "readings"):
        if getattr(args, name) < 1:
            raise SystemExit(f"kafkacompat demo oilrig: --{name} must be at least 1")
    alerts = run(Settings(args.data_dir, args.output, args.pumps, args.readings, args.pressure_limit,
                          args.temperature_limit))
    return 0 if alerts >= 0 else 1
