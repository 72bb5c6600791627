"""CPU seconds and peak RSS of a broker process, read from /proc.

Peak RSS is reset before each workload (writing 5 to clear_refs resets
VmHWM) so each row reports its own peak; where the kernel refuses, the row
reports the peak since the process started.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time

log = logging.getLogger(__name__)

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    cpu_seconds: float
    peak_rss_mb: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far."""
    with open(f"/proc/{pid}/stat") as fh:
        stat = fh.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the peak resident set size, in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb(pid: int) -> float:
    """VmRSS: the resident set size now, in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def running(pid: int) -> bool:
    """Whether `pid` still runs: a zombie (exited, its parent yet to reap it) holds nothing and does not."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def send_signal(pid: int, sig: signal.Signals) -> None:
    """`sig` to `pid`, unless it is gone already."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pids: list[int], timeout_s: float) -> None:
    """Until none of `pids` runs (a killed worker is reaped by init, not by its killer), or `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.01)


def tree_rss_mb(pid: int) -> float:
    """VmRSS of `pid` and every process under it, in MiB: what `serve --workers N` holds in all (its
    supervisor, workers and spare). A process that exits meanwhile counts nothing."""
    total = 0.0
    for each in process_tree(pid):
        try:
            total += rss_mb(each)
        except OSError:
            pass
    return total


def process_tree(pid: int) -> list[int]:
    """`pid` and every process under it, as /proc has them now."""
    found, queue = [], [pid]
    while queue:
        each = queue.pop()
        found.append(each)
        try:
            threads = os.listdir(f"/proc/{each}/task")
        except OSError:
            continue
        for thread in threads:  # a child belongs to the thread that started it
            try:
                with open(f"/proc/{each}/task/{thread}/children") as fh:
                    queue.extend(int(child) for child in fh.read().split())
            except OSError:
                pass
    return found


def reset_peak_rss(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError as exc:
        log.debug("cannot reset peak RSS of %d: %s", pid, exc)
        return False


class Meter:
    """Measures one workload from its creation: CPU seconds spent and the peak RSS reached."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._cpu0 = 0.0
        if pid is not None:
            reset_peak_rss(pid)
            self._cpu0 = cpu_seconds(pid)

    def usage(self) -> Usage | None:
        """None when the broker is not ours to observe (--bootstrap) or has died."""
        if self.pid is None:
            return None
        try:
            return Usage(cpu_seconds(self.pid) - self._cpu0, peak_rss_mb(self.pid))
        except OSError:
            return None
