"""The fuzzing harness: every kept finding replays cleanly, and short fuzz runs find nothing.

Long runs are documented in docs/hostile-input.md (Fuzzing).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafkacompat.protocol.messages import MalformedRequestError, decode_request, parse_request_header

from kafkacompat.fuzz.network import DEFAULT_CORPUS
from kafkacompat.fuzz.seeds import load_corpus, sample_frames
from kafkacompat.fuzz.targets import decode_frame, fuzz_frames, fuzz_records

CORPUS = Path(__file__).parent / "fuzz_corpus"


def test_every_served_request_version_decodes_through_the_bounds_check() -> None:
    """kio-built samples of all served versions pass: the check refuses only what does not fit."""
    frames = sample_frames()
    assert len(frames) > 150
    for name, frame in frames:
        assert decode_frame(frame) is not None, name


def test_captured_client_frames_decode() -> None:
    captured = list(load_corpus(DEFAULT_CORPUS))
    assert len(captured) > 50
    for name, frame in captured:
        assert decode_frame(frame) is not None, name


@pytest.mark.parametrize("target", ["frames", "records"])
def test_the_kept_corpus_replays_without_a_crash(target: str) -> None:
    fuzz = {"frames": fuzz_frames, "records": fuzz_records}[target]
    found = list(load_corpus(CORPUS / target))
    assert found
    for _name, data in found:
        fuzz(data)  # raises, or kills the process, on a regression


def test_kept_crashes_are_refused_as_malformed() -> None:
    crashes = [(n, d) for n, d in load_corpus(CORPUS / "frames") if n.startswith("crash-")]
    assert crashes
    for name, data in crashes:
        frame = data[4:]
        with pytest.raises(MalformedRequestError):
            decode_request(parse_request_header(frame), frame)


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris is not installed (the fuzz extra)")
@pytest.mark.parametrize("target", ["frames", "records"])
def test_a_short_coverage_guided_run_finds_nothing(target: str, tmp_path: Path) -> None:
    work = tmp_path / "corpus"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat.fuzz", target, str(work), str(CORPUS / target),
         "-max_total_time=12", "-runs=200000", f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=2048"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    findings = sorted(p.name for p in tmp_path.glob("crash-*")) + sorted(p.name for p in tmp_path.glob("oom-*"))
    assert done.returncode == 0 and not findings, (findings, done.stderr[-3000:])


def test_a_short_network_fuzz_run_leaves_the_broker_serving(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat.fuzz.network", "run", "--frames", "400", "--seed", "7",
         "--log", str(tmp_path / "broker.log")],
        capture_output=True, text=True, timeout=150, cwd=Path(__file__).parents[1],
    )
    report = json.loads(done.stdout)
    assert report["sent"] == 400 and report["closed_by_broker"] > 0
    assert report["broker_up"] and report["client_works"] and report["tracebacks"] == 0, report
    assert done.returncode == 0
