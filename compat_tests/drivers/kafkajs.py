"""kafkajs 2 (npm), installed into compat_tests/node by tests/run.sh.

Snappy and LZ4 come from the kafkajs-snappy and kafkajs-lz4 codec packages;
kafkajs has no zstd codec that installs without a native build here.
Every question runs in one long-lived node process (compat_tests/node/server.js).
"""

from __future__ import annotations

import functools
import json
import pathlib
import shutil

from . import ClientUnavailable, NotApplicable
from .programs import ProgramDriver, ProgramServer, stopped_at_exit

NODE_DIR = pathlib.Path(__file__).resolve().parent.parent / "node"


def installed() -> None:
    """Raise ClientUnavailable unless node and kafkajs are installed."""
    if shutil.which("node") is None:
        raise ClientUnavailable("node is not on PATH")
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").is_file():
        raise ClientUnavailable("run `npm ci --prefix compat_tests/node` (tests/run.sh does)")


@functools.cache
def node_server() -> ProgramServer:
    """The session's one node process running the programs of compat_tests/node."""
    return stopped_at_exit("node process", lambda: ["node", str(NODE_DIR / "server.js")])


class KafkajsDriver(ProgramDriver):
    name = "kafkajs"
    program = "scenarios"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        installed()
        package = NODE_DIR / "node_modules" / "kafkajs" / "package.json"
        self.version = f"kafkajs {json.loads(package.read_text())['version']}"

    def server(self) -> ProgramServer:
        return node_server()

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        if compression == "zstd":
            raise NotApplicable("kafkajs ships no zstd codec; @kafkajs/zstd needs a native build")
        return super().produce(
            topic, n, prefix=prefix, compression=compression, acks=acks, idempotent=idempotent, partition=partition
        )
