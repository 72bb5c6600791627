"""A restart is not a deletion: restarting either side of a multi-master pair or any member of a ring
must not make replication report (or act on) a topic "deleted and created again"."""

from __future__ import annotations

import logging

import pytest

from kafkacompat.testing import Broker

from .helpers import admin, end_offset, link_state, replica, wait_for

RECREATED = "deleted and created again"


def _start(tmp_path, name: str, port: int = 0) -> Broker:
    return Broker(str(tmp_path / name), cluster_name=name, port=port).start()


def _in_sync(broker: Broker) -> bool:
    links = link_state(broker, "/apps/cars")
    return bool(links) and all(entry["state"] == "in-sync" for entry in links)


def _settled(brokers: list[Broker], topics: dict[str, int]) -> None:
    for topic, count in topics.items():
        wait_for(lambda: all(end_offset(b, "/apps/cars", topic) == count for b in brokers),
                 what=f"{topic} at {count} everywhere")
    for broker in brokers:
        wait_for(lambda: _in_sync(broker), what="links in sync")


@pytest.mark.parametrize("topology", ["pair", "ring"])
def test_restarting_each_cluster_reports_no_recreation(tmp_path, caplog, topology):
    names = ["sanjose", "newyork"] if topology == "pair" else ["sanjose", "newyork", "london"]
    brokers = [_start(tmp_path, n) for n in names]
    try:
        for broker in brokers:
            admin(broker).call("stream.create", path="/apps/cars")
        n = len(brokers)
        links = [(0, 1), (1, 0)] if topology == "pair" else [(i, (i + 1) % n) for i in range(n)]
        for i, j in links:
            admin(brokers[i]).call("replica.add", path="/apps/cars", replica=replica(brokers[j], "/apps/cars"))
        topics = {}
        for k, broker in enumerate(brokers):
            for i in range(5):
                broker.produce(f"/apps/cars:{names[k]}_positions", f"{k}-{i}".encode())
            topics[f"{names[k]}_positions"] = 5
        _settled(brokers, topics)
        ids = {t: brokers[0].server.store.get_topic("/apps/cars", t).topic_id for t in topics}
        caplog.set_level(logging.INFO)
        for k in range(n):  # each side in turn stops (as on SIGTERM) and starts again
            caplog.clear()
            port = brokers[k].port
            brokers[k].stop()
            brokers[k] = _start(tmp_path, names[k], port)
            brokers[k].produce(f"/apps/cars:{names[k]}_positions", b"after restart")
            topics[f"{names[k]}_positions"] += 1
            _settled(brokers, topics)
            assert not [r.getMessage() for r in caplog.records if RECREATED in r.getMessage()]
        for t, topic_id in ids.items():  # and nothing was in fact recreated anywhere
            assert brokers[0].server.store.get_topic("/apps/cars", t).topic_id == topic_id
    finally:
        for broker in brokers:
            broker.stop()
