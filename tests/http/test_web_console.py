"""The web console in a real headless Chromium (Debian's, driven by Playwright), as a user clicks through it.

Each page is loaded, checked for what the broker holds (a stream the CLI
made, a message a Kafka client produced during the test, a group's lag),
and photographed: the screenshots go to a fresh directory named in the test
output (KAFKACOMPAT_ARTIFACTS_DIR to choose it), never into the checkout.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacompat.testing import Broker
from tests.http.console_kit import CHROMIUM

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
REPO = Path(__file__).resolve().parents[2]
PHONE = {"width": 390, "height": 844}  # an iPhone 12-sized viewport
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (tests/run.sh installs Debian's)")


def say(config: pytest.Config, line: str) -> None:
    """A line in pytest's own output, past its capture (module teardown runs captured)."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.ensure_newline()
        reporter.write_line(line)


@pytest.fixture(scope="module")
def screens(pytestconfig: pytest.Config) -> Iterator[Path]:
    base = os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="kafkacompat-console-screens-", dir=base))
    yield folder
    say(pytestconfig, f"web console screenshots ({len(list(folder.glob('*.png')))}): {folder}")


@pytest.fixture(scope="module")
def load_times(pytestconfig: pytest.Config) -> Iterator[dict[str, float]]:
    """Page load times (the browser's navigation timing, ms), printed at the end as figures."""
    times: dict[str, float] = {}
    yield times
    if times:
        say(pytestconfig, "web console timings (ms; page loads are navigation start to load end): "
            + ", ".join(f"{page} {ms:.0f}" for page, ms in times.items()))


@pytest.fixture(scope="module")
def web() -> Iterator[Broker]:
    with Broker(data_dir="tmp", http_port=0) as running:
        yield running


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
    context = browser.new_context()
    try:
        opened = context.new_page()
        opened.set_default_timeout(15_000)
        yield opened
    finally:
        context.close()


def visit(page: object, url: str, load_times: dict[str, float], label: str) -> None:
    answer = page.goto(url)
    assert answer is not None and answer.status == 200, (url, answer and answer.status)
    load_times[label] = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")


def shoot(page: object, screens: Path, name: str) -> None:
    """A full-page screenshot on a laptop-sized viewport, then one on a phone's."""
    page.screenshot(path=str(screens / f"{name}.png"), full_page=True)
    size = page.viewport_size
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(screens / f"{name}-phone.png"), full_page=True)
    # on a phone the tables become cards: nothing may stick out sideways
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), f"{name} scrolls sideways on a phone"
    page.set_viewport_size(size)


def cli(broker: Broker, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", broker.bootstrap_servers],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def produce(broker: Broker, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, key=key)
    assert producer.flush(15) == 0


def create_topic(broker: Broker, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions)])[name].result(15)


@pytest.mark.slow  # a real Chromium: a few seconds each
def test_home_lists_the_stream_the_cli_created(web: Broker, page: object, screens: Path, load_times: dict) -> None:
    path = "/apps/iot/" + unique("pump_")
    cli(web, "stream", "create", path, "--ttl", "7d", "--partitions", "3", "--autocreate", "false",
        "--produce-perm", "u:alice")
    visit(page, web.http_url + "/", load_times, "streams")
    row = page.locator("#streams tbody tr", has_text=path)
    expect(row).to_have_count(1)
    expect(row.locator("td[data-label='TTL']")).to_have_text("7d")  # as the CLI writes it, not 604800
    expect(row.locator("td[data-label='Default partitions']")).to_have_text("3")
    expect(row.locator("td[data-label='Autocreate']")).to_have_text("no")
    expect(row.locator("td[data-label='Permissions']")).to_contain_text("produce: u:alice")
    expect(page.locator("#volumes")).to_contain_text(web.config.data_dir)
    shoot(page, screens, "streams")

    row.get_by_role("link", name=path).click()
    expect(page.locator("h1")).to_have_text(f"Stream {path}")
    expect(page.locator("#policy")).to_contain_text("7d")
    load_times["stream"] = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    shoot(page, screens, "stream")


