"""`kafkacompat serve`: run a broker until SIGTERM or SIGINT; its flags are generated from config.SETTINGS.

Every broker setting is one field of the config table (kafkacompat/config.py),
so the flags, their help text, the environment variables and the --config
keys cannot drift apart. A broker that cannot start says why in one line and
exits with a status that names the kind of failure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import logging
import os
import signal
import socket
import sys
import traceback

from .. import log_format
from ..config import (
    SETTINGS,
    BrokerConfig,
    flag_name,
    render_config,
    resolve_config,
    setting_kind,
    unknown_variables,
)
from ..kafka_port.file_limit import raise_file_limit
from ..workers.role import SPARE, WorkerRole, WorkersError, announce_ready, await_role, worker_config, worker_count
from ..workers.supervisor import SupervisorError, run_workers
from .heap import freeze_long_lived, thaw_now_and_then

log = logging.getLogger("kafkacompat")

# `serve` exit statuses (docs/configuration.md, "serve exit codes")
EXIT_OK = 0
EXIT_FAILED = 1  # the broker failed while running
EXIT_CONFIG = 2  # a bad flag, environment variable or config file
EXIT_LISTEN = 3  # cannot listen on the address
EXIT_DATA_DIR = 4  # cannot open the store in the data dir


class StartError(Exception):
    """A broker that could not start: `str()` names the cause and the fix; `status` is the exit code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run a broker",
        description="Run a broker on the embedded store until SIGTERM or SIGINT.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Every setting also comes from --config FILE (TOML, the names above with '_')\n"
            "and from KAFKACOMPAT_<NAME> environment variables (KAFKACOMPAT_PORT=9093,\n"
            "KAFKACOMPAT_VOLUMES=/mnt/a,/mnt/b); flags win over the environment, which\n"
            "wins over the file. --print-config shows the result and where each value\n"
            "came from.\n\n"
            "exit status: 0 stopped on SIGTERM/SIGINT, 1 failed while running, 2 bad\n"
            "setting, 3 cannot listen on the address, 4 cannot open the data dir\n\n"
            "example:\n  kafkacompat serve --data-dir /var/lib/kafkacompat --port 9092"
        ),
    )
    p.add_argument("--config", metavar="FILE", help="TOML file with broker settings")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective settings as TOML, each with where it came from, and exit")
    settings = p.add_argument_group("settings (each also KAFKACOMPAT_<NAME> and a --config key)")
    for name, field in SETTINGS.items():
        help_text = field.metadata.get("help", "see kafkacompat/config.py")
        metavar = field.metadata.get("metavar", "VALUE")
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        kind = setting_kind(field)
        if kind == "bool":
            settings.add_argument(flag_name(name), dest=name, action=argparse.BooleanOptionalAction, default=None,
                                  help=f"{help_text} (default {'true' if default else 'false'})")
        elif kind == "list[str]":
            settings.add_argument(flag_name(name), dest=name, metavar=metavar, action="append", help=help_text)
        else:
            shown = "" if default is None else f" (default {default})"
            settings.add_argument(flag_name(name), dest=name, metavar=metavar, type=int if kind == "int" else str,
                                  help=help_text + shown)
    p.set_defaults(func=_serve)


async def run_until_signalled(config: BrokerConfig) -> None:
    """Start a broker, serve until SIGTERM or SIGINT, stop it cleanly; StartError if it cannot start."""
    from ..kafka_port.server import BrokerServer  # imported here: the client commands start faster without it

    supervisor = os.getppid()  # read first: a worker paused until after its supervisor died must still see it go
    try:
        server = BrokerServer(config)
    except ValueError as exc:  # the store's engine refuses the settings it was given (an unknown store URL)
        raise StartError(f"data_dir: {exc}", EXIT_CONFIG) from exc
    except Exception as exc:
        raise _explain(config, exc) or exc
    stop = asyncio.Event()  # set before start: a SIGTERM right after "listening on" still stops cleanly
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start(before_serving=freeze_long_lived)
    except Exception as exc:
        raise _explain(config, exc) or exc
    thaw = loop.create_task(thaw_now_and_then())
    watch = None
    if config.worker_of is not None:  # one of `serve --workers N`: tell the supervisor, stop if it goes
        announce_ready(WorkerRole.parse(config.worker_of))
        watch = loop.create_task(_stop_when_orphaned(stop, supervisor))
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        thaw.cancel()
        if watch is not None:
            watch.cancel()
        await server.stop()


def _load_the_broker(config: BrokerConfig) -> None:
    """What a spare loads while it waits: the broker's modules (most of a worker's start-up time), with
    the HTTP server's when it is on (the spare may take worker 0's place)."""
    import importlib

    for module in ("kafkacompat.kafka_port.server", "kafkacompat.storage.disk.store",
                   *(("kafkacompat.http",) if config.http_port is not None else ())):
        importlib.import_module(module)


