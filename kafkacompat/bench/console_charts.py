"""What the console's charts cost with many topics: `python -m kafkacompat.bench.console_charts`.

Starts an in-process broker (disk store in a temporary directory) with HTTP
on, creates --topics topics, produces one message to each through librdkafka
(so each has traffic figures) and commits a group's offsets on all of them,
then fills the broker's chart history with a whole window (360 samples, as
an hour at 10 s) and prints:

- the history's memory: its rings measured object by object, and the growth
  of Python's traced memory while it filled;
- how long one sample takes (the broker's event loop is busy that long every 10 s);
- the median time of each chart page and of its JSON over --repeat requests;
- with Debian's chromium and Playwright installed, each chart page's load in
  a headless browser (navigation start to load end) and until its charts are drawn.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
import tracemalloc
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkacompat.http.console import history
from kafkacompat.testing import Broker

PAGES = (("broker (/)", "/", "/console/charts/data?scope=broker"),
         ("stream", "/console/stream?path=/default", "/console/charts/data?scope=stream&path=/default"),
         ("topic", "/console/topic?stream=/default&topic=t0000000",
          "/console/charts/data?scope=topic&stream=/default&topic=t0000000"),
         ("group", "/console/group?id=bench", "/console/charts/data?scope=group&id=bench"))


def _get_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as answer:
        answer.read()
    return (time.perf_counter() - started) * 1000


def footprint(kept: history.History) -> int:
    """Bytes of the history's rings, their dicts and keys, and the rate counters."""
    total = sys.getsizeof(kept.times) + sys.getsizeof(kept.rings) + sys.getsizeof(kept._previous)
    for scope, rings in kept.rings.items():
        total += sys.getsizeof(scope) + sum(sys.getsizeof(part) for part in scope) + sys.getsizeof(rings)
        total += sum(sys.getsizeof(ring) for ring in rings.values())
    for label, counters in kept._previous.items():
        total += sys.getsizeof(label) + sys.getsizeof(counters)
    return total


def _feed(broker: Broker, topics: list[str]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for name in topics:
        producer.produce(name, b"m" * 100)
    assert producer.flush(120) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "bench"})
    consumer.commit(offsets=[TopicPartition(name, 0, 0) for name in topics], asynchronous=False)
    consumer.close()


def _browser_loads(base: str, repeat: int) -> None:
    chromium = os.environ.get("KAFKACOMPAT_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        print("(no chromium or Playwright: browser page loads not measured)")
        return
    print(f"{'page in Chromium':<24} {'load ms':>8} {'charts drawn ms':>16}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page()
        for label, path, _ in PAGES:
            loads, drawn = [], []
            for _ in range(repeat):
                started = time.perf_counter()
                page.goto(base + path)
                page.wait_for_selector("section.charts[data-samples]")
                drawn.append((time.perf_counter() - started) * 1000)
                loads.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
            print(f"{label:<24} {statistics.median(loads):>8.0f} {statistics.median(drawn):>16.0f}")
        browser.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with Broker(data_dir="tmp", http_port=0) as broker:
        names = [f"t{i:07d}" for i in range(args.topics)]
        for name in names:
            broker.create_topic(name)
        _feed(broker, names)
        served = history.of(broker.server)
        served.interval = 3600.0  # the broker's own sampler stays out of the way while the bench fills the window
        kept = history.History()  # a fresh one, so all its memory is allocated while traced
        cluster = broker.server.cluster
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        start, took = time.time() - kept.window * 10, []
        for tick in range(kept.window):
            began = time.perf_counter()
            broker.call(kept.sample(cluster, now=start + tick * 10), timeout=600)
            took.append(time.perf_counter() - began)
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        vars(served).update(vars(kept), interval=served.interval)  # the pages show the filled window
        print(f"{args.topics} topics, 1 group, {kept.count} samples kept in {len(kept.rings)} scopes")
        print(f"history memory: {footprint(kept) / 2**20:.1f} MiB (rings measured), "
              f"{grown / 2**20:.1f} MiB (traced growth while filling)")
        print(f"one sample: median {statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms")
        print(f"{'request':<24} {'page ms':>8} {'JSON ms':>8}")
        for label, path, data in PAGES:
            page = statistics.median(_get_ms(broker.http_url + path) for _ in range(args.repeat))
            json_ms = statistics.median(_get_ms(broker.http_url + data) for _ in range(args.repeat))
            print(f"{label:<24} {page:>8.1f} {json_ms:>8.1f}")
        _browser_loads(broker.http_url, args.repeat)


if __name__ == "__main__":
    main()
