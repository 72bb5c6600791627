"""ProgramServer, the long-lived process the Java and kafkajs drivers ask their questions of:
a process that dies or runs over its time is replaced, and the next question is answered."""

from __future__ import annotations

import sys

import pytest

from .drivers import ClientUnavailable
from .drivers.kafkajs import installed, node_server
from .drivers.programs import ProgramServer

# answers `ok BASE64(the words)`; `die` ends the process, `hang` never answers
ECHO = """
import base64, sys
for line in sys.stdin:
    words = line.rstrip("\\n").split("\\t")
    if words[0] == "die":
        sys.exit(3)
    if words[0] == "hang":
        continue
    print("ok", base64.b64encode(" ".join(words).encode()).decode(), flush=True)
"""


@pytest.fixture
def echo():
    server = ProgramServer("echo", lambda: [sys.executable, "-c", ECHO])
    yield server
    server.close()


def test_a_process_that_dies_is_started_again_for_the_next_question(echo: ProgramServer) -> None:
    assert echo.run("say", ["a", "b"], 10).stdout == "say a b"
    ended = echo.run("die", ["now"], 10)
    assert ended.returncode == 1 and "the echo running die ended" in ended.stderr
    assert echo.run("say", ["again"], 10).stdout == "say again"


def test_a_question_over_its_time_stops_the_process(echo: ProgramServer) -> None:
    with pytest.raises(AssertionError, match="echo hang x ran over 0.5s"):
        echo.run("hang", ["x"], 0.5)
    assert echo.run("say", ["after"], 10).stdout == "say after"


def test_the_node_process_answers_a_failed_run_and_goes_on() -> None:
    try:
        installed()
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    failed = node_server().run("nothing-here", ["x"], 30)
    assert failed.returncode == 1 and "unknown program nothing-here" in failed.stderr
    # a question whose program throws gets its stack, and the process still answers the next
    thrown = node_server().run("scenarios", ["no_such_command", "127.0.0.1:1"], 30)
    assert thrown.returncode == 1 and "unknown command no_such_command" in thrown.stderr
