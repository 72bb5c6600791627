"""kafkajs 2 (npm), installed into compat_tests/node by tests/run.sh.

Snappy and LZ4 come from the kafkajs-snappy and kafkajs-lz4 codec packages;
kafkajs has no zstd codec that installs without a native build here.
"""

from __future__ import annotations

import json
import pathlib
import shutil

from . import ClientUnavailable, NotApplicable
from .programs import ProgramDriver

NODE_DIR = pathlib.Path(__file__).resolve().parent.parent / "node"


class KafkajsDriver(ProgramDriver):
    name = "kafkajs"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        package = NODE_DIR / "node_modules" / "kafkajs" / "package.json"
        if shutil.which("node") is None:
            raise ClientUnavailable("node is not on PATH")
        if not package.is_file():
            raise ClientUnavailable("run `npm install --prefix compat_tests/node` (tests/run.sh does)")
        self.version = f"kafkajs {json.loads(package.read_text())['version']}"

    def command(self) -> list[str]:
        return ["node", str(NODE_DIR / "scenarios.js")]

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        if compression == "zstd":
            raise NotApplicable("kafkajs ships no zstd codec; @kafkajs/zstd needs a native build")
        return super().produce(
            topic, n, prefix=prefix, compression=compression, acks=acks, idempotent=idempotent, partition=partition
        )
