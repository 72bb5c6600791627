"""Collects each compat test's outcome per (client, scenario) and writes COMPATIBILITY.md.

A test run never touches the tracked file by itself. It is regenerated only
on request, by

    python -m compat_tests.matrix --write     # runs the whole compat suite, then writes
    pytest compat_tests --write-compat-matrix[=PATH]

and only when the whole compat suite ran (no -k, -m, deselection or single
files), so a partial run never hides a known gap.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
from collections import Counter

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_PATH = HERE.parent / "COMPATIBILITY.md"

# matrix columns, in order, with the pytest marker that names each
COLUMNS = ("java", "librdkafka", "kcat", "kafka_python", "aiokafka", "kafkajs", "spark_java", "pyspark", "kafka_tools",
           "kafka_connect")
OPTION = "--write-compat-matrix"
_versions: dict[str, str] = {}
# a client's own test suite run against the broker: title -> test id -> (outcome, why)
_suites: dict[str, dict[str, tuple[str, str]]] = {}


def note_version(client: str, version: str) -> None:
    """Record the client version the run really used (shown in the matrix)."""
    if version:
        _versions[client] = version


def note_suite(title: str, outcomes: dict[str, tuple[str, str]]) -> None:
    """Record the outcome of every test of a client's own suite (pass, fail, skip; why for the last two)."""
    _suites[title] = dict(outcomes)


def cell_of(item: pytest.Item) -> tuple[str, str] | None:
    """(client, scenario) of a compat test, or None for other tests."""
    path = pathlib.Path(str(item.path)).resolve()
    if HERE not in path.parents:
        return None
    client = next((m.name for m in item.iter_markers() if m.name in COLUMNS), None)
    if client is None or item.get_closest_marker("workers") is not None:  # --on-workers runs: no cells
        return None
    scenario = getattr(item, "originalname", item.name).removeprefix("test_")
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        extra = [str(v) for k, v in callspec.params.items() if k not in ("client_name", "target")]
        if extra:
            scenario += "[" + ",".join(extra) + "]"
    return client, scenario


def on_cluster(item: pytest.Item) -> bool:
    """Whether the test ran against the three-broker cluster (its own section of the matrix)."""
    return item.get_closest_marker("cluster") is not None


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION, nargs="?", const=str(DEFAULT_PATH), default=None, metavar="PATH",
        help="after a run of the whole compat suite, write its matrix to PATH (default: COMPATIBILITY.md)",
    )


class MatrixRecorder:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cells: dict[str, tuple[str, str]] = {}  # nodeid -> (client, scenario)
        self.results: dict[tuple[str, str], tuple[str, str]] = {}  # cell -> (outcome, note)
        self.cluster_results: dict[tuple[str, str], tuple[str, str]] = {}  # the same, on the cluster
        self.cluster_cells: set[str] = set()  # nodeids of runs against the cluster
        target = config.getoption(OPTION.lstrip("-").replace("-", "_"), default=None)
        self.target = pathlib.Path(target) if target else None
        self.complete = self._whole_suite_requested()

    def _whole_suite_requested(self) -> bool:
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
                if on_cluster(item):
                    self.cluster_cells.add(item.nodeid)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if any(cell_of(item) for item in items):
            self.complete = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cell = self.cells.get(report.nodeid)
        if cell is None:
            return
        results = self.cluster_results if report.nodeid in self.cluster_cells else self.results
        previous = results.get(cell, ("pass", ""))
        if previous[0] in ("fail", "skip", "known gap"):
            return  # the first bad news of a test stands
        if hasattr(report, "wasxfail"):
            results[cell] = ("known gap", report.wasxfail or "")
        elif report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            results[cell] = ("skip", reason.removeprefix("Skipped: "))
        elif report.failed:
            results[cell] = ("fail", f"{report.when}: {report.head_line or ''}")
        elif report.when == "call":
            results[cell] = ("pass", "")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.target is None or not self.results or exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        if not self.complete:
            sys.stderr.write(f"\n{OPTION}: not written, this run was not the whole compat suite\n")
            return
        self.target.write_text(render(self.results, self.cluster_results))
        sys.stderr.write(f"\n{OPTION}: wrote {self.target}\n")


