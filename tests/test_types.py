"""The type checker passes over the handlers, their typed views of the broker, protocol/, the Kafka port and
operations/.

What mypy checks is configured in pyproject.toml ([tool.mypy] files): a
handler that reaches for something the broker's views (kafkacompat/services.py)
do not offer, or misuses what they do, fails here rather than on a client.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.installed_layout import lay_out

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean(tmp_path: Path) -> None:
    tree = lay_out(tmp_path)  # mypy walks folders: protocol/ and storage/ where the wheel puts them
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(ROOT / ".mypy_cache")], cwd=tree, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("Success: no issues found")
