"""The `kafkacompat` command run as users run it: a subprocess of this checkout, with a broker to talk to."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from kafkacompat.testing import Broker

REPO = Path(__file__).resolve().parents[2]


def kafkacompat(*args: str, input: str | None = None, env: dict[str, str] | None = None,
                timeout: float = 60, cwd: Path = REPO, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m kafkacompat ARGS` importing this checkout; KAFKACOMPAT_* of the test run are not inherited.

    `prefix` runs it under another command (setpriv, ...).
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "kafkacompat", *args], input=input, capture_output=True, text=True, timeout=timeout,
        cwd=cwd, env={**base, "PYTHONPATH": str(REPO), **(env or {})},
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], status: int, *phrases: str) -> None:
    """A refusal as users should see it: the status, nothing on stdout, one line on stderr naming the problem."""
    assert done.returncode == status, (done.returncode, done.stderr)
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("kafkacompat")
    for phrase in phrases:
        assert phrase in done.stderr


@pytest.fixture(scope="module")
def cli_broker() -> Iterator[Broker]:
    """A broker whose groups rebalance at once, so group commands need not wait 3 s for a first member."""
    with Broker(group_initial_rebalance_delay_ms=0) as running:
        yield running