def render(results: dict[tuple[str, str], tuple[str, str]],
           cluster_results: dict[tuple[str, str], tuple[str, str]] | None = None) -> str:
    notes: dict[str, int] = {}
    lines = [
        "# Compatibility matrix",
        "",
        "Written by `python -m compat_tests.matrix --write` (a whole run of compat_tests/): "
        "stock clients against this broker, one test per client and scenario; the column kafka_tools "
        "is Apache Kafka 4.1's own CLI tools run against Kafka 4.1 and kafkacompat alike, compared "
        "(compat_tests/test_differential.py). Do not edit by hand.",
        "",
        "Topic names: a stream topic `/apps/iot/oilpump_metrics:Pressure` is also reachable as its "
        "Kafka-legal alias `apps.iot.oilpump_metrics..Pressure`. kafka-python refuses names outside "
        "`[a-zA-Z0-9._-]` before sending anything, so its users name stream topics by the alias; "
        "the broker lists aliases to kafka-python in all-topics metadata, so `subscribe(pattern=...)` "
        "matches them (`pattern=r\"apps\\.iot\\.oilpump_metrics\\.\\..*\"`).",
        "",
        *_tables(results, notes),
    ]
    if cluster_results:
        lines += ["", "## Three brokers as one cluster", "",
                  "The core scenarios again, against three `kafkacompat serve` processes forming one cluster "
                  "on PostgreSQL and an S3 endpoint (moto), clients bootstrapped from one broker and routed "
                  "by Metadata to partition leaders spread over all three (compat_tests/targets.py). "
                  "Every client library runs them; kcat, librdkafka's command-line client, runs them "
                  "through librdkafka's column (targets.CLUSTER_CLIENTS).", "",
                  *_tables(cluster_results, notes)]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"{number}. {text}" for text, number in notes.items()]
    lines += _render_suites()
    return "\n".join(lines) + "\n"


def _tables(results: dict[tuple[str, str], tuple[str, str]], notes: dict[str, int]) -> list[str]:
    """Counts per client, then one row per scenario; each note gets the next number in `notes`."""
    clients = [c for c in COLUMNS if any(cell[0] == c for cell in results)]
    scenarios = sorted({cell[1] for cell in results})
    lines = ["| client | version | pass | fail | skip | known gap |", "|---|---|---|---|---|---|"]
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
    return lines


def _render_suites() -> list[str]:
    """The clients' own test suites: counts, then every test that did not pass and why."""
    if not _suites:
        return []
    lines = ["", "## Clients' own test suites", "",
             "Each suite as its client's source distribution ships it, its tests unchanged, its broker "
             "fixtures pointed at kafkacompat brokers (compat_tests/test_kafka_python_suite.py).", "",
             "| suite | pass | fail | skip |", "|---|---|---|---|"]
    for title, outcomes in _suites.items():
        counts = Counter(outcome for outcome, _ in outcomes.values())
        lines.append(f"| {title} | {counts['pass']} | {counts['fail']} | {counts['skip']} |")
    for title, outcomes in _suites.items():
        others = sorted((test, outcome, why) for test, (outcome, why) in outcomes.items() if outcome != "pass")
        if others:
            lines += ["", f"{title}, the tests that do not pass:", "", "| test | outcome | why |", "|---|---|---|"]
            lines += [f"| {test} | {outcome} | {why} |" for test, outcome, why in others]
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m compat_tests.matrix --write`: run the whole compat suite and rewrite the matrix."""
    parser = argparse.ArgumentParser(prog="python -m compat_tests.matrix", description=main.__doc__)
    parser.add_argument("--write", action="store_true", help="run compat_tests/ and rewrite COMPATIBILITY.md")
    parser.add_argument("--output", default=str(DEFAULT_PATH), help="where to write (default: %(default)s)")
    args, pytest_args = parser.parse_known_args(argv)
    if not args.write:
        parser.print_help()
        return 2
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE),
               f"{OPTION}={args.output}", *pytest_args]
    return subprocess.run(command, cwd=HERE.parent, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
