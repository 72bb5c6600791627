"""The workloads driven by the Java client: Kafka 4.1's own perf tools.

`kafka-producer-perf-test` and `kafka-consumer-perf-test` from the reference
distribution (kafkacompat.testing.reference_kafka finds it) are what Kafka's
users benchmark a cluster with, so their figures are the ones a user would
compare. Each tool runs in its own JVM with Kafka's default JIT and GC; the
tools time themselves from their first send or fetch, so a JVM's start is not
in the figures. The producer runs with the Java client's defaults
(acks=all means idempotence on, linger.ms=5, batch.size=16384) except acks.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import uuid

from kafkacompat.testing.reference_kafka import find_kafka_home, unavailable

from .workloads import Outcome

log = logging.getLogger(__name__)

TOOL_HEAP = "-Xmx512m"
TIMEOUT_S = 600.0  # one tool run; the record budgets keep a run well under this
JOIN_ALLOWANCE_S = 30.0  # a group join of the consumer tool on a loaded machine

# "100 records sent, 12.3 records/sec (0.01 MB/sec), 4.50 ms avg latency, 9.00 ms max latency,
#  4 ms 50th, 8 ms 95th, 9 ms 99th, 9 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


class JavaToolsMissingError(RuntimeError):
    pass


def check() -> None:
    """Raise with the reason when the perf tools cannot run here."""
    why = unavailable()
    if why:
        raise JavaToolsMissingError(why)


def _run(tool: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    home = find_kafka_home()
    if home is None:
        raise JavaToolsMissingError(unavailable())
    env = {**os.environ, "KAFKA_HEAP_OPTS": TOOL_HEAP, "LOG_DIR": os.environ.get("TMPDIR", "/tmp")}
    env.pop("JMX_PORT", None)
    env.pop("KAFKA_JVM_PERFORMANCE_OPTS", None)
    log.debug("running %s %s", tool, " ".join(args))
    return subprocess.run([str(home / "bin" / f"{tool}.sh"), *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False, env=env)


def _first_error(text: str) -> str | None:
    for line in text.splitlines():
        if "Exception" in line or line.startswith("ERROR"):
            return line.strip()[:300]
    return None


def produce(bootstrap: str, topic: str, size: int, acks: int, records: int, rate: int = -1) -> Outcome:
    """kafka-producer-perf-test: `records` values of `size` bytes, saturated (rate -1) or at `rate`/s.

    Its summary line gives msg/s and the send-to-acknowledgement latency
    percentiles (whole milliseconds, as the tool prints them).
    """
    done = _run("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", str(rate),
        "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={'all' if acks == -1 else acks}",
    ])
    found = _PRODUCER_SUMMARY.findall(done.stdout)
    if done.returncode != 0 or not found:
        reason = _first_error(done.stderr + done.stdout) or f"exit {done.returncode}"
        return Outcome(0, 0.0, status=f"kafka-producer-perf-test failed: {reason}")
    sent, per_s, _mb, _avg, _max, p50, _p95, p99, p999 = found[-1]
    outcome = Outcome(int(sent), int(sent) / float(per_s) if float(per_s) else 0.0,
                      percentiles_ms=(float(p50), float(p99), float(p999)))
    error = _first_error(done.stderr)
    if error:
        outcome.status = f"errors: {error}"
    return outcome


def consume(bootstrap: str, topic: str, expected: int, stall_s: float) -> Outcome:
    """kafka-consumer-perf-test: read `expected` messages from the start in a fresh group.

    Its fetch time starts once the group has assigned the partitions, so the
    group join (a protocol exchange, not data) is not in the rate. The tool's
    --timeout counts from its start, join included: at least JOIN_ALLOWANCE_S.
    """
    stall_s = max(stall_s, JOIN_ALLOWANCE_S)
    done = _run("kafka-consumer-perf-test", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(expected),
        "--group", f"bench-java-{uuid.uuid4().hex[:8]}", "--timeout", str(int(stall_s * 1000)),
    ])
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("start.time")), None)
    names = [name.strip() for name in header.split(",")] if header else []
    # the figures: the line with as many fields as the header (a WARNING line about the
    # --timeout may come between them)
    figures = next((line for line in lines if line != header and line.count(",") == len(names) - 1), None)
    if done.returncode != 0 or not names or figures is None:
        reason = _first_error(done.stderr + done.stdout) or f"exit {done.returncode}"
        return Outcome(0, 0.0, status=f"kafka-consumer-perf-test failed: {reason}")
    values = dict(zip(names, (value.strip() for value in figures.split(","))))
    got = int(values["data.consumed.in.nMsg"])
    outcome = Outcome(got, float(values["fetch.time.ms"]) / 1000)
    if got < expected:
        outcome.status = f"stalled: {got} of {expected} read, none for {stall_s:.0f} s"
    return outcome
