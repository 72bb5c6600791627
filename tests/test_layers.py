"""The package's layers hold: no symlinks, every package shipped, the import contracts kept, no import circles.

Why: a newcomer finds a module by its layer (entry points, the HTTP and Kafka ports, handlers, the composition
root, services, the catalog, then protocol/ and storage/), and a layer that imports up, or a circle closed by a
lazy or TYPE_CHECKING import, is where changes ripple unseen. import-linter (the maintained tool for this)
checks the contracts written in pyproject.toml; grimp, the import graph it is built on, finds the circles,
counting imports inside functions and under TYPE_CHECKING as imports, since that is how circles hide.

Both read the package laid out as the wheel installs it (protocol/ and storage/ inside kafkacompat/): the
source tree maps them through package-dir, which the tools' file walk does not follow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.installed_layout import lay_out

REPO = Path(__file__).resolve().parents[1]
MAPPED = {"protocol": "kafkacompat.protocol", "storage": "kafkacompat.storage"}

# Circles allowed, each named with why (none today). Any other circle fails.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}

CIRCLES_SCRIPT = """
import json, sys
import grimp

graph = grimp.build_graph("kafkacompat", cache_dir=None)  # imports under TYPE_CHECKING and in functions count
index, low, stack, on_stack, circles = {}, {}, [], set(), []
sys.setrecursionlimit(100_000)

def visit(module):
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for imported in graph.find_modules_directly_imported_by(module):
        if imported not in index:
            visit(imported)
            low[module] = min(low[module], low[imported])
        elif imported in on_stack:
            low[module] = min(low[module], index[imported])
    if low[module] == index[module]:
        circle = []
        while not circle or circle[-1] != module:
            circle.append(stack.pop())
            on_stack.discard(circle[-1])
        if len(circle) > 1:
            circles.append(sorted(circle))

for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps({"circles": circles, "storage_read": "kafkacompat.storage.disk.store" in graph.modules}))
"""


def _python_packages(root: Path) -> set[str]:
    return {str(d.relative_to(REPO)).replace("/", ".") for d in [root, *root.rglob("*")]
            if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))}


def test_the_repository_has_no_symlinks() -> None:
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    links = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line.startswith("120000 ")]
    assert links == [], "symlinks break checkouts without them and hide the layers from import tools"


def test_every_package_is_listed() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {name: folder for folder, name in MAPPED.items()}
    found = _python_packages(REPO / "kafkacompat")
    for folder, name in MAPPED.items():
        found |= {name + package[len(folder):] for package in _python_packages(REPO / folder)}
    missing = sorted(found - set(setuptools["packages"]))
    assert missing == [], "add these to [tool.setuptools] packages in pyproject.toml, or the wheel lacks them"
    assert sorted(set(setuptools["packages"]) - found) == [], "listed packages that no longer exist"


@pytest.fixture(scope="module")
def installed_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's Python files laid out as the wheel installs them."""
    return lay_out(tmp_path_factory.mktemp("installed"))


def _run_in(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(tree)  # the copy's kafkacompat before the editable install's
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold(installed_tree: Path) -> None:
    done = _run_in(installed_tree, "-c", "import sys; from importlinter.cli import lint_imports; "
                   f"sys.exit(lint_imports(config_filename={str(REPO / 'pyproject.toml')!r}, no_cache=True, no_logo=True))")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_import_circles(installed_tree: Path) -> None:
    done = _run_in(installed_tree, "-c", CIRCLES_SCRIPT)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["storage_read"], "the graph holds the mapped layers"
    circles = [frozenset(circle) for circle in found["circles"]]
    unknown = [sorted(circle) for circle in circles if circle not in KNOWN_CIRCLES]
    assert unknown == [], "modules that import each other, directly or around a circle"
    gone = [label for circle, label in KNOWN_CIRCLES.items() if circle not in circles]
    assert gone == [], "these circles are broken now: take them out of KNOWN_CIRCLES (as import-linter's " \
                       "ignore_imports fail once they match nothing)"
