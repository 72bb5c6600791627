"""Every coordinator-bound request goes through the one seam, Cluster.coordinator_error (issue 37).

That seam waits out a hand-over of the key's __consumer_offsets partition
before answering COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR; a handler
that checked `coordinates()` itself answered NOT_COORDINATOR at once and the
client looked its coordinator up again (seconds lost on a fresh or changed
cluster). The APIs are derived from the handler registry: every request that
names a group or transactional id is probed, in-process, unless listed below
with the reason it does not go to a coordinator; so a new coordinator API is
probed without anyone remembering to add it.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import AsyncIterator
from types import UnionType
from typing import Any

import pytest
from kafkacompat.protocol.messages import make, request_schema
from kafkacompat.storage import open_store
from kio.schema.errors import ErrorCode

from kafkacompat.broker.cluster import Cluster
from kafkacompat.config import BrokerConfig
from kafkacompat.handlers.registry import registry
from kafkacompat.http.kafka_calls import call, version_of

KEY = "probed-key"
# request fields that name what a coordinator is found for (FindCoordinator's key_type 0 and 1)
KEY_FIELDS = {"group_id", "group_ids", "groups", "groups_names", "transactional_id", "transactional_ids",
              "v3_and_below_transactional_id"}
NOT_TO_A_COORDINATOR = {
    0: "Produce: to the partition's leader (its transactional id is checked there, KIP-890)",
    78: "ShareFetch: to the partition's leader, which keeps the share-partition (KIP-932)",
    79: "ShareAcknowledge: to the partition's leader, which keeps the share-partition (KIP-932)",
}


def _fields(cls: type) -> set[str]:
    """The field names of a request and its nested entities."""
    names: set[str] = set()
    for field in dataclasses.fields(cls):
        names.add(field.name)
        names |= {name for kind in _kinds(typing.get_type_hints(cls)[field.name]) if dataclasses.is_dataclass(kind)
                  for name in _fields(kind)}
    return names


def _kinds(hint: Any) -> list[Any]:
    """The types a hint names, through Optional and tuple[...]."""
    if typing.get_origin(hint) in (tuple, typing.Union, UnionType):
        return [kind for arg in typing.get_args(hint) if arg is not Ellipsis for kind in _kinds(arg)]
    return [hint]


def _value(hint: Any) -> Any:
    """A plain value of a kio field's type: every string the probed key, numbers 0, one entity per array."""
    if typing.get_origin(hint) in (typing.Union, UnionType):
        return _value(next(arg for arg in typing.get_args(hint) if arg is not type(None)))
    if typing.get_origin(hint) is tuple:
        return (_value(typing.get_args(hint)[0]),)
    kind = hint
    if dataclasses.is_dataclass(kind):
        return _filled(kind)
    for base, value in ((bool, False), (str, KEY), (datetime.timedelta, datetime.timedelta(seconds=30)),
                        (int, 0), (uuid.UUID, uuid.uuid4()), (bytes, b"")):
        if isinstance(kind, type) and issubclass(kind, base):
            return value
    raise TypeError(f"no probe value for {hint!r}")


def _filled(cls: Any) -> Any:
    hints = typing.get_type_hints(cls)
    return make(cls, **{field.name: _value(hints[field.name]) for field in dataclasses.fields(cls)})


def _codes(answer: Any) -> set[ErrorCode]:
    """Every error code anywhere in a kio response."""
    if isinstance(answer, tuple):
        return {code for item in answer for code in _codes(item)}
    if isinstance(answer, ErrorCode):
        return {answer}
    if dataclasses.is_dataclass(answer):
        return {code for field in dataclasses.fields(answer) for code in _codes(getattr(answer, field.name))}
    return set()


def _coordinator_bound() -> list[int]:
    apis = registry().apis
    return [key for key, api in sorted(apis.items())
            if api.advertised and _fields(request_schema(key, api.versions[1])) & KEY_FIELDS
            and key not in NOT_TO_A_COORDINATOR]


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[Cluster, list[str]]]:
    """A broker whose every coordinator is being loaded, recording the keys asked about, and whose one
    topic has the key's name (some requests ask only once their topics resolve)."""
    store = open_store("memory://")
    await store.open()
    await store.create_topic(store.default_stream, KEY, 1)  # requests name it as their topic too
    broker = Cluster(BrokerConfig(), store)
    asked: list[str] = []

    async def loading(key: str) -> ErrorCode:
        asked.append(key)
        return ErrorCode.coordinator_load_in_progress

    broker.coordinator_error = loading  # type: ignore[method-assign]
    broker.transactions.coordinator_error = loading
    try:
        yield broker, asked
    finally:
        await broker.groups.close()
        await store.close()


def test_the_probed_apis_are_derived_from_the_registry() -> None:
    bound = _coordinator_bound()
    assert {11, 12, 14, 15, 22, 26, 42, 47, 65, 69, 76, 88, 89} <= set(bound), bound  # JoinGroup ... StreamsGroupDescribe
    stale = set(NOT_TO_A_COORDINATOR) - set(registry().apis)
    assert not stale, f"listed but no longer served: {stale}"


@pytest.mark.parametrize("api_key", _coordinator_bound())
async def test_a_coordinator_bound_request_asks_the_seam_and_answers_its_error(
        cluster: tuple[Cluster, list[str]], api_key: int) -> None:
    broker, asked = cluster
    body = _filled(request_schema(api_key, version_of(api_key)))
    answer = await call(broker, api_key, body)
    assert KEY in asked, f"{registry().handlers[api_key].__name__} does not ask Cluster.coordinator_error"
    assert ErrorCode.coordinator_load_in_progress in _codes(answer), answer


@pytest.mark.parametrize("loading, answer", [(True, ErrorCode.coordinator_load_in_progress),
                                             (False, ErrorCode.not_coordinator)])
async def test_the_seam_waits_then_tells_loading_from_elsewhere(loading: bool, answer: ErrorCode) -> None:
    """After its wait, a broker still loading the key's partition says so (the client retries the
    same broker); one that was never handed it sends the client to look its coordinator up again."""
    store = open_store("memory://")
    await store.open()
    broker = Cluster(BrokerConfig(), store)
    looked: list[tuple[str, str, int]] = []

    async def look_again(key: tuple[str, str, int]) -> None:
        looked.append(key)

    view: Any = broker.view
    view.leads, view.catching_up, view.look_again = (lambda key: False), (lambda key: loading), look_again
    try:
        assert await broker.coordinator_error(KEY) == answer
        assert [key[1] for key in looked] == ["__consumer_offsets"]
        view.leads = lambda key: True  # alone (the disk engine), or once served: no wait at all
        assert await broker.coordinator_error(KEY) == ErrorCode.none
        assert len(looked) == 1
    finally:
        await broker.groups.close()
        await store.close()
