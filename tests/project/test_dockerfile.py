"""The Dockerfile, checked as far as a machine without a Docker engine allows.

Parsed with dockerfile-parse (the library OpenShift's build tools use): a builder stage with the compiler
and a runtime stage without one, a non-root user, the ports and settings the broker really has (asked of
`kafkacompat serve --print-config`, not copied here), a HEALTHCHECK on /health/live, and a .dockerignore
that keeps what the docs' own commands create out of the build context. Then the builder's wheel build
runs on a copy of that build context, the wheel goes into a scratch virtual environment, and the broker it
installs answers the image's own HEALTHCHECK command.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from dockerfile_parse import DockerfileParser

from tests.project.doc_blocks import REPO

# what the docs' commands leave in a checkout (README, security.md, spark.md, benchmarks.md, chaos), and the usual
LEFT_BY_DOCS = [".venv/bin/python", "data/store.json", "build/site/index.html", "build/lib/kafkacompat/cli.py",
                "oilrig-data/store.json", "oilrig-out/aggregates/part-0.parquet", "ca.key", "alice.key", "ca.pem",
                "client.properties", "user-groups", "bench-results.json", ".git/HEAD", "history.jsonl",
                "compat_tests/node/node_modules/kafkajs/package.json", "kafkacompat/__pycache__/cli.cpython-311.pyc",
                "protocol/_record_scan.cpython-311-x86_64-linux-gnu.so", "kafkacompat.egg-info/PKG-INFO"]


def _stages() -> list[list[dict[str, Any]]]:
    stages: list[list[dict[str, Any]]] = []
    for step in DockerfileParser(path=str(REPO / "Dockerfile")).structure:
        if step["instruction"] == "FROM":
            stages.append([])
        if stages and step["instruction"] != "COMMENT":
            stages[-1].append(step)
    return stages


def _values(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [step["value"] for step in stage if step["instruction"] == instruction]


def _envs(stage: list[dict[str, Any]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in _values(stage, "ENV"):
        env.update(word.split("=", 1) for word in shlex.split(value))
    return env


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides; `!` re-includes."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            ignored = not negate
    return ignored


def _dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_a_builder_stage_compiles_and_the_runtime_stage_has_no_compiler() -> None:
    builder, runtime = _stages()
    assert re.fullmatch(r"python:3\.\d+-slim AS builder", _values(builder, "FROM")[0])
    assert any("gcc" in run for run in _values(builder, "RUN"))
    assert any(re.search(r"\bpip wheel\b.*--wheel-dir /wheels", run) for run in _values(builder, "RUN"))
    assert re.fullmatch(r"python:3\.\d+-slim", _values(runtime, "FROM")[0])
    [install] = _values(runtime, "RUN")
    assert "from=builder" in install and "--no-index" in install
    assert not re.search(r"apt-get|gcc|cc\b|build-essential", install)  # nothing to compile with
    [user] = _values(runtime, "USER")
    assert user not in ("root", "0")
    assert _values(runtime, "ENTRYPOINT") == ['["kafkacompat", "serve"]']


def test_ports_settings_and_health_check_are_the_brokers(tmp_path: Path) -> None:
    _, runtime = _stages()
    env = _envs(runtime)
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "kafkacompat"), "serve", "--print-config"], cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}, **env},
        capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "warning" not in shown.stderr, shown.stderr  # every ENV is a setting
    config = tomllib.loads(shown.stdout)
    assert (config["port"], config["http_port"], config["data_dir"]) == (9092, 9644, "/data")
    assert set(" ".join(_values(runtime, "EXPOSE")).split()) == {str(config["port"]), str(config["http_port"])}
    assert _values(runtime, "VOLUME") == [config["data_dir"]]
    [health] = _values(runtime, "HEALTHCHECK")
    command = json.loads(health.split(" CMD ", 1)[1])
    assert command[0] == "python" and "/health/live" in command[-1] and "KAFKACOMPAT_HTTP_PORT" in command[-1]


def test_the_build_context_is_only_what_the_dockerfile_copies() -> None:
    patterns = _dockerignore()
    kept = [path for path in LEFT_BY_DOCS if not _ignored(path, patterns)]
    assert not kept, f".dockerignore lets these into the build context: {kept}"
    builder, _ = _stages()
    copied = [src for value in _values(builder, "COPY") for src in value.split()[:-1]]
    assert {"pyproject.toml", "README.md", "protocol", "storage", "kafkacompat"} <= set(copied)
    missing = [src for src in copied if _ignored(src, patterns) or not (REPO / src).exists()]
    assert not missing, f"the Dockerfile copies what the build context lacks: {missing}"
    assert not _ignored("protocol/_record_scan.c", patterns)
    assert not _ignored("storage/_frame_walk.c", patterns)
    assert not _ignored("kafkacompat/http/console/templates/base.html", patterns)


def _build_context(tmp_path: Path) -> Path:
    """The files the builder stage copies, as the Docker daemon would receive them."""
    builder, _ = _stages()
    patterns = _dockerignore()
    context = tmp_path / "context"
    context.mkdir()
    for value in _values(builder, "COPY"):
        *sources, _dest = value.split()
        for src in sources:
            if (REPO / src).is_dir():
                shutil.copytree(REPO / src, context / src, symlinks=True,
                                ignore=lambda folder, names: [n for n in names if _ignored(
                                    str((Path(folder) / n).relative_to(REPO)), patterns)])
            else:
                shutil.copy(REPO / src, context / src)
    return context


def _wheel_command(wheels: Path) -> list[str]:
    """The builder's `pip wheel` step, with this interpreter; dependencies come from the test's environment."""
    builder, _ = _stages()
    [run] = [run for run in _values(builder, "RUN") if "pip wheel" in run]
    words = shlex.split(run.replace("/wheels", str(wheels)))
    assert words[:2] == ["pip", "wheel"]
    # this environment's build backend when it is new enough (offline, quicker); else pip fetches one, as Docker's does
    local = ["--no-build-isolation"] if _setuptools_version() >= (74, 1) else []
    return [sys.executable, "-m", *words, "--no-deps", *local, "--quiet"]


def _setuptools_version() -> tuple[int, ...]:
    try:
        import setuptools
    except ImportError:  # Python 3.12's venv has none
        return ()
    return tuple(int(part) for part in re.findall(r"\d+", setuptools.__version__)[:2])


def _start(python: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([str(python.parent / "kafkacompat"), "serve"], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        http = re.search(r"HTTP server .* at http://127\.0\.0\.1:(\d+)", line)
        if http:
            return proc, http.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"the installed wheel's broker did not start its HTTP server: {proc.stderr.read()}")


def test_the_builders_wheel_installs_and_answers_the_health_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as in the image, no PYTHONPATH: one naming this checkout (the Spark tests set it in this process)
    # would make pip find kafkacompat installed already, and the venv import this checkout's
    monkeypatch.delenv("PYTHONPATH", raising=False)
    context, wheels = _build_context(tmp_path), tmp_path / "wheels"
    built = subprocess.run(_wheel_command(wheels), cwd=context, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("kafkacompat-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.match(r"kafkacompat/protocol/_record_scan\..*\.so$", n) for n in names), "no C record walk"
    assert any(re.match(r"kafkacompat/storage/_frame_walk\..*\.so$", n) for n in names), "no C header walk"
    assert "kafkacompat/storage/api.py" in names and any(n.startswith("kafkacompat/http/console/templates/")
                                                          for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, timeout=300)
    # the dependencies: this environment's (the image gets them from the builder's wheels)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "test-deps.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    where = subprocess.check_output([str(python), "-c", "import kafkacompat.protocol._record_scan as m; print(m.__file__)"],
                                    text=True, cwd=tmp_path).strip()
    assert where.startswith(str(venv)), where  # the wheel's code, not this checkout's

    _, runtime = _stages()
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}
    env = {**base, **_envs(runtime), "KAFKACOMPAT_DATA_DIR": str(tmp_path / "data"), "KAFKACOMPAT_HOST": "127.0.0.1",
           "KAFKACOMPAT_PORT": "0", "KAFKACOMPAT_HTTP_HOST": "127.0.0.1", "KAFKACOMPAT_HTTP_PORT": "0"}
    broker, http_port = _start(python, env)
    try:
        [health] = _values(runtime, "HEALTHCHECK")
        command = json.loads(health.split(" CMD ", 1)[1])
        checked = subprocess.run([str(python), *command[1:]], env={**env, "KAFKACOMPAT_HTTP_PORT": http_port},
                                 capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0
    broken = subprocess.run([str(python), *command[1:]], env={**env, "KAFKACOMPAT_HTTP_PORT": http_port},
                            capture_output=True, text=True, timeout=30)
    assert broken.returncode != 0  # and the check fails once the broker is gone
