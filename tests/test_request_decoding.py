"""Request bodies as real clients send them, decoded as Kafka decodes them."""

from kafkacompat.protocol.messages import decode_request, parse_request_header

# librdkafka 2.16's Metadata v12 request for all topics (AdminClient.list_topics),
# captured from the wire: the body ends with three bytes no schema field covers.
LIBRDKAFKA_METADATA_V12_ALL_TOPICS = bytes.fromhex(
    "0003000c00000003000772646b61666b610000000000010000"
)


def test_bytes_after_the_body_are_ignored_like_kafka_does() -> None:
    header = parse_request_header(LIBRDKAFKA_METADATA_V12_ALL_TOPICS)
    request = decode_request(header, LIBRDKAFKA_METADATA_V12_ALL_TOPICS)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert request.topics is None  # all topics
