"""The workers' own channel: Unix sockets in the data dir, over which the workers of `serve --workers N`
ask each other, authenticated by the file system.

Workers ask each other over the Kafka protocol: WorkerState (share state,
aborted transactions, another worker's partitions for the console and the
links), relayed replica requests, transaction verification and markers,
auto-creation, REST writes to another worker's partitions. Over the Kafka
port such a request came as `User:ANONYMOUS`, as every PLAINTEXT client
does (workers serve PLAINTEXT only), so with an authorizer on it was
refused unless ANONYMOUS held CLUSTER_ACTION, which let any client write
transaction markers.

Here each worker also serves the Kafka protocol on a Unix socket in the data
dir's `.workers` folder (mode 0700, made by the supervisor, which binds the
sockets once and hands each worker its own, so a worker's socket stays open
across its restarts, as its port does). Only the user that owns the store's
files, who can read every record in them anyway, can connect there, so a
connection on it is the broker itself: principal `security.principal.WORKER`, which the
authorizer counts as a super user, as Kafka counts its brokers' principal.
No login yields that principal (SASL, certificates and tokens give `User:`
principals). A worker reaches a socket through /proc/self/fd and a descriptor
of the folder, so a deep data dir does not pass the 107 bytes a socket path
may have.
"""

from __future__ import annotations

import asyncio
import os
import socket

FOLDER = ".workers"  # in the data dir: worker i's socket is named i


def folder_of(data_dir: str) -> str:
    return os.path.join(data_dir, FOLDER)


def bind(data_dir: str, count: int) -> list[socket.socket]:
    """The supervisor's part: the folder (0700, made afresh) and a listening socket for each of `count`
    workers, which it keeps for every start of that worker."""
    folder = folder_of(data_dir)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)  # an older folder too: the mode is what keeps other users out
    held = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        sockets = []
        for index in range(count):
            path = _path(held, index)
            if os.path.lexists(path):
                os.unlink(path)  # left by a supervisor that was killed
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(path)
            sock.listen(socket.SOMAXCONN)
            sockets.append(sock)
        return sockets
    finally:
        os.close(held)


def unlink(data_dir: str, count: int) -> None:
    """The sockets' files removed once the supervisor closed them (a killed one leaves them to its next start)."""
    for index in range(count):
        try:
            os.unlink(os.path.join(folder_of(data_dir), str(index)))
        except OSError:
            pass


class WorkerChannel:
    """How a worker connects to another: `open_stream(host, port)` names the worker by its Kafka port, as
    every caller knows it, and connects to that worker's socket instead."""

    def __init__(self, data_dir: str, ports: tuple[int, ...]) -> None:
        self._ports = ports
        self._folder = os.open(folder_of(data_dir), os.O_PATH | os.O_DIRECTORY)  # kept for the worker's life

    async def open_stream(self, host: str, port: int, timeout: float
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if port not in self._ports:
            raise ConnectionRefusedError(f"port {port} is no worker's")
        return await asyncio.wait_for(asyncio.open_unix_connection(_path(self._folder, self._ports.index(port))),
                                      timeout)


def _path(folder_fd: int, index: int) -> str:
    return f"/proc/self/fd/{folder_fd}/{index}"
