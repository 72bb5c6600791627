"""The workers engine: the disk engine's broker run as `kafkacompat serve --workers 2` (docs/workers.md).

The command a user runs starts a supervisor, which starts two worker
processes over the one store and restarts one that dies. So the nemesis
here acts on processes the disk engine does not have: a process fault
(`kill`, `pause`, `restart`) picks one worker (node 1 is worker 0, node 2
worker 1, their node ids in Metadata) and kill -9s it, SIGSTOPs it for
longer than a session timeout, or SIGTERMs it; the supervisor must start
it again (under a new leader epoch) and its partitions, or with worker 0
every group and transaction coordinator, come back with it: ownership
does not move (docs/workers.md, "What it does not cover yet"). `kill-broker`
kill -9s the supervisor and every worker at once, as a crash of the machine
or of the service's cgroup would, then starts the command again;
`kill-supervisor` kill -9s the supervisor alone: its orphaned workers must
stop by themselves, and the command is started again once they have. Every disk
fault of the disk engine applies unchanged: the workers share its files,
and the offline ones stop the whole command (kill -9 of every process, or
SIGTERM of the supervisor, which stops its workers).

The workers' pids come from the supervisor's own log lines ("worker 1
started (pid ...)"), as an operator reads them; readiness from "2 workers
serving on ports" and "worker 1 serves again".

The transactional producer writes every partition of topic T, so its
transactions span both workers: worker 1's partitions verify with worker
0's coordinator and take their markers from it.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ..bench.procstats import send_signal
from ..testing.ports import free_port_run
from ..workers.supervisor import WORKER_AGAIN, WORKER_STARTED
from .disk import DiskEngine
from .engine import StorageFault
from .history import History
from .process import START_TIMEOUT

WORKERS = 2
SERVING = f"{WORKERS} workers serving on ports"
ORPHANS_STOP_S = 30.0  # the workers of a supervisor killed with -9 stop by themselves within this


class WorkersEngine(DiskEngine):
    name = "workers"

    def __init__(self, workdir: Path, history: History, skip_damaged: bool = True) -> None:
        super().__init__(workdir, history, skip_damaged=skip_damaged)
        self.port = free_port_run(WORKERS)
        self.bootstrap = ",".join(f"127.0.0.1:{self.port + i}" for i in range(WORKERS))
        args = self.broker.serve_args
        args[args.index("--port") + 1] = str(self.port)
        args += ["--workers", str(WORKERS)]
        self.nodes = [1 + i for i in range(WORKERS)]  # worker i is broker node 1 + i (--node-id 1 + i)
        self.pids: dict[int, int] = {}
        self.serving = threading.Event()  # the supervisor said every worker serves
        self.again: dict[int, threading.Event] = {i: threading.Event() for i in range(WORKERS)}
        for event in self.again.values():
            event.set()  # cleared when the nemesis takes its worker down, set by its "serves again"
        self.broker.on_line = self._line

    def _line(self, line: str) -> None:
        self._quarantine(line)
        if (started := WORKER_STARTED.search(line)) is not None:
            self.pids[int(started["index"])] = int(started["pid"])
        elif (again := WORKER_AGAIN.search(line)) is not None:
            self.again[int(again["index"])].set()
        elif SERVING in line:
            self.serving.set()

    # processes: node None is the whole command (supervisor and workers), node n worker n - 1

    def start(self) -> bool:
        """Start the command unless it runs and wait until every worker serves; or, while it runs, wait
        until the supervisor has served again every worker the nemesis took down."""
        if not self.broker.running():
            self.serving.clear()
            if not self.broker.start():
                return False
            return self._wait(self.serving, "the supervisor never said every worker serves")
        waiting = [e for e in self.again.values() if not e.is_set()]
        return all(self._wait(e, "the supervisor did not restart a worker") for e in waiting)

    def _wait(self, event: threading.Event, reason: str) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while not event.wait(0.2):
            if not self.broker.running() or time.monotonic() > deadline:
                self.history.record("broker", node=0, action="start-failed", reason=reason)
                self.broker.kill()
                self._kill_workers()
                return False
        return True

    def _signal_worker(self, node: int, sig: signal.Signals) -> None:
        index = node - 1
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.again[index].clear()  # start() waits for its "serves again"
        try:
            os.kill(self.pids[index], sig)
        except (KeyError, ProcessLookupError):
            self.again[index].set()
            return
        action = {signal.SIGKILL: "killed", signal.SIGTERM: "stopped-worker"}.get(sig)
        if action is not None:
            self.history.record("broker", node=node, action=action, pid=self.pids[index])

    def _kill_workers(self) -> None:
        for pid in self.pids.values():
            send_signal(pid, signal.SIGKILL)

    def kill(self, node: int | None = None) -> None:
        if node is not None:
            return self._signal_worker(node, signal.SIGKILL)
        self.broker.kill()  # the supervisor first, so it restarts nobody
        self._kill_workers()
        self.pids.clear()

    def stop(self, node: int | None = None) -> None:
        if node is not None:
            return self._signal_worker(node, signal.SIGTERM)
        for pid in self.pids.values():
            send_signal(pid, signal.SIGCONT)  # a paused worker cannot stop
        self.broker.stop()

    def pause(self, node: int | None = None) -> None:
        for n in ([node] if node is not None else self.nodes):
            self._signal_worker(n, signal.SIGSTOP)

    def resume(self, node: int | None = None) -> None:
        for n in ([node] if node is not None else self.nodes):
            self._signal_worker(n, signal.SIGCONT)

    def close(self) -> None:
        self.kill()
        super().close()

    def setup(self, rng: random.Random) -> dict[str, Any]:
        return {**super().setup(rng), "workers": WORKERS}

    def storage_faults(self) -> list[StorageFault]:
        return [*super().storage_faults(), StorageFault("kill-broker", self._kill_broker, live=True),
                StorageFault("kill-supervisor", self._kill_supervisor, live=True)]

    def _kill_broker(self, rng: random.Random) -> dict[str, Any]:
        """kill -9 of the supervisor and every worker at once, then the command started again."""
        down = rng.uniform(0.2, 3)
        self.kill()
        time.sleep(down)
        return {"down": round(down, 2), "restarted": self.start()}

    def _kill_supervisor(self, rng: random.Random) -> dict[str, Any]:
        """kill -9 of the supervisor alone, then the command started again once its orphaned workers have
        stopped by themselves (the data dir stays locked until they have: a start before is refused)."""
        down = rng.uniform(0.2, 3)
        orphans = list(self.pids.values())
        self.broker.kill()
        time.sleep(down)
        deadline = time.monotonic() + ORPHANS_STOP_S
        while (left := [pid for pid in orphans if _alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if left:
            self.history.record("broker", node=0, action="start-failed",
                                reason=f"{len(left)} workers of the killed supervisor still ran {ORPHANS_STOP_S} s on")
            self._kill_workers()
            return {"down": round(down, 2), "orphans_stayed": len(left)}
        return {"down": round(down, 2), "orphans_lived": round(ORPHANS_STOP_S - (deadline - time.monotonic()), 2),
                "restarted": self.start()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
