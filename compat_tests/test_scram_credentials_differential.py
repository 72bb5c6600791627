"""Describe/AlterUserScramCredentials against Apache Kafka 4.1 and kafkacompat: the same calls, compared.

Same AdminClient steps on both sides (on their PLAINTEXT listeners, where
Kafka serves these APIs too): add users, describe them, the refusals for an
unknown user, too few and too many iterations, an unknown deletion.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkacompat.testing import Broker

pytestmark = [pytest.mark.differential, pytest.mark.slow]


def outcome(future: Any) -> Any:
    try:
        result = future.result(timeout=30)
    except KafkaException as exc:
        error = exc.args[0]
        return ("error", error.name(), error.str())
    if result is None:
        return "ok"
    return sorted((str(i.mechanism), i.iterations) for i in result.scram_credential_infos)


def described(admin: AdminClient, user: str, mechanisms: set[str], timeout: float = 30.0) -> Any:
    """Describe `user` once it shows exactly `mechanisms` (what the alterations that succeeded
    left), or as it stands after `timeout`.

    Kafka's controller answers AlterUserScramCredentials once the change is in the metadata
    log; the broker answers DescribeUserScramCredentials from its own metadata image, which
    applies the change a moment later. A broker that never shows the change is compared as it
    stands and fails.
    """
    deadline = time.monotonic() + timeout
    while True:
        seen = outcome(admin.describe_user_scram_credentials([user])[user])
        shown = {mechanism for mechanism, _ in seen} if isinstance(seen, list) else set()
        if shown == mechanisms or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def steps(bootstrap: str, user: str) -> list[Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seen: list[Any] = []
    both = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"pw"),
            UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw",
                                         b"salt-of-sixteen!")]
    seen.append(outcome(admin.alter_user_scram_credentials(both)[user]))  # one user twice: refused
    stored = set()
    for upsertion in both:
        seen.append(outcome(admin.alter_user_scram_credentials([upsertion])[user]))
        if seen[-1] == "ok":
            stored.add(str(upsertion.scram_credential_info.mechanism))
    seen.append(described(admin, user, stored))
    seen.append(outcome(admin.describe_user_scram_credentials([f"{user}-ghost"])[f"{user}-ghost"]))
    for iterations in (1000, 20000):
        altered = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            f"{user}-{iterations}", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, iterations), b"pw")])
        seen.append(outcome(altered[f"{user}-{iterations}"]))
    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(f"{user}-x", ScramMechanism.SCRAM_SHA_256)])
    seen.append(outcome(deleted[f"{user}-x"]))
    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    seen.append(outcome(deleted[user]))
    if seen[-1] == "ok":
        stored.discard(str(ScramMechanism.SCRAM_SHA_256))
    seen.append(described(admin, user, stored))
    return seen


def test_scram_credentials_as_kafka(reference_kafka) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"  # the same name on both sides: messages name it
    with Broker() as broker:
        mine = steps(broker.bootstrap_servers, user)
    theirs = steps(reference_kafka.bootstrap_servers, user)
    assert mine == theirs
