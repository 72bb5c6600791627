"""The replication engine: three clusters (`kafkacompat serve` on the disk store) linked in a chain or a ring.

Replication promises more than a single broker does (docs/replication.md):
every message at the same offset in every cluster, byte for byte, in any
topology; a link never ships a batch to a cluster on its path, so a ring
delivers each message exactly once everywhere; a link that resumes after a
restart of either side loses and repeats nothing; cursors are carried once
the messages they point at are there, so a group moved to another cluster
resumes at its last commit. Those promises are only tested where a message
crosses more than one link, so the engine runs three clusters a, b, c: a
chain (a -> b -> c, set up with `stream replica autosetup` on a, then on b,
as docs/replication.md's London follows New York) or a ring (the chain
closed by c -> a with `stream replica add` and `stream upstream add`). The
seed picks the topology unless `--topology` does (`pair`, a -> b, is the
first campaign's, kept for replays). The workload writes to a only: the
docs promise multi-master for topics unique per master, and the campaign's
topics are one set. The nemesis kills, pauses and restarts any cluster (the
source, a middle one, the last), pauses one link (`stream replica pause`,
then `resume`, as an operator would) or cuts one link's network (each link
runs through a relay, link_proxy.py, that resets its connections). After the source's final read,
`final_checks` waits until each replica's end offsets equal the source's (a
condition with a timeout), reads each whole, asks every link's state, waits
for the group's cursors on each, and fails the group over to the last
cluster of the chain; replica_checker.py judges those events.

`--workers-clusters` runs the named clusters as `serve --workers 2`
(docs/workers.md): a link into one reaches worker 1's partitions through
the worker it names, a link from one runs in worker 0 and reads worker 1's
partitions through it, and a kill, pause or restart of the cluster acts on
its supervisor and both workers at once (process.SupervisedProcess).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..testing.ports import free_port, free_port_run
from .engine import Engine, StorageFault
from .history import History
from .link_proxy import LinkProxy
from .process import BrokerProcess, BrokerProcesses, SupervisedProcess
from .replica_clients import FAILOVER_TIMEOUT, Partitions, committed, end_offsets, every_partition, fail_over
from .workload import GROUP, PARTITIONS, final_read

STREAM = "/chaos"
PARTITIONLET_SIZE = "32KiB"  # as the disk engine: the link ships from sealed and active partitionlets
SOURCE = 1  # the cluster the workload writes to
NAMES = {1: "a", 2: "b", 3: "c"}
TOPOLOGIES = {"pair": [(1, 2)], "chain": [(1, 2), (2, 3)], "ring": [(1, 2), (2, 3), (3, 1)]}
SEEDED = ("chain", "ring")  # what the seed picks from when --topology is not given
CATCH_UP_TIMEOUT = 120.0  # seconds the links get to bring a replica to the source's end offsets
CURSOR_TIMEOUT = 30.0  # and then to carry the group's cursors
CLUSTER_WORKERS = 2  # worker processes of a cluster named in --workers-clusters


def topology_of(seed: int, asked: str | None) -> str:
    return asked or random.Random(f"{seed}:topology").choice(SEEDED)


class ReplicationEngine(BrokerProcesses, Engine):
    name = "replication"

    def __init__(self, workdir: Path, history: History, topology: str,
                 workers_clusters: tuple[str, ...] = ()) -> None:
        self.history, self.topology = history, topology
        self.links = TOPOLOGIES[topology]
        self.nodes = sorted({n for link in self.links for n in link})
        self.replicas = [n for n in self.nodes if n != SOURCE]  # in chain order: the last is the farthest
        # the longest final_checks may legitimately wait (campaign.watch): each replica's catch-up, read and
        # cursors, then the failover
        self.final_checks_s = len(self.replicas) * (CATCH_UP_TIMEOUT + CURSOR_TIMEOUT + 60) + FAILOVER_TIMEOUT
        self.supervised = [n for n in self.nodes if NAMES[n] in workers_clusters]  # run as `serve --workers 2`
        self.ports = {n: free_port_run(CLUSTER_WORKERS) if n in self.supervised else free_port() for n in self.nodes}
        self.addresses = {n: f"127.0.0.1:{p}" for n, p in self.ports.items()}
        self.bootstrap = self.addresses[SOURCE]
        self.log = open(workdir / "broker.log", "a", encoding="utf-8")
        lock = threading.Lock()
        self.brokers = {}
        for node in self.nodes:
            data = workdir / NAMES[node]
            workers = ["--workers", str(CLUSTER_WORKERS)] if node in self.supervised else []
            self.brokers[node] = (SupervisedProcess if node in self.supervised else BrokerProcess)(
                node, ["--data-dir", str(data), "--host", "127.0.0.1", "--port", str(self.ports[node]),
                       "--cluster-name", NAMES[node], "--group-initial-rebalance-delay-ms", "500", *workers],
                history, self.log, lock, clean_marker=data / ".clean")
        self.proxies = {link: LinkProxy(self.ports[link[1]]) for link in self.links}  # each link's network
        self.killed_worker: tuple[int, int] | None = None  # (cluster, worker index) killed alone, until back
        self.paused: tuple[int, int] | None = None  # the link the nemesis holds paused
        self.severed: tuple[int, int] | None = None  # and the one whose network it holds cut
        self.watching = threading.Event()
        self.watcher = threading.Thread(target=self._watch_replica_cursors, name="chaos-replica-cursors", daemon=True)

    def close(self) -> None:
        self._stop_watching()
        for b in self.brokers.values():
            b.kill()
        for proxy in self.proxies.values():
            proxy.close()
        self.log.close()

    # the stream, its topics and the links, made with the commands a user types

    def _cli(self, node: int, *args: str) -> subprocess.CompletedProcess[str]:
        """A `kafkacompat` command against cluster `node` (links are managed on their source cluster)."""
        return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server",
                               self.addresses[node]], capture_output=True, text=True, timeout=60)

    def _replica(self, node: int) -> str:
        return f"{self.addresses[node]}{STREAM}"

    def _via(self, link: tuple[int, int]) -> str:
        """The replica address link `link` is added with: its relay's port, which the nemesis can cut."""
        return f"127.0.0.1:{self.proxies[link].port}{STREAM}"

    def setup(self, rng: random.Random) -> dict[str, Any]:
        fsync = rng.choice(["none", "interval", "always"])
        commands = [(SOURCE, ("stream", "create", STREAM, "--fsync", fsync, "--partitionlet-size",
                              PARTITIONLET_SIZE, "--ttl", "0"))]
        commands += [(SOURCE, ("topic", "create", f"{STREAM}:{topic.split('..')[1]}", "--partitions", str(count)))
                     for topic, count in PARTITIONS.items()]
        for src, dst in self.links:
            if dst != SOURCE:  # a new stream there: autosetup makes it with the source's policies
                commands.append((src, ("stream", "replica", "autosetup", "--path", STREAM,
                                       "--replica", self._via((src, dst)))))
            else:  # the ring closes on the stream the workload writes: register the upstream, add the link
                commands.append((dst, ("stream", "upstream", "add", "--path", STREAM,
                                       "--upstream", self._replica(src))))
                commands.append((src, ("stream", "replica", "add", "--path", STREAM,
                                       "--replica", self._via((src, dst)))))
        for node, command in commands:
            done = self._cli(node, *command)
            if done.returncode != 0:
                raise subprocess.SubprocessError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout}")
        self.watcher.start()
        return {"topology": self.topology, "fsync": fsync, "partitionlet_size": PARTITIONLET_SIZE,
                "clusters": len(self.nodes), "links": " ".join(self._link_name(link) for link in self.links),
                "workers_clusters": " ".join(NAMES[n] for n in self.supervised) or "none"}

    # the links' own faults: one link paused by the operator's command, or its network cut, until healed

    def storage_faults(self) -> list[StorageFault]:
        workers = [StorageFault("kill-worker", self._kill_worker, live=True, heal=self._worker_back)]
        return [StorageFault("link-pause", self._pause_one, live=True, heal=self._resume_paused),
                StorageFault("link-cut", self._cut_one, live=True, heal=self._mend_cut),
                *(workers if self.supervised else [])]

    # a worker of a `serve --workers 2` cluster killed alone: its supervisor starts it again

    def _kill_worker(self, rng: random.Random) -> dict[str, Any]:
        node = rng.choice(self.supervised)
        broker = self.brokers[node]
        assert isinstance(broker, SupervisedProcess)
        index = rng.randrange(CLUSTER_WORKERS)
        pid = broker.kill_worker(index)
        self.killed_worker = (node, index) if pid is not None else None
        return {"cluster": NAMES[node], "worker": index, "pid": pid, "skipped": pid is None}

    def _worker_back(self) -> None:
        """Until the supervisor says the killed worker serves again; a start-failed event if it never does."""
        if self.killed_worker is None:
            return
        node, index = self.killed_worker
        self.killed_worker = None
        broker = self.brokers[node]
        assert isinstance(broker, SupervisedProcess)
        if not broker.served_again(index):
            self.history.record("broker", node=node, action="start-failed",
                                reason=f"worker {index} did not serve again after its kill")

    def _cut_one(self, rng: random.Random) -> dict[str, Any]:
        self.severed = rng.choice(self.links)
        self.proxies[self.severed].sever()
        return {"between": self._link_name(self.severed)}

    def _mend_cut(self) -> None:
        if self.severed is not None:
            self.proxies[self.severed].mend()
            self.severed = None

    def _pause_one(self, rng: random.Random) -> dict[str, Any]:
        self.paused = rng.choice(self.links)
        return self._link("pause", self.paused)

    def _resume_paused(self) -> None:
        if self.paused is not None:
            self._link("resume", self.paused, record=True)
            self.paused = None

    @staticmethod
    def _link_name(link: tuple[int, int]) -> str:
        return f"{NAMES[link[0]]}->{NAMES[link[1]]}"

    def _link(self, action: str, link: tuple[int, int], record: bool = False) -> dict[str, Any]:
        src, dst = link
        done = self._cli(src, "stream", "replica", action, "--path", STREAM, "--replica", self._via(link))
        out = {"link": action, "between": self._link_name(link), "rc": done.returncode,
               "said": (done.stderr or done.stdout).strip()[:300]}
        if record or done.returncode != 0:
            self.history.record("link", **out)
        return out

    # while the campaign runs, and after the source's final read: the replicas, the cursors, a failover

    def _watch_replica_cursors(self) -> None:
        """While the campaign runs: every second the group's cursors on each replica, then its end offsets. A
        cursor is carried only once its messages are there, so it never exceeds the end read after it."""
        tps = every_partition()
        while not self.watching.wait(1):
            for node in self.replicas:
                cursors = committed(self.addresses[node], tps)
                ends = end_offsets(self.addresses[node], tps)
                for (topic, partition), cursor in cursors.items():
                    if cursor >= 0 and ends[(topic, partition)] >= 0:
                        self.history.record("replica-observed", group=GROUP, cluster=NAMES[node], topic=topic,
                                            partition=partition, cursor=cursor, end=ends[(topic, partition)])

    def _stop_watching(self) -> None:
        self.watching.set()
        if self.watcher.is_alive():
            self.watcher.join(30)

    def final_checks(self) -> None:
        self._stop_watching()
        for link in self.links:  # a pause the nemesis could not undo (it never should be needed)
            self._link("resume", link, record=True)
        tps = every_partition()
        ends = {node: self._wait_caught_up(node, tps) for node in self.replicas}
        for node in self.replicas:
            final_read(self.addresses[node], self.history, event="replica-final", tag={"cluster": NAMES[node]})
        self._record_link_states()
        for node in self.replicas:
            self._wait_cursors_carried(node, ends[node])
        last = self.replicas[-1]  # the farthest replica: its cursors crossed every link of the chain
        fail_over(self.addresses[last], NAMES[last], self.history, len(tps))

    def _wait_caught_up(self, node: int, tps: Partitions) -> dict[tuple[str, int], int]:
        """Wait until every partition's end offset on replica `node` equals the source's; record both."""
        started = time.monotonic()
        source, replica = end_offsets(self.addresses[SOURCE], tps), end_offsets(self.addresses[node], tps)
        while source != replica and time.monotonic() - started < CATCH_UP_TIMEOUT:
            time.sleep(0.5)  # the source may still grow: a transaction its coordinator ends (timeout) adds a marker
            source, replica = end_offsets(self.addresses[SOURCE], tps), end_offsets(self.addresses[node], tps)
        waited = round(time.monotonic() - started, 2)
        for topic, partition in tps:
            self.history.record("replica-end", cluster=NAMES[node], topic=topic, partition=partition,
                                source=source[(topic, partition)], replica=replica[(topic, partition)], waited=waited)
        return replica

    def _record_link_states(self) -> None:
        """Every link's state as `stream replica list` shows it on its source cluster, once all caught up."""
        for src, dst in self.links:
            done = self._cli(src, "stream", "replica", "list", "--path", STREAM, "--json")
            try:
                entries = json.loads(done.stdout) if done.returncode == 0 else []
            except json.JSONDecodeError:
                entries = []
            entry = next((e for e in entries if e.get("replica") == self._via((src, dst))), {})
            self.history.record("link-state", between=self._link_name((src, dst)), state=entry.get("state"),
                                reason=entry.get("reason") or (done.stderr.strip()[:300] if done.returncode else ""))

    def _wait_cursors_carried(self, node: int, ends: dict[tuple[str, int], int]) -> None:
        """Wait until the group's cursors on replica `node` equal the source's; record both with its end."""
        tps = list(ends)
        started = time.monotonic()
        source, replica = committed(self.addresses[SOURCE], tps), committed(self.addresses[node], tps)
        while source != replica and time.monotonic() - started < CURSOR_TIMEOUT:
            time.sleep(0.5)
            replica = committed(self.addresses[node], tps)
        for topic, partition in tps:
            self.history.record("replica-cursor", group=GROUP, cluster=NAMES[node], topic=topic, partition=partition,
                                source=source[(topic, partition)], replica=replica[(topic, partition)],
                                replica_end=ends[(topic, partition)])
