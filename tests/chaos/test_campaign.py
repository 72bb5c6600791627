"""The CI slice of the fault campaign: `python -m kafkacompat.chaos` on the disk engine, briefly, as a user runs it.

Two fixed seeds and one random seed (printed, so a failure can be replayed
with `--seed`), each half a minute of faults from the `safe` mix: the faults
whose promises (docs/operations.md) hold today, every disk fault among them. Seed 23 runs
the broker without --skip-damaged, so consumers reaching a quarantined range
must be told (an error event). The cloud engine (three brokers) runs one fixed seed,
the replication engine (three clusters) one for a chain, one for a ring and one for a chain
whose first two clusters run `serve --workers 2`, and the workers engine (`serve --workers 2`) one.
The faults held back (nemesis.HELD_BACK, CLOUD_HELD_BACK) find known bugs;
KAFKACOMPAT_CHAOS_FAULTS=all runs them too.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

FAULTS = os.environ.get("KAFKACOMPAT_CHAOS_FAULTS", "safe")
RANDOM_SEED = random.randrange(1 << 31)


def campaign(tmp_path: Path, engine: str, seed: int, faults: str, *extra: str) -> str:
    """Run one half-minute campaign as a user runs it; its output, once it passed."""
    print(f"chaos campaign seed {seed} (replay: python -m kafkacompat.chaos --engine {engine} --minutes 0.5 "
          f"--faults {faults} --seed {seed} {' '.join(extra)})")
    run = subprocess.run(
        [sys.executable, "-m", "kafkacompat.chaos", "--engine", engine, "--minutes", "0.5", "--seed", str(seed),
         "--faults", faults, "--workdir", str(tmp_path), *extra],
        capture_output=True, text=True, timeout=400, cwd=Path(__file__).resolve().parents[2])
    if run.returncode == 3 and "not installed" in run.stderr:
        pytest.skip(run.stderr.strip())
    out = run.stdout
    assert run.returncode == 0, f"seed {seed}:\n{out[-6000:]}\n{run.stderr[-2000:]}"
    assert "chaos: PASS (0 violations)" in out and f"--seed {seed}" in out
    verified = int(re.search(r"^verified\s+(\d+)$", out, re.M)[1])
    acknowledged = int(re.search(r"^acknowledged writes\s+(\d+)$", out, re.M)[1])
    allowed = int(re.search(r"^lost to damage \(allowed\)\s+(\d+)$", out, re.M)[1])
    assert verified > 200 and verified + allowed == acknowledged, out
    faults = out.split("-- faults injected")[1].split("-- checks")[0]
    done = sum(int(n) for n in re.findall(r"^[a-z-]+\s+(\d+)$", faults, re.M))  # not "(nothing to damage yet)"
    assert done >= 2, f"the nemesis did too little:\n{out}"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed, extra", [(11, ()), (23, ("--no-skip-damaged",)), (RANDOM_SEED, ())],
                         ids=["seed-11", "seed-23-consumers-told", "random-seed"])
def test_campaign_finds_no_violation(tmp_path: Path, seed: int, extra: tuple[str, ...]) -> None:
    out = campaign(tmp_path, "disk", seed, FAULTS, *extra)
    assert ("skip_damaged False" in out) == bool(extra)


@pytest.mark.slow
def test_cloud_campaign_survives_brokers_killed_paused_and_restarted(tmp_path: Path) -> None:
    """Three brokers on PostgreSQL + S3; one at a time is killed, paused or restarted, or the database
    or the object store is out of reach for a few seconds."""
    out = campaign(tmp_path, "cloud", 12, "kill,pause,restart,database-outage,object-store-outage")
    assert "brokers 3" in out


@pytest.mark.slow
@pytest.mark.parametrize("topology, seed", [("chain", 31), ("ring", 32)])
def test_replication_campaign_keeps_every_acknowledged_record_on_every_replica(tmp_path: Path, topology: str,
                                                                              seed: int) -> None:
    """Three clusters, the stream replicated a -> b -> c (chain) or a -> b -> c -> a (ring); any cluster is
    killed, paused or restarted, or a link paused or its network cut. Every replica then holds every record at the source's offset,
    no link broke (the ring's link back to a brings nothing twice), the group's cursors are carried to each, and
    the group failed over to c reads on without a skip."""
    out = campaign(tmp_path, "replication", seed, "kill,pause,restart,link-pause,link-cut", "--topology", topology)
    assert f"topology {topology}" in out and "clusters 3" in out
    replicated = int(re.search(r"^verified on every replica\s+(\d+)$", out, re.M)[1])
    verified = int(re.search(r"^verified\s+(\d+)$", out, re.M)[1])
    assert replicated == verified, out


@pytest.mark.slow
def test_replication_campaign_over_clusters_of_two_workers(tmp_path: Path) -> None:
    """The chain a -> b -> c with a and b run as `serve --workers 2`: the link from a runs in a's worker 0 and
    reads worker 1's partitions through it, the link into b reaches b's worker 1 through the worker it names,
    and either cluster is killed, paused or restarted whole, or one of its workers killed alone."""
    out = campaign(tmp_path, "replication", 33, "kill,pause,restart,link-pause,link-cut,kill-worker",
                   "--topology", "chain", "--workers-clusters", "a,b")
    assert "workers_clusters a b" in out
    replicated = int(re.search(r"^verified on every replica\s+(\d+)$", out, re.M)[1])
    verified = int(re.search(r"^verified\s+(\d+)$", out, re.M)[1])
    assert replicated == verified, out


@pytest.mark.parametrize("args, says", [
    (["--faults", "kill,nope"], "unknown fault nope"),
    (["--minutes", "-1"], "--minutes must be in"),
    (["--engine", "replication", "--no-skip-damaged"], "--no-skip-damaged is for the disk engine only"),
    (["--engine", "cloud", "--no-skip-damaged"], "--no-skip-damaged is for the disk engine only"),
    (["--topology", "ring"], "--topology is for the replication engine only"),
    (["--workers-clusters", "b"], "--workers-clusters is for the replication engine only"),
    (["--engine", "replication", "--workers-clusters", "b,d"], "--workers-clusters names clusters a, b, c, not d"),
])
def test_bad_arguments_get_one_line_and_status_2(args: list[str], says: str) -> None:
    run = subprocess.run([sys.executable, "-m", "kafkacompat.chaos", *args], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and says in run.stderr


@pytest.mark.slow
def test_workers_campaign_survives_workers_killed_paused_and_the_whole_command_killed(tmp_path: Path) -> None:
    """`serve --workers 2` on the disk store: one worker at a time killed, paused or stopped (the supervisor
    restarts it), the supervisor and every worker killed at once (`kill-broker`), the supervisor alone
    (`kill-supervisor`: its workers must stop before the command starts again), and the disk faults. The
    transactional producer writes topic T's two partitions, one on each worker."""
    out = campaign(tmp_path, "workers", 5, FAULTS)
    assert "workers 2" in out
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    committed = {e["txn"] for e in events if e["type"] == "txn" and e["outcome"] == "committed"}
    partitions = {e["partition"] for e in events if e["type"] == "ack" and e["kind"] == "txn" and e["txn"] in committed}
    assert partitions == {0, 1}, "no transaction committed on one of the workers' partitions of T"


@pytest.mark.slow
def test_a_campaign_stopped_by_sigterm_leaves_no_broker_or_server_running(tmp_path: Path) -> None:
    """A campaign a user (or CI's timeout) stops with SIGTERM stops its brokers, PostgreSQL and the S3 server
    before it exits: killed outright, it left them running."""
    import signal
    import socket
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkacompat.chaos", "--engine", "cloud", "--minutes", "2", "--seed", "5",
         "--faults", "kill", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 180
        started: list[int] = []
        while len(started) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the campaign's brokers did not start"
            time.sleep(0.2)
            history = tmp_path / "history.jsonl"
            lines = history.read_text().splitlines() if history.exists() else []
            started = [json.loads(line)["pid"] for line in lines if '"action":"started"' in line]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "chaos: stopped before the end; no verdict" in err, err
    for pid in started:
        assert not Path(f"/proc/{pid}").exists(), f"broker pid {pid} still runs"
    store_port = int(re.search(r"postgresql://\S+@127\.0\.0\.1:(\d+)/", (tmp_path / "broker.log").read_text())[1])
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", store_port))
