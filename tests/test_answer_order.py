"""Answers leave a connection in request order, whether made at once or later.

A client may send many requests before reading (the Java producer keeps
five in flight, a consumer pipelines fetches with metadata). An answer
still being made (a fetch waiting for records) holds back the answers
behind it, never the handling of the requests behind it.
"""

from __future__ import annotations

import kio.schema.api_versions.v3.request as api_versions
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch, iter_records

from kafkacompat.testing import Broker
from tests.test_bad_input import produce_request
from tests.test_fetch_and_offsets import fetch_request
from tests.wire import Wire

PRODUCE, FETCH, API_VERSIONS = (0, 9), (1, 12), (18, 3)


def test_a_burst_is_answered_in_order_around_a_fetch_that_waits(broker: Broker, topic: str) -> None:
    versions = make(api_versions.ApiVersionsRequest, client_software_name="wire", client_software_version="1")
    burst = [
        (PRODUCE, produce_request(topic, build_batch([Record(None, b"a", [], 1000)]))),
        (API_VERSIONS, versions),
        # waits: offset 1 does not exist yet; the produce two requests later brings it
        (FETCH, fetch_request(12, topic, 1, max_wait_ms=10_000)),
        (API_VERSIONS, versions),
        (PRODUCE, produce_request(topic, build_batch([Record(None, b"b", [], 1001)]))),
        (API_VERSIONS, versions),
    ]
    with Wire(broker.bootstrap_servers, timeout=10) as wire:
        frames = [(wire.frame(*api, body), wire.correlation) for api, body in burst]
        wire.send_raw(b"".join(data for data, _ in frames))  # one write: the broker reads them together
        answers = [wire.receive(*api) for api, _ in burst]
    assert [correlation for correlation, _ in answers] == [correlation for _, correlation in frames]
    produced = [answers[i][1].responses[0].partition_responses[0] for i in (0, 4)]
    assert [(p.error_code.value, p.base_offset) for p in produced] == [(0, 0), (0, 1)]
    assert all(answers[i][1].error_code.value == 0 and answers[i][1].api_keys for i in (1, 3, 5))
    [fetched] = answers[2][1].responses[0].partitions
    assert fetched.high_watermark == 2
    assert [(r.offset, r.value) for r in iter_records(fetched.records)] == [(1, b"b")]
