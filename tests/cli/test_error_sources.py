"""Errors that say where they come from: the flag, variable or file of a bad setting, user-facing names, no
option taken for another by its prefix, errors as JSON under --json, counts with their plurals right."""

from __future__ import annotations

import json
import uuid

from kafkacompat.testing import Broker

from .conftest import assert_one_line_error, kafkacompat


def test_a_bad_setting_names_its_environment_variable_flag_or_file(tmp_path) -> None:
    done = kafkacompat("serve", env={"KAFKACOMPAT_PORT": "abc"})
    assert_one_line_error(done, 2, "port must be an integer, got 'abc' (environment variable KAFKACOMPAT_PORT)")
    config = tmp_path / "broker.toml"
    config.write_text('log_format = "xml"\n')
    done = kafkacompat("serve", "--config", str(config))
    assert_one_line_error(done, 2, f"log_format must be one of text, json, got 'xml' (config file {config})")
    done = kafkacompat("serve", "--port", "70000")
    assert_one_line_error(done, 2, "at most 65535), got 70000 (flag --port)")


def test_partitionlet_size_below_the_minimum_is_refused_by_its_flag_name() -> None:
    done = kafkacompat("stream", "create", "/x", "--partitionlet-size", "1", "--bootstrap-server", "127.0.0.1:1")
    assert_one_line_error(done, 2, "argument --partitionlet-size: must be at least 4 KiB, not 1")
    assert "partitionlet_bytes" not in done.stderr


def test_an_option_is_never_taken_for_a_longer_one_by_its_prefix() -> None:
    done = kafkacompat("topic", "create", "/s:t", "--partition", "3", "--bootstrap-server", "127.0.0.1:1")
    assert_one_line_error(done, 2, "unrecognized arguments: --partition 3")
    done = kafkacompat("stream", "create", "/s", "--partition", "3", "--bootstrap-server", "127.0.0.1:1")
    assert_one_line_error(done, 2, "unrecognized arguments: --partition 3")


def test_errors_under_json_are_one_json_object(cli_broker: Broker) -> None:
    missing = f"/nope{uuid.uuid4().hex[:6]}"
    done = kafkacompat("stream", "info", missing, "--json", "--bootstrap-server", cli_broker.bootstrap_servers)
    assert (done.returncode, done.stdout) == (1, "")
    assert json.loads(done.stderr) == {"error": f"stream {missing} does not exist"}
    done = kafkacompat("topic", "create", "/s:t", "--partition", "3", "--json")
    assert done.returncode == 2
    assert json.loads(done.stderr) == {"error": "kafkacompat: unrecognized arguments: --partition 3"}


def test_purge_progress_counts_one_topic_in_the_singular(cli_broker: Broker) -> None:
    stream = f"/apps/one{uuid.uuid4().hex[:6]}"
    cli_broker.create_topic(f"{stream}:only")
    done = kafkacompat("stream", "purge", stream, "--progress", "--bootstrap-server", cli_broker.bootstrap_servers)
    assert done.returncode == 0 and done.stdout.startswith(f"Purged stream {stream}: emptied 1 topic ")
    assert done.stderr.splitlines()[-1].startswith(f"purging stream {stream} (1 topic): done in ")
