"""How fast the test broker starts: `python -m kafkacompat.testing.bench [--runs N] [--disk] [--json]`.

Every run is a fresh interpreter, so imports and memory count from nothing.
It times `import kafkacompat.testing`, then `Broker()` entry until an
ApiVersions v3 request sent over a real socket is answered ("cold"), then
the same for a second broker in the same process ("warm": what each further
broker in a test session costs), and reads the peak RSS. Prints each run and
the medians against the targets (50 ms, 60 MB). `--disk` measures brokers
on a fresh temporary directory instead of memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time
from typing import Any

from kafkacompat.frames import read_frame

STARTUP_TARGET_MS = 50.0
RSS_TARGET_MB = 60.0
_CORRELATION_ID = 7


def _api_versions_request() -> bytes:
    """ApiVersions v3 as a client sends it: header v2, compact client software name/version."""
    client_id = b"bench"
    header = struct.pack(">hhih", 18, 3, _CORRELATION_ID, len(client_id)) + client_id + b"\x00"
    body = b"\x06bench" + b"\x041.0" + b"\x00"  # compact strings (length + 1), no tagged fields
    return struct.pack(">i", len(header) + len(body)) + header + body


def served_api_versions(port: int) -> None:
    """Send ApiVersions over a real socket; raise unless it is answered without error."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_api_versions_request())
        answer = read_frame(sock)
    correlation_id, error_code = struct.unpack_from(">ih", answer)
    if correlation_id != _CORRELATION_ID or error_code != 0:
        raise RuntimeError(f"bad ApiVersions answer: correlation {correlation_id}, error {error_code}")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _time_broker(broker_class: Any, data_dir: str | None) -> tuple[float, Any]:
    started = time.perf_counter()
    broker = broker_class(data_dir=data_dir).start()
    served_api_versions(broker.port)
    return (time.perf_counter() - started) * 1000, broker


def measure_once(disk: bool = False) -> dict[str, float]:
    """One run's figures, in this (fresh) interpreter."""
    data_dir = "tmp" if disk else None
    baseline = _peak_rss_mb()
    started, cpu_started = time.perf_counter(), time.process_time()
    from kafkacompat.testing import Broker

    import_ms = (time.perf_counter() - started) * 1000
    import_cpu_ms = (time.process_time() - cpu_started) * 1000  # steadier than wall time on a busy box
    cold_ms, first = _time_broker(Broker, data_dir)
    warm_ms, second = _time_broker(Broker, data_dir)
    rss = _peak_rss_mb()
    second.stop()
    first.stop()
    return {
        "import_ms": import_ms,
        "import_cpu_ms": import_cpu_ms,
        "startup_ms": cold_ms,
        "warm_startup_ms": warm_ms,
        "peak_rss_mb": rss,
        "interpreter_rss_mb": baseline,
    }


def run(runs: int, disk: bool = False) -> list[dict[str, float]]:
    results = []
    for _ in range(runs):
        child = subprocess.run(
            [sys.executable, "-m", "kafkacompat.testing.bench", "--child", *(["--disk"] if disk else [])],
            capture_output=True, text=True, timeout=120, check=True,
        )
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    return results


def medians(results: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters to measure (default 7)")
    parser.add_argument("--disk", action="store_true", help="brokers on a temporary directory, not memory")
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_once(args.disk)))
        return 0
    results = run(args.runs, args.disk)
    middle = medians(results)
    if args.json:
        print(json.dumps({"runs": len(results), **middle}))
        return 0
    print(f"{'run':>6} {'import ms':>10} {'(cpu ms)':>9} {'startup ms':>11} {'warm ms':>8} {'peak RSS MB':>12}")
    for label, r in [*((str(i), r) for i, r in enumerate(results, 1)), ("median", middle)]:
        print(f"{label:>6} {r['import_ms']:>10.1f} {r['import_cpu_ms']:>9.1f} {r['startup_ms']:>11.1f} "
              f"{r['warm_startup_ms']:>8.1f} {r['peak_rss_mb']:>12.1f}")
    print(
        f"{'On disk' if args.disk else 'In memory'}: Broker() entry to a served ApiVersions: {middle['startup_ms']:.1f} ms "
        f"(target < {STARTUP_TARGET_MS:.0f} ms); peak RSS {middle['peak_rss_mb']:.1f} MB "
        f"(target < {RSS_TARGET_MB:.0f} MB; a bare interpreter: {middle['interpreter_rss_mb']:.1f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
