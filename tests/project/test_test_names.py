"""Test modules outside packages have names of their own: pytest imports such a file under its bare name,
so two of one name stop the whole run at collection (a new tests/chaos/test_recovery.py beside
tests/storage/test_recovery.py did, and only the full run showed it: a subset collects one of them)."""

from __future__ import annotations

from collections import defaultdict

from tests.project.doc_blocks import REPO


def test_test_modules_outside_packages_have_unique_names() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for folder in ("tests", "compat_tests"):
        for path in (REPO / folder).rglob("test_*.py"):
            if "node_modules" not in path.parts and not (path.parent / "__init__.py").exists():
                by_name[path.name].append(str(path.relative_to(REPO)))
    assert by_name, "no test module found: the walk looks in the wrong place"
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each (or make its folder a package): {clashes}"