async def _stop_when_orphaned(stop: asyncio.Event, parent: int) -> None:
    """A worker whose supervisor (`parent`, read at the worker's start) died stops: without it nobody holds
    the store's lock. Read here instead, a worker stopped (SIGSTOP) between its ready line and this task's
    first turn, its supervisor killed meanwhile, took its new parent for the supervisor and never stopped."""
    while os.getppid() == parent:
        await asyncio.sleep(0.5)
    log.error("the supervisor (pid %d) is gone; this worker stops", parent)
    stop.set()


def _explain(config: BrokerConfig, exc: Exception) -> StartError | None:
    """A failed start as one sentence with the cause and the fix; None when the failure is not understood."""
    from ..security.tls import TlsSetupError
    from ..storage import StorageError

    if isinstance(exc, TlsSetupError):
        return StartError(str(exc), EXIT_CONFIG)
    address = ", ".join(config.listeners) or f"{config.host}:{config.port}"
    if config.http_port is not None:
        from ..http import HttpListenError  # only here: aiohttp is loaded only when HTTP is on

        if isinstance(exc, HttpListenError):
            why = "the address is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            return StartError(f"cannot listen for HTTP on {config.http_host}:{config.http_port}: {why}; "
                              "choose another --http-port or --http-host", EXIT_LISTEN)
    from ..cluster import ClusterError

    if isinstance(exc, ClusterError):
        return StartError(str(exc), EXIT_CONFIG)
    if isinstance(exc, StorageError):
        if "in use by another store" in str(exc):  # not "its metadata reserve is in use" (a full disk)
            return StartError(f"data dir {config.data_dir} is in use by another broker; stop that broker or "
                              "choose another --data-dir", EXIT_DATA_DIR)
        return StartError(f"cannot open the store in {config.store_url}: {exc}", EXIT_DATA_DIR)
    if isinstance(exc, OSError) and exc.filename:  # a file of the store; a socket error names no file
        if isinstance(exc, PermissionError):
            fix = "give this user write access to it (chown/chmod) or choose another --data-dir"
        elif isinstance(exc, (NotADirectoryError, FileExistsError)):
            fix = "a file stands where a directory should; choose another --data-dir"
        else:
            fix = "fix the data dir or choose another --data-dir"
        return StartError(f"cannot open the store: {exc.strerror or exc}: {exc.filename}; {fix}", EXIT_DATA_DIR)
    if isinstance(exc, socket.gaierror):
        return StartError(f"cannot listen on {address}: unknown host {config.host!r}; choose another --host "
                          "(0.0.0.0 listens on every address)", EXIT_LISTEN)
    if isinstance(exc, OSError):
        if exc.errno == errno.EADDRINUSE:
            return StartError(f"cannot listen on {address}: the address is already in use (another broker?); "
                              "stop what listens there or choose another --port", EXIT_LISTEN)
        if exc.errno == errno.EACCES:
            return StartError(f"cannot listen on {address}: permission denied (ports below 1024 need "
                              "privileges); choose a --port of 1024 or more", EXIT_LISTEN)
        if exc.errno == errno.EADDRNOTAVAIL:
            return StartError(f"cannot listen on {address}: {config.host} is not an address of this machine; "
                              "choose another --host (0.0.0.0 listens on every address)", EXIT_LISTEN)
        return StartError(f"cannot listen on {address}: {exc.strerror or exc}; choose another --host or --port",
                          EXIT_LISTEN)
    return None


def _serve(args: argparse.Namespace) -> int:
    for warning in unknown_variables():  # a misspelt setting would otherwise be ignored in silence
        print(f"kafkacompat: warning: {warning}", file=sys.stderr)
    overrides = {name: getattr(args, name) for name in SETTINGS}
    config, sources = resolve_config(args.config, overrides=overrides)
    if args.print_config:
        print(render_config(config, sources))
        return EXIT_OK
    debug = config.log_level.upper() == "DEBUG"
    log_format.configure(config.log_level, config.log_format)
    try:
        if config.worker_of == SPARE and (config := await_role(config, _load_the_broker)) is None:
            return EXIT_OK  # the supervisor stopped before this spare was needed
        if config.worker_of is not None:
            config, _role = worker_config(config)
        elif (count := worker_count(config.workers)) > 1:
            return run_workers(config, count)
    except WorkersError as exc:
        print(f"kafkacompat: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SupervisorError as exc:
        print(f"kafkacompat: {exc}", file=sys.stderr)
        return exc.status
    if (too_low := raise_file_limit(config.max_connections)) is not None:
        log.warning("%s", too_low)
    try:
        asyncio.run(run_until_signalled(config))
    except StartError as exc:
        if debug:
            traceback.print_exc()
        print(f"kafkacompat: {exc}", file=sys.stderr)
        return exc.status
    except Exception as exc:
        if debug:
            traceback.print_exc()
        hint = "" if debug else "; run with --log-level DEBUG for the traceback"
        print(f"kafkacompat: the broker failed: {type(exc).__name__}: {exc}{hint}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
