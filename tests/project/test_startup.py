"""A command starts without importing what only tests use (hypothesis, which kio imports when it can)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.project.doc_blocks import REPO


def _imported(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "kafkacompat", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [("--help",), ("serve", "--help")], ids=["help", "serve-help"])
def test_a_command_loads_the_codec_without_hypothesis_where_it_is_installed(args: tuple[str, ...]) -> None:
    """kio registers test strategies with hypothesis whenever it can import it: 0.15-0.3 s of every
    broker and CLI start on a machine that has it (the test suite's thousands of processes paid it)."""
    pytest.importorskip("hypothesis")  # the test extra installs it: the case that costs
    imported = _imported(*args)
    assert "kio.serial" in imported  # the codec is loaded,
    assert "hypothesis" not in imported  # its test strategies are not
