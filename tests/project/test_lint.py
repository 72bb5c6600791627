"""ruff, configured in pyproject.toml, finds nothing: run as docs/development.md tells contributors to run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.project.doc_blocks import REPO, run_by

LINT = "tests/project/test_lint.py::test_ruff_is_clean"


def test_ruff_is_clean() -> None:
    [block] = run_by(LINT)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_sees_the_tree() -> None:
    """A configuration that excluded most of the tree would pass too: every layer's files are checked."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--show-files"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    checked = {Path(line).relative_to(REPO).parts[0] for line in done.stdout.splitlines() if line.endswith(".py")}
    assert {"protocol", "storage", "kafkacompat", "tests", "compat_tests", "docs"} <= checked, checked
