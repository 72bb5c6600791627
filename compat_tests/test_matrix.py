"""The matrix file shows every outcome, counts per client and the reason behind each non-pass."""

import pathlib
from types import SimpleNamespace

import pytest

from . import matrix
from .matrix import DEFAULT_PATH, HERE, MatrixRecorder, render


def test_render_counts_outcomes_and_numbers_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matrix, "_versions", {})  # versions other tests of the run noted
    monkeypatch.setattr(matrix, "_suites", {})  # and clients' own suites they ran (kafka-python's)
    text = render({
        ("java", "acks[all]"): ("pass", ""),
        ("java", "keys_and_headers"): ("fail", "call: AssertionError"),
        ("kcat", "acks[all]"): ("pass", ""),
        ("kcat", "keys_and_headers"): ("skip", "not applicable: no admin"),
        ("pyspark", "write_with_the_kafka_sink"): ("skip", "not applicable: no admin"),
    })
    lines = text.splitlines()
    assert "| java | ? | 1 | 1 | 0 | 0 |" in lines
    assert "| kcat | ? | 1 | 0 | 1 | 0 |" in lines
    assert "| keys_and_headers | fail [1] | skip [2] | – |" in lines
    assert "| write_with_the_kafka_sink | – | – | skip [2] |" in lines
    assert lines[-2:] == ["1. call: AssertionError", "2. not applicable: no admin"]


def test_cluster_runs_get_a_section_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matrix, "_versions", {})
    monkeypatch.setattr(matrix, "_suites", {})
    text = render({("java", "acks[all]"): ("pass", "")},
                  {("java", "keys_and_headers"): ("fail", "call: AssertionError")})
    in_process, cluster = text.split("## Three brokers as one cluster")
    assert "| acks[all] | pass |" in in_process.splitlines()
    assert "keys_and_headers" not in in_process
    assert "| keys_and_headers | fail [1] |" in cluster.splitlines()
    assert "| java | ? | 0 | 1 | 0 | 0 |" in cluster.splitlines()
    assert "acks[all]" not in cluster


def whole_suite_config(target: pathlib.Path | None, *args: str) -> SimpleNamespace:
    """The parts of pytest's config the recorder reads, as for `pytest compat_tests [--write-compat-matrix]`."""
    return SimpleNamespace(
        getoption=lambda name, default=None: str(target) if target else None,
        option=SimpleNamespace(keyword="", markexpr="", lf=False),
        args=list(args) or [str(HERE)],
        invocation_params=SimpleNamespace(dir=HERE.parent),
        rootpath=HERE.parent,
    )


RESULTS = {("java", "keys_and_headers"): ("fail", "call: AssertionError")}


def test_a_whole_run_leaves_the_tracked_matrix_alone() -> None:
    before = DEFAULT_PATH.read_bytes()
    recorder = MatrixRecorder(whole_suite_config(None))  # type: ignore[arg-type]
    assert recorder.complete
    recorder.results = dict(RESULTS)
    recorder.pytest_sessionfinish(None, 0)  # type: ignore[arg-type]
    assert DEFAULT_PATH.read_bytes() == before


def test_the_option_writes_the_matrix_after_a_whole_run(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "matrix.md"
    recorder = MatrixRecorder(whole_suite_config(target))  # type: ignore[arg-type]
    recorder.results = dict(RESULTS)
    recorder.pytest_sessionfinish(None, 0)  # type: ignore[arg-type]
    assert "| keys_and_headers | fail [1] |" in target.read_text().splitlines()


def test_the_option_writes_nothing_after_a_partial_run(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "matrix.md"
    recorder = MatrixRecorder(whole_suite_config(target, str(HERE / "test_matrix.py")))  # type: ignore[arg-type]
    recorder.results = dict(RESULTS)
    recorder.pytest_sessionfinish(None, 0)  # type: ignore[arg-type]
    assert not target.exists()


def scenario_item(target: str) -> SimpleNamespace:
    """A collected test_keys_and_headers[java-<target>] as the recorder sees it."""
    markers = [SimpleNamespace(name="java")] + ([SimpleNamespace(name="cluster")] if target == "cluster" else [])
    return SimpleNamespace(
        path=HERE / "test_scenarios.py", nodeid=f"test_scenarios.py::test_keys_and_headers[java-{target}]",
        name=f"test_keys_and_headers[java-{target}]", originalname="test_keys_and_headers",
        callspec=SimpleNamespace(params={"client_name": "java", "target": target}),
        iter_markers=lambda: iter(markers),
        get_closest_marker=lambda name: next((m for m in markers if m.name == name), None),
    )


def test_the_recorder_keeps_cluster_runs_apart(tmp_path: pathlib.Path) -> None:
    recorder = MatrixRecorder(whole_suite_config(tmp_path / "matrix.md"))  # type: ignore[arg-type]
    items = [scenario_item("broker"), scenario_item("cluster")]
    recorder.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    for item, passed in zip(items, (True, False)):
        recorder.pytest_runtest_logreport(SimpleNamespace(  # type: ignore[arg-type]
            nodeid=item.nodeid, when="call", skipped=False, passed=passed, failed=not passed,
            head_line="test_keys_and_headers", longrepr=None))
    assert recorder.results == {("java", "keys_and_headers"): ("pass", "")}
    assert recorder.cluster_results == {("java", "keys_and_headers"): ("fail", "call: test_keys_and_headers")}
