"""The cloud engine while its PostgreSQL is down: every call fails with a named error, nothing is lost.

Callers of a Store catch StorageError and answer a Kafka error code; a raw
asyncpg or OSError would close a client's connection or end a background
task instead. So each public call made while the server is stopped must
raise StorageUnavailableError (its cause the database's own error), leave
this process's view as the database holds it, and once the server is back
the same store must serve again with everything written before intact.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kafkacompat.protocol.records import iter_records, record_timestamps
from kafkacompat.storage import Cursor, StreamPolicy
from storage_testkit import batch

from kafkacompat import storage
from kafkacompat.testing.services import BUCKET, Postgres, ServiceUnavailable, cloud_store, postgres_fixture

DEFAULT = "/default"


@pytest.fixture
def private_pg():
    """A PostgreSQL of this test's own (stopping the shared one would stop every other test's)."""
    try:
        cloud_store()  # the shared S3 endpoint, and its AWS_* variables in the environment
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    yield from postgres_fixture()


async def _offsets(part: storage.Partition) -> list[int]:
    data = await part.read(0, 1 << 20)
    return [r.offset for r in iter_records(bytes(data))]


async def test_every_call_while_the_database_is_down_raises_storage_unavailable_and_loses_nothing(
        private_pg: Postgres) -> None:
    import asyncpg

    database, objects = private_pg.create_database(), f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"
    store = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=2)
    await store.open()
    try:
        await store.create_topic(DEFAULT, "t", 1)
        part = store.partition(DEFAULT, "t", 0)
        await part.append(batch(2), 2)
        await store.commit_cursors(DEFAULT, "g", [Cursor("t", 0, 2, -1, "before", 0)])
        await store.put_state(DEFAULT, "groups", {"g": {"generation": 1}})
        await store.set_settings({"cluster.name": "before"})

        await asyncio.to_thread(private_pg.stop_server)
        try:
            calls = {
                "commit_cursors": lambda: store.commit_cursors(DEFAULT, "g", [Cursor("t", 0, 9, -1, "during", 0)]),
                "commit_cursors fenced": lambda: store.commit_cursors(DEFAULT, "g", [Cursor("t", 0, 9, -1, "during", 0)],
                                                                      fence=(DEFAULT, "t", 0, 1)),
                "delete_cursors": lambda: store.delete_cursors(DEFAULT, "g"),
                "delete_cursors fenced": lambda: store.delete_cursors(DEFAULT, "g", fence=(DEFAULT, "t", 0, 1)),
                "put_state": lambda: store.put_state(DEFAULT, "groups", {"g": {"generation": 2}}, durable=False),
                "put_state fenced": lambda: store.put_state(DEFAULT, "shares", {"k": {}}, fence=(DEFAULT, "t", 0, 1)),
                "reload_state": lambda: store.reload_state(DEFAULT, "groups"),
                "set_settings": lambda: store.set_settings({"cluster.name": "during"}),
                "create_topic": lambda: store.create_topic(DEFAULT, "u", 1),
                "set_topic_configs": lambda: store.set_topic_configs(DEFAULT, "t", {"retention.ms": "1000"}),
                "delete_topic": lambda: store.delete_topic(DEFAULT, "t"),
                "create_stream": lambda: store.create_stream("/other"),
                "edit_stream": lambda: store.edit_stream(DEFAULT, StreamPolicy(autocreate=False)),
                "purge_stream": lambda: store.purge_stream(DEFAULT),
                "append": lambda: part.append(batch(1), 1),
                "delete_records": lambda: part.delete_records(1),
                "enforce_retention": lambda: store.enforce_retention(),
            }
            for name, call in calls.items():
                with pytest.raises(storage.StorageUnavailableError) as failed:
                    await call()
                assert isinstance(failed.value.__cause__, (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)), \
                    (name, repr(failed.value.__cause__))
            # this broker's view is what the database holds: no refused change shows
            assert store.get_topic(DEFAULT, "t") is not None and store.get_topic(DEFAULT, "u") is None
            assert store.get_topic(DEFAULT, "t").configs == {}
            assert store.get_stream("/other") is None and store.get_stream(DEFAULT).policy.autocreate
            assert [(c.offset, c.metadata) for c in store.get_cursors(DEFAULT, "g")] == [(2, "before")]
            assert store.get_state(DEFAULT, "groups") == {"g": {"generation": 1}}
            assert store.settings()["cluster.name"] == "before"
            assert part.high_watermark == 2 and part.log_start_offset == 0
        finally:
            await asyncio.to_thread(private_pg.start_server)

        # back: the same store serves again, and what was written before is all there
        await store.commit_cursors(DEFAULT, "g", [Cursor("t", 0, 3, -1, "after", 0)])
        assert (await part.append(batch(1), 1)).base_offset == 2
        await store.put_state(DEFAULT, "groups", {"g": {"generation": 3}})
        assert await _offsets(part) == [0, 1, 2]
    finally:
        await store.close()

    again = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps)
    await again.open()
    try:
        assert [(c.offset, c.metadata) for c in again.get_cursors(DEFAULT, "g")] == [(3, "after")]
        assert again.get_state(DEFAULT, "groups") == {"g": {"generation": 3}}
        assert again.settings()["cluster.name"] == "before"
        assert await _offsets(again.partition(DEFAULT, "t", 0)) == [0, 1, 2]
        assert again.get_topic(DEFAULT, "u") is None and again.get_stream("/other") is None
    finally:
        await again.close()
