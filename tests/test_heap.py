"""The broker process's garbage collection (kafkacompat/cli/heap.py, issue 32).

Survivors of full collections are frozen so the next full collection, which
stops every connection, scans only what was made since; the hourly thaw
frees what became garbage among them. Each case runs in its own interpreter:
freezing changes the whole process's collector, and a test's heap must stay
collectable.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_what_survives_a_full_collection_is_left_out_of_the_next() -> None:
    out = run("""
        import gc
        from kafkacompat.cli.heap import freeze_long_lived
        freeze_long_lived()
        at_start = gc.get_freeze_count()
        topics = [{"name": f"t{i}", "partitions": [[i]]} for i in range(50_000)]  # made at run time
        gc.collect()
        print(at_start, gc.get_freeze_count() - at_start)
    """)
    at_start, frozen_since = map(int, out.split())
    assert at_start > 0
    assert frozen_since >= 100_000, "the run-time topics were not frozen after a full collection"


def test_garbage_among_frozen_objects_is_freed_by_the_thaw() -> None:
    out = run("""
        import asyncio, gc, weakref
        from kafkacompat.cli.heap import freeze_long_lived, thaw_now_and_then

        class Node:
            pass

        node = Node(); node.me = node  # a reference cycle: only the collector can free it
        gone = weakref.ref(node)
        freeze_long_lived()
        del node
        gc.collect()
        print("after a full collection:", "alive" if gone() is not None else "freed")

        async def main():
            thaw = asyncio.create_task(thaw_now_and_then(0.05))
            while gone() is not None:
                await asyncio.sleep(0.01)
            thaw.cancel()
            print("after the thaw: freed")

        asyncio.run(asyncio.wait_for(main(), 10))
    """)
    assert out.splitlines() == ["after a full collection: alive", "after the thaw: freed"]