@pytest.mark.slow  # a real Chromium: a few seconds each
def test_topic_page_shows_partitions_partitionlets_and_their_volume(web: Broker, page: object, screens: Path,
                                                                   load_times: dict) -> None:
    path = "/apps/" + unique("rig_")
    cli(web, "stream", "create", path)
    name = f"{path}:readings"
    create_topic(web, name, partitions=2)
    produce(web, name, [b"reading-%d" % i for i in range(5)], key=b"pump-1")  # one key: one partition
    url = web.http_url + "/console/topic?" + urllib.parse.urlencode({"stream": path, "topic": "readings"})
    visit(page, url, load_times, "topic")
    expect(page.locator("h1")).to_have_text(f"Topic {name}")
    rows = page.locator("#partitions tbody tr")
    expect(rows).to_have_count(2)
    messages = [int(t) for t in page.locator("#partitions td[data-label='Messages']").all_inner_texts()]
    assert sorted(messages) == [0, 5]
    full = rows.nth(messages.index(5))
    expect(full.locator("td[data-label='End offset']")).to_have_text("5")
    expect(full.locator("td[data-label='Partitionlets']")).to_contain_text(web.config.data_dir)
    shoot(page, screens, "topic")


@pytest.mark.slow  # a real Chromium: a few seconds each
def test_live_tail_shows_a_message_produced_during_the_test(web: Broker, page: object, screens: Path,
                                                            load_times: dict) -> None:
    topic = unique("tail-")
    create_topic(web, topic, partitions=3)
    produce(web, topic, [b"old news"])  # before the tail opens: not shown (it follows from the end)
    url = web.http_url + "/console/tail?" + urllib.parse.urlencode({"stream": web.server.cluster.default_stream,
                                                                    "topic": topic})
    visit(page, url, load_times, "tail")
    expect(page.locator("#tail-status")).to_contain_text("Following 3 partition(s)")
    value = b"<img src=x onerror=\"document.title='pwned'\"> pressure=7.1bar"
    started = time.monotonic()
    produce(web, topic, [value], key=b"pump-7")
    row = page.locator("#tail tbody tr")
    expect(row).to_have_count(1)
    seen_after = time.monotonic() - started
    expect(row.locator("td.value")).to_have_text(value.decode())  # shown as text, not run as HTML
    expect(row.locator("td.key")).to_have_text("pump-7")
    assert page.locator("#tail img").count() == 0 and page.title() != "pwned"
    assert "old news" not in page.locator("#tail").inner_text()
    load_times["tail: produce to row shown"] = seen_after * 1000
    shoot(page, screens, "tail")

    page.goto(url + "&from=beginning")
    expect(page.locator("#tail tbody tr")).to_have_count(2)
    expect(page.locator("#tail")).to_contain_text("old news")


