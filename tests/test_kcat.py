"""kcat (librdkafka's command-line client, from Debian) through the broker."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kafkacompat.testing import Broker

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (tests/run.sh installs it)")


def kcat(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produces_and_consumes(broker: Broker, topic_name: str, codec: str) -> None:
    lines = [f"key{i}:value {i}" for i in range(25)]
    kcat("-b", broker.bootstrap_servers, "-P", "-t", topic_name, "-K:", "-z", codec, "-H", "origin=kcat",
         stdin="\n".join(lines) + "\n")
    out = kcat("-b", broker.bootstrap_servers, "-C", "-t", topic_name, "-e", "-o", "beginning",
               "-f", "%o|%k|%s|%h\n")
    assert out.splitlines() == [f"{i}|key{i}|value {i}|origin=kcat" for i in range(25)]


def test_kcat_lists_metadata(broker: Broker, topic_name: str) -> None:
    kcat("-b", broker.bootstrap_servers, "-P", "-t", topic_name, stdin="x\n")
    out = kcat("-b", broker.bootstrap_servers, "-L", "-t", topic_name)
    assert f'topic "{topic_name}" with 1 partitions' in out
    assert f"broker 1 at {broker.bootstrap_servers} (controller)" in out


def test_kcat_reads_from_an_offset_and_a_timestamp(broker: Broker, topic_name: str) -> None:
    kcat("-b", broker.bootstrap_servers, "-P", "-t", topic_name, stdin="a\nb\nc\nd\n")
    out = kcat("-b", broker.bootstrap_servers, "-C", "-t", topic_name, "-e", "-o", "2", "-f", "%o %s\n")
    assert out.splitlines() == ["2 c", "3 d"]
    out = kcat("-b", broker.bootstrap_servers, "-C", "-t", topic_name, "-e", "-o", "-1", "-f", "%o %s\n")
    assert out.splitlines() == ["3 d"]
    out = kcat("-b", broker.bootstrap_servers, "-C", "-t", topic_name, "-e", "-o", "s@0", "-f", "%o %s\n")
    assert out.splitlines() == ["0 a", "1 b", "2 c", "3 d"]
