"""kafka-acls.sh against Kafka 4.1 with its StandardAuthorizer and against kafkacompat with its authorizer.

Both run on PLAINTEXT with User:ANONYMOUS as the super user, so the tool
may do everything and only the ACL bookkeeping is compared: what --add
echoes, what --list finds with each filter (literal, prefixed, match,
principal), what --remove takes away, and the tool's own refusals. ACL
order inside a listing is the authorizer's own (a hash order on Kafka), so
each resource's entries are compared as sets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkacompat.testing import Broker

from .reference import SIDES, KafkaTools, ReferenceKafka, Side, Step, kafka_home, on_both, unique

pytestmark = [pytest.mark.differential, pytest.mark.kafka_tools]

SUPER = "User:ANONYMOUS"
HEADER = re.compile(r"^(Adding ACLs for resource|Current ACLs for resource|ACLs for principal|"
                    r"Removing ACLs for resource)")


@pytest.fixture(scope="module")
def secured_sides(kafka_tools: KafkaTools) -> Iterator[dict[str, Side]]:
    kafka = ReferenceKafka(kafka_home(), **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": SUPER,
    })
    with kafka, Broker(authorizer=True, super_users=[SUPER]) as mine:
        yield {"kafka": Side("kafka", kafka.bootstrap_servers, kafka_tools),
               "kafkacompat": Side("kafkacompat", mine.bootstrap_servers, kafka_tools)}


def listing(step: Step) -> tuple[int, list[tuple[str, tuple[str, ...]]]]:
    """The exit code and each block of the tool's output as (header, sorted entries)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in step.out.splitlines():
        if HEADER.match(line):
            blocks.append((line.rstrip(), []))
        elif line.strip():
            if not blocks:
                blocks.append(("", []))
            blocks[-1][1].append(line.strip())
    return step.code, sorted((header, tuple(sorted(entries))) for header, entries in blocks)


def _acl(entry: str) -> tuple[str, ...]:
    """An ACL entry's fields, whichever order the tool printed them in."""
    return tuple(sorted(part.strip() for part in entry.strip("()").split(",")))


def _entries(step: Step, header: str) -> set[tuple[str, tuple[str, ...]]]:
    """(resource pattern, ACL) of every entry under the step's blocks whose header starts with `header`."""
    _, blocks = listing(step)
    return {(title.split("`")[1], _acl(entry)) for title, found in blocks if title.startswith(header)
            for entry in found}


def changed(side: Side, change: Step, shows: Callable[[set[tuple[str, tuple[str, ...]]]], bool],
            timeout: float = 30.0) -> Step:
    """`change` (a kafka-acls --add or --remove step), once `kafka-acls --list` shows it applied.

    Kafka's controller answers CreateAcls and DeleteAcls once the change is in the metadata
    log; the broker answers DescribeAcls from its authorizer, which applies the change a
    moment later, so a --list right after may not show it yet. The listing of every ACL is
    read until `shows` holds for its entries, 30 s at most: the compared --list steps come
    after that, and a broker that never shows the change is compared as it stands and fails.
    """
    deadline = time.monotonic() + timeout
    while not shows(_entries(side.step("kafka-acls", "--list"), "Current ACLs")) and time.monotonic() < deadline:
        time.sleep(0.2)
    return change


@pytest.fixture(scope="module")
def acl_runs(secured_sides: dict[str, Side]) -> dict[str, dict[str, Any]]:
    topic, prefix, group, txn = unique("orders"), unique("logs") + "-", unique("readers"), unique("txn")

    def script(side: Side) -> dict[str, Any]:
        acls = lambda *args: side.step("kafka-acls", *args)  # noqa: E731 - one tool, many steps

        def add(*args: str) -> Step:
            step = acls("--add", *args)
            return changed(side, step, lambda listed: _entries(step, "Adding ACLs") <= listed)

        def remove(*args: str, gone: Callable[[tuple[str, tuple[str, ...]]], bool]) -> Step:
            return changed(side, acls("--remove", "--force", *args), lambda listed: not any(map(gone, listed)))

        literal = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
        run: dict[str, Any] = {}
        run["add literal"] = add("--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
                                 "--topic", topic)
        run["add consumer prefixed"] = add("--allow-principal", "User:bob", "--consumer", "--topic", prefix,
                                           "--group", group, "--resource-pattern-type", "prefixed")
        run["add deny cluster"] = add("--deny-principal", "User:carl", "--deny-host", "10.0.0.1",
                                      "--operation", "All", "--cluster")
        run["add producer"] = add("--allow-principal", "User:dave", "--producer", "--topic", topic,
                                  "--transactional-id", txn)
        run["add again"] = add("--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
        run["list topic"] = acls("--list", "--topic", topic)
        run["list match"] = acls("--list", "--topic", prefix + "app", "--resource-pattern-type", "match")
        run["list prefixed group"] = acls("--list", "--group", group, "--resource-pattern-type", "prefixed")
        run["list literal group"] = acls("--list", "--group", group)
        run["list principal"] = acls("--list", "--principal", "User:bob")
        run["list cluster"] = acls("--list", "--cluster")
        run["list transactional id"] = acls("--list", "--transactional-id", txn)
        run["remove one"] = remove("--allow-principal", "User:alice", "--operation", "Read", "--topic", topic,
                                   gone=lambda entry: entry[0] == literal and {"principal=User:alice",
                                                                               "operation=READ"} <= set(entry[1]))
        run["list after remove"] = acls("--list", "--topic", topic)
        run["remove resource"] = remove("--topic", topic, gone=lambda entry: entry[0] == literal)
        run["list removed"] = acls("--list", "--topic", topic)
        run["bad principal"] = acls("--add", "--allow-principal", "alice", "--operation", "Read", "--topic", topic)
        run["bad operation"] = acls("--add", "--allow-principal", "User:x", "--operation", "Write", "--cluster")
        return run

    return on_both(secured_sides, script)


STEPS = ("add literal", "add consumer prefixed", "add deny cluster", "add producer", "add again", "list topic",
         "list match", "list prefixed group", "list literal group", "list principal", "list cluster",
         "list transactional id", "remove one", "list after remove", "remove resource", "list removed")


@pytest.mark.parametrize("step", STEPS)
def test_kafka_acls_agree(acl_runs: dict[str, dict[str, Any]], step: str) -> None:
    theirs, mine = (listing(acl_runs[side][step]) for side in SIDES)
    assert mine == theirs


@pytest.mark.parametrize("step", ["bad principal", "bad operation"])
def test_kafka_acls_refusals_agree(acl_runs: dict[str, dict[str, Any]], step: str) -> None:
    theirs, mine = (acl_runs[side][step] for side in SIDES)
    assert (mine.code, mine.out.splitlines()[:1]) == (theirs.code, theirs.out.splitlines()[:1])


def test_the_listing_is_not_empty(acl_runs: dict[str, dict[str, Any]]) -> None:
    """The comparison above compares something: each side found alice's and dave's ACLs on the topic."""
    _, blocks = listing(acl_runs["kafkacompat"]["list topic"])
    entries = [entry for _, found in blocks for entry in found]
    assert any("User:alice" in e and "READ" in e for e in entries)
    assert any("User:dave" in e and "WRITE" in e for e in entries)
