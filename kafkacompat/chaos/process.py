"""One `kafkacompat serve` as a subprocess, started as a user starts it, and the signals the nemesis sends it.

Every engine runs its brokers through this: the command line is the
user's, the log is followed line by line into the campaign's broker log
(and handed to the engine, which may turn lines into history events), and
every start, kill and stop is a `broker` event in the history, with the
exit status and the clean-shutdown marker of a SIGTERM.
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

from .history import History

START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0
RUNNING: set[subprocess.Popen[str]] = set()  # every broker process started and not yet reaped (kill_all)


class BrokerProcess:
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
        """Start it unless it runs; wait for its "listening on" line. False (and a history line) if it never comes."""
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
            if "listening on" in line:
                listening.set()
            if "after an internal error" in line or "the broker failed" in line:
                self.history.record("broker", node=self.node, action="internal-error", line=line.strip())
            if self.on_line is not None:
                self.on_line(line.strip())

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
