"""The matrix file shows every outcome, counts per client and the reason behind each non-pass."""

from .matrix import render


def test_render_counts_outcomes_and_numbers_reasons() -> None:
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
