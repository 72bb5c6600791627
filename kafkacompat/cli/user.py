"""`kafkacompat user add|list|delete`: SCRAM users of a stopped broker's store.

The first admin must exist before a SASL-only broker starts, as Kafka's
`kafka-storage format --add-scram` provides; these commands write the same
credential records the broker reads (the default stream's
`scram_credentials` table). With the broker running, use
kafka-configs.sh --entity-type users (AlterUserScramCredentials) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from kafkacompat import storage
from kafkacompat.storage import StorageError

from ..config import load_config
from ..security.credentials import Credentials
from ..security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential

EPILOG = """\
examples:
  echo 'admin-secret' | kafkacompat user add admin --mechanism SCRAM-SHA-512 --password-stdin --data-dir /var/lib/kafkacompat
  kafkacompat user list --data-dir /var/lib/kafkacompat
  kafkacompat user delete alice --data-dir /var/lib/kafkacompat

PLAIN logins check the password against the user's SCRAM credential, so a
user added here logs in with PLAIN, SCRAM-SHA-256 (if added) and SCRAM-SHA-512.
"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `user add|list|delete` with the top-level command."""
    user = sub.add_parser("user", help="add, list or delete SASL/SCRAM users of a stopped broker's store",
                          description=__doc__.split("\n\n", 1)[0], epilog=EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = user.add_subparsers(dest="user_command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", metavar="DIR", help="the broker's data dir (default: from --config or "
                                                         "KAFKACOMPAT_DATA_DIR)")
        p.add_argument("--config", metavar="FILE", help="the broker's TOML settings (data_dir, default_stream)")

    add = commands.add_parser("add", help="add a user, or replace the password of a mechanism")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--mechanism", choices=MECHANISMS, action="append",
                     help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default SCRAM-SHA-512)")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"PBKDF2 iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")
    add.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    common(add)
    add.set_defaults(func=_add)
    listing = commands.add_parser("list", help="list users and their mechanisms (never the keys)")
    common(listing)
    listing.set_defaults(func=_list)
    delete = commands.add_parser("delete", help="delete a user's credentials")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", choices=MECHANISMS, help="delete only this mechanism's credential")
    common(delete)
    delete.set_defaults(func=_delete)
    user.set_defaults(func=lambda args: (user.print_help(), 2)[1])


async def _with_credentials(args: argparse.Namespace, action) -> int:  # type: ignore[no-untyped-def]
    config = load_config(args.config, overrides={"data_dir": args.data_dir})
    if config.data_dir.startswith("memory://"):
        print("kafkacompat user: a memory:// store has no users to keep; give --data-dir", file=sys.stderr)
        return 2
    store = storage.open_store(config.data_dir, volumes=config.volumes, default_stream=config.default_stream)
    try:
        await store.open()
    except StorageError as exc:
        hint = ("; with the broker running use kafka-configs.sh --entity-type users instead"
                if "in use" in str(exc) else "")
        print(f"kafkacompat user: cannot open the store in {config.data_dir}: {exc}{hint}", file=sys.stderr)
        return 2
    try:
        return await action(Credentials(store, store.default_stream))
    finally:
        await store.close()


def _password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    if not sys.stdin.isatty():
        return None
    first = getpass.getpass(f"password for {args.name}: ")
    return first if getpass.getpass("again: ") == first else None


def _add(args: argparse.Namespace) -> int:
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        print(f"kafkacompat user add: --iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}", file=sys.stderr)
        return 2
    if not args.name:
        print("kafkacompat user add: the user name must not be empty", file=sys.stderr)
        return 2
    password = _password(args)
    if not password:
        print("kafkacompat user add: no password (use --password-stdin, or type it twice the same on a terminal)",
              file=sys.stderr)
        return 2
    mechanisms = args.mechanism or ["SCRAM-SHA-512"]

    async def add(credentials: Credentials) -> int:
        for mechanism in mechanisms:
            await credentials.set(args.name, mechanism, make_credential(mechanism, password, args.iterations))
        print(f"user {args.name}: {', '.join(mechanisms)} set")
        return 0
    return asyncio.run(_with_credentials(args, add))


def _list(args: argparse.Namespace) -> int:
    async def listing(credentials: Credentials) -> int:
        for name, mechanisms in credentials.users().items():
            shown = ", ".join(f"{mech} (iterations={cred.iterations})" for mech, cred in sorted(mechanisms.items()))
            print(f"{name}\t{shown}")
        return 0
    return asyncio.run(_with_credentials(args, listing))


def _delete(args: argparse.Namespace) -> int:
    async def delete(credentials: Credentials) -> int:
        if not await credentials.delete(args.name, args.mechanism):
            what = f"a {args.mechanism} credential" if args.mechanism else "credentials"
            print(f"kafkacompat user delete: user {args.name} has no {what}", file=sys.stderr)
            return 1
        print(f"user {args.name}: {args.mechanism or 'all credentials'} deleted")
        return 0
    return asyncio.run(_with_credentials(args, delete))
