"""`kafkacompat bench` runs end to end and reports sane figures.

Only the shape of the output is checked (rows present, numbers positive):
speed is what the benchmark measures, never what a unit test asserts.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kafkacompat.bench import brokers
from kafkacompat.bench.report import ratios, rows_table
from kafkacompat.bench.runner import QUICK, Row, cells

REPO = Path(__file__).resolve().parents[1]


def _bench(tmp_path: Path, *args: str, timeout: float = 240) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "bench", "--quick", "--json", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.read_text())


def _assert_sane(row: dict) -> None:
    assert row["status"] == "ok", row
    assert row["messages"] > 0 and row["seconds"] > 0, row
    assert row["msg_per_s"] > 0 and row["mb_per_s"] > 0, row
    assert row["cpu_s"] is not None and row["cpu_s"] >= 0, row
    assert row["peak_rss_mib"] > 0, row
    if row["workload"] == "latency":
        # the Java perf tool prints whole milliseconds: its p50 may be 0 on a quiet machine
        assert 0 <= row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"] and row["p99_ms"] > 0, row


def test_quick_run_reports_every_row(tmp_path: Path) -> None:
    stdout, doc = _bench(tmp_path)
    rows = doc["rows"]
    expected = sum(len(cell.rows("kafkacompat", 1)) for cell in cells(QUICK))
    assert len(rows) == expected == 26
    for row in rows:
        _assert_sane(row)
    assert {(r["workload"], r["acks"]) for r in rows} == {
        ("produce", 1), ("produce", -1), ("consume", None), ("produce-txn", -1), ("latency", 1), ("latency", -1)
    }
    assert "msg/s" in stdout and "16 KiB" in stdout


def test_vs_pairs_rows_with_tansu(tmp_path: Path) -> None:
    try:
        brokers.find_tansu()
    except brokers.TansuNotFoundError as exc:
        pytest.skip(str(exc))
    stdout, doc = _bench(tmp_path, "--vs", "--sizes", "100", "--partitions", "1")
    by_broker = {name: [r for r in doc["rows"] if r["broker"] == name] for name in ("kafkacompat", "tansu")}
    assert len(by_broker["kafkacompat"]) == len(by_broker["tansu"]) == 6
    for row in by_broker["kafkacompat"]:
        _assert_sane(row)
    assert len(doc["ratios"]) == 6
    for pair in doc["ratios"]:
        if not pair["note"]:
            assert pair["ratio"] > 0, pair
    assert "ratios kafkacompat / tansu" in stdout


def test_a_failing_peer_keeps_its_row() -> None:
    ours = Row("kafkacompat", 1, "consume", 100, 1, None, messages=10, seconds=1.0, msg_per_s=10.0)
    peer = Row("tansu", 1, "consume", 100, 1, None, messages=4, seconds=1.0, msg_per_s=4.0,
               status="stalled: 4 of 10 read, none for 10 s")
    (pair,) = ratios([ours, peer], "kafkacompat", "tansu")
    assert pair.ratio == 2.5 and "tansu: stalled" in pair.note
    assert "stalled: 4 of 10 read" in rows_table([ours, peer])


def test_missing_tansu_is_explained(tmp_path: Path) -> None:
    with pytest.raises(brokers.TansuNotFoundError, match="not an executable"):
        brokers.find_tansu(str(tmp_path / "tansu"))


@pytest.mark.slow
def test_vs_kafka_with_the_java_client(tmp_path: Path) -> None:
    """Kafka 4.1's perf tools drive both brokers; every row of both has figures and a ratio."""
    from kafkacompat.testing.reference_kafka import unavailable

    if unavailable():
        pytest.skip(unavailable())
    stdout, doc = _bench(tmp_path, "--vs", "kafka", "--client", "java", "--sizes", "1024", "--partitions", "1",
                         timeout=480)
    by_broker = {name: [r for r in doc["rows"] if r["broker"] == name] for name in ("kafkacompat", "kafka")}
    assert len(by_broker["kafkacompat"]) == len(by_broker["kafka"]) == 5  # produce x2, consume, latency x2
    for row in doc["rows"]:
        _assert_sane(row)
        if row["workload"] == "produce":
            assert 0 <= row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"], row
    assert len(doc["ratios"]) == 5 and all(pair["ratio"] > 0 for pair in doc["ratios"])
    assert doc["peer"] == "kafka" and "ratios kafkacompat / kafka" in stdout and "load average" in stdout


def test_the_java_tool_without_kafka_is_explained(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "bench", "--vs", "kafka", "--json", str(tmp_path / "b.json")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "KAFKACOMPAT_JARS_DIR": str(tmp_path), "KAFKA_HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Apache Kafka 4.1.0 is not here" in done.stderr


@pytest.mark.slow
def test_login_bench_reports_both_mechanisms() -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.logins", "--logins", "20", "--rounds", "1",
                           "--clients", "2"], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines() if "logins/s" in line]
    assert [row[0] for row in rows] == ["SCRAM-SHA-512", "OAUTHBEARER"]
    assert all(float(row[1]) > 0 for row in rows)


@pytest.mark.slow
def test_workers_bench_prints_produce_and_consume_for_each_broker() -> None:
    """`python -m kafkacompat.bench.workers`, one short row: both workers counts produce, then read it all back."""
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.workers", "--seconds", "1", "--rounds", "1",
                           "--producers", "1", "--sizes", "100", "--no-kafka"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] == ["1"]]
    assert [" ".join(row[3:5]) for row in rows] == ["workers 1", "workers 2"], done.stdout
    # produce MB/s, the producers' CPU per GB and their bound; the same for consume
    assert all(float(row[i]) > 0 for row in rows for i in (5, 7, 8, 9, 11, 12)), done.stdout
    assert "100 B, 1 producer(s), consume: --workers 2 / workers 1 =" in done.stdout


