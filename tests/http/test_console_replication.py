"""The console's replication picture in a real headless Chromium: the topology drawn, a link paused and resumed,
and each link's lag charted live."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from kafkacompat.admin.client import AdminClient
from kafkacompat.http.console import history
from kafkacompat.testing import Broker
from tests.http.console_kit import CHROMIUM, accessible

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


@pytest.mark.slow  # two brokers and a real Chromium
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (tests/run.sh installs it)")
def test_the_stream_page_draws_its_links_and_pauses_one(tmp_path: Path) -> None:
    with Broker(str(tmp_path / "a"), cluster_name="sanjose", http_port=0) as a, \
            Broker(str(tmp_path / "b"), cluster_name="newyork") as b, \
            playwright_api.sync_playwright() as playwright:
        for broker in (a, b):
            AdminClient(broker.bootstrap_servers, timeout=30).call("stream.create", path="/s")
        history.of(a.server).interval = 1.0  # a chart sample a second, so the live update shows within the test
        link = f"127.0.0.1:{b.port}/s"
        AdminClient(a.bootstrap_servers, timeout=30).call("replica.add", path="/s", replica=link)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_context(bypass_csp=True).new_page()  # bypass only so axe-core can be injected
        page.set_default_timeout(15_000)
        page.goto(a.http_url + "/console/stream?path=/s")
        svg = page.locator("#topology")
        expect(svg).to_contain_text("this stream")
        expect(svg).to_contain_text(link)
        expect(svg).to_contain_text("replica on newyork")
        row = page.locator("#replicas tbody tr", has_text=link)
        row.get_by_role("button", name="Pause").click()
        expect(page.locator("#topology .link-label")).to_have_text("paused · 0 behind")
        assert page.locator("#topology line[stroke-dasharray]").count() == 1  # a paused link is dashed
        a.produce("/s:t", b"waits")
        page.reload()
        expect(page.locator("#topology .link-label")).to_have_text("paused · 1 behind")
        expect(page.locator("#chart-link-lag .latest")).to_have_text(f"now: {link} 1 msg", timeout=20_000)
        expect(page.locator("#chart-link-lag canvas").first).to_be_visible()
        accessible(page)
        base = os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")
        shots = Path(tempfile.mkdtemp(prefix="kafkacompat-console-replication-", dir=base))
        page.screenshot(path=str(shots / "replication.png"), full_page=True)
        page.locator("#replicas tbody tr", has_text=link).get_by_role("button", name="Resume").click()
        expect(page.locator("#replicas tbody tr", has_text=link).get_by_role("button", name="Pause")).to_be_visible()
        store = b.server.cluster.store

        def shipped() -> bool:
            return store.get_topic("/s", "t") is not None and store.partition("/s", "t", 0).high_watermark == 1

        deadline = time.monotonic() + 20  # the link ships what waited
        while time.monotonic() < deadline and not shipped():
            time.sleep(0.1)
        assert shipped()
        # without reloading, the chart sees the link catch up
        expect(page.locator("#chart-link-lag .latest")).to_have_text(f"now: {link} 0 msg", timeout=20_000)
        expect(page.locator("#chart-link-lag .peak")).to_have_text(f"peak: {link} 1 msg")
        browser.close()
