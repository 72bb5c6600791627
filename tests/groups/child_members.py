"""Group members as child processes (member_main.py) and what they report.

Each member's stdout is read on a thread into a list of events; tests wait
on conditions over those events with a deadline, never on fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

SCRIPT = os.path.join(os.path.dirname(__file__), "member_main.py")


class Member:
    def __init__(self, client: str, bootstrap: str, topic: str, group: str, *,
                 instance_id: str = "", assignor: str = "range", session_ms: int = 3000) -> None:
        self.name = instance_id or f"{client}-{id(self):x}"
        cmd = [sys.executable, SCRIPT, client, bootstrap, topic, group,
               "--assignor", assignor, "--session-ms", str(session_ms)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["t"] = time.monotonic()
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    # what the member saw ---------------------------------------------------------

    def assignment(self) -> set[int]:
        """Partitions owned now, replaying assigned/revoked (eager and incremental alike)."""
        owned: set[int] = set()
        for event in list(self.events):
            if event["event"] == "assigned":
                owned |= set(event["partitions"])
            elif event["event"] == "revoked":
                owned -= set(event["partitions"])
        return owned

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["partition"], e["offset"], e["value"]) for e in list(self.events) if e["event"] == "record"]

    def rebalance_events(self) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] in ("assigned", "revoked")]

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not condition():
                    raise AssertionError(
                        f"member {self.name}: {what} did not happen within {timeout}s "
                        f"(exit={self.proc.poll()}); events={self.events[-10:]}; "
                        f"stderr={''.join(self._stderr)[-2000:]}"
                    )
                self._changed.wait(min(left, 0.2))

    # ending ----------------------------------------------------------------------

    def close(self, timeout: float = 30) -> None:
        """SIGTERM: the client closes normally (LeaveGroup for dynamic members)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.wait(lambda: any(e["event"] == "closed" for e in self.events), timeout, "a clean close")
        self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: gone without a word, like a crashed host."""
        self.proc.kill()
        self.proc.wait(10)

    def stop_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll a condition over several members; returns the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.05)
    return time.monotonic() - start


def covers(members: Iterable[Member], partitions: int) -> bool:
    """Every partition owned by exactly one of the members."""
    owned = [p for m in members for p in m.assignment()]
    return sorted(owned) == list(range(partitions))


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    """Spread values round-robin over the partitions and wait for every ack."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(15) == 0
    assert not errors
