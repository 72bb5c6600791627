"""The `kafkacompat` command: run a broker, produce and consume, manage streams, topics, cursors and groups.

One module per command group (serve, produce_consume, groups, streams, bench,
store, demo, user), each with add_parsers(subparsers); `stream replica|upstream`
and `cluster` (replication.py) hang under streams. This one assembles them
into one parser and maps what every command may raise to an exit status.
Adding a command group is one module here and its name in COMMAND_GROUPS.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..config import ConfigError
from . import bench, demo, groups, produce_consume, serve, store, streams, user
from .options import OneLineParser
from .serve import EXIT_CONFIG, EXIT_OK

DESCRIPTION = """\
kafkacompat: a Kafka-compatible broker whose topics live in streams.

Streams sit at filesystem-like paths (/apps/iot/oilpump_metrics) and group
topics under shared policies; address a topic as /path/to/stream:topic, as
its Kafka-legal alias path.to.stream..topic, or by a plain Kafka name
(which lives in the default stream).
"""

# Each module adds its commands with add_parsers(subparsers); help lists them in this order.
COMMAND_GROUPS = (serve, produce_consume, groups, streams, bench, store, demo, user)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="kafkacompat", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"kafkacompat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    OneLineParser.json_errors = "--json" in arguments  # usage errors too come as JSON to a script
    parser = build_parser()
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"kafkacompat: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except BrokenPipeError:  # `kafkacompat ... | head`: the reader has had enough, which is no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK

