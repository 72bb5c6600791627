"""The console's charts in a real headless Chromium: rates, sizes and lag a user sees move without reloading.

One broker and one browser for the module; the broker samples its history
every second here (10 s by default) so the live update shows within the
test. Each page with charts is photographed (next to test_web_console's
screenshots: KAFKACOMPAT_ARTIFACTS_DIR, else a fresh temporary directory)
and checked with axe-core (npm, installed by tests/run.sh into
tests/http/a11y) for serious or critical accessibility violations.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacompat.http.console import history
from kafkacompat.testing import Broker
from tests.http.console_kit import CHROMIUM, accessible

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
PHONE = {"width": 390, "height": 844}
browser_tests = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} "
                                   "(tests/run.sh installs Debian's)")


@pytest.fixture(scope="module")
def web() -> Iterator[Broker]:
    with Broker(data_dir="tmp", http_port=0) as running:
        history.of(running.server).interval = 1.0
        yield running


@pytest.fixture(scope="module")
def screens() -> Path:
    base = os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kafkacompat-console-charts-", dir=base))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(bypass_csp=True)  # only so axe-core can be injected; the console sends its CSP
    try:
        opened = context.new_page()
        opened.set_default_timeout(15_000)
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
        assert not errors, f"script errors on the page: {errors}"
    finally:
        context.close()


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def create_topic(broker: Broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions)])[name].result(15)



def shoot(page: object, screens: Path, name: str) -> None:
    page.screenshot(path=str(screens / f"{name}.png"), full_page=True)
    size = page.viewport_size
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(screens / f"{name}-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), f"{name} scrolls sideways"
    page.set_viewport_size(size)


def samples(page: object) -> int:
    return int(page.locator("section.charts").get_attribute("data-samples") or 0)


@browser_tests
@pytest.mark.slow  # a real Chromium
def test_topic_charts_show_produce_and_fetch_rates_live(web: Broker, page: object, screens: Path) -> None:
    topic = unique("meters-")
    create_topic(web, topic, 2)
    url = web.http_url + "/console/topic?" + urllib.parse.urlencode({"stream": "/default", "topic": topic})
    page.goto(url)
    expect(page.locator("#chart-rates canvas").first).to_be_visible()  # uPlot drew
    expect(page.locator("#chart-rates .latest")).to_contain_text("Produced")
    before = samples(page)

    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 0})
    for i in range(200):
        producer.produce(topic, b"reading %d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": web.bootstrap_servers, "group.id": unique("g"),
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got, deadline = 0, time.monotonic() + 30
        while got < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            got += message is not None and message.error() is None
        assert got == 200
    finally:
        consumer.close()
    # without reloading, the page picks up the samples that saw the traffic
    try:
        expect(page.locator("#chart-rates .peak")).to_have_text(re.compile(r"peak: Produced [1-9][0-9.]* msg/s, "
                                                                           r"Fetched [1-9][0-9.]* msg/s"),
                                                                timeout=20_000)
    except AssertionError as failed:  # what the broker held, to tell the sampler from the page
        kept = history.of(web.server)
        raise AssertionError(f"{failed}\nbroker's series: {kept.view(('topic', '/default', topic))}\n"
                             f"counted: {web.server.cluster.stats.topic_totals.get(topic)}") from None
    expect(page.locator("#chart-bytes .peak")).to_have_text(re.compile(r"In [1-9][0-9.]* (B|KiB)/s"))
    expect(page.locator("#chart-size .latest")).to_have_text(re.compile(r"now: Size \d+(\.\d)? KiB"))
    expect(page.locator("#chart-partition-sizes .latest")).to_have_text(
        re.compile(r"now: Partition 0 \d+(\.\d)? (B|KiB), Partition 1 \d+(\.\d)? (B|KiB)"))
    assert samples(page) > before
    figures = history.of(web.server).view(("topic", "/default", topic))["series"]
    assert figures["size_p0"][-1] + figures["size_p1"][-1] == figures["size_bytes"][-1] > 0
    assert sum(v or 0 for v in figures["produced_msgs"]) > 0 and sum(v or 0 for v in figures["fetched_msgs"]) > 0
    accessible(page)
    shoot(page, screens, "charts-topic")


@browser_tests
@pytest.mark.slow  # a real Chromium
def test_group_charts_show_lag_in_messages_and_in_time(web: Broker, page: object, screens: Path) -> None:
    topic, group = unique("orders-"), unique("billing-")
    create_topic(web, topic, 1)
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, b"order %d" % i, timestamp=two_hours_ago + i)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": web.bootstrap_servers, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # 4 unread, the oldest 2 h old
    consumer.close()

    page.goto(web.http_url + "/console/group?" + urllib.parse.urlencode({"id": group}))
    expect(page.locator("#chart-lag .latest")).to_contain_text("Lag 4 msg")
    expect(page.locator("#chart-age .latest")).to_contain_text("Age 2 h")
    expect(page.locator("#chart-age canvas").first).to_be_visible()
    accessible(page)
    shoot(page, screens, "charts-group")


@browser_tests
@pytest.mark.slow  # a real Chromium
def test_broker_and_stream_pages_chart_and_pass_axe(web: Broker, page: object, screens: Path) -> None:
    page.goto(web.http_url + "/")
    expect(page.locator("#chart-rates canvas").first).to_be_visible()
    expect(page.locator("#chart-size .latest")).to_contain_text("Size")
    accessible(page)
    shoot(page, screens, "charts-broker")
    page.goto(web.http_url + "/console/stream?path=/default")
    expect(page.locator("#chart-bytes canvas").first).to_be_visible()
    expect(page.locator(".chart-status")).to_contain_text("updated live")
    accessible(page)
    shoot(page, screens, "charts-stream")
    for path in ("/console/groups", "/console/tail?stream=/default&topic=" + next(
            t.name for t in web.server.cluster.store.list_topics("/default"))):
        page.goto(web.http_url + path)
        accessible(page)


def test_history_keeps_one_window_and_forgets_deleted_topics(web: Broker) -> None:
    kept = history.History(window=30, interval=10)
    cluster = web.server.cluster
    web.create_topic("short-lived")
    for tick in range(40):
        web.call(kept.sample(cluster, now=1_000_000.0 + 10 * tick))
    view = kept.view(("topic", "/default", "short-lived"))
    assert len(view["times"]) == 30 and view["times"][0] == 1_000_000.0 + 100  # the oldest ten samples dropped
    assert view["series"]["size_bytes"] == [0.0] * 30
    web.delete_topic("short-lived")
    web.call(kept.sample(cluster, now=1_000_000.0 + 400))
    assert ("topic", "/default", "short-lived") not in kept.rings
    assert not math.isnan(kept.rings[history.BROKER_SCOPE]["size_bytes"][kept.head - 1])


def test_traffic_seen_by_a_failed_sample_is_charted_by_the_next(web: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = history.History(window=30, interval=10)
    cluster = web.server.cluster
    topic = unique("bumpy-")
    create_topic(web, topic, 1)
    web.call(kept.sample(cluster, now=2_000_000.0))
    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 0})
    for i in range(50):
        producer.produce(topic, b"reading %d" % i)
    assert producer.flush(15) == 0

    async def group_deleted_meanwhile(*_: object) -> None:
        raise RuntimeError("a group went away under the sample")

    with monkeypatch.context() as patched:
        patched.setattr(kept, "_lags", group_deleted_meanwhile)
        with pytest.raises(RuntimeError):
            web.call(kept.sample(cluster, now=2_000_010.0))
    web.call(kept.sample(cluster, now=2_000_020.0))
    produced = kept.view(("topic", "/default", topic))["series"]["produced_msgs"]
    assert produced[-1] == pytest.approx(50 / 20)  # the 50 records over the 20 s since the last good sample


def test_traffic_before_the_first_sample_is_charted(web: Broker) -> None:
    kept = history.History(window=30, interval=10)
    kept.begin(3_000_000.0)  # the sampler started; its first sample comes later (a slow start, a busy loop)
    topic = unique("early-")
    create_topic(web, topic, 1)
    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 0})
    for i in range(40):
        producer.produce(topic, b"reading %d" % i)
    assert producer.flush(15) == 0
    web.call(kept.sample(web.server.cluster, now=3_000_010.0))
    assert kept.view(("topic", "/default", topic))["series"]["produced_msgs"] == [pytest.approx(40 / 10)]


def test_chart_data_answers_bad_scopes_with_one_json_error(web: Broker) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(web.http_url + "/console/charts/data?scope=planet", timeout=10)
    assert caught.value.code == 400
    assert b"is not one of broker, stream, topic, group" in caught.value.read()


def test_without_the_chart_library_the_pages_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKACOMPAT_UPLOT_DIR", str(tmp_path))  # an empty folder: no uPlot there
    with Broker(http_port=0) as broker:
        with urllib.request.urlopen(broker.http_url + "/", timeout=10) as answer:
            home = answer.read().decode()
        assert 'id="charts-missing"' in home and "npm ci --prefix kafkacompat/http/console/charts" in home
        assert "uPlot.iife.min.js" not in home
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(broker.http_url + "/console/vendor/uplot/uPlot.iife.min.js", timeout=10)
        assert caught.value.code == 404