def test_scale_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "bench", "scale", "--topics", "20", "--streams", "3",
         "--connections", "10", "--cursors", "30", "--data-dir", str(tmp_path), "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert doc["topics"] == 20 and doc["streams"] == 3
    assert len(doc["create_topics_per_s_by_tenth"]) == 10 and min(doc["create_topics_per_s_by_tenth"]) > 0
    assert 0 < doc["metadata_one_topic_ms"]["p50"] <= doc["metadata_one_topic_ms"]["p99"]
    assert doc["describe_topic_partitions_pages"] == 1 and len(doc["metadata_all_topics_ms"]) == 3
    assert doc["cursors_fetched_back"] == 30  # more cursors than topics: a second group holds the rest
    assert doc["cursor_bytes_on_disk"] > 0 and doc["clean_stop_s"] > 0
    assert doc["start_after_kill9_s"]["first_metadata"] >= doc["start_after_kill9_s"]["listening"] > 0
    assert doc["first_produce_to_20_written_topics_after_kill9_ms"] > 0  # each written topic recovered and written
    assert doc["one_topic_metadata_meanwhile_ms"]["max"] >= doc["one_topic_metadata_meanwhile_ms"]["p99"] > 0
    assert doc["rss_empty_mb"] > 0 and doc["idle_connections"] == 10 and doc["rss_with_idle_connections_mb"] > 0
    steady = doc["steady_p99_ms_idle_connections"]  # the steady producer before and while they are held
    assert steady["before"]["produce"] > 0 and steady["held"]["produce"] > 0
    assert "results in" in done.stdout
    assert not any(tmp_path.glob("kafkacompat-bench-*")), "the broker's store was left behind"


@pytest.mark.slow
def test_scale_holds_more_connections_than_one_process_may_over_workers(tmp_path: Path) -> None:
    """Each process may hold only its open-file limit of connections (20,000 here, which no process may
    raise): `--workers N` spreads the idle connections over N broker processes. With the limit lowered
    to 3,048 (2,048 kept for the store's files), 1,500 are refused for one process and held by two."""
    limit = 3048

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def scale(workers: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kafkacompat", "bench", "scale", "--topics", "2", "--streams", "1",
             "--connections", "1500", "--cursors", "0", "--workers", str(workers), "--data-dir", str(tmp_path),
             "--json", str(tmp_path / "scale.json")],
            cwd=REPO, capture_output=True, text=True, timeout=240, preexec_fn=lowered)

    alone = scale(1)
    assert alone.returncode == 2 and "ask for at most 1,000, or spread them over more --workers" in alone.stdout
    spread = scale(2)
    assert spread.returncode == 0, spread.stdout + spread.stderr
    doc = json.loads((tmp_path / "scale.json").read_text())
    assert doc["workers"] == 2 and doc["idle_connections"] == 1500
    assert doc["rss_with_idle_connections_mb"] > doc["rss_empty_mb"] > 0  # every process of the command counted
    assert doc["start_after_kill9_s"]["first_metadata"] > 0  # every process killed, the command started again
    assert not any(tmp_path.glob("kafkacompat-bench-*")), "the broker's store was left behind"


@pytest.mark.slow
def test_scale_measures_kafka_as_its_peer(tmp_path: Path) -> None:
    """`--engine kafka`: the same figures from Apache Kafka 4.1, restarts on its kept log dir included."""
    from kafkacompat.testing.reference_kafka import unavailable

    if unavailable():
        pytest.skip(unavailable())
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "bench", "scale", "--engine", "kafka", "--topics", "20",
         "--connections", "10", "--cursors", "30", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert doc["engine"] == "kafka" and len(doc["create_topics_per_s_by_tenth"]) == 10
    assert doc["cursors_fetched_back"] == 30 and doc["cursor_bytes_on_disk"] > 0
    assert doc["start_after_kill9_s"]["first_metadata"] >= doc["start_after_kill9_s"]["listening"] > 0
    assert doc["first_produce_to_20_written_topics_after_kill9_ms"] > 0  # Kafka took records after the kill -9
    assert doc["rss_empty_mb"] > 0 and doc["rss_with_idle_connections_mb"] > 0


def test_scale_without_kafka_is_explained(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "bench", "scale", "--engine", "kafka", "--json", str(tmp_path / "s.json")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "KAFKACOMPAT_JARS_DIR": str(tmp_path), "KAFKA_HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Apache Kafka 4.1.0 is not here" in done.stderr


def test_scale_refuses_bad_counts() -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", "bench", "scale", "--topics", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "expected a positive integer" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_scaleout_bench_counts_the_cpu_of_every_process_it_starts() -> None:
    """`python -m kafkacompat.bench.scaleout`, one broker, no failovers: the row names the CPU of the brokers,
    moto and the client, and how busy the machine was. moto's column was always 0.0 (the process it
    looked for was misspelled), which hid that moto used as much CPU as the brokers."""
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.scaleout", "--messages", "2000", "--size",
                           "16384", "--brokers", "1", "--failovers", "0", "--trickle-rate", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 and "not installed" in done.stderr:
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    header = next(line for line in done.stdout.splitlines() if line.split()[:1] == ["brokers"])
    assert "cpu s3 s" in header and "host busy" in header, header
    row = next(line.split() for line in done.stdout.splitlines() if line.split()[:1] == ["1"])
    brokers_s, _postgres_s, s3_s, client_s, busy = row[-5:]
    assert float(brokers_s) > 0 and float(s3_s) > 0 and float(client_s) > 0, done.stdout
    assert busy.endswith("%") and 0 < int(busy[:-1]) <= 100, done.stdout
