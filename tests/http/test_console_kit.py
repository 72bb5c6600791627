"""The console tests' accessibility check can fail: on a violation, and when axe-core is not there to look."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.http import console_kit
from tests.http.console_kit import CHROMIUM, accessible


def test_a_missing_axe_core_fails_the_check_instead_of_passing_it(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(console_kit, "AXE", tmp_path / "axe.min.js")
    with pytest.raises(BaseException) as stopped:  # a skip would end the test here too: tell them apart
        accessible(object())
    assert stopped.type is pytest.fail.Exception and "axe-core is not installed" in str(stopped.value)


@pytest.mark.slow  # a real Chromium
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (tests/run.sh installs it)")
def test_a_page_with_a_critical_violation_fails_the_check() -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page()
        page.set_content('<html lang="en"><head><title>t</title></head><body><main><img src="x.png"></main></body></html>')
        with pytest.raises(AssertionError, match="image-alt"):
            accessible(page)
        page.set_content('<html lang="en"><head><title>t</title></head><body><main><img src="x.png" alt="x">'
                         '</main></body></html>')
        accessible(page)
        browser.close()
