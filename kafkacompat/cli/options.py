"""What every command group's parser shares: one-line usage errors, --bootstrap-server and --progress.

The groups talk to a broker the same way (one address flag with an
environment default, Kafka-style --command-config security properties),
so the flags are defined once here and read alike in every command.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, NoReturn

from ..admin.client import BOOTSTRAP_VARIABLE, DEFAULT_BOOTSTRAP, default_bootstrap, parse_bootstrap
from ..security.client import ClientSecurity, SecurityConfigError, load_command_config
from .arg_types import parsed


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit 2), one JSON object under --json.

    Options are never matched by a prefix (--partition is not --partitions): a typo is an error.
    """

    json_errors = False  # set by the `kafkacompat` command when its arguments hold --json

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            self.exit(2, json.dumps({"error": f"{self.prog}: {message}"}) + "\n")
        self.exit(2, f"{self.prog}: error: {message}\n")


def _bootstrap(text: str) -> str:
    parsed(parse_bootstrap, text)
    return text


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    """--bootstrap-server, defaulting to $KAFKACOMPAT_BOOTSTRAP_SERVERS so a shell can name its broker once."""
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", default=default_bootstrap(), type=_bootstrap,
                   help=f"the broker to talk to (default ${BOOTSTRAP_VARIABLE}, else {DEFAULT_BOOTSTRAP})")
    p.add_argument("--command-config", metavar="FILE", type=_command_config,
                   help="client security properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.location, ...), as Kafka's tools take them")


def _command_config(path: str) -> ClientSecurity:
    return parsed(load_command_config, path, SecurityConfigError)


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action="store_true",
                   help="report progress on stderr even when it is not a terminal")
