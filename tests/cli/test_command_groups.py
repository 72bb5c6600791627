"""The command line is one package: every command group in kafkacompat/cli/ is reachable, by every entry point.

A group module registers its commands with add_parsers(subparsers) and is
named in COMMAND_GROUPS; one written but not named would be a command no
user can run. The console script, `python -m kafkacompat` and
`python -m kafkacompat.cli` are the same command.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import kafkacompat.cli as cli

from .conftest import REPO


def test_every_group_module_is_registered() -> None:
    modules = [importlib.import_module(f"kafkacompat.cli.{m.name}") for m in pkgutil.iter_modules(cli.__path__)
               if m.name != "__main__"]
    groups = {m.__name__ for m in modules if hasattr(m, "add_parsers")}
    assert groups == {m.__name__ for m in cli.COMMAND_GROUPS}


def test_every_entry_point_is_the_same_command() -> None:
    script = Path(sys.executable).with_name("kafkacompat")  # the [project.scripts] entry point, when installed
    commands = [[sys.executable, "-m", "kafkacompat"], [sys.executable, "-m", "kafkacompat.cli"]]
    commands += [[str(script)]] if script.exists() else []
    helps = [subprocess.run([*c, "--help"], capture_output=True, text=True, timeout=60, cwd=REPO) for c in commands]
    assert all(h.returncode == 0 and h.stderr == "" for h in helps), helps
    assert helps[0].stdout.startswith("usage: kafkacompat [-h] [--version] COMMAND")
    assert all(h.stdout == helps[0].stdout for h in helps)
