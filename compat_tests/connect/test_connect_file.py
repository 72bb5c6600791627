"""FileStream source and sink through a topic on Connect distributed, driven by its REST API."""

from __future__ import annotations

import time
import urllib.error

import pytest

from .connect_kit import ConnectWorker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.kafka_connect]


def lines_of(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def append_lines(path: str, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


@pytest.fixture
def files(worker: ConnectWorker, tmp_path) -> tuple[str, str, str]:
    """(source file, sink file, topic) wired by a FileStreamSource and a FileStreamSink."""
    source, sink = str(tmp_path / "in.txt"), str(tmp_path / "out.txt")
    topic = f"lines-{tmp_path.name[-8:]}".replace("_", "-")
    open(source, "w").close()
    worker.create(f"src-{topic}", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                   "tasks.max": "1", "file": source, "topic": topic})
    worker.create(f"sink-{topic}", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                    "tasks.max": "1", "file": sink, "topics": topic})
    worker.wait_state(f"src-{topic}", "RUNNING")
    worker.wait_state(f"sink-{topic}", "RUNNING")
    yield source, sink, topic
    for name in (f"src-{topic}", f"sink-{topic}"):
        try:
            worker.request("DELETE", f"/connectors/{name}")
        except urllib.error.HTTPError:
            pass


def test_filestream_source_to_topic_to_sink(worker, files, connect_broker):
    source, sink, topic = files
    sent = [f"line {i}" for i in range(50)]
    append_lines(source, sent)
    wait_for("every line in the sink file", lambda: lines_of(sink) == sent, 60, worker.log_tail)
    stored = connect_broker.consume(topic, count=50)
    assert [m.value for m in stored] == [f'"{line}"'.encode() for line in sent]  # JsonConverter strings


def test_rest_api_create_pause_resume_delete(worker, files):
    source, sink, topic = files
    append_lines(source, ["before pause"])
    wait_for("the first line", lambda: lines_of(sink) == ["before pause"], 60, worker.log_tail)
    assert {c for c in worker.request("GET", "/connectors")} >= {f"src-{topic}", f"sink-{topic}"}

    worker.request("PUT", f"/connectors/src-{topic}/pause")
    worker.wait_state(f"src-{topic}", "PAUSED")
    append_lines(source, ["while paused"])
    # a paused source reads nothing: for three seconds (many of its 1 s polls) the sink,
    # still running, gets no new line
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert lines_of(sink) == ["before pause"]
        time.sleep(0.2)

    worker.request("PUT", f"/connectors/src-{topic}/resume")
    worker.wait_state(f"src-{topic}", "RUNNING")
    wait_for("the line written while paused", lambda: lines_of(sink) == ["before pause", "while paused"], 60,
             worker.log_tail)

    worker.request("DELETE", f"/connectors/src-{topic}")
    wait_for("the connector to be gone", lambda: worker.state(f"src-{topic}") is None, 30, worker.log_tail)
    assert f"src-{topic}" not in worker.request("GET", "/connectors")
    append_lines(source, ["after delete"])
    with pytest.raises(urllib.error.HTTPError) as err:
        worker.request("GET", f"/connectors/src-{topic}")
    assert err.value.code == 404


def test_worker_restart_keeps_source_offsets(worker, files, connect_broker):
    source, sink, topic = files
    append_lines(source, [f"first {i}" for i in range(20)])
    wait_for("the first lines", lambda: len(lines_of(sink)) == 20, 60, worker.log_tail)
    worker.stop()
    # the offsets live in the worker's compacted offsets topic; let the cleaner have a go at it
    connect_broker.call(connect_broker.server.store.clean_logs())
    append_lines(source, [f"second {i}" for i in range(5)])
    worker.start()
    worker.wait_state(f"src-{topic}", "RUNNING", timeout=90)
    expected = [f"first {i}" for i in range(20)] + [f"second {i}" for i in range(5)]
    wait_for("the new lines", lambda: len(lines_of(sink)) >= 25, 90, worker.log_tail)
    assert lines_of(sink) == expected  # nothing read twice
    assert len(connect_broker.consume(topic, count=25)) == 25
