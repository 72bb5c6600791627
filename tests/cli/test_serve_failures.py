"""`kafkacompat serve` that cannot start: one line naming cause and fix, a documented status, the store untouched."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from kafkacompat.testing import Broker

from .conftest import assert_one_line_error, kafkacompat

EXIT_CONFIG, EXIT_LISTEN, EXIT_DATA_DIR = 2, 3, 4  # docs/configuration.md, "serve exit codes"


def stopped_store(tmp_path: Path) -> Path:
    """A data dir a broker used and stopped cleanly: it holds the clean-shutdown marker."""
    data = tmp_path / "data"
    with Broker(data_dir=str(data)) as broker:
        broker.produce("orders", b"paid")
    assert (data / ".clean").exists()
    return data


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def busy_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_address_in_use_leaves_the_store_and_its_clean_marker_alone(tmp_path: Path, busy_port: int) -> None:
    data = stopped_store(tmp_path)
    before = files_of(data)
    done = kafkacompat("serve", "--data-dir", str(data), "--host", "127.0.0.1", "--port", str(busy_port))
    assert_one_line_error(done, EXIT_LISTEN, f"cannot listen on 127.0.0.1:{busy_port}", "already in use",
                          "choose another --port")
    assert files_of(data) == before, "a broker that did not start must not touch the store"
    # so the next start is a clean one: no recovery scan, no warning
    with Broker(data_dir=str(data)) as broker:
        assert broker.server.store.clean
        assert [m.value for m in broker.consume("orders")] == [b"paid"]


def test_debug_shows_the_traceback_before_the_line(tmp_path: Path, busy_port: int) -> None:
    done = kafkacompat("serve", "--data-dir", str(tmp_path / "d"), "--host", "127.0.0.1", "--port", str(busy_port),
                       "--log-level", "DEBUG")
    assert done.returncode == EXIT_LISTEN
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"kafkacompat: cannot listen on 127.0.0.1:{busy_port}")


def test_store_locked_by_a_running_broker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data_dir=str(data)) as running:
        done = kafkacompat("serve", "--data-dir", str(data), "--host", "127.0.0.1", "--port", "0")
        assert_one_line_error(done, EXIT_DATA_DIR, f"data dir {data} is in use by another broker",
                              "choose another --data-dir")
        assert running.produce("orders", b"still served").offset == 0


def _without_root_powers() -> list[str]:
    """As root, drop the capability that ignores file modes (so a read-only directory refuses root too)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a directory unwritable")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def test_permission_denied_on_the_data_dir(tmp_path: Path) -> None:
    parent = tmp_path / "readonly"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        done = kafkacompat("serve", "--data-dir", str(parent / "data"), "--host", "127.0.0.1", "--port", "0",
                           prefix=_without_root_powers())
    finally:
        parent.chmod(0o755)
    assert_one_line_error(done, EXIT_DATA_DIR, "Permission denied", str(parent / "data"),
                          "give this user write access", "choose another --data-dir")
    assert list(parent.iterdir()) == []


BAD_SETTINGS = {
    "log level": (["--log-level", "LOUD"], {}, None, "log_level must be one of DEBUG, INFO, WARNING, ERROR"),
    "port not a number": (["--port", "ninety"], {}, None, "argument --port: invalid int value: 'ninety'"),
    "port too large": (["--port", "70000"], {}, None, "port must be a TCP port (at most 65535), got 70000"),
    "negative port": (["--port=-1"], {}, None, "port must be at least 0, got -1"),
    "port in the environment": ([], {"KAFKACOMPAT_PORT": "ninety"}, None, "port must be an integer, got 'ninety'"),
    "missing config file": (["--config", "{tmp}/nope.toml"], {}, None, "config file {tmp}/nope.toml does not exist"),
    "config file not TOML": (["--config", "{file}"], {}, "port = \n", "is not valid TOML"),
    "misspelt setting in file": (["--config", "{file}"], {}, "prot = 9093\n",
                                 "unknown setting 'prot' in {file} (did you mean 'port'?)"),
    "wrong type in file": (["--config", "{file}"], {}, "port = 9.5\n", "port must be int, got 9.5"),
    "list setting as a number": (["--config", "{file}"], {}, "volumes = 3\n", "volumes must be a list of strings"),
    "bad bool in environment": ([], {"KAFKACOMPAT_AUTO_CREATE_TOPICS": "maybe"}, None,
                                "auto_create_topics must be true or false, got 'maybe'"),
    "zero max connections": (["--max-connections", "0"], {}, None, "max_connections must be at least 1, got 0"),
    "default stream not a path": (["--default-stream", "plain"], {}, None,
                                  "default_stream: stream path 'plain' must be absolute"),
    "store url no engine serves": (["--data-dir", "s3://bucket/kafka"], {}, None,
                                   "data_dir: unsupported store url 's3://bucket/kafka'"),
    "unknown http login": (["--http-authentication", "kerberos"], {}, None,
                           "http_authentication must be one of none, basic, mtls, oauthbearer, got 'kerberos'"),
    "oauthbearer without a jwks": (["--sasl-enabled-mechanism", "OAUTHBEARER"], {}, None,
                                   "OAUTHBEARER (sasl_enabled_mechanisms or http_authentication) needs "
                                   "sasl_oauthbearer_jwks_endpoint_url"),
    "http mtls without https": (["--http-authentication", "mtls"], {}, None,
                                "http_authentication mtls needs http_tls and ssl_ca_location"),
    "missing replication client config": (["--replication-client-config", "{tmp}/nope.properties"], {}, None,
                                          "replication_client_config: cannot read the file {tmp}/nope.properties"),
    "JKS in replication client config": (["--replication-client-config", "{file}"], {},
                                         "security.protocol=SSL\nssl.truststore.type=JKS\n",
                                         "replication_client_config: ssl.truststore.type=JKS: only PEM files"),
}


@pytest.mark.parametrize("args, env, content, message", BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_bad_settings_are_one_line_and_status_2(tmp_path: Path, args: list[str], env: dict[str, str],
                                                content: str | None, message: str) -> None:
    config = tmp_path / "broker.toml"
    if content is not None:
        config.write_text(content)
    fill = {"tmp": str(tmp_path), "file": str(config)}
    data = tmp_path / "data"
    done = kafkacompat("serve", "--data-dir", str(data), *[a.format(**fill) for a in args], env=env)
    assert_one_line_error(done, EXIT_CONFIG, message.format(**fill))
    assert not data.exists(), "nothing is created for a broker with bad settings"
