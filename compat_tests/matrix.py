"""Collects each compat test's outcome per (client, scenario) and writes COMPATIBILITY.md.

The file is rewritten only when the whole compat suite ran (no -k, -m,
deselection or single files), so a partial run never hides a known gap;
KAFKACOMPAT_WRITE_MATRIX=1 forces writing, KAFKACOMPAT_MATRIX=PATH moves it.
"""

from __future__ import annotations

import os
import pathlib
from collections import Counter

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_PATH = HERE.parent / "COMPATIBILITY.md"

# matrix columns, in order, with the pytest marker that names each
COLUMNS = ("java", "librdkafka", "kcat", "kafka_python", "aiokafka", "kafkajs", "spark_java", "pyspark",
           "kafka_connect")
_versions: dict[str, str] = {}


def note_version(client: str, version: str) -> None:
    """Record the client version the run really used (shown in the matrix)."""
    if version:
        _versions[client] = version


def cell_of(item: pytest.Item) -> tuple[str, str] | None:
    """(client, scenario) of a compat test, or None for other tests."""
    path = pathlib.Path(str(item.path)).resolve()
    if HERE not in path.parents:
        return None
    client = next((m.name for m in item.iter_markers() if m.name in COLUMNS), None)
    if client is None:
        return None
    scenario = getattr(item, "originalname", item.name).removeprefix("test_")
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        extra = [str(v) for k, v in callspec.params.items() if k != "client_name"]
        if extra:
            scenario += "[" + ",".join(extra) + "]"
    return client, scenario


class MatrixRecorder:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cells: dict[str, tuple[str, str]] = {}  # nodeid -> (client, scenario)
        self.results: dict[tuple[str, str], tuple[str, str]] = {}  # cell -> (outcome, note)
        self.complete = self._whole_suite_requested()

    def _whole_suite_requested(self) -> bool:
        if os.environ.get("KAFKACOMPAT_WRITE_MATRIX") == "1":
            return True
        opt = self.config.option
        if getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or getattr(opt, "lf", False):
            return False
        args = self.config.args or [str(self.config.rootpath)]
        for arg in args:
            if "::" in arg:
                continue
            target = (self.config.invocation_params.dir / arg).resolve()
            if target == HERE or target in HERE.parents:
                return True
        return False

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            cell = cell_of(item)
            if cell is not None:
                self.cells[item.nodeid] = cell

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if any(cell_of(item) for item in items):
            self.complete = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cell = self.cells.get(report.nodeid)
        if cell is None:
            return
        previous = self.results.get(cell, ("pass", ""))
        if previous[0] in ("fail", "skip", "known gap"):
            return  # the first bad news of a test stands
        if hasattr(report, "wasxfail"):
            self.results[cell] = ("known gap", report.wasxfail or "")
        elif report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.results[cell] = ("skip", reason.removeprefix("Skipped: "))
        elif report.failed:
            self.results[cell] = ("fail", f"{report.when}: {report.head_line or ''}")
        elif report.when == "call":
            self.results[cell] = ("pass", "")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.results or not self.complete or exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        path = pathlib.Path(os.environ.get("KAFKACOMPAT_MATRIX", DEFAULT_PATH))
        path.write_text(render(self.results))


def render(results: dict[tuple[str, str], tuple[str, str]]) -> str:
    clients = [c for c in COLUMNS if any(cell[0] == c for cell in results)]
    scenarios = sorted({cell[1] for cell in results})
    notes: dict[str, int] = {}
    lines = [
        "# Compatibility matrix",
        "",
        "Written by the test run (`bash tests/run.sh`, hook in `compat_tests/matrix.py`): "
        "stock clients against this broker, one test per client and scenario. Do not edit by hand.",
        "",
        "| client | version | pass | fail | skip | known gap |",
        "|---|---|---|---|---|---|",
    ]
    for client in clients:
        counts = Counter(outcome for (c, _), (outcome, _) in results.items() if c == client)
        lines.append(
            f"| {client} | {_versions.get(client, '?')} | {counts['pass']} | {counts['fail']} "
            f"| {counts['skip']} | {counts['known gap']} |"
        )
    lines += ["", "| scenario | " + " | ".join(clients) + " |", "|---" * (len(clients) + 1) + "|"]
    for scenario in scenarios:
        row = []
        for client in clients:
            outcome, note = results.get((client, scenario), ("", ""))
            if note:
                number = notes.setdefault(note.strip().splitlines()[0][:300], len(notes) + 1)
                outcome += f" [{number}]"
            row.append(outcome or "–")
        lines.append(f"| {scenario} | " + " | ".join(row) + " |")
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"{number}. {text}" for text, number in notes.items()]
    return "\n".join(lines) + "\n"
