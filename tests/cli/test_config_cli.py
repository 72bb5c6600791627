"""Where settings come from, as a user inspects them: --help, --print-config, --version, stray variables."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import kafkacompat
from kafkacompat.config import SETTINGS, env_name, flag_name

from .conftest import REPO
from .conftest import kafkacompat as run


def test_version_is_the_package_version() -> None:
    done = run("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kafkacompat {kafkacompat.__version__}\n", "")
    with open(REPO / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == kafkacompat.__version__


def test_every_setting_has_help_and_appears_in_serve_help() -> None:
    done = run("serve", "--help")
    assert done.returncode == 0
    for name, field in SETTINGS.items():
        assert field.metadata.get("help"), f"setting {name} has no help text"
        assert flag_name(name) in done.stdout, f"serve --help does not offer {name}"
    assert "KAFKACOMPAT_<NAME>" in done.stdout and "exit status" in done.stdout


def test_print_config_shows_each_value_and_its_source(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('port = 9100\nnode_id = 3\nvolumes = ["/mnt/a"]\n')
    done = run("serve", "--config", str(config), "--port", "9200", "--print-config",
               env={"KAFKACOMPAT_NODE_ID": "4", "KAFKACOMPAT_HOST": "127.0.0.1"})
    assert done.returncode == 0 and done.stderr == ""
    lines = {line.split()[0].lstrip("#"): line for line in done.stdout.splitlines()}
    assert lines["port"].endswith("# flag --port")
    assert lines["node_id"].endswith(f"# environment {env_name('node_id')}")
    assert lines["host"].endswith("# environment KAFKACOMPAT_HOST")
    assert lines["volumes"].endswith(f"# file {config}")
    assert lines["data_dir"].endswith("# default")
    values = tomllib.loads(done.stdout)
    assert (values["port"], values["node_id"], values["host"], values["volumes"]) == (9200, 4, "127.0.0.1", ["/mnt/a"])
    unset = {name for name, field in SETTINGS.items() if field.default is None}  # printed as comments
    assert unset == {"advertised_host", "advertised_port", "http_port", "cluster_id", "cluster_name", "store",
                     "object_store", "cluster_url", "rest_default_stream", "ssl_certificate_location",
                     "ssl_key_location", "ssl_key_password", "ssl_ca_location", "user_groups_file",
                     "replication_client_config", "delegation_token_secret_key",
                     "sasl_oauthbearer_jwks_endpoint_url", "sasl_oauthbearer_expected_issuer", "worker_of"}
    assert set(values) | unset == set(SETTINGS)
    # the output is a config file: fed back, it gives the same settings
    printed = tmp_path / "printed.toml"
    printed.write_text(done.stdout)
    again = run("serve", "--config", str(printed), "--print-config")
    assert tomllib.loads(again.stdout) == values


def test_print_config_never_shows_the_delegation_token_secret() -> None:
    done = run("serve", "--print-config", env={"KAFKACOMPAT_DELEGATION_TOKEN_SECRET_KEY": "hush-hush"})
    assert done.returncode == 0 and "hush-hush" not in done.stdout
    assert "# delegation_token_secret_key set (not shown)" in done.stdout


def test_unknown_kafkacompat_variables_get_a_warning_line() -> None:
    done = run("serve", "--print-config", env={"KAFKACOMPAT_PROT": "9093", "KAFKACOMPAT_BOOTSTRAP_SERVERS": "h:1"})
    assert done.returncode == 0
    assert done.stderr == ("kafkacompat: warning: unknown environment variable KAFKACOMPAT_PROT is ignored; "
                           "did you mean KAFKACOMPAT_PORT?\n")
    assert "port = 9092" in done.stdout


def test_bootstrap_servers_variable_is_every_client_command_s_default() -> None:
    # a closed port: each command names the address it tried, which came from the variable
    env = {"KAFKACOMPAT_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    for args in (["stream", "list"], ["produce", "orders"], ["consume", "orders"], ["group", "list"]):
        done = run(*args, env=env, input="")
        assert done.returncode == 1, args
        assert done.stderr == "kafkacompat: error: cannot reach a broker (127.0.0.1:1: Connection refused)\n", args
    done = run("stream", "list", "--help", env=env)
    assert "KAFKACOMPAT_BOOTSTRAP_SERVERS" in done.stdout


def test_a_closed_pipe_ends_a_command_quietly() -> None:
    """`kafkacompat serve --print-config | head -1`: the reader leaving early is no error."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before the command writes a byte
    try:
        done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--print-config"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
