"""Replication as the console and /metrics show it: a paused link's state and how far behind it is."""

from __future__ import annotations

import re

import requests

from kafkacompat.testing import Broker

from .helpers import admin, end_offset, replica, wait_for


def test_a_paused_link_shows_its_lag_in_the_console_and_metrics(tmp_path):
    with Broker(str(tmp_path / "a"), cluster_name="sanjose", http_port=0) as a, \
            Broker(str(tmp_path / "b"), cluster_name="newyork") as b:
        for broker in (a, b):
            admin(broker).call("stream.create", path="/s")
        link = replica(b, "/s")
        admin(a).call("replica.add", path="/s", replica=link)
        a.produce("/s:t", b"one")
        wait_for(lambda: end_offset(b, "/s", "t") == 1, what="first message replicated")
        admin(a).call("replica.pause", path="/s", replica=link)
        a.produce("/s:t", b"two")
        a.produce("/s:t", b"three")

        def metric(name: str) -> float | None:
            text = requests.get(f"{a.http_url}/metrics", timeout=10).text
            found = re.search(rf'^{name}{{replica="{re.escape(link)}",stream="/s"}} (\S+)$', text, re.M)
            return float(found.group(1)) if found else None

        wait_for(lambda: metric("kafkacompat_replication_lag_messages") == 2, what="a lag of 2 in /metrics")
        assert metric("kafkacompat_replication_link_up") == 0
        assert metric("kafkacompat_replication_shipped_bytes_total") > 0
        page = requests.get(f"{a.http_url}/console/stream", params={"path": "/s"}, timeout=10).text
        row = re.search(r'<table id="replicas">.*?</table>', page, re.S).group(0)
        assert link in row and "paused" in row and ">2<" in row and "newyork" in row
        admin(a).call("replica.resume", path="/s", replica=link)
        wait_for(lambda: metric("kafkacompat_replication_lag_messages") == 0, what="the lag back to 0")
        assert metric("kafkacompat_replication_link_up") == 1
