"""PostgreSQL's statistics of the tables CreateTopics fills keep up with a burst of topics.

kc_commit joins kc_partition_leaders, kc_topics and kc_partitions; planned
from statistics of near-empty tables after thousands of topics were made in
seconds, every commit read those tables whole (at 100,000 topics 160 ms a
commit instead of 0.5, and a steady producer's p99 rose to 4.5 s) until
autovacuum looked, up to a minute later. The broker analyzes them itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker
from tests.cloud_engine import on_the_cloud_engine

TABLES = ("kc_topics", "kc_partitions", "kc_partition_leaders")


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    on_the_cloud_engine(monkeypatch)
    with Broker(store_flush_ms=2) as running:
        yield running


def _estimated_rows(database: str) -> dict[str, float]:
    """What the planner believes each table holds (pg_class.reltuples: -1 before any ANALYZE)."""
    import asyncpg

    async def read() -> dict[str, float]:
        conn = await asyncpg.connect(database)
        try:
            rows = await conn.fetch("SELECT relname, reltuples FROM pg_class WHERE relname = ANY($1::text[])",
                                    list(TABLES))
        finally:
            await conn.close()
        return {r["relname"]: r["reltuples"] for r in rows}

    return asyncio.run(read())


def test_the_planner_knows_the_tables_grew_after_thousands_of_topics(broker: Broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for first in (0, 1000):
        futures = admin.create_topics([NewTopic(f"burst-{i:05d}", 1, 1) for i in range(first, first + 1000)],
                                      request_timeout=120)
        for future in futures.values():
            future.result(timeout=120)
    deadline = time.monotonic() + 20
    while min((estimated := _estimated_rows(broker.config.store)).values()) < 2000:
        assert time.monotonic() < deadline, estimated  # before: -1 until autovacuum's minute came
        time.sleep(0.2)
    assert set(estimated) == set(TABLES)
    assert broker.produce("burst-01999", b"x").offset == 0
    assert [(m.offset, m.value) for m in broker.consume("burst-01999", count=1)] == [(0, b"x")]
