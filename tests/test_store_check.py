"""`kafkacompat store check DIR [--repair]`: the offline check, as an operator runs it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from kafkacompat.storage import StreamPolicy

from kafkacompat import storage
from tests.storage.storage_testkit import batch


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkacompat", "store", "check", *args], capture_output=True,
                          text=True, timeout=60)


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def build(data: Path) -> None:
    st = storage.open_store(str(data))
    await st.open()
    await st.create_stream("/s", StreamPolicy(partitionlet_bytes=4096))
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    for i in range(60):
        await part.append(batch(2, size=100 + i), 2)
    await st.close()


def test_check_reports_every_damaged_file_and_repair_fixes_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    assert run_check(str(data)).returncode == 0
    pdir = data / "streams" / "s" / "t" / "0"
    logs = sorted(pdir.glob("*.log"))
    with open(logs[1], "r+b") as f:  # a flipped byte in a sealed partitionlet
        f.seek(200)
        byte = f.read(1)[0]
        f.seek(200)
        f.write(bytes([byte ^ 0x80]))
    (pdir / "chain.json").unlink()
    (data / "streams" / "s" / ".cursors").write_bytes(b"\xff\xfe garbage\n")
    (data / "store.json").write_bytes(b"{\"epo")
    before = snapshot(data)

    checked = run_check(str(data))
    assert checked.returncode == 1, checked.stderr
    damaged = [line for line in checked.stdout.splitlines() if line.startswith("DAMAGED")]
    for name in (logs[1].name, "chain.json", ".cursors", "store.json"):
        assert any(name in line and "would:" in line for line in damaged), (name, checked.stdout)
    assert "run with --repair" in checked.stdout and not checked.stderr
    assert snapshot(data) == before  # a check writes nothing

    repaired = run_check(str(data), "--repair")
    assert repaired.returncode == 1 and repaired.stdout.count("action taken:") == len(damaged)
    again = run_check(str(data))
    assert again.returncode == 0 and "no damage found" in again.stdout, again.stdout
    assert (pdir / "chain.json").exists()


def test_check_refuses_a_store_in_use_or_missing(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def hold_and_check() -> subprocess.CompletedProcess:
        st = storage.open_store(str(data))
        await st.open()
        try:
            return await asyncio.to_thread(run_check, str(data))
        finally:
            await st.close()

    busy = asyncio.run(hold_and_check())
    assert busy.returncode == 2 and "in use" in busy.stderr and "Traceback" not in busy.stderr
    missing = run_check(str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and not os.path.exists(tmp_path / "nowhere")


def test_serve_refuses_a_store_it_cannot_open_in_one_line(tmp_path: Path) -> None:
    """Two volumes claiming one id (a copied data dir): refused, named, no traceback."""
    a, b = tmp_path / "a", tmp_path / "b"
    asyncio.run(build(a))
    b.mkdir()
    (b / "volume.id").write_bytes((a / "volume.id").read_bytes())
    served = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(a), "--volume", str(b), "--port", "0",
         "--host", "127.0.0.1"], capture_output=True, text=True, timeout=60)
    assert served.returncode == 4  # the data dir cannot be opened
    assert "cannot open the store" in served.stderr and "same volume" in served.stderr
    assert "Traceback" not in served.stderr and len(served.stderr.strip().splitlines()) == 1


def test_a_damaged_stream_file_is_rebuilt_keeping_every_message(tmp_path: Path) -> None:
    """The lost policy may have kept messages forever: the rebuilt one (ttl 0) deletes nothing."""
    data = tmp_path / "data"
    asyncio.run(build(data))
    (data / "streams" / "s" / ".stream").write_bytes(b"{\"policy\": {\"ttl")
    repaired = run_check(str(data), "--repair")
    assert repaired.returncode == 1 and "ttl 0, keeping every message" in repaired.stdout, repaired.stdout

    async def policy() -> StreamPolicy:
        st = storage.open_store(str(data))
        await st.open()
        try:
            return st.get_stream("/s").policy
        finally:
            await st.close()

    assert asyncio.run(policy()).ttl_seconds == 0
