"""Idle Kafka connections by the hundred thousand, held from several processes and source addresses.

An IoT broker holds many device connections that are mostly silent (issue
32). One process on one address cannot open a hundred thousand of them to a
broker: each connection from one source address takes a port of the
ephemeral range (32768-60999 on a stock Linux: 28,232 ports), and a process
holds at most its RLIMIT_NOFILE descriptors. So the connections are spread
over helper processes of PER_PROCESS each, and each helper binds its
connections to addresses of its own in 127.0.0.0/8 (loopback: every such
address is this machine), PER_SOURCE per address.

With several bootstrap addresses (the ports of `serve --workers N`), the
connections go round them, as devices given the whole list each pick one.

Each connection sends ApiVersions and reads the answer before it counts, so
the broker has accepted it and set it up; then it stays silent until the
helpers are told to close. Helpers are spawned, not forked: the bench's
other clients run librdkafka threads, which a fork would copy half-way.
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import socket
import struct
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from ..frames import read_frame
from ..kafka_port.file_limit import allow_open_files

PER_PROCESS = 25_000
PER_SOURCE = 12_500  # connections per source address: well inside one address's ephemeral ports
FIRST_SOURCE = ipaddress.IPv4Address("127.1.0.1")  # source addresses go up from here, one block per helper
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, ApiVersions v0, correlation 1, no client id
OPEN_TIMEOUT_S = 600.0
OWN_FILES = 64  # a helper's descriptors beside its connections (its pipe, Python's own)


class IdleConnections:
    """`count` idle connections to `bootstrap` ("host:port", or several, comma-separated, taken in turn):
    open() until all are set up, close() releases them."""

    def __init__(self, bootstrap: str, count: int) -> None:
        self._addresses = [_address(each) for each in bootstrap.split(",")]
        self.count = count
        self._helpers: list[tuple[BaseProcess, Connection]] = []

    def open(self) -> None:
        """Start the helpers and wait until each holds its share; RuntimeError naming what failed."""
        spawn = multiprocessing.get_context("spawn")
        per_process = min(PER_PROCESS, allow_open_files(PER_PROCESS + OWN_FILES) - OWN_FILES)  # what a helper may hold
        shares = [min(per_process, self.count - first) for first in range(0, self.count, per_process)]
        for index, share in enumerate(shares):
            mine, theirs = spawn.Pipe()
            sources = [str(FIRST_SOURCE + index * (PER_PROCESS // PER_SOURCE + 1) + s)
                       for s in range(-(-share // PER_SOURCE))]
            helper = spawn.Process(target=_hold, args=(self._addresses, sources, share, theirs), daemon=True)
            helper.start()
            self._helpers.append((helper, mine))
        failures = []
        for helper, pipe in self._helpers:
            if not pipe.poll(OPEN_TIMEOUT_S):
                failures.append(f"helper {helper.pid}: nothing said in {OPEN_TIMEOUT_S:.0f} s")
                continue
            held, error = pipe.recv()
            if error:
                failures.append(f"helper {helper.pid}: {held} connections open, then {error}")
        if failures:
            self.close()
            raise RuntimeError("idle connections: " + "; ".join(failures))

    def close(self) -> None:
        for helper, pipe in self._helpers:
            try:
                pipe.send("close")
            except OSError:  # the helper is gone already
                pass
        for helper, _pipe in self._helpers:
            helper.join(60)
            if helper.is_alive():
                helper.kill()
        self._helpers.clear()

    def __enter__(self) -> "IdleConnections":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _address(text: str) -> tuple[str, int]:
    host, port = text.strip().rsplit(":", 1)
    return host, int(port)


def _hold(addresses: list[tuple[str, int]], sources: list[str], count: int, pipe: Connection) -> None:
    """A helper: open `count` connections round the `sources` and `addresses`, say how many, hold them
    until told."""
    allow_open_files(count + OWN_FILES)
    held: list[socket.socket] = []
    error = ""
    try:
        for i in range(count):
            held.append(_connected(addresses[i % len(addresses)], sources[i % len(sources)]))
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"
    pipe.send((len(held), error))
    try:
        pipe.recv()
    except EOFError:  # the bench is gone: close too
        pass
    for sock in held:
        sock.close()


def _connected(address: tuple[str, int], source: str) -> socket.socket:
    """A connection from `source` whose ApiVersions the broker has answered; closed again if that fails."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(OPEN_TIMEOUT_S)
        sock.bind((source, 0))
        sock.connect(address)
        sock.sendall(API_VERSIONS_V0)
        read_frame(sock, 1 << 20)
    except OSError:
        sock.close()
        raise
    return sock
