"""What the console's browser tests share: where Chromium and axe-core are, and the accessibility check."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("KAFKACOMPAT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
AXE = Path(__file__).parent / "a11y" / "node_modules" / "axe-core" / "axe.min.js"


def accessible(page: object) -> None:
    """axe-core finds no serious or critical violation on the page as it is now.

    Without axe-core the check fails rather than skips: tests/run.sh installs it (and CI runs that), so its
    absence is a broken setup, and a check that quietly passes could never catch a violation."""
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed at {AXE}: run tests/run.sh, or npm ci --prefix {AXE.parents[2]}")
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
                          ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
                          ".map(v => v.id + ': ' + v.help + ' @ ' + v.nodes.map(n => n.target.join(' ')).join(', ')))")
    assert not found, found
