"""What a worker is told by its supervisor, and how many workers `--workers` asks for.

The supervisor passes each worker one setting, `worker_of`
(INDEX/COUNT/EPOCH/PORT,PORT,.../READY_FD/LISTEN_FD/CHANNEL_FD): its place, the
leader epoch it starts under, every worker's Kafka port, the listening
socket the supervisor holds for its port (so a client connecting while the
worker restarts waits in the socket's queue instead of being refused) and
the one it holds for its Unix socket, where the other workers ask it
(channel.py). A spare (`worker_of` = spare) is started
ahead with everything loaded and reads that setting from its standard input
when a worker dies, so the dead one's place is taken without the seconds a
fresh interpreter spends importing. The rest of a worker's settings are
the supervisor's own, with the port, node id and HTTP server made its own
here (worker 0 serves HTTP; node ids are node_id + INDEX).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable

from ..config import BrokerConfig
from ..storage.disk.shared import WorkerShare


class WorkersError(ValueError):
    """A bad --workers or worker_of value; the message says what is wrong."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerRole:
    index: int
    count: int
    epoch: int
    ports: tuple[int, ...]
    ready_fd: int = -1  # the supervisor's pipe: the worker writes one byte there once it serves
    listen_fd: int = -1  # the listening socket the supervisor bound for this worker's port; -1: bind it
    channel_fd: int = -1  # the supervisor's Unix socket for this worker (channel.py); -1: workers ask over TCP

    @property
    def share(self) -> WorkerShare:
        return WorkerShare(self.index, self.count, self.epoch)

    def spec(self) -> str:
        return (f"{self.index}/{self.count}/{self.epoch}/{','.join(map(str, self.ports))}/{self.ready_fd}"
                f"/{self.listen_fd}/{self.channel_fd}")

    @classmethod
    def parse(cls, spec: str) -> "WorkerRole":
        try:
            index, count, epoch, ports, ready, *fds = spec.split("/")
            if len(fds) > 2:
                raise ValueError(spec)
            listen, channel = (*map(int, fds), -1, -1)[:2]
            role = cls(int(index), int(count), int(epoch), tuple(int(p) for p in ports.split(",")), int(ready),
                       listen, channel)
        except ValueError:
            raise WorkersError(f"worker_of {spec!r} is not "
                               "INDEX/COUNT/EPOCH/PORT,PORT.../READY_FD[/LISTEN_FD[/CHANNEL_FD]]") from None
        if not (0 <= role.index < role.count == len(role.ports)) or role.epoch < 1:
            raise WorkersError(f"worker_of {spec!r} names no worker of its count")
        return role


SPARE = "spare"  # the worker_of of a spare: a worker started ahead, told its role when one dies


def await_role(config: BrokerConfig, preload: Callable[[BrokerConfig], None]) -> BrokerConfig | None:
    """A spare's wait: load what serving needs (`preload`), then read the role of the worker whose place it
    takes, one line from the supervisor; None when the supervisor closed the pipe without one (it stops)."""
    preload(config)
    spec = sys.stdin.readline()
    if not spec.strip():
        return None
    return dataclasses.replace(config, worker_of=spec.strip())


def worker_count(value: str) -> int:
    """The number of workers `--workers` asks for: N >= 1, or auto (one per core this process may use)."""
    if value.strip().lower() == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    try:
        count = int(value)
    except ValueError:
        raise WorkersError(f"--workers {value!r} is not a number of workers or auto") from None
    if not 1 <= count <= 256:
        raise WorkersError(f"--workers {count}: give 1 to 256 workers, or auto")
    return count


def worker_config(config: BrokerConfig) -> tuple[BrokerConfig, WorkerRole]:
    """The settings worker `config.worker_of` runs with: its own port and node id; HTTP on worker 0 alone
    (topics another worker is asked to make on first use are made by worker 0: broker/cluster.py)."""
    assert config.worker_of is not None
    role = WorkerRole.parse(config.worker_of)
    if config.store_url.startswith(("memory:", "postgresql:", "postgres:")):
        raise WorkersError("--workers shares an on-disk store; memory:// and postgresql:// stores cannot be shared")
    if config.listeners:
        raise WorkersError("--workers gives each worker one port (--port + INDEX); --listeners is not supported with it")
    changes: dict = {"port": role.ports[role.index], "node_id": config.node_id + role.index, "advertised_port": None}
    if role.index > 0:
        changes.update(http_port=None)
    return dataclasses.replace(config, **changes), role


def announce_ready(role: WorkerRole) -> None:
    """Tell the supervisor this worker serves (its store is open and its port listens)."""
    if role.ready_fd >= 0:
        try:
            os.write(role.ready_fd, b"r")
            os.close(role.ready_fd)
        except OSError:
            pass  # the supervisor is gone: it stops this worker next
