"""The code blocks of README.md and docs/*.md, with the marker that says who runs each shell block.

A shell block (```sh, ```bash, ```shell, ```console, or an untagged block that reads as commands) carries,
on the nearest non-blank line above its fence, one of:

    <!-- run by: tests/project/test_docs_commands.py::test_the_readme_tour -->
    <!-- not run: why (needs PostgreSQL and S3, starts a broker for good, ...) -->

`run by` names a test that reads this block and runs its commands; `not run` says why nothing does.
tests/project/test_docs_commands.py holds every page to that.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"sh", "bash", "shell", "console", "zsh"}
MARKER = re.compile(r"^<!--\s*(run by|not run):\s*(.*?)\s*-->$")
# an untagged block is taken for commands when a line is a prompt or starts like a command
COMMAND_START = re.compile(r"^(\$ |kafkacompat |python3? -m |pip |docker |curl |kcat |export )")


@dataclasses.dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str | None  # "run by", "not run" or None
    note: str  # the test named by "run by", or the reason of "not run"

    @property
    def is_shell(self) -> bool:
        if self.lang in SHELL_LANGS:
            return True
        return self.lang == "" and any(COMMAND_START.match(line) for line in self.text.splitlines())

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+)\s*([\w-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, lang = fence.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        body = "\n".join(line[len(indent):] for line in lines[i + 1:end])
        marker, note = _marker_above(lines, i)
        found.append(Block(path, i + 1, lang, body + "\n", marker, note))
        i = end + 1
    return found


def _marker_above(lines: list[str], fence: int) -> tuple[str | None, str]:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = MARKER.match(lines[j].strip()) if j >= 0 else None
    return (match.group(1), match.group(2)) if match else (None, "")


def shell_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path) if b.is_shell]


def run_by(test: str) -> list[Block]:
    """The shell blocks whose marker names this test (`tests/...py::test_name`), in page order."""
    return [b for b in shell_blocks() if b.marker == "run by" and b.note == test]
