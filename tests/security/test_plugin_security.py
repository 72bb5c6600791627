"""The pytest plugin's kafka_broker on a secure listener, as a user's own test suite sees it."""

from __future__ import annotations

import os
import subprocess
import sys

USERS_TEST = '''
from confluent_kafka import Consumer, Producer


def test_round_trip(kafka_broker, kafka_topic):
    config = kafka_broker.client_config()
    assert config["security.protocol"] == "SASL_SSL"
    producer = Producer(config)
    producer.produce(kafka_topic, b"paid")
    assert producer.flush(15) == 0
    assert [m.value for m in kafka_broker.consume(kafka_topic)] == [b"paid"]
'''


def test_kafka_security_option_serves_sasl_ssl(tmp_path) -> None:
    (tmp_path / "test_users_code.py").write_text(USERS_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kafkacompat.testing.pytest_plugin", "-p", "no:cacheprovider", "-q",
         "--kafka-security=SASL_SSL", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert "1 passed" in done.stdout, done.stdout + done.stderr
