"""What Spark's Python workers import to plan and read: the store reader, not the store or the broker.

Spark starts planning workers for queries and forks task workers; each
imports these modules afresh, so an eager import here costs every query.
"""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO


def loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_planning_and_reading_load_the_store_reader_but_no_engine_and_no_asyncio() -> None:
    for module in ("kafkacompat.spark.plan", "kafkacompat.spark.scan"):
        loaded = loaded_after(module)
        assert "kafkacompat.storage.disk.reader" in loaded
        heavy = {"asyncio", "kafkacompat.storage.engines", "kafkacompat.storage.disk.store", "kafkacompat.storage.api"}
        assert not heavy & loaded, (module, sorted(heavy & loaded))
    assert "kafkacompat.protocol.records" not in loaded_after("kafkacompat.spark.plan")  # only startingTimestamp decodes
