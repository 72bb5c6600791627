"""`python -m kafkacompat.bench.rest` runs end to end and prints its figures (a tiny run: no speed asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.timeout(180)
def test_rest_bench_prints_both_paths() -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.rest", "--records", "400", "--samples", "20",
                           "--streams", "2", "--chunk", "50", "--data-dir", "memory://", "--json"],
                          capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["records"] == 400
    for name in ("kafka_records_per_s", "rest_records_per_s", "kafka_p99_ms", "rest_p99_ms"):
        assert figures[name] > 0, name
