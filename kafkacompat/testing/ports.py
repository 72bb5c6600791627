"""Free loopback ports for the brokers and servers that tests, benches and campaigns start.

A port is picked here and bound a moment later by another process. Asking the kernel for one (bind
to port 0) gives a port of its ephemeral range, where every outgoing connection takes its local port,
so a client connecting meanwhile could take it; and two asks before either port is bound could get
the same one (a cluster of three brokers got one port twice when the suite ran on two workers). So a
port comes from below the ephemeral range, is checked free, and is never handed out twice by one
process. Under pytest-xdist each worker draws from its own share of that range, so the two workers'
brokers never meet on one port either.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

_given: set[int] = set()
_lock = threading.Lock()
_pick = random.Random()  # its own: a test that seeds the global random does not make ports repeat


def free_port() -> int:
    """A loopback port nobody listens on now, not handed out before by this process."""
    low, high = _share()
    with _lock:
        while True:
            port = _pick.randrange(low, high)
            if port not in _given and is_free(port):
                _given.add(port)
                return port


def below_ephemeral() -> tuple[int, int]:
    """[low, high): the ports handed out here, below the kernel's ephemeral range."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    return min(10000, ephemeral // 2), ephemeral


def _share() -> tuple[int, int]:
    """[low, high): this process's share of below_ephemeral()."""
    start, ephemeral = below_ephemeral()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under `pytest -n N`
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1")
    index = int(worker[2:]) if worker[:2] == "gw" and worker[2:].isdigit() else 0
    width = (ephemeral - start) // max(workers, 1)
    low = start + min(index, max(workers, 1) - 1) * width
    return low, low + width


def is_free(port: int) -> bool:
    """Whether a process could listen on 127.0.0.1:`port` now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port_run(count: int) -> int:
    """A port P such that P .. P+count-1 are free now (`--port P` gives worker i port P+i), below the
    kernel's ephemeral range: a port the kernel hands out for outgoing connections (every client's
    here) was taken between the pick and worker 1's start, and the command failed to start."""
    low, high = below_ephemeral()
    while True:
        port = _pick.randrange(low, high - count)
        if all(is_free(port + i) for i in range(count)):
            return port
