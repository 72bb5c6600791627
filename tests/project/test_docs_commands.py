"""Every shell command in README.md and docs/ is run by a test, or says why not.

A command in the docs that nothing runs goes stale without anyone noticing (a flag renamed, a default
changed). Each shell block carries a marker (see doc_blocks.py): `run by` names a test that reads the
block and runs it as written, `not run` gives the reason. The walk below fails on a block without one,
and on a `run by` naming a test that does not exist or does not read its blocks.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.project.doc_blocks import REPO, run_by, shell_blocks

TOUR = "tests/project/test_docs_commands.py::test_the_readme_tour"


def _test_function(test_id: str) -> ast.FunctionDef | None:
    file, _, name = test_id.partition("::")
    path = REPO / file
    if not path.is_file() or not name:
        return None
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _reads_its_blocks(test_id: str) -> bool:
    """The test's module takes its commands from the docs: it calls run_by() and names its own id."""
    source = (REPO / test_id.partition("::")[0]).read_text()
    return "run_by(" in source and f'"{test_id}"' in source


def test_every_shell_block_is_run_or_marked() -> None:
    problems = []
    for block in shell_blocks():
        if block.marker is None:
            problems.append(f"{block.where()}: a shell block with no <!-- run by: ... --> or <!-- not run: ... -->")
        elif block.marker == "not run" and not block.note:
            problems.append(f"{block.where()}: <!-- not run: --> without a reason")
        elif block.marker == "not run":
            problems += [f"{block.where()}: the reason names {path}, which does not exist"
                         for path in re.findall(r"\b(?:tests|compat_tests)/[\w/.]*", block.note)
                         if not (REPO / path.rstrip(".")).exists()]
        elif block.marker == "run by":
            function = _test_function(block.note)
            if function is None:
                problems.append(f"{block.where()}: run by {block.note}, which does not exist")
            elif not _reads_its_blocks(block.note):
                problems.append(f"{block.where()}: {block.note}'s module never calls run_by({block.note!r})")
    assert not problems, "\n".join(problems)


def test_the_walk_sees_every_kind_of_shell_block() -> None:
    """The check above is only as good as the walk: it must find blocks of each page, marked or not."""
    langs = {b.lang for b in shell_blocks()}
    assert {"sh", "console"} <= langs
    pages = {b.path.name for b in shell_blocks()}
    assert {"README.md", "streams.md", "security.md", "cloud.md", "operations.md"} <= pages
    assert len([b for b in shell_blocks() if b.marker == "run by"]) >= 2


def _env(port: str | None = None) -> dict[str, str]:
    """The environment a user's shell has: this checkout's `kafkacompat` first on PATH, no KAFKACOMPAT_* of ours."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kafkacompat").exists(), f"no kafkacompat script next to {sys.executable} (pip install -e .)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    if port:
        env["KAFKACOMPAT_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{port}"
    return env


def _start(command: str, cwd: Path) -> tuple[subprocess.Popen[str], str]:
    """The README's serve command as written; only the port (0: a free one) and address come from the environment."""
    env = {**_env(), "KAFKACOMPAT_PORT": "0", "KAFKACOMPAT_HOST": "127.0.0.1",
           "KAFKACOMPAT_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
    proc = subprocess.Popen(["bash", "-c", "exec " + command.strip()], cwd=cwd, env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        listening = re.search(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)", line)
        if listening:
            return proc, listening.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"the README's serve command did not start listening: {proc.stderr.read()}")


def test_the_readme_tour(tmp_path: Path) -> None:
    serve, clients = run_by(TOUR)
    assert serve.text.strip().startswith("kafkacompat serve") and "&" not in serve.text
    broker, port = _start(serve.text, tmp_path)
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", clients.text], cwd=tmp_path, env=_env(port),
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert out.splitlines()[0] == "hello"
        assert "1450 psi\n1380 psi\n" in out
        cursor = re.search(r"^dashboards\s+Pressure\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s", out, re.M)
        assert cursor, out  # the group's cursor: partition, offset, end, lag
        assert cursor.group(2) == cursor.group(3) and cursor.group(4) == "0"
        assert re.search(r"^Partitions:\s+3$", out, re.M) and re.search(r"^Messages:\s+2$", out, re.M), out
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0
    assert (tmp_path / "data" / "streams" / "apps" / "iot" / "oilpump_metrics").is_dir()


SECURITY = "tests/project/test_docs_commands.py::test_the_security_setup"


def test_the_security_setup(tmp_path: Path) -> None:
    """docs/security.md's certificates (openssl) and SCRAM users, made as written in an empty folder."""
    certificates, users = run_by(SECURITY)
    for block in (certificates, users):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    verified = subprocess.run(["openssl", "verify", "-CAfile", "ca.pem", "broker.pem", "alice.pem"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=30)
    assert verified.stdout.split() == ["broker.pem:", "OK", "alice.pem:", "OK"], verified.stdout + verified.stderr
    assert "user admin: SCRAM-SHA-512 set\nuser alice: SCRAM-SHA-512, SCRAM-SHA-256 set\n" in done.stdout
    assert re.search(r"^admin\tSCRAM-SHA-512 \(iterations=\d+\)$", done.stdout, re.M), done.stdout
    assert re.search(r"^alice\tSCRAM-SHA-256 \(iterations=\d+\), SCRAM-SHA-512", done.stdout, re.M), done.stdout
    assert "secret" not in done.stdout
