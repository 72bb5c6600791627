"""Listeners as Kafka names them, from the config file, the environment and flags."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from kafkacompat.config import ConfigError, load_config
from kafkacompat.security.listeners import parse_listeners
from kafkacompat.testing import Broker
from kafkacompat.testing.ports import free_port


def test_listeners_from_file_environment_and_flags(tmp_path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('listeners = ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://:9094"]\n'
                    'listener_security_protocol_map = ["INTERNAL:SASL_PLAINTEXT"]\n'
                    'advertised_listeners = ["INTERNAL://broker1.internal:19094"]\n')
    listeners = parse_listeners(load_config(str(path), environ={}))
    assert [(listener.name, listener.security_protocol, listener.host, listener.port) for listener in listeners] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092), ("INTERNAL", "SASL_PLAINTEXT", "0.0.0.0", 9094)]
    assert listeners[1].advertised(9094) == ("broker1.internal", 19094)
    env = load_config(environ={"KAFKACOMPAT_LISTENERS": "SASL_PLAINTEXT://127.0.0.1:9093,PLAINTEXT://[::1]:9092"})
    assert [str(listener) for listener in parse_listeners(env)] == ["SASL_PLAINTEXT://127.0.0.1:9093", "PLAINTEXT://[::1]:9092"]
    default = parse_listeners(load_config(environ={}, overrides={"host": "127.0.0.1", "port": 9300}))
    assert [str(listener) for listener in default] == ["PLAINTEXT://127.0.0.1:9300"]  # --host/--port without listeners


@pytest.mark.parametrize("settings,message", [
    ({"listeners": ["PLAINTEXT:/x:1"]}, "is not NAME://HOST:PORT"),
    ({"listeners": ["CUSTOM://:1"]}, "no security protocol for listener CUSTOM"),
    ({"listeners": ["PLAINTEXT://:1", "PLAINTEXT://:2"]}, "appears twice"),
    ({"listeners": ["SSL://:1"]}, "needs ssl_certificate_location and ssl_key_location"),
    ({"listeners": ["PLAINTEXT://:1"], "advertised_listeners": ["SSL://h:1"]}, "SSL is not in listeners"),
    ({"ssl_client_auth": "maybe"}, "ssl_client_auth must be one of none, requested, required"),
    ({"sasl_enabled_mechanisms": ["GSSAPI"]}, "GSSAPI not supported"),
    ({"ssl_principal_mapping_rules": "RULE:broken"}, "ssl_principal_mapping_rules: cannot parse"),
])
def test_bad_listener_settings_are_named(settings, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ={}, overrides=settings)


def test_metadata_answers_with_the_listener_the_client_came_in_on() -> None:
    with Broker(listeners=["PLAINTEXT://127.0.0.1:0", "OTHER://127.0.0.1:0"],
                listener_security_protocol_map=["OTHER:PLAINTEXT"]) as broker:
        for name in ("PLAINTEXT", "OTHER"):
            port = broker.server.listener_port(name)
            metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
            assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", port)]
        assert broker.server.listener_port("PLAINTEXT") != broker.server.listener_port("OTHER")


def test_advertised_listener_is_what_clients_are_told() -> None:
    with Broker(listeners=["PLAINTEXT://127.0.0.1:0", "EXTERNAL://127.0.0.1:0"],
                listener_security_protocol_map=["EXTERNAL:PLAINTEXT"],
                advertised_listeners=["EXTERNAL://kafka.example.com:443"]) as broker:
        from tests.wire import Wire, request_class

        with Wire(f"127.0.0.1:{broker.server.listener_port('EXTERNAL')}") as wire:
            brokers = wire.request(3, 1, request_class(3, 1)(topics=())).brokers
            assert [(b.host, b.port) for b in brokers] == [("kafka.example.com", 443)]
            coordinator = wire.request(10, 1, request_class(10, 1)(key="g", key_type=0))
            assert (coordinator.host, coordinator.port) == ("kafka.example.com", 443)


def test_serve_with_repeated_listener_flags(tmp_path) -> None:
    plain, sasl = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "d"),
         "--listener", f"PLAINTEXT://127.0.0.1:{plain}", "--listener", f"SASL_PLAINTEXT://127.0.0.1:{sasl}"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if sum("kafkacompat listening on" in item for item in seen) == 2:
                break
        assert any(f"SASL_PLAINTEXT://127.0.0.1:{sasl} (SASL_PLAINTEXT" in item for item in seen), seen
        assert any(f"PLAINTEXT://127.0.0.1:{plain} (PLAINTEXT" in item for item in seen), seen
        from tests.wire import Wire, request_class

        with Wire(f"127.0.0.1:{plain}") as wire:  # served: the broker is past start and handles SIGTERM
            assert wire.request(18, 0, request_class(18, 0)()).api_keys
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_unusable_certificate_is_one_line_and_exit_2(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "d"), "--listener",
         "SSL://127.0.0.1:0", "--ssl-certificate-location", str(tmp_path / "missing.pem"),
         "--ssl-key-location", str(tmp_path / "missing.key")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"kafkacompat: cannot load ssl_certificate_location {tmp_path}/missing.pem with "
                           f"ssl_key_location {tmp_path}/missing.key: No such file or directory\n")
    assert not (tmp_path / "d").exists()  # nothing touched
