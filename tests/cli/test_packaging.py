"""The wheel owns one name in site-packages, so a user's own `storage` package and the plugin live together.

The wheel is built from a copy of the tracked files (building writes
build/ and *.egg-info next to the sources), installed without dependencies
into a new virtual environment that borrows the dependencies of the
environment running this test, and used as a user's project would use it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import kafkacompat

REPO = Path(__file__).resolve().parents[2]
USER_TEST = '''
import storage  # the user's own package, next to this file

from confluent_kafka import Producer


def test_the_plugin_and_my_storage_package(kafka_broker, kafka_topic):
    assert storage.MINE is True
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(kafka_topic, b"paid", key=b"order-7")
    assert producer.flush(10) == 0
    [message] = kafka_broker.consume(kafka_topic)
    assert (message.key, message.value, message.offset) == (b"order-7", b"paid", 0)
'''

pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _tracked_copy(destination: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if listed.returncode != 0 or not listed.stdout:
        pytest.skip("not a git checkout: the wheel is built from the tracked files")
    files = listed.stdout
    for name in filter(None, files.decode().split("\0")):
        source, target = REPO / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():  # a tracked file deleted in the worktree is not shipped
            target.write_bytes(source.read_bytes())
    return destination


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _tracked_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "-w", out,
         source, cwd=source)
    [built] = out.glob("kafkacompat-*.whl")
    return built


def test_the_wheel_holds_only_kafkacompat_with_both_layers_inside(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"kafkacompat", f"kafkacompat-{kafkacompat.__version__}.dist-info"}
    tracked = subprocess.run(["git", "ls-files", "kafkacompat", "storage", "protocol"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    modules = [name if name.startswith("kafkacompat/") else f"kafkacompat/{name}"
               for name in tracked if name.endswith(".py")]
    assert any(m.startswith("kafkacompat/storage/") for m in modules), "storage/ holds modules"
    missing = [name for name in modules if name not in names]
    assert missing == [], "every module ships, the two layers under kafkacompat/"
    entry_points = zipfile.ZipFile(wheel).read(f"kafkacompat-{kafkacompat.__version__}.dist-info/entry_points.txt")
    assert b"kafkacompat = kafkacompat.cli:main" in entry_points
    assert b"[pytest11]" in entry_points


def test_installed_next_to_a_user_storage_package_the_plugin_works(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path)
                .stdout.strip())
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet",
         "--disable-pip-version-check", wheel, cwd=tmp_path)
    assert sorted(p.name for p in site.iterdir() if not p.name.startswith(("_", "."))) == [
        "kafkacompat", f"kafkacompat-{kafkacompat.__version__}.dist-info"]
    # the dependencies (kio, crc32c, cramjam, confluent-kafka, pytest) from the environment running this test
    (site / "zz_shared_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    project = tmp_path / "project"
    (project / "storage").mkdir(parents=True)
    (project / "storage" / "__init__.py").write_text("MINE = True\n")
    (project / "test_orders.py").write_text(USER_TEST)
    done = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py", cwd=project)
    assert "1 passed" in done.stdout
    done = _run(venv / "bin" / "kafkacompat", "--version", cwd=project)
    assert done.stdout == f"kafkacompat {kafkacompat.__version__}\n"


def test_the_wheel_ships_the_web_consoles_templates_and_static_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    console = REPO / "kafkacompat" / "http" / "console"
    files = [path.relative_to(REPO).as_posix() for folder in ("templates", "static") for path in (console / folder).iterdir()]
    assert files and [name for name in files if name not in names] == []
