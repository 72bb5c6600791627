"""The replication benchmark runs end to end and prints its figures (a small run)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_replication_bench_prints_throughput_and_lag():
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.replication", "--mb", "3", "--lag-seconds", "1",
                           "--rate-mb", "2"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"\s+1 KiB\s+[\d.]+\s+[\d.]+", lines[1]) and re.fullmatch(r"\s+16 KiB\s+[\d.]+\s+[\d.]+", lines[2])
    assert re.match(r"lag at 2 MB/s \(4 KiB messages, 488 messages\): p50 [\d.]+ ms, p99 [\d.]+ ms", lines[3])
