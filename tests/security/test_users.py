"""SCRAM users: offline with `kafkacompat user`, online with Describe/AlterUserScramCredentials."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkacompat.testing import Broker


def user_command(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkacompat", "user", *args], input=stdin, text=True,
                          capture_output=True, timeout=60)


def can_log_in(broker: Broker, user: str, password: str, mechanism: str) -> bool:
    """True when metadata arrives; False once the client reports an authentication error."""
    errors: list[KafkaError] = []
    producer = Producer({**broker.client_config(user, password, mechanism), "error_cb": errors.append})
    for _ in range(20):
        try:
            producer.list_topics(timeout=0.5)
            return True
        except KafkaException:
            producer.poll(0)  # serves error_cb
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
    raise AssertionError(f"neither logged in nor refused: {errors}")


def test_first_admin_exists_before_the_broker_starts(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    added = user_command("add", "admin", "--mechanism", "SCRAM-SHA-512", "--password-stdin", "--data-dir", data_dir,
                         stdin="s3cret\n")
    assert added.returncode == 0, added.stderr
    added = user_command("add", "ops", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", "--password-stdin",
                         "--data-dir", data_dir, stdin="ops-pw\n")
    assert added.returncode == 0, added.stderr
    listed = user_command("list", "--data-dir", data_dir)
    assert listed.stdout.splitlines() == ["admin\tSCRAM-SHA-512 (iterations=4096)",
                                          "ops\tSCRAM-SHA-256 (iterations=8192)"]
    with Broker(data_dir=data_dir, listeners=["SASL_PLAINTEXT://127.0.0.1:0"]) as broker:
        assert can_log_in(broker, "admin", "s3cret", "SCRAM-SHA-512")
        assert can_log_in(broker, "admin", "s3cret", "PLAIN")
        assert can_log_in(broker, "ops", "ops-pw", "SCRAM-SHA-256")
        assert not can_log_in(broker, "ops", "ops-pw", "SCRAM-SHA-512")  # no credential for that mechanism
        assert not can_log_in(broker, "admin", "wrong", "SCRAM-SHA-512")
        busy = user_command("list", "--data-dir", data_dir)
        assert busy.returncode == 2 and "kafka-configs.sh --entity-type users" in busy.stderr
        assert busy.stderr.count("\n") == 1
    deleted = user_command("delete", "ops", "--data-dir", data_dir)
    assert deleted.returncode == 0
    assert user_command("list", "--data-dir", data_dir).stdout.splitlines() == ["admin\tSCRAM-SHA-512 (iterations=4096)"]
    missing = user_command("delete", "nobody", "--data-dir", data_dir)
    assert missing.returncode == 1 and missing.stderr.strip() == "kafkacompat user delete: user nobody has no credentials"


def test_no_secret_on_disk(tmp_path) -> None:
    data_dir = tmp_path / "data"
    assert user_command("add", "eve", "--password-stdin", "--data-dir", str(data_dir),
                        stdin="needle-in-store\n").returncode == 0
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert b"needle-in-store" not in path.read_bytes(), path


def test_add_refuses_bad_input(tmp_path) -> None:
    result = user_command("add", "x", "--iterations", "10", "--password-stdin", "--data-dir", str(tmp_path),
                          stdin="pw\n")
    assert result.returncode == 2 and "--iterations must be 4096-16384" in result.stderr
    result = user_command("add", "x", "--password-stdin", "--data-dir", str(tmp_path), stdin="\n")
    assert result.returncode == 2 and "no password" in result.stderr


@pytest.fixture(scope="module")
def broker():
    with Broker(sasl={"admin": "admin-pw"}) as running:
        yield running


def admin(broker: Broker) -> AdminClient:
    return AdminClient(broker.client_config("admin"))


def test_alter_and_describe_online(broker: Broker) -> None:
    client = admin(broker)
    for mechanism, iterations in ((ScramMechanism.SCRAM_SHA_512, 8192), (ScramMechanism.SCRAM_SHA_256, 4096)):
        upsertion = UserScramCredentialUpsertion("zoe", ScramCredentialInfo(mechanism, iterations), b"zoe-pw")
        client.alter_user_scram_credentials([upsertion])["zoe"].result(timeout=10)  # one change per user and request
    assert can_log_in(broker, "zoe", "zoe-pw", "SCRAM-SHA-512")  # at once, no restart
    assert can_log_in(broker, "zoe", "zoe-pw", "SCRAM-SHA-256")
    described = client.describe_user_scram_credentials(["zoe"])["zoe"].result(timeout=10)
    infos = sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos)
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = client.describe_user_scram_credentials().result(timeout=10)
    assert {"admin", "zoe"} <= set(everyone)
    deleted = client.alter_user_scram_credentials([UserScramCredentialDeletion("zoe", ScramMechanism.SCRAM_SHA_512)])
    deleted["zoe"].result(timeout=10)
    assert not can_log_in(broker, "zoe", "zoe-pw", "SCRAM-SHA-512")
    assert can_log_in(broker, "zoe", "zoe-pw", "SCRAM-SHA-256")


def test_online_errors_as_kafka_names_them(broker: Broker) -> None:
    client = admin(broker)
    with pytest.raises(KafkaException) as caught:
        client.describe_user_scram_credentials(["ghost"])["ghost"].result(timeout=10)
    assert caught.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    results = client.alter_user_scram_credentials([
        UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_256),
        UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"),
    ])
    with pytest.raises(KafkaException) as caught:
        results["ghost"].result(timeout=10)
    assert caught.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert "does not exist" in caught.value.args[0].str()
    with pytest.raises(KafkaException) as caught:
        results["few"].result(timeout=10)
    assert caught.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert "Too few iterations" in caught.value.args[0].str()


def test_a_user_without_alter_on_the_cluster_gets_a_refusal_per_user(tmp_path) -> None:
    """Kafka answers each named user CLUSTER_AUTHORIZATION_FAILED; an empty answer breaks clients' result mapping."""
    users = {"admin": "admin-pw", "bob": "bob-pw"}
    with Broker(sasl=users, authorizer=True, super_users=["User:admin"]) as secured:
        bob = AdminClient(secured.client_config("bob"))
        results = bob.alter_user_scram_credentials([
            UserScramCredentialUpsertion("admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"taken"),
            UserScramCredentialDeletion("zed", ScramMechanism.SCRAM_SHA_512),
        ])
        for user in ("admin", "zed"):
            with pytest.raises(KafkaException) as caught:
                results[user].result(timeout=10)
            assert caught.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert can_log_in(secured, "admin", "admin-pw", "SCRAM-SHA-512")  # the change was refused
        assert not can_log_in(secured, "admin", "taken", "SCRAM-SHA-256")
