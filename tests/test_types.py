"""The type checker passes over the handlers, their typed views of the broker, protocol/ and the Kafka port.

What mypy checks is configured in pyproject.toml ([tool.mypy] files): a
handler that reaches for something the broker's views (kafkacompat/services.py)
do not offer, or misuses what they do, fails here rather than on a client.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean() -> None:
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("Success: no issues found")
