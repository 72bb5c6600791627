"""store.json's format version: a store from a newer kafkacompat is refused untouched; an older one opens.

What an operator sees: `kafkacompat serve` and `kafkacompat store check` say
in one line that the store is newer, exit non-zero and change no file; the
Spark source's reader refuses it too. A store written before store.json had
a `format` field (format 1) opens as before, and gains the field.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafkacompat.storage import StorageError
from kafkacompat.storage.disk.format import FORMAT
from kafkacompat.storage.disk.reader import StoreReader

from kafkacompat import storage
from tests.storage.storage_testkit import batch

REPO = Path(__file__).resolve().parents[2]


def kafkacompat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**env, "PYTHONPATH": str(REPO)})


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def build(data: Path) -> None:
    st = storage.open_store(str(data))
    await st.open()
    await st.create_stream("/s", storage.StreamPolicy())
    await st.create_topic("/s", "t", 2)
    await st.partition("/s", "t", 0).append(batch(3), 3)
    await st.close()


def store_json(data: Path) -> dict:
    return json.loads((data / "store.json").read_bytes())


@pytest.fixture
def newer_store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    asyncio.run(build(data))
    state = store_json(data)
    assert state["format"] == FORMAT  # written on create
    (data / "store.json").write_text(json.dumps({**state, "format": FORMAT + 1}))
    return data


def assert_refused(done: subprocess.CompletedProcess[str], status: int, data: Path) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    assert done.stdout == "" or done.stdout.startswith("checking ")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("kafkacompat")
    assert f"format {FORMAT + 1}" in done.stderr and "newer kafkacompat" in done.stderr


def test_broker_refuses_a_store_of_a_newer_format_and_changes_nothing(newer_store: Path) -> None:
    before = files_of(newer_store)
    done = kafkacompat("serve", "--data-dir", str(newer_store), "--host", "127.0.0.1", "--port", "0")
    assert_refused(done, 4, newer_store)  # exit 4: cannot open the store in the data dir
    assert files_of(newer_store) == before


def test_store_check_refuses_a_store_of_a_newer_format_and_changes_nothing(newer_store: Path) -> None:
    before = files_of(newer_store)
    for repair in ((), ("--repair",)):
        done = kafkacompat("store", "check", str(newer_store), *repair)
        assert_refused(done, 2, newer_store)  # exit 2: the store could not be checked
        assert files_of(newer_store) == before


def test_spark_reader_refuses_a_store_of_a_newer_format(newer_store: Path) -> None:
    with pytest.raises(StorageError, match=f"format {FORMAT + 1}"):
        StoreReader([str(newer_store)])


def test_a_store_written_before_the_format_field_opens_as_format_1(tmp_path: Path) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    state = store_json(data)
    del state["format"]
    (data / "store.json").write_text(json.dumps(state))  # as every store written before the field was

    assert StoreReader([str(data)]).topics("/s") == {"t": 2}
    checked = kafkacompat("store", "check", str(data))
    assert checked.returncode == 0 and "no damage found" in checked.stdout, checked.stdout + checked.stderr

    async def reopen() -> int:
        st = storage.open_store(str(data))
        await st.open()
        try:
            return st.partition("/s", "t", 0).high_watermark
        finally:
            await st.close()

    assert asyncio.run(reopen()) == 3
    reopened = store_json(data)
    assert reopened["format"] == 1 and reopened["store_id"] == state["store_id"]
    assert reopened["epoch"] > state["epoch"]
