"""Fixtures: the admin CLI run as a user runs it, as a subprocess against a live broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kafkacompat.admin.client import AdminClient
from kafkacompat.testing import Broker

REPO = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 60


def run_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m kafkacompat ARGS --bootstrap-server ...` from the repo root, so this checkout is imported."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", bootstrap],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT,
    )


@pytest.fixture
def cli(broker: Broker) -> Callable[..., str]:
    """Run a CLI command that must succeed; returns its stdout."""

    def run(*args: str) -> str:
        done = run_cli(broker.bootstrap_servers, *args)
        assert done.returncode == 0, f"kafkacompat {' '.join(args)} failed: {done.stderr}"
        assert done.stderr == ""
        return done.stdout

    return run


@pytest.fixture
def cli_json(cli: Callable[..., str]) -> Callable[..., Any]:
    return lambda *args: json.loads(cli(*args, "--json"))


@pytest.fixture
def admin(broker: Broker) -> AdminClient:
    """The admin API in-process, for snapshots taken around a CLI call."""
    return AdminClient(broker.bootstrap_servers)


@pytest.fixture
def stream_path() -> str:
    return f"/tests/s{uuid.uuid4().hex[:10]}"


def table_rows(text: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the table in `text` whose header line starts with `header_start`, as dicts."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+", lines[start])]
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        ends = [pos for _, pos in columns[1:]] + [None]
        rows.append({name: line[pos:end].strip() for (name, pos), end in zip(columns, ends)})
    return rows


def block_values(text: str) -> dict[str, str]:
    """'Label:  value' lines as a dict."""
    out = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep and value.startswith(" ") and label and not label.startswith(" "):
            out[label] = value.strip()
    return out


def produce_sized(broker: Broker, topic: str, count: int, size: int) -> list[int]:
    """`count` messages of `size` bytes, one batch each (so partitionlets fill predictably); their offsets."""
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, bytes([65 + i % 26]) * size, partition=0,
                         on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
        producer.poll(0)
    assert producer.flush(30) == 0
    return offsets
