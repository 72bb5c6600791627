"""/openapi.json describes what the REST API answers: schemathesis finds no 5xx and no schema violation."""

from __future__ import annotations

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from kafkacompat.testing import Broker

EXAMPLES = 8
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


# Path parameters narrowed to things that exist, so generated requests reach the handlers' success paths
KNOWN = {"topic": "orders", "group": "g", "instance": "c", "partition_id": "0", "partition": "0",
         "name": "retention.ms", "stream": "/default", "broker_id": "1"}


@pytest.fixture(scope="module")
def rest_broker():
    with Broker(http_port=0, rest_consumer_instance_timeout_ms=60_000) as broker:
        broker.create_topic("orders", partitions=2)
        yield broker


def narrowed(document: dict) -> dict:
    """The served document with path parameters fixed to existing resources (KNOWN)."""
    for item in document["paths"].values():
        for operation in item.values():
            for param in operation.get("parameters", []):
                if param["in"] == "path" and param["name"] in KNOWN:
                    param["schema"] = {"type": "string", "enum": [KNOWN[param["name"]]]}
    return document


def test_the_document_is_served_and_names_every_area(rest_broker) -> None:
    document = requests.get(rest_broker.http_url + "/openapi.json", timeout=10).json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for path in ("/v3/clusters/{cluster_id}/topics/{topic}/records", "/consumers/{group}",
                 "/consumers/{group}/instances/{instance}/records", "/streams/{stream}/topics/{topic}"):
        assert path in paths


def _check_operation(operation, statuses: list[int]) -> None:
    """Generated requests for one operation, each answered without 5xx and as the document says."""

    @given(operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        response = case.call_and_validate(checks=CHECKS, timeout=10)
        statuses.append(response.status_code)

    run()


@pytest.mark.timeout(180)
def test_api_conforms_to_its_openapi_document(rest_broker) -> None:
    """Every operation, a few generated cases each (bounded: about a minute in all)."""
    url = rest_broker.http_url
    requests.post(url + "/consumers/g", json={"name": "c", "format": "json"}, timeout=10,
                  headers={"Content-Type": "application/vnd.kafka.v2+json"}).raise_for_status()
    document = requests.get(url + "/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(narrowed(document))
    schema.config.update(base_url=url)
    failures = []
    operations = 0
    statuses: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        try:
            _check_operation(operation, statuses)
        except Exception as exc:  # noqa: BLE001 - collected: every failing operation is reported
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert operations >= 35
    assert not failures, "\n\n".join(failures)
    accepted = sum(1 for status in statuses if status < 300)
    assert accepted >= 40, f"only {accepted} of {len(statuses)} generated requests were accepted"
