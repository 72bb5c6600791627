"""The `kafkacompat` command: run a broker, and manage its streams, topics and cursors."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from .admin import cli as admin_cli
from .bench.command import add_parser as _bench_parser
from .config import BrokerConfig, ConfigError, load_config

log = logging.getLogger("kafkacompat")

DESCRIPTION = """\
kafkacompat: a Kafka-compatible broker whose topics live in streams.

Streams sit at filesystem-like paths (/apps/iot/oilpump_metrics) and group
topics under shared policies; address a topic as /path/to/stream:topic, as
its Kafka-legal alias path.to.stream..topic, or by a plain Kafka name
(which lives in the default stream).
"""


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run a broker",
        description="Run a broker on the embedded store until SIGTERM or SIGINT.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Settings also come from --config FILE (TOML, same names) and from\n"
            "KAFKACOMPAT_<NAME> environment variables; flags win.\n\n"
            "example:\n  kafkacompat serve --data-dir /var/lib/kafkacompat --port 9092"
        ),
    )
    p.add_argument("--config", metavar="FILE", help="TOML file with broker settings")
    p.add_argument("--data-dir", metavar="DIR", help="first volume of the store, or memory:// (default ./data)")
    p.add_argument("--volume", metavar="DIR", action="append", dest="volumes",
                   help="another data dir for partitionlets (repeatable)")
    p.add_argument("--host", metavar="H", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--port", metavar="P", type=int, help="port to listen on (default 9092)")
    p.add_argument("--advertised-host", metavar="H", help="host clients are told to connect to")
    p.add_argument("--advertised-port", metavar="P", type=int, help="port clients are told to connect to")
    p.add_argument("--node-id", metavar="N", type=int, help="broker id reported in metadata (default 1)")
    p.add_argument("--default-stream", metavar="PATH",
                   help="stream holding plain Kafka topic names such as 'orders'; created on start if missing "
                        "(default /default)")
    p.add_argument("--max-frame-bytes", metavar="N", type=int,
                   help="largest request accepted, like socket.request.max.bytes (default 104857600)")
    p.add_argument("--max-connections", metavar="N", type=int, help="connection limit (default 10000)")
    p.add_argument("--no-auto-create-topics", dest="auto_create_topics", action="store_false", default=None,
                   help="refuse topics not created explicitly (auto.create.topics.enable=false)")
    p.add_argument("--retention-check-ms", metavar="MS", type=int,
                   help="how often messages past their stream's ttl are deleted (default 60000)")
    p.add_argument("--log-cleaner-backoff-ms", metavar="MS", type=int,
                   help="pause between log cleaner passes over compacted topics (default 15000)")
    p.add_argument("--log-cleaner-dedupe-buffer-size", metavar="BYTES", type=int,
                   help="memory for the key -> offset map of one cleaning (default 134217728)")
    p.add_argument("--no-log-cleaner", dest="log_cleaner_enable", action="store_false", default=None,
                   help="never clean compacted topics (log.cleaner.enable=false)")
    p.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    p.set_defaults(func=_serve)


def _config_from(args: argparse.Namespace) -> BrokerConfig:
    overrides = {
        name: getattr(args, name)
        for name in (
            "data_dir", "volumes", "host", "port", "advertised_host", "advertised_port", "node_id",
            "default_stream", "max_frame_bytes", "max_connections", "auto_create_topics", "retention_check_ms",
            "log_cleaner_backoff_ms", "log_cleaner_dedupe_buffer_size", "log_cleaner_enable", "log_level",
        )
    }
    return load_config(args.config, overrides=overrides)


async def run_until_signalled(config: BrokerConfig) -> None:
    from .broker.server import BrokerServer  # imported here: the admin commands start faster without it

    server = BrokerServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()


def _serve(args: argparse.Namespace) -> int:
    config = _config_from(args)
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(run_until_signalled(config))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkacompat", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _serve_parser(sub)
    admin_cli.add_parsers(sub)
    _bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"kafkacompat: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
