"""`topic list` of every stream, and progress of long commands on stderr (a terminal, or --progress)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import uuid

from kafkacompat.testing import Broker

from .conftest import REPO, kafkacompat


def cli(broker: Broker, *args: str):
    return kafkacompat(*args, "--bootstrap-server", broker.bootstrap_servers)


def test_topic_list_without_a_stream_lists_every_topic_of_every_stream(cli_broker: Broker) -> None:
    stream = f"/apps/s{uuid.uuid4().hex[:6]}"
    plain = f"orders{uuid.uuid4().hex[:6]}"
    cli_broker.create_topic(f"{stream}:Pressure", partitions=3)
    cli_broker.create_topic(plain)
    cli_broker.produce(plain, b"paid")
    done = cli(cli_broker, "topic", "list")
    assert done.returncode == 0 and done.stderr == ""
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0] == ["TOPIC", "KAFKA-NAME", "PARTITIONS", "MESSAGES", "SIZE"]
    by_name = {line[0]: line for line in lines[1:]}
    assert by_name[f"{stream}:Pressure"][1:4] == [f"{stream[1:].replace('/', '.')}..Pressure", "3", "0"]
    assert by_name[plain][1:4] == [plain, "1", "1"]
    listed = json.loads(cli(cli_broker, "topic", "list", "--json").stdout)
    assert {(t["stream"], t["topic"]) for t in listed} >= {(stream, "Pressure"), ("/default", plain)}
    one = json.loads(cli(cli_broker, "topic", "list", stream, "--json").stdout)
    assert [t["topic"] for t in one] == ["Pressure"]


def test_purge_and_delete_report_progress_when_asked(cli_broker: Broker) -> None:
    stream = f"/apps/p{uuid.uuid4().hex[:6]}"
    for name in ("a", "b"):
        cli_broker.create_topic(f"{stream}:{name}")
        cli_broker.produce(f"{stream}:{name}", b"x")
    done = cli(cli_broker, "stream", "purge", stream, "--progress")
    assert done.returncode == 0
    assert done.stdout.startswith(f"Purged stream {stream}: emptied 2 topics")
    assert done.stderr.splitlines()[-1].startswith(f"purging stream {stream} (2 topics): done in ")
    done = cli(cli_broker, "stream", "delete", stream, "--progress")
    assert done.stderr.splitlines()[-1].startswith(f"deleting stream {stream} (2 topics): done in ")
    missing = cli(cli_broker, "stream", "purge", stream, "--progress")
    assert (missing.returncode, missing.stderr) == (1, f"kafkacompat: error: stream {stream} does not exist\n")


def test_progress_shows_on_a_terminal_without_being_asked(cli_broker: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = f"wide-{uuid.uuid4().hex[:6]}"
    cli_broker.create_topic(topic, partitions=1200)
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kafkacompat", "group", "reset-offsets", group, "--topic", topic, "--to-latest",
             "--execute", "--bootstrap-server", cli_broker.bootstrap_servers],
            stdout=subprocess.PIPE, stderr=follower, text=True, timeout=120, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed: everything has been read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0
    assert done.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    text = shown.decode()
    assert "\r\x1b[K" in text, "a terminal gets one line redrawn in place"
    assert f"resetting offsets of {group}: 1200/1200 (100%) in " in text
