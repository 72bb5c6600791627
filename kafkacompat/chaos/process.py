"""One `kafkacompat serve` as a subprocess, started as a user starts it, and the signals the nemesis sends it.

Every engine runs its brokers through this: the command line is the
user's, the log is followed line by line into the campaign's broker log
(and handed to the engine, which may turn lines into history events), and
every start, kill and stop is a `broker` event in the history, with the
exit status and the clean-shutdown marker of a SIGTERM.

`SupervisedProcess` is the same command run as `serve --workers N`: its
signals reach the supervisor and every worker, as a crash, a freeze or a
stop of the machine would (the workers engine, workers.py, acts on one
worker at a time instead).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..bench.procstats import send_signal, wait_gone
from ..workers.supervisor import WORKER_AGAIN, WORKER_STARTED
from .history import History

START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0
RUNNING: set[subprocess.Popen[str]] = set()  # every broker process started and not yet reaped (kill_all)


class BrokerProcess:
    ready_line = "listening on"  # the log line that says clients may connect

    def __init__(self, node: int, serve_args: list[str], history: History, log: TextIO, log_lock: threading.Lock,
                 on_line: Callable[[str], None] | None = None, clean_marker: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.node, self.serve_args, self.history = node, serve_args, history
        self.log, self.log_lock, self.on_line = log, log_lock, on_line
        self.clean_marker, self.env = clean_marker, env
        self.proc: subprocess.Popen[str] | None = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> bool:
        """Start it unless it runs; wait for its `ready_line`. False (and a history line) if it never comes."""
        if self.running():
            return True
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkacompat", "serve", *self.serve_args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)
        RUNNING.add(self.proc)
        listening, tail = threading.Event(), []
        threading.Thread(target=self._follow, args=(self.proc, listening, tail), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not listening.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                reason = f"exit status {self.proc.poll()}; last lines: {' | '.join(tail[-3:])}"
                self.history.record("broker", node=self.node, action="start-failed", reason=reason)
                self.kill()
                return False
        self.history.record("broker", node=self.node, action="started", pid=self.proc.pid)
        return True

    def _follow(self, proc: subprocess.Popen[str], listening: threading.Event, tail: list[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self.log_lock:
                self.log.write(f"[node {self.node}] {line}")
                self.log.flush()
            tail.append(line.strip())
            del tail[:-5]
            self._saw(line)
            if self.ready_line in line:
                listening.set()
            if "after an internal error" in line or "the broker failed" in line:
                self.history.record("broker", node=self.node, action="internal-error", line=line.strip())
            if self.on_line is not None:
                self.on_line(line.strip())

    def _saw(self, line: str) -> None:
        """Each line the process logs, as it comes."""

    def kill(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            RUNNING.discard(self.proc)
            self.history.record("broker", node=self.node, action="killed")

    def stop(self) -> None:
        if not self.running():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)  # a paused broker cannot stop
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc: int | None = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
            self.proc.kill()
            self.proc.wait()
        RUNNING.discard(self.proc)
        clean = self.clean_marker.exists() if self.clean_marker is not None else True
        self.history.record("broker", node=self.node, action="stopped", rc=rc, clean=clean)

    def signal(self, sig: signal.Signals) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(sig)


class SupervisedProcess(BrokerProcess):
    """`kafkacompat serve --workers N`: ready once the supervisor says every worker serves; the workers'
    pids read from its log lines ("worker 1 started (pid ...)"), as an operator reads them."""

    ready_line = "workers serving on ports"
    workers: dict[int, int] = {}  # worker index -> its pid now; each start() gives the instance its own
    again: dict[int, threading.Event] = {}  # worker index -> set once it serves after the supervisor restarted it

    def start(self) -> bool:
        if not self.running():
            self.workers, self.again = {}, {}
        return super().start()

    def _saw(self, line: str) -> None:
        if (started := WORKER_STARTED.search(line)) is not None:
            self.workers[int(started["index"])] = int(started["pid"])
        elif (again := WORKER_AGAIN.search(line)) is not None:
            self.again.setdefault(int(again["index"]), threading.Event()).set()

    def kill_worker(self, index: int) -> int | None:
        """kill -9 of worker `index` alone (the supervisor starts it again); its pid, None if it had none."""
        pid = self.workers.get(index)
        if pid is None or not self.running():
            return None
        self.again[index] = threading.Event()
        send_signal(pid, signal.SIGKILL)
        return pid

    def served_again(self, index: int, timeout: float = START_TIMEOUT) -> bool:
        """Whether worker `index`, killed alone, serves again within `timeout` seconds."""
        event = self.again.get(index)
        return event is None or event.wait(timeout)

    def kill(self) -> None:
        """kill -9 of the supervisor (first, so it restarts nobody) and of every worker at once."""
        super().kill()
        pids, self.workers = list(self.workers.values()), {}
        for pid in pids:
            send_signal(pid, signal.SIGKILL)
        wait_gone(pids, STOP_TIMEOUT)  # their files and ports let go

    def signal(self, sig: signal.Signals) -> None:
        """To the supervisor and every worker: SIGSTOP freezes the whole command, SIGCONT thaws it."""
        super().signal(sig)
        for pid in self.workers.values():
            send_signal(pid, sig)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)  # a paused worker cannot stop; the supervisor's SIGTERM stops them all
        super().stop()


def kill_all() -> None:
    """SIGKILL every broker process still running, writing nothing to the history: for a campaign giving up
    because its own threads are stuck (the history's lock may be held by one of them)."""
    for proc in list(RUNNING):
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                continue
        RUNNING.discard(proc)


class BrokerProcesses:
    """Process faults for an engine of several broker processes, `brokers` by node id (None: every broker)."""

    brokers: dict[int, BrokerProcess]

    def _each(self, node: int | None) -> list[BrokerProcess]:
        return list(self.brokers.values()) if node is None else [self.brokers[node]]

    def start(self) -> bool:
        return all([b.start() for b in self.brokers.values()])

    def kill(self, node: int | None = None) -> None:
        for b in self._each(node):
            b.kill()

    def stop(self, node: int | None = None) -> None:
        for b in self._each(node):
            b.stop()

    def pause(self, node: int | None = None) -> None:
        for b in self._each(node):
            b.signal(signal.SIGSTOP)

    def resume(self, node: int | None = None) -> None:
        for b in self._each(node):
            b.signal(signal.SIGCONT)
