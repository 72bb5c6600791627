"""The nemesis does what a campaign's checks count on, whatever the host's speed.

A half-minute campaign in CI on a loaded host got through one fault (broker
restarts take long there) and its test failed with "the nemesis did too
little" now and then; the nemesis now goes on past its time, up to
OVERTIME_S, until MIN_FAULTS faults did something.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from kafkacompat.chaos.engine import Engine, StorageFault
from kafkacompat.chaos.history import History, load
from kafkacompat.chaos.nemesis import MIN_FAULTS, Nemesis


class SlowHost(Engine):
    """Brokers that take their time to start again, as on a loaded 2-core machine; nothing to damage yet."""

    name, bootstrap, nodes = "slow", "", [1]

    def __init__(self) -> None:
        self.starts = 0

    def start(self) -> bool:
        time.sleep(0.3)
        self.starts += 1
        return True

    def kill(self, node: int | None = None) -> None: ...
    def stop(self, node: int | None = None) -> None: ...
    def pause(self, node: int | None = None) -> None: ...
    def resume(self, node: int | None = None) -> None: ...
    def setup(self, rng: random.Random) -> dict[str, Any]:
        return {}

    def storage_faults(self) -> list[StorageFault]:
        return [StorageFault("flip-sealed", apply=lambda rng: {"skipped": True})]

    def close(self) -> None: ...


def faults(history: Path) -> list[dict[str, Any]]:
    return [e for e in load(history) if e["type"] == "fault" and e["phase"] == "start"]


def test_a_campaign_whose_time_is_up_before_its_faults_still_injects_them(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    Nemesis(SlowHost(), history, random.Random(1), ("restart",)).run(0.1, threading.Event())
    history.close()
    assert len(faults(tmp_path / "history.jsonl")) == MIN_FAULTS


def test_faults_that_found_nothing_to_damage_are_not_counted(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    Nemesis(SlowHost(), history, random.Random(2), ("restart", "flip-sealed")).run(0.1, threading.Event())
    history.close()
    done = [f for f in faults(tmp_path / "history.jsonl") if not f.get("skipped")]
    assert len(done) == MIN_FAULTS
