"""Group scenarios every client library must pass; test modules run them per library."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

from kafkacompat.testing import Broker
from tests.groups.helpers import GROUP_SETTINGS, SESSION_MS, create_topic, produce, wait_for
from tests.groups.members import Member, spread

PARTITIONS = 6
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def new_group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


def all_received(members: list[Member]) -> list[bytes]:
    return [value for m in members for _, value in m.received]


def consume_exactly_once(bootstrap: str, topic: str, members: list[Member], count: int, start: int) -> None:
    """Produce `count` messages; the members together read each exactly once, from their own partitions."""
    before = [len(m.received) for m in members]
    expected = produce(bootstrap, topic, count, PARTITIONS, start)
    wait_for(lambda: sum(len(m.received) for m in members) - sum(before) >= count, 30, f"{count} messages")
    fresh = [value for m, b in zip(members, before) for _, value in m.received[b:]]
    duplicates = [v for v, n in Counter(fresh).items() if n > 1]
    assert not duplicates, f"consumed more than once: {duplicates[:5]}"
    assert set(fresh) == expected
    for m, b in zip(members, before):
        assert {p for p, _ in m.received[b:]} <= m.assigned


def start_group(lib: str, bootstrap: str, topic: str, group: str, n: int = 3, **extra: object) -> list[Member]:
    members = [Member(lib, bootstrap, topic, group, **extra) for _ in range(n)]
    wait_for(lambda: spread(members, PARTITIONS) or any(m.error for m in members), 30, f"{n} members to share {PARTITIONS} partitions")
    assert not [m.error for m in members if m.error]
    return members


def three_members_share_exactly_once(lib: str, broker: Broker, topic: str) -> None:
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    members = start_group(lib, broker.bootstrap_servers, topic, new_group())
    try:
        assert [len(m.assigned) for m in members] == [2, 2, 2]
        consume_exactly_once(broker.bootstrap_servers, topic, members, 300, 0)
    finally:
        for m in members:
            m.stop()


def leaving_member_is_replaced(lib: str, broker: Broker, topic: str) -> float:
    """A member closes (LeaveGroup): the others take its partitions at once. Returns the handover time."""
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    members = start_group(lib, broker.bootstrap_servers, topic, new_group())
    try:
        consume_exactly_once(broker.bootstrap_servers, topic, members, 60, 0)
        leaving = members.pop()
        started = time.monotonic()
        leaving.stop()
        wait_for(lambda: spread(members, PARTITIONS), SESSION_MS / 1000, "the others to take over")
        took = time.monotonic() - started
        consume_exactly_once(broker.bootstrap_servers, topic, members, 60, 60)
        return took
    finally:
        for m in members:
            m.stop()


def killed_member_is_replaced(lib: str, broker: Broker, topic: str) -> float:
    """A member's process dies (no LeaveGroup): after its session timeout the others take over."""
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    group = new_group()
    members = [Member(lib, broker.bootstrap_servers, topic, group) for _ in range(2)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.groups.member_process", lib, broker.bootstrap_servers, topic, group],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    proc_assigned: list[list[int]] = [[]]

    def read_lines() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            proc_assigned.append(json.loads(line))

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        def three_way() -> bool:
            theirs = frozenset(proc_assigned[-1])
            mine = [m.assigned for m in members]
            return bool(theirs) and all(mine) and len(theirs.union(*mine)) == PARTITIONS == len(theirs) + sum(map(len, mine))

        wait_for(three_way, 30, "three members sharing the partitions")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        wait_for(lambda: spread(members, PARTITIONS), SESSION_MS / 1000 + 3, "the survivors to take over")
        took = time.monotonic() - started
        consume_exactly_once(broker.bootstrap_servers, topic, members, 120, 0)
        return took
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for m in members:
            m.stop()


def resume_after_restart(lib: str, data_dir: str) -> None:
    """Offsets committed before a broker restart are where a new consumer of the group starts."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", new_group()
    with Broker(data_dir=data_dir, **GROUP_SETTINGS) as broker:
        create_topic(broker.bootstrap_servers, topic, PARTITIONS)
        members = start_group(lib, broker.bootstrap_servers, topic, group, n=1)
        consume_exactly_once(broker.bootstrap_servers, topic, members, 60, 0)
        members[0].stop()
    with Broker(data_dir=data_dir, **GROUP_SETTINGS) as broker:
        expected = produce(broker.bootstrap_servers, topic, 60, PARTITIONS, 60)
        members = start_group(lib, broker.bootstrap_servers, topic, group, n=1)
        try:
            wait_for(lambda: len(members[0].received) >= 60, 30, "the new messages")
            assert sorted(all_received(members)) == sorted(expected)  # nothing from before the restart
        finally:
            members[0].stop()
