"""The broker process's garbage collection: what has lived long is left out of full collections (issue 32).

CPython's full collection scans every tracked object, and the event loop,
so every connection, waits for it. A broker's heap is mostly long-lived: the
topics of its catalog, its open partitions, idle connections. Left alone,
each full collection rescans all of it, and full collections come as the
heap grows by a quarter: creating 200,000 topics at run time took fifteen of
them, the last ones 240 ms each, and each Metadata for all topics afterwards
set off more of the same (the steady producer beside it saw 250-390 ms).

So the broker's own process (never a test's in-process broker, whose heap
must stay collectable):

- collects once at start and freezes what the store loaded, before the
  listeners accept (a freeze after "listening on" held the first clients
  0.2-0.5 s at 20,000 topics);
- freezes the survivors of every later full collection too, so the next one
  scans only what was made since (topics created at run time, connections);
- thaws everything once an hour (`THAW_S`) and collects it once: frozen
  objects that later become garbage inside reference cycles are otherwise
  never freed. That one collection costs what a full collection of the whole
  heap costs (about a quarter of a second per 200,000 topics).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger("kafkacompat")

THAW_S = 3600.0
OLDEST = 2  # the generation a full collection collects


def freeze_long_lived() -> None:
    """Collect, then leave what survives (every topic of the store, at start) out of later full collections,
    and from now on the survivors of each full collection as well."""
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)
    started = time.perf_counter()
    gc.collect()  # the callback freezes what survives
    log.debug("froze %d objects loaded at start in %.0f ms", gc.get_freeze_count(),
              (time.perf_counter() - started) * 1000)


async def thaw_now_and_then(interval_s: float = THAW_S) -> None:
    """Every `interval_s`, give the frozen objects back to the collector and collect everything once."""
    while True:
        await asyncio.sleep(interval_s)
        started = time.perf_counter()
        thawed = gc.get_freeze_count()
        gc.unfreeze()
        freed = gc.collect()
        log.info("collected the whole heap (%d objects had been left out) in %.0f ms: %d freed", thawed,
                 (time.perf_counter() - started) * 1000, freed)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    """A gc callback: after a full collection, every survivor is live, so none is garbage when frozen."""
    if phase == "stop" and info["generation"] == OLDEST:
        gc.freeze()