@pytest.mark.slow  # a real Chromium: a few seconds each
def test_group_page_shows_members_and_lag(web: Broker, page: object, screens: Path, load_times: dict) -> None:
    topic = unique("lag-")
    group = "<b>ops</b> " + unique("g")  # group ids are arbitrary text: shown escaped
    create_topic(web, topic)
    produce(web, topic, [b"m%d" % i for i in range(10)])
    consumer = Consumer({"bootstrap.servers": web.bootstrap_servers, "group.id": group, "client.id": "dashboard-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == 10
        consumer.commit(asynchronous=False)
        produce(web, topic, [b"late-1", b"late-2", b"late-3"])  # not read yet: lag 3

        visit(page, web.http_url + "/console/groups", load_times, "groups")
        row = page.locator("#groups tbody tr", has_text=group)
        expect(row.locator("td[data-label='Members']")).to_have_text("1")
        expect(row.locator("td[data-label='Total lag']")).to_have_text("3")
        shoot(page, screens, "groups")
        row.get_by_role("link", name=group).click()
        expect(page.locator("h1")).to_have_text(f"Group {group}")
        load_times["group"] = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        expect(page.locator("#members tbody tr")).to_contain_text("dashboard-reader")
        expect(page.locator("#members td[data-label='Partitions']")).to_have_text(f"{topic}-0")
        lag_row = page.locator("#lag tbody tr")
        expect(lag_row.locator("td[data-label='Committed']")).to_have_text("10")
        expect(lag_row.locator("td[data-label='End offset']")).to_have_text("13")
        expect(lag_row.locator("td[data-label='Lag']")).to_have_text("3")
        assert page.locator("h1 b").count() == 0
        shoot(page, screens, "group")
    finally:
        consumer.close()


@pytest.mark.slow  # a real Chromium: a few seconds each
def test_forms_create_a_stream_edit_its_policy_and_create_a_topic(web: Broker, page: object, screens: Path) -> None:
    path = "/apps/" + unique("form_")
    store = web.server.cluster.store
    page.goto(web.http_url + "/")
    form = page.locator("#create-stream")
    form.get_by_label("Path").fill(path)
    form.get_by_label("Default partitions").fill("4")
    form.get_by_label("fsync").select_option("always")
    form.get_by_role("button", name="Create stream").click()
    expect(page.locator("h1")).to_have_text(f"Stream {path}")
    policy = store.get_stream(path).policy
    assert (policy.default_partitions, policy.fsync.value, policy.autocreate) == (4, "always", True)

    edit = page.locator("#edit-stream")
    edit.get_by_label("Time to live").fill("1h")  # as the CLI's --ttl takes it
    edit.get_by_label("Create topics on first use").uncheck()
    edit.get_by_role("button", name="Save policy").click()
    expect(page.locator("#policy")).to_contain_text("1h")
    policy = store.get_stream(path).policy
    assert (policy.ttl_seconds, policy.autocreate, policy.default_partitions) == (3600, False, 4)

    create = page.locator("#create-topic")
    create.get_by_label("Name").fill("alerts")
    create.get_by_role("button", name="Create topic").click()
    expect(page.locator("h1")).to_have_text(f"Topic {path}:alerts")
    expect(page.locator("#partitions tbody tr")).to_have_count(4)  # the stream's default
    # a Kafka client sees the topic the form made
    metadata = AdminClient({"bootstrap.servers": web.bootstrap_servers}).list_topics(timeout=15)
    assert metadata.topics[f"{path}:alerts"].partitions.keys() == {0, 1, 2, 3}
    shoot(page, screens, "forms-topic-created")

    edit_topic = page.locator("#edit-topic")
    edit_topic.get_by_label("Partitions").fill("6")
    edit_topic.get_by_label("Config").fill("retention.ms")
    edit_topic.get_by_label("Value").fill("3600000")
    edit_topic.get_by_role("button", name="Save").click()
    expect(page.locator("#partitions tbody tr")).to_have_count(6)
    topic = store.get_topic(path, "alerts")
    assert (topic.partitions, topic.configs.get("retention.ms")) == (6, "3600000")
    edit_topic = page.locator("#edit-topic")
    edit_topic.get_by_label("Partitions").fill("2")  # partitions only grow: refused, nothing changed
    edit_topic.get_by_role("button", name="Save").click()
    expect(page.locator(".error")).to_contain_text("can only be added")
    assert store.get_topic(path, "alerts").partitions == 6

    # refused input: the form comes back with the store's reason, and nothing changed
    page.goto(web.http_url + "/console/stream?" + urllib.parse.urlencode({"path": path}))
    create = page.locator("#create-topic")
    create.get_by_label("Name").fill("alerts")
    create.get_by_role("button", name="Create topic").click()
    expect(page.locator(".error")).to_contain_text("already exists")
    page.goto(web.http_url + "/")
    page.locator("#create-stream").get_by_label("Path").fill("no-leading-slash")
    page.locator("#create-stream").get_by_role("button", name="Create stream").click()
    expect(page.locator(".error")).to_be_visible()
    assert store.get_stream("no-leading-slash") is None
    shoot(page, screens, "forms-refused")


def post(url: str, fields: dict[str, str], headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), method="POST",
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_form_posted_from_another_site_is_refused(web: Broker) -> None:
    path = "/apps/" + unique("csrf_")
    status = post(web.http_url + "/console/stream/create", {"path": path},
                  {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    assert web.server.cluster.store.get_stream(path) is None
    # reached by a name that is not loopback (DNS rebinding): refused too
    assert post(web.http_url + "/console/stream/create", {"path": path}, {"Host": "evil.example"}) == 403
    assert web.server.cluster.store.get_stream(path) is None


def test_changes_are_refused_when_http_listens_beyond_loopback() -> None:
    with Broker(http_port=0, http_host="0.0.0.0") as broker:
        url = f"http://127.0.0.1:{broker.http_port}"
        with urllib.request.urlopen(url + "/", timeout=10) as answer:
            home = answer.read().decode()
        assert "not on loopback only" in home and 'id="create-stream"' not in home
        assert post(url + "/console/stream/create", {"path": "/apps/open"}) == 403
        assert broker.server.cluster.store.get_stream("/apps/open") is None


def test_unknown_things_answer_404_pages(web: Broker) -> None:
    for path in ("/console/stream?path=/nowhere", "/console/topic?stream=/default&topic=nope",
                 "/console/group?id=nobody", "/console/tail?stream=/default&topic=nope"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(web.http_url + path, timeout=10)
        assert caught.value.code == 404
        assert caught.value.headers["Content-Type"].startswith("text/html")


def test_an_open_tail_does_not_hold_up_the_brokers_stop() -> None:
    broker = Broker(http_port=0).start()
    try:
        broker.create_topic("watched")
        stream = urllib.request.urlopen(broker.http_url + "/console/tail/events?stream=/default&topic=watched",
                                        timeout=10)
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        assert stream.readline() == b"event: ready\n"
        broker.produce("watched", b"seen")
        assert [stream.readline() for _ in range(2)] == [b'data: {"partitions": 1}\n', b"\n"]
        assert stream.readline() == b"event: record\n"
        assert b'"value": {"text": "seen"' in stream.readline()
        started = time.monotonic()
    finally:
        broker.stop()
    assert time.monotonic() - started < 5
    assert b"event: record" not in stream.read()  # the server ended the stream (read() returned, no timeout)


def test_a_stream_with_many_topics_is_listed_a_page_at_a_time(web: Broker) -> None:
    path = "/apps/" + unique("many_")
    store = web.server.cluster.store

    async def make() -> None:
        await store.create_stream(path)
        for i in range(120):
            await store.create_topic(path, f"t{i:03d}", 1)

    web.call(make())
    with urllib.request.urlopen(web.http_url + "/console/stream?" + urllib.parse.urlencode({"path": path}),
                                timeout=10) as answer:
        first = answer.read().decode()
    assert "Topics 1–100 of 120." in first and ">t099<" in first and ">t100<" not in first
    with urllib.request.urlopen(web.http_url + "/console/stream?" + urllib.parse.urlencode({"path": path, "start": 100}),
                                timeout=10) as answer:
        second = answer.read().decode()
    assert "Topics 101–120 of 120." in second and ">t100<" in second and ">t099<" not in second


def test_a_kip848_groups_members_and_lag_on_its_page() -> None:
    with Broker(http_port=0, group_consumer_heartbeat_interval_ms=500, group_initial_rebalance_delay_ms=0) as broker:
        create_topic(broker, "events", partitions=2)
        produce(broker, "events", [b"e1", b"e2", b"e3"], key=b"one-key")  # one partition
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kip848-readers",
                             "group.protocol": "consumer", "client.id": "new-protocol-reader",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["events"])
            got, deadline = 0, time.monotonic() + 30
            while (got < 3 or len(consumer.assignment()) < 2) and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                got += message is not None and message.error() is None
            assert got == 3 and len(consumer.assignment()) == 2
            consumer.commit(asynchronous=False)
            produce(broker, "events", [b"e4"], key=b"one-key")
            with urllib.request.urlopen(broker.http_url + "/console/group?id=kip848-readers", timeout=10) as answer:
                page = answer.read().decode()
        finally:
            consumer.close()
        assert "<dt>Type</dt><dd>consumer</dd>" in page
        assert "new-protocol-reader" in page and "events-0, events-1" in page
        assert '<dd id="total-lag">1</dd>' in page


def test_a_tail_ends_when_its_topic_is_deleted(web: Broker) -> None:
    topic = unique("doomed-")
    web.create_topic(topic)
    query = urllib.parse.urlencode({"stream": web.server.cluster.default_stream, "topic": topic})
    stream = urllib.request.urlopen(web.http_url + "/console/tail/events?" + query, timeout=10)
    assert stream.readline() == b"event: ready\n"
    store = web.server.cluster.store
    web.call(store.delete_topic(store.default_stream, topic))
    lines = stream.read().decode().splitlines()  # returns: the server ended the stream (no timeout)
    assert "event: end" in lines
    assert any(line.startswith("data: ") and '"partition": 0' in line for line in lines)
