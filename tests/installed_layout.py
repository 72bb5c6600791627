"""The package's Python files laid out as the wheel installs them, for tools that walk files.

The source tree maps protocol/ and storage/ into kafkacompat/ through setuptools' package-dir; import-linter,
grimp and mypy find modules by walking folders, which does not follow that mapping. Tests that run them
read a copy laid out as `pip install` lays it out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAPPED = ("protocol", "storage")  # [tool.setuptools.package-dir]: kafkacompat.protocol, kafkacompat.storage


def lay_out(tree: Path) -> Path:
    """Copy kafkacompat/ with protocol/ and storage/ inside it into `tree`; return `tree`."""
    keep_python = shutil.ignore_patterns("__pycache__", "*.so", "static", "templates", "*.c", "node_modules")
    shutil.copytree(REPO / "kafkacompat", tree / "kafkacompat", ignore=keep_python)
    for folder in MAPPED:
        shutil.copytree(REPO / folder, tree / "kafkacompat" / folder, ignore=keep_python)
    return tree
