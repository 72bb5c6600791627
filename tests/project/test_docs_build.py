"""The docs build as MkDocs builds them, strictly: a broken link or anchor, or a page in docs/ that the
navigation leaves out, fails here and not on a reader's screen. The site must also open offline."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.project.doc_blocks import REPO


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_docs_build_strictly_and_open_offline(tmp_path: Path) -> None:
    done = _build(tmp_path / "site")
    assert done.returncode == 0, done.stderr
    pages = sorted((tmp_path / "site").glob("*.html"))
    assert {"index.html", "architecture.html", "compatibility-matrix.html"} <= {p.name for p in pages}
    # COMPATIBILITY.md stays at the top of the repository and is served as a page, unchanged
    matrix = (tmp_path / "site" / "compatibility-matrix.html").read_text()
    first_heading = next(line for line in (REPO / "COMPATIBILITY.md").read_text().splitlines() if line.startswith("#"))
    assert first_heading.lstrip("# ").split()[0] in matrix
    remote = {m for p in pages for m in re.findall(r'(?:src|href)="(https?://[^"]+\.(?:js|css))"', p.read_text())}
    assert not remote, f"the site fetches scripts or styles from elsewhere: {remote}"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strictness above is real: a copy of the docs with one dead anchor does not build."""
    copy = tmp_path / "repo"
    for part in ("docs", "mkdocs.yml", "COMPATIBILITY.md", "storage/cloud/DESIGN.md"):
        (copy / part).parent.mkdir(parents=True, exist_ok=True)
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, copy / part)
        else:
            shutil.copy(REPO / part, copy / part)
    page = copy / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [streams](streams.md#no-such-section).\n")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=copy, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "no-such-section" in done.stderr


def test_the_readme_is_a_doorway() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 300
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))
    missing = linked - {p.name for p in (REPO / "docs").glob("*.md")}
    assert not missing, f"the README links pages that do not exist: {missing}"


def test_the_readmes_test_example_is_one_the_plugin_tests_run() -> None:
    """tests/testing/test_pytest_plugin.py runs docs/testing.md's examples; the README shows the first."""
    readme = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    examples = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "testing.md").read_text(), re.S)
    assert [b for b in readme if "def test_" in b] == examples[:1]
