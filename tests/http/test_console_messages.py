"""The console's message browser in a real headless Chromium: seek, filter, page, produce, as a user would.

Records are written by a stock Kafka client (librdkafka) and read back by
one, so what the page shows and what the form writes are what Kafka
clients see. One broker and one browser for the module; screenshots go
where test_web_console's go (KAFKACOMPAT_ARTIFACTS_DIR, else a temporary
directory), and each page is checked with axe-core.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.records import iter_records

from kafkacompat.schemas.registry import registry_of
from kafkacompat.testing import Broker
from tests.http.console_kit import CHROMIUM, accessible

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} "
                                "(tests/run.sh installs Debian's)")
START_MS = 1_780_000_000_000  # 2026-05-28T20:26:40Z: record i is stamped START_MS + i minutes


@pytest.fixture(scope="module")
def web() -> Iterator[Broker]:
    with Broker(data_dir="tmp", http_port=0) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def screens() -> Path:
    base = os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kafkacompat-console-messages-", dir=base))


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(bypass_csp=True)  # only so axe-core can be injected
    try:
        opened = context.new_page()
        opened.set_default_timeout(15_000)
        yield opened
    finally:
        context.close()


@pytest.fixture(scope="module")
def readings(web: Broker) -> str:
    """A topic of 2 partitions; partition 0 holds 120 records: JSON values, keys pump-0..2, a header on every 10th."""
    topic = f"readings-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": web.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(15)
    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 5})
    for i in range(120):
        headers = [("alarm", b"overpressure" if i % 20 == 0 else b"low")] if i % 10 == 0 else None
        producer.produce(topic, json.dumps({"seq": i, "bar": 1 + i / 100}).encode(), key=b"pump-%d" % (i % 3),
                         partition=0, timestamp=START_MS + i * 60_000, headers=headers)
    assert producer.flush(15) == 0
    return topic



def offsets(page: object) -> list[int]:
    return [int(t) for t in page.locator("#messages td[data-label='Offset']").all_inner_texts()]


def url(web: Broker, topic: str, **query: object) -> str:
    return web.http_url + "/console/messages?" + urllib.parse.urlencode({"stream": "/default", "topic": topic, **query})


@pytest.mark.slow  # a real Chromium
def test_seek_page_and_filter_a_partition(web: Broker, readings: str, page: object, screens: Path) -> None:
    page.goto(web.http_url + "/console/topic?" + urllib.parse.urlencode({"stream": "/default", "topic": readings}))
    page.get_by_role("link", name="Browse messages").click()
    expect(page.locator("h1")).to_have_text(f"Messages of {readings}")
    assert offsets(page) == list(range(50))  # a page, not the partition
    first = page.locator("#messages tbody tr").first
    expect(first.locator("td.key")).to_have_text("pump-0")
    expect(first.locator("td.value pre.json")).to_contain_text('"seq": 0')  # JSON decoded and indented
    expect(first.locator("td.headers")).to_have_text("alarm: overpressure")
    expect(first.locator("td[data-label='Time']")).to_have_text("2026-05-28 20:26:40.000 UTC")
    page.get_by_role("link", name="Next page").click()
    assert offsets(page) == list(range(50, 100))
    accessible(page)
    page.screenshot(path=str(screens / "messages.png"), full_page=True)

    form = page.locator("#seek")
    form.get_by_label("Start at").select_option("offset")
    form.get_by_label("Offset or time").fill("117")
    form.get_by_role("button", name="Show").click()
    assert offsets(page) == [117, 118, 119]
    expect(page.locator("#page-summary")).to_contain_text("to the end")

    form = page.locator("#seek")
    form.get_by_label("Start at").select_option("timestamp")
    form.get_by_label("Offset or time").fill("2026-05-28T21:00:00")  # 33 min 20 s after the first: offset 34
    form.get_by_role("button", name="Show").click()
    assert offsets(page)[0] == 34

    form = page.locator("#seek")
    form.get_by_label("Start at").select_option("end")
    form.get_by_role("button", name="Show").click()
    assert offsets(page) == list(range(70, 120))

    form = page.locator("#seek")
    form.get_by_label("Start at").select_option("beginning")
    form.get_by_label("Key contains").fill("pump-1")
    form.get_by_label("Header (name or name=text)").fill("alarm=low")
    form.get_by_role("button", name="Show").click()
    assert offsets(page) == [10, 70]  # key pump-1 (i % 3 == 1), header alarm "low" (not 40, 100: overpressure)
    expect(page.locator("#page-summary")).to_contain_text("2 record(s) matching, of 120 looked at")

    form = page.locator("#seek")
    form.get_by_label("Key contains").fill("")
    form.get_by_label("Header (name or name=text)").fill("")
    form.get_by_label("Value contains").fill('"seq": 7')
    form.get_by_role("button", name="Show").click()
    assert offsets(page) == [7] + list(range(70, 80))
    page.screenshot(path=str(screens / "messages-filtered.png"), full_page=True)


@pytest.mark.slow  # a real Chromium
def test_produce_form_writes_a_record_a_consumer_reads(web: Broker, readings: str, page: object,
                                                        screens: Path) -> None:
    page.goto(url(web, readings, partition=1))
    form = page.locator("#produce")
    form.get_by_label("Partition").fill("1")
    form.get_by_label("Key", exact=True).fill("pump-9")
    form.get_by_label("Value", exact=True).fill('{"bar": 9.5}')
    form.get_by_label("Headers").fill("source: console\ntrace: abc")
    form.get_by_role("button", name="Produce").click()
    fresh = page.locator("#messages tr.fresh")  # the page opens at the record it wrote
    expect(fresh.locator("td.key")).to_have_text("pump-9")
    expect(fresh.locator("td.headers")).to_have_text("source: consoletrace: abc")
    accessible(page)
    page.screenshot(path=str(screens / "messages-produced.png"), full_page=True)

    consumer = Consumer({"bootstrap.servers": web.bootstrap_servers, "group.id": "reader-" + uuid.uuid4().hex[:6]})
    try:
        consumer.assign([TopicPartition(readings, 1, 0)])
        deadline, message = time.monotonic() + 20, None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert (message.key(), json.loads(message.value()), message.headers()) == (
            b"pump-9", {"bar": 9.5}, [("source", b"console"), ("trace", b"abc")])
    finally:
        consumer.close()

    form = page.locator("#produce")
    form.get_by_label("Partition").fill("7")  # the topic has 2: refused, shown, nothing written
    form.get_by_label("Value", exact=True).fill("lost?")
    form.get_by_role("button", name="Produce").click()
    expect(page.locator(".error")).to_be_visible()
    assert web.server.cluster.store.partition("/default", readings, 1).high_watermark == 1


def test_bad_seeks_answer_a_page_with_the_reason(web: Broker, readings: str) -> None:
    import urllib.error
    import urllib.request

    for query, reason in (({"seek": "offset", "at": "ten"}, "is not a whole number"),
                          ({"seek": "timestamp", "at": "yesterday"}, "is not a time"),
                          ({"partition": "9"}, "is not one of 0..1")):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(url(web, readings, **query), timeout=10)
        assert caught.value.code == 400
        assert reason in caught.value.read().decode()


@pytest.mark.slow  # a real Chromium
def test_group_offset_reset_previews_then_resets(web: Broker, readings: str, page: object, screens: Path) -> None:
    group = "billing-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": web.bootstrap_servers, "group.id": group})
    consumer.commit(offsets=[TopicPartition(readings, 0, 100)], asynchronous=False)
    consumer.close()
    page.goto(web.http_url + "/console/group?" + urllib.parse.urlencode({"id": group}))
    form = page.locator("#reset")
    form.get_by_label("Move the offsets").select_option("datetime")
    form.get_by_label("N or time").fill("2026-05-28T21:00:00")  # the first record at or after it: offset 34
    form.get_by_label("Topic").fill(f"{readings}:0")
    form.get_by_role("button", name="Preview (dry run)").click()
    row = page.locator("#reset-preview tbody tr")
    expect(row.locator("td[data-label='Committed now']")).to_have_text("100")
    expect(row.locator("td[data-label='New offset']")).to_have_text("34")

    form = page.locator("#reset")
    form.get_by_label("Move the offsets").select_option("shift")
    form.get_by_label("N or time").fill("-60")
    form.get_by_role("button", name="Preview (dry run)").click()
    expect(page.locator("#reset-preview td[data-label='New offset']")).to_have_text("40")
    assert web.committed(group, readings) == {0: 100}  # a dry run changes nothing
    accessible(page)
    page.screenshot(path=str(screens / "group-reset-preview.png"), full_page=True)

    page.get_by_role("button", name="Reset 1 offset(s)").click()
    expect(page.locator("#reset-done")).to_contain_text("Reset the committed offsets of 1 partition(s)")
    expect(page.locator("#lag td[data-label='Committed']")).to_have_text("40")
    assert web.committed(group, readings) == {0: 40}

    form = page.locator("#reset")
    form.get_by_label("Move the offsets").select_option("offset")
    form.get_by_label("N or time").fill("ten")
    form.get_by_role("button", name="Preview (dry run)").click()
    expect(page.locator(".error")).to_contain_text("N must be a whole number")


@pytest.mark.slow  # a real Chromium
def test_delete_records_then_the_topic_each_after_confirming(web: Broker, page: object, screens: Path) -> None:
    topic = "scratch-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": web.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": web.bootstrap_servers, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, b"r%d" % i)
    assert producer.flush(15) == 0
    page.goto(web.http_url + "/console/topic?" + urllib.parse.urlencode({"stream": "/default", "topic": topic}))
    form = page.locator("#delete-records")
    form.get_by_label("Delete every record before offset").fill("6")
    form.get_by_role("button", name="Delete records").click()  # not confirmed: refused, nothing lost
    expect(page.locator(".error")).to_contain_text("tick the box")
    partition = web.server.cluster.store.partition("/default", topic, 0)
    assert partition.log_start_offset == 0
    form = page.locator("#delete-records")
    form.get_by_label("Delete every record before offset").fill("6")
    form.get_by_label("I understand").check()
    form.get_by_role("button", name="Delete records").click()
    expect(page.locator("#records-deleted")).to_contain_text("starts at offset 6")
    expect(page.locator("#partitions td[data-label='Log start']")).to_have_text("6")
    accessible(page)
    page.screenshot(path=str(screens / "topic-actions.png"), full_page=True)

    form = page.locator("#delete-topic")
    form.get_by_label("to confirm").fill("not-the-name")
    form.get_by_role("button", name="Delete topic").click()
    expect(page.locator(".error")).to_contain_text(f"type the topic's name, {topic}")
    assert web.server.cluster.store.get_topic("/default", topic) is not None
    page.locator("#delete-topic").get_by_label("to confirm").fill(topic)
    page.locator("#delete-topic").get_by_role("button", name="Delete topic").click()
    expect(page.locator("#topic-deleted")).to_have_text(f"Deleted topic {topic}.")
    assert web.server.cluster.store.get_topic("/default", topic) is None
    assert topic not in admin.list_topics(timeout=15).topics


METER = {"type": "record", "name": "Meter", "namespace": "rig",
         "fields": [{"name": "meter", "type": "string"}, {"name": "kwh", "type": "double"}]}
METER_KEY = {"type": "object", "properties": {"meter": {"type": "string"}}, "required": ["meter"]}
UNKNOWN_ID = 0x7FFFFFF0  # no schema has it: content ids are 31-bit hashes, and this one is not registered


def reading_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="rig", syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    message.field.add(name="value", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("rig.Reading"))


@pytest.fixture(scope="module")
def meters(web: Broker) -> str:
    """Schema-framed records written by confluent-kafka's own serializers through the broker's registry.

    Offsets 0-1: JSON Schema keys and Avro values (subjects <topic>-key, <topic>-value); 2: a Protobuf value
    (subject rig.Reading, by RecordNameStrategy); 3: a value framed with an id the registry does not hold.
    """
    from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"meters-{uuid.uuid4().hex[:6]}"
    registry = SchemaRegistryClient({"url": web.http_url})
    keys, values = (SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE))
    key_of = JSONSerializer(json.dumps(METER_KEY), registry)
    value_of = AvroSerializer(registry, json.dumps(METER))
    reading = reading_class()  # rig.Reading {sensor, value}, as protoc would generate it
    protobuf = ProtobufSerializer(reading, registry, {"use.deprecated.format": False,
                                                      "subject.name.strategy": record_subject_name_strategy})
    producer = Producer({"bootstrap.servers": web.bootstrap_servers})
    for meter, kwh in (("m1", 1.5), ("m2", 2.5)):
        producer.produce(topic, value_of({"meter": meter, "kwh": kwh}, values), key=key_of({"meter": meter}, keys))
    producer.produce(topic, protobuf(reading(sensor="p1", value=7.25), values))
    producer.produce(topic, b"\x00" + UNKNOWN_ID.to_bytes(4, "big") + b"opaque")
    assert producer.flush(15) == 0
    return topic


def test_filters_search_the_decoded_json_of_framed_values(web: Broker, meters: str) -> None:
    import urllib.request

    def offsets_for(text: str) -> list[int]:
        with urllib.request.urlopen(url(web, meters, value=text), timeout=10) as answer:
            html = answer.read().decode()
        return [int(cell) for cell in re.findall(r'<td data-label="Offset">(\d+)</td>', html)]

    assert offsets_for('"kwh": 2.5') == [1]  # indented, as shown: not in the Avro bytes
    assert offsets_for('"sensor":"p1"') == [2]  # compact JSON matches too
    assert offsets_for("opaque") == [3]  # an unknown id: its raw bytes


@pytest.mark.slow  # a real Chromium
def test_schema_framed_records_are_shown_decoded_with_their_schema(web: Broker, meters: str, page: object,
                                                                    screens: Path) -> None:
    registry = registry_of(web.server.cluster)  # the ids it gave the serializers
    avro_id, json_id = (registry.version(f"{meters}-{what}", "latest").id for what in ("value", "key"))
    page.goto(url(web, meters))
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(4)
    first = rows.nth(0)
    expect(first.locator("td.value .schema-name")).to_have_text(f"Avro · {meters}-value v1 · id {avro_id}")
    expect(first.locator("td.value pre.json")).to_contain_text('"kwh": 1.5')
    expect(first.locator("td.key .schema-name")).to_have_text(f"JSON Schema · {meters}-key v1 · id {json_id}")
    expect(first.locator("td.key pre.json")).to_contain_text('"meter": "m1"')
    protobuf = rows.nth(2).locator("td.value")
    expect(protobuf.locator(".schema-name")).to_contain_text("Protobuf · rig.Reading v1")
    expect(protobuf.locator("pre.json")).to_contain_text('"value": 7.25')
    expect(rows.nth(3).locator("td.value")).to_contain_text(f"schema id {UNKNOWN_ID} unknown")
    accessible(page)
    page.screenshot(path=str(screens / "messages-decoded.png"), full_page=True)


def test_a_subject_the_reader_may_not_read_is_not_named(web: Broker, meters: str) -> None:
    """Decoding needs only READ on the topic; the subject and version are shown only to who may read the subject."""
    from kafkacompat.http.console.decoding import Decoder

    registry = registry_of(web.server.cluster)
    partition = web.server.cluster.store.partition("/default", meters, 0)
    first = next(iter(iter_records(web.call(partition.read(0, 64 * 1024)))))
    for may_read, subject in ((lambda s: True, f"{meters}-value"), (lambda s: False, None)):
        seen = Decoder(registry, {meters}, may_read).decoded(first.value, "value")
        assert (seen["format"], seen["subject"], json.loads(seen["text"])) == ("Avro", subject,
                                                                                {"meter": "m1", "kwh": 1.5})


def test_a_filtered_page_stops_after_its_decoding_budget(web: Broker, meters: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.request

    from kafkacompat.http.console import messages

    monkeypatch.setattr(messages, "DECODES_MAX", 1)  # record 0's value (the filter decodes no key): no further
    with urllib.request.urlopen(url(web, meters, value='"kwh": 2.5'), timeout=10) as answer:
        html = answer.read().decode()
    assert "0 record(s) matching, of 1 looked at" in html and "more from offset 1" in html
    assert 'id="next-page"' in html  # the user goes on from there
