"""`kafkacompat store check DIR [--repair]`: an offline check of an on-disk store.

Like `kafka-dump-log --verify` and fsck: with the broker stopped, read every
metadata file (store.json, volume ids, .stream, .topics, .cursors, chain
manifests) and every stored batch (length, offsets, CRC-32C), report each
damaged file and what would be done about it; `--repair` does it. The
checks and repairs are the store's own, the ones the broker makes on start.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TextIO

from kafkacompat.storage import StorageError

EPILOG = """\
exit status: 0 no damage found, 1 damage found (repaired with --repair), 2 the
store could not be checked (missing, or in use by a running broker).

examples:
  kafkacompat store check /var/lib/kafkacompat
  kafkacompat store check /var/lib/kafkacompat --volume /mnt/disk2 --repair
"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `store check` with the top-level command."""
    store = sub.add_parser("store", help="check or repair an on-disk store (offline)",
                           description="Offline tools for an on-disk store; the broker must be stopped.")
    commands = store.add_subparsers(dest="store_command", metavar="COMMAND")
    check = commands.add_parser(
        "check", help="verify every metadata file and batch CRC; --repair fixes what is damaged",
        description="Verify a stopped broker's store: metadata files, chain manifests against the\n"
                    "partitionlet files, and the CRC-32C of every stored batch. Reports each damaged\n"
                    "file and what would be done; --repair does it (rebuild, quarantine, rewrite).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    check.add_argument("data_dir", metavar="DIR", help="the store's first volume (the broker's --data-dir)")
    check.add_argument("--volume", metavar="DIR", action="append", dest="volumes", default=[],
                       help="another data dir of the store (repeatable, as given to the broker)")
    check.add_argument("--repair", action="store_true", help="repair what is damaged (default: only report)")
    check.set_defaults(func=_check)
    store.set_defaults(func=lambda args: (store.print_help(), 2)[1])


def _check(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(check_store(args.data_dir, args.volumes, repair=args.repair, out=sys.stdout))
    except StorageError as exc:
        print(f"kafkacompat store check: {exc}", file=sys.stderr)
        return 2


async def check_store(data_dir: str, volumes: list[str], *, repair: bool, out: TextIO) -> int:
    """Check (and with `repair`, repair) a store; print progress and findings; return the exit status."""
    from kafkacompat.storage.disk.store import DiskStore  # here: every other command would import the disk store

    store = DiskStore([data_dir, *volumes], repair=repair, background_verify=False)
    store.log_findings = False  # printed below, once
    started = time.monotonic()
    print(f"checking {data_dir}{' (repairing)' if repair else ''}", file=out, flush=True)
    await store.open()
    try:
        partitions = 0
        last = [time.monotonic(), ""]

        def progress(name: str, damaged: int) -> None:
            """A line per stream, and one a second within a long one."""
            nonlocal partitions
            partitions += 1
            now, stream = time.monotonic(), name.rpartition(":")[0]
            if stream != last[1] or now - last[0] >= 1.0:
                last[0], last[1] = now, stream
                print(f"  {partitions} partition(s) checked, at {name}; {damaged} damaged range(s) so far",
                      file=out, flush=True)

        await store.verify_all(progress)
    finally:
        await store.close()
    findings = store.findings
    verb = "action taken" if repair else "would"
    for finding in findings:
        print(f"DAMAGED {finding.path} {finding.problem}; {verb}: {finding.action}", file=out)
    elapsed = time.monotonic() - started
    print(f"{partitions} partition(s) checked in {elapsed:.1f} s: "
          + (f"{len(findings)} damaged file(s)" if findings else "no damage found")
          + ("" if repair or not findings else "; run with --repair to repair"), file=out, flush=True)
    return 1 if findings else 0
