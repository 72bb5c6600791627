"""One typed configuration for the broker: defaults < file < environment < flags.

The file is TOML with the same keys as the dataclass fields; the
environment uses KAFKACOMPAT_<FIELD> (e.g. KAFKACOMPAT_PORT=9093,
KAFKACOMPAT_VOLUMES=/mnt/a,/mnt/b). Each field carries its help text, so
`serve --help`, `serve --print-config` and the flags are all made from
this one list and cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from kafkacompat.storage import InvalidPathError
from kafkacompat.storage.names import check_stream_path

from .security.client import SecurityConfigError, load_command_config
from .security.permissions import read_user_groups

ENV_PREFIX = "KAFKACOMPAT_"
SECRET_SUFFIXES = ("_password", "_secret_key")  # settings --print-config never shows
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")  # log_format (kafkacompat/log_format.py)
CONSUMER_GROUP_ASSIGNORS = ("uniform", "range")  # KIP-848 server-side assignors (kafkacompat/groups/assignors.py)
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")  # group.consumer.migration.policy
HTTP_AUTHENTICATIONS = ("none", "basic", "mtls", "oauthbearer")  # http_authentication (kafkacompat/http/principal.py)
# KAFKACOMPAT_* variables that are not broker settings, with who reads them.
OTHER_VARIABLES = {
    "BOOTSTRAP_SERVERS": "the default --bootstrap-server of the client commands",
    "VENV": "the virtual environment tests/run.sh uses",
    "SPARK_JARS": "the Spark Kafka connector jars (PySpark tests, `kafkacompat demo oilrig`)",
    "JARS_DIR": "the folder of test jars (Apache Kafka 4.1, Spark's connector) tests/run.sh finds",
    "JAVA_CLIENT_LIBS": "another kafka-clients (and its compression jars) for the Java compat driver",
    "REFERENCE_PORT": "a running Kafka 4.1 the differential tests use instead of starting one",
    "KAFKA_HOME": "the Apache Kafka 4.1 installation the compaction tests compare with",
    "TEST_STORE": "the engine of the tests' default broker: memory or cloud (PostgreSQL + S3, started by the tests)",
    "TEST_WORKERS": "the pytest-xdist workers tests/run.sh runs the suite on (2; 0: one process)",
    "KEEP_LOGS": "a folder where tests keep a copy of the log of each broker they start as a process",
}


def _setting(default: Any, help: str, *, metavar: str = "N", minimum: int | None = 0, flag: str | None = None) -> Any:
    """A dataclass field with what the command line needs to offer it."""
    meta = {"help": help, "metavar": metavar, "minimum": minimum, "flag": flag}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(slots=True)
class BrokerConfig:
    data_dir: str = _setting("./data", "first volume of the store, or memory:// to keep everything in memory",
                             metavar="DIR")
    volumes: list[str] = _setting([], "another data dir for partitionlets (repeatable; comma-separated in "
                                      "the environment)", metavar="DIR", flag="--volume")
    host: str = _setting("0.0.0.0", "address to listen on", metavar="HOST")
    port: int = _setting(9092, "port to listen on (0 picks a free one)", metavar="PORT")
    advertised_host: str | None = _setting(None, "host clients are told to connect to (default: the listen "
                                                 "address, or localhost for 0.0.0.0)", metavar="HOST")
    advertised_port: int | None = _setting(None, "port clients are told to connect to (default: the listen port)",
                                           metavar="PORT", minimum=1)
    node_id: int = _setting(1, "broker id reported in metadata, like node.id")
    workers: str = _setting("1", "broker processes sharing the store, each owning a share of the partitions "
                                 "(N, or auto: one per core); see docs/workers.md", metavar="N|auto")
    worker_of: str | None = _setting(None, "set by serve --workers for each worker it starts "
                                           "(INDEX/COUNT/EPOCH/PORTS/READY_FD, or spare); not for users",
                                     metavar="SPEC")
    spare_worker: bool = _setting(True, "with --workers: keep one more worker process started and waiting, which "
                                        "takes the place of the next worker to die without the start-up time; "
                                        "see docs/workers.md")
    cluster_id: str | None = _setting(None, "cluster id reported in metadata (default: a Kafka-style id made once "
                                            "per store and kept in it)", metavar="ID")
    default_stream: str = _setting("/default", "stream holding plain Kafka topic names such as 'orders'; "
                                               "created on start if missing", metavar="PATH")
    # limits, named and defaulted as Kafka's broker settings (dots become underscores)
    socket_request_max_bytes: int = _setting(100 * 1024 * 1024, "largest request accepted, like "
                                                                "socket.request.max.bytes", minimum=1)
    message_max_bytes: int = _setting(1_048_588, "largest record batch unless the topic sets max.message.bytes, "
                                                 "like message.max.bytes", minimum=1)
    max_connections: int = _setting(10_000, "connection limit, like max.connections (Kafka: 2147483647; a "
                                            "Python broker cannot serve that many)", minimum=1)
    max_connections_per_ip: int = _setting(2**31 - 1, "connection limit per client address, like "
                                                      "max.connections.per.ip", minimum=1)
    connections_max_idle_ms: int = _setting(600_000, "close connections with no traffic this long, like "
                                                     "connections.max.idle.ms", metavar="MS", minimum=1)
    queued_max_request_bytes: int = _setting(512 * 1024 * 1024, "bytes of large requests being received at once "
                                                                "across connections (a frame that would overrun "
                                                                "it waits), -1 for no limit, like "
                                                                "queued.max.request.bytes", minimum=-1)
    max_partitions_per_request: int = _setting(10_000, "partitions one CreateTopics or CreatePartitions request "
                                                       "may add (Kafka's controller refuses more with "
                                                       "POLICY_VIOLATION)", minimum=1)
    max_broker_partitions: int = _setting(100_000, "partitions in total on this broker, after KIP-578's "
                                                   "max.broker.partitions", minimum=1)
    producer_id_expiration_ms: int = _setting(24 * 3600 * 1000, "how long an idle idempotent producer's state is "
                                                                "kept, like producer.id.expiration.ms", minimum=1)
    auto_create_topics: bool = _setting(True, "create unknown topics on first use, like auto.create.topics.enable "
                                              "(streams can refuse too)", metavar="")
    retention_check_ms: int = _setting(60_000, "how often messages past their stream's ttl are deleted, like "
                                               "log.retention.check.interval.ms", metavar="MS", minimum=1)
    skip_damaged: bool = _setting(False, "let fetches step over damaged (quarantined) offsets, with a log line, "
                                         "instead of answering CORRUPT_MESSAGE for them", metavar="")
    # log compaction, named after Kafka's log.cleaner.* broker settings
    log_cleaner_enable: bool = _setting(True, "clean compacted topics (cleanup.policy=compact), like "
                                              "log.cleaner.enable", metavar="")
    log_cleaner_dedupe_buffer_size: int = _setting(128 * 1024 * 1024, "bytes of key -> offset map one cleaning "
                                                                      "may use, like log.cleaner.dedupe.buffer.size",
                                                   metavar="BYTES", minimum=1024)
    log_cleaner_backoff_ms: int = _setting(15_000, "pause between log cleaner passes, like log.cleaner.backoff.ms",
                                           metavar="MS", minimum=1)
    # consumer groups, named after Kafka's group.* and offsets.* broker settings
    group_initial_rebalance_delay_ms: int = _setting(3000, "wait for more members before the first rebalance of "
                                                           "a new group, like group.initial.rebalance.delay.ms",
                                                     metavar="MS")
    group_min_session_timeout_ms: int = _setting(6000, "smallest session timeout a member may ask for, like "
                                                       "group.min.session.timeout.ms", metavar="MS")
    group_max_session_timeout_ms: int = _setting(1_800_000, "largest session timeout a member may ask for, like "
                                                            "group.max.session.timeout.ms", metavar="MS")
    group_max_size: int = _setting(2**31 - 1, "most members in one group, like group.max.size", minimum=1)
    offset_metadata_max_bytes: int = _setting(4096, "largest metadata string of a committed offset, like "
                                                    "offset.metadata.max.bytes")
    # KIP-848 consumer groups (group.protocol=consumer), like Kafka's group.consumer.* settings
    group_consumer_session_timeout_ms: int = _setting(45_000, "session timeout of consumer-protocol members, like "
                                                              "group.consumer.session.timeout.ms", metavar="MS",
                                                      minimum=1)
    group_consumer_heartbeat_interval_ms: int = _setting(5_000, "heartbeat interval told to consumer-protocol "
                                                                "members, like group.consumer.heartbeat.interval.ms",
                                                         metavar="MS", minimum=1)
    group_consumer_min_session_timeout_ms: int = _setting(45_000, "smallest consumer.session.timeout.ms a group "
                                                                  "may set, like group.consumer.min.session.timeout.ms",
                                                          metavar="MS", minimum=1)
    group_consumer_max_session_timeout_ms: int = _setting(60_000, "largest consumer.session.timeout.ms a group "
                                                                  "may set, like group.consumer.max.session.timeout.ms",
                                                          metavar="MS", minimum=1)
    group_consumer_min_heartbeat_interval_ms: int = _setting(5_000, "smallest consumer.heartbeat.interval.ms a "
                                                                    "group may set, like "
                                                                    "group.consumer.min.heartbeat.interval.ms",
                                                             metavar="MS", minimum=1)
    group_consumer_max_heartbeat_interval_ms: int = _setting(15_000, "largest consumer.heartbeat.interval.ms a "
                                                                     "group may set, like "
                                                                     "group.consumer.max.heartbeat.interval.ms",
                                                             metavar="MS", minimum=1)
    group_consumer_max_size: int = _setting(2**31 - 1, "most members in one consumer group, like "
                                                       "group.consumer.max.size", minimum=1)
    group_consumer_assignors: list[str] = _setting(["uniform", "range"], "server-side assignors offered, the first "
                                                                        "the default, like group.consumer.assignors "
                                                                        "(uniform, range)", metavar="NAME",
                                                   flag="--group-consumer-assignor")
    group_consumer_migration_policy: str = _setting("bidirectional", "classic <-> consumer group conversions during "
                                                                     "rolling upgrades: bidirectional, upgrade, "
                                                                     "downgrade or disabled, like "
                                                                     "group.consumer.migration.policy",
                                                    metavar="POLICY")
    # KIP-1071 Streams groups (Kafka Streams' group.protocol=streams), like Kafka's group.streams.* settings
    group_streams_num_standby_replicas: int = _setting(0, "standby replicas of each task in Streams groups, like "
                                                          "group.streams.num.standby.replicas", minimum=0)
    group_streams_max_standby_replicas: int = _setting(2, "most streams.num.standby.replicas a group may set, like "
                                                          "group.streams.max.standby.replicas", minimum=0)
    group_streams_session_timeout_ms: int = _setting(45_000, "session timeout of Streams group members, like "
                                                             "group.streams.session.timeout.ms", metavar="MS",
                                                     minimum=1)
    group_streams_heartbeat_interval_ms: int = _setting(5_000, "heartbeat interval told to Streams group members, "
                                                               "like group.streams.heartbeat.interval.ms",
                                                        metavar="MS", minimum=1)
    group_streams_min_session_timeout_ms: int = _setting(45_000, "smallest streams.session.timeout.ms a group may "
                                                                 "set, like group.streams.min.session.timeout.ms",
                                                         metavar="MS", minimum=1)
    group_streams_max_session_timeout_ms: int = _setting(60_000, "largest streams.session.timeout.ms a group may "
                                                                 "set, like group.streams.max.session.timeout.ms",
                                                         metavar="MS", minimum=1)
    group_streams_min_heartbeat_interval_ms: int = _setting(5_000, "smallest streams.heartbeat.interval.ms a group "
                                                                   "may set, like "
                                                                   "group.streams.min.heartbeat.interval.ms",
                                                            metavar="MS", minimum=1)
    group_streams_max_heartbeat_interval_ms: int = _setting(15_000, "largest streams.heartbeat.interval.ms a group "
                                                                    "may set, like "
                                                                    "group.streams.max.heartbeat.interval.ms",
                                                            metavar="MS", minimum=1)
    # KIP-932 share groups (KafkaShareConsumer), like Kafka's share.version feature and group.share.* settings
    share_version: int = _setting(1, "the share.version feature level until kafka-features sets one (kept in "
                                     "the store), like kafka-storage format --feature: 1 serves share groups "
                                     "(KIP-932), 0 refuses them", metavar="LEVEL")
    group_share_session_timeout_ms: int = _setting(45_000, "session timeout of share group members, like "
                                                           "group.share.session.timeout.ms", metavar="MS", minimum=1)
    group_share_heartbeat_interval_ms: int = _setting(5_000, "heartbeat interval told to share group members, like "
                                                             "group.share.heartbeat.interval.ms", metavar="MS",
                                                      minimum=1)
    group_share_min_session_timeout_ms: int = _setting(45_000, "smallest share.session.timeout.ms a group may "
                                                               "set, like group.share.min.session.timeout.ms",
                                                       metavar="MS", minimum=1)
    group_share_max_session_timeout_ms: int = _setting(60_000, "largest share.session.timeout.ms a group may "
                                                               "set, like group.share.max.session.timeout.ms",
                                                       metavar="MS", minimum=1)
    group_share_min_heartbeat_interval_ms: int = _setting(5_000, "smallest share.heartbeat.interval.ms a group may "
                                                                 "set, like group.share.min.heartbeat.interval.ms",
                                                          metavar="MS", minimum=1)
    group_share_max_heartbeat_interval_ms: int = _setting(15_000, "largest share.heartbeat.interval.ms a group may "
                                                                  "set, like group.share.max.heartbeat.interval.ms",
                                                          metavar="MS", minimum=1)
    group_share_max_size: int = _setting(200, "most members in one share group, like group.share.max.size",
                                         minimum=1)
    group_share_record_lock_duration_ms: int = _setting(30_000, "how long a share group member holds records it "
                                                                "fetched before they go to another, like "
                                                                "group.share.record.lock.duration.ms", metavar="MS",
                                                        minimum=1)
    group_share_min_record_lock_duration_ms: int = _setting(15_000, "smallest share.record.lock.duration.ms a "
                                                                    "group may set, like "
                                                                    "group.share.min.record.lock.duration.ms",
                                                            metavar="MS", minimum=1)
    group_share_max_record_lock_duration_ms: int = _setting(60_000, "largest share.record.lock.duration.ms a group "
                                                                    "may set, like "
                                                                    "group.share.max.record.lock.duration.ms",
                                                            metavar="MS", minimum=1)
    group_share_delivery_count_limit: int = _setting(5, "deliveries of a record to a share group before it is "
                                                        "archived, like group.share.delivery.count.limit",
                                                     minimum=1)
    group_share_partition_max_record_locks: int = _setting(2000, "most records of one share-partition held by "
                                                                 "members at once, like "
                                                                 "group.share.partition.max.record.locks", minimum=1)
    offsets_retention_minutes: int = _setting(7 * 24 * 60, "how long an empty group's committed offsets are kept, "
                                                           "like offsets.retention.minutes", metavar="MIN",
                                              minimum=1)
    offsets_topic_num_partitions: int = _setting(50, "partitions of the internal __consumer_offsets topic, like "
                                                     "offsets.topic.num.partitions", minimum=1)
    offsets_retention_check_interval_ms: int = _setting(600_000, "how often expired committed offsets are removed, "
                                                                 "like offsets.retention.check.interval.ms",
                                                        metavar="MS", minimum=1)
    # the HTTP server beside the Kafka listeners: web console, REST proxy, /metrics and /health
    http_port: int | None = _setting(None, "port of the HTTP server: web console, REST proxy, /metrics and "
                                           "/health (0 picks a free one); no HTTP server unless set",
                                     metavar="PORT")
    http_host: str = _setting("127.0.0.1", "address the HTTP server listens on (loopback by default: "
                                           "without http_authentication anyone who reaches it acts as "
                                           "User:ANONYMOUS)", metavar="HOST")
    http_authentication: str = _setting("none", "how HTTP clients log in: none (everyone is User:ANONYMOUS), "
                                                "basic (HTTP Basic with the SCRAM users' passwords, as "
                                                "User:<name>; /health stays open), mtls (a client certificate "
                                                "signed by ssl_ca_location, named by ssl_principal_mapping_rules; "
                                                "needs http_tls) or oauthbearer (Authorization: Bearer JWT, "
                                                "checked as the OAUTHBEARER mechanism checks it)",
                                        metavar="none|basic|mtls|oauthbearer")
    http_tls: bool = _setting(False, "serve HTTPS with the ssl_certificate_location certificate and key of the "
                                     "SSL listeners")
    http_open: bool = _setting(False, "on a broker with an authorizer, serve the HTTP port without logins (every "
                                      "request is User:ANONYMOUS, still authorized; a warning at start); without "
                                      "it such a broker's http_authentication none means basic", metavar="")
    # the REST proxy on the HTTP port (Confluent REST Proxy v2/v3 compatible)
    rest_consumer_instance_timeout_ms: int = _setting(300_000, "idle REST consumer instances are deleted after "
                                                               "this long, like the REST Proxy's "
                                                               "consumer.instance.timeout.ms", metavar="MS",
                                                      minimum=1)
    rest_default_stream: str | None = _setting(None, "stream of topic names without one in REST requests, like "
                                                     "MapR's streams.default.stream (unset: the broker's default "
                                                     "stream)", metavar="PATH")
    metrics_topic_series: int = _setting(0, "topics that get their own bytes/messages series in /metrics (the "
                                            "first N seen; later ones count under topic=\"_other\"); 0 keeps "
                                            "broker totals only, so series stay bounded with many topics")
    # transactions, named after Kafka's transaction.* broker settings
    transaction_max_timeout_ms: int = _setting(900_000, "longest transaction.timeout.ms a producer may ask for, "
                                                        "like transaction.max.timeout.ms", metavar="MS", minimum=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _setting(
        10_000, "how often transactions open past their timeout are aborted, like "
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", metavar="MS", minimum=1)
    # security (kafkacompat/security), named after Kafka's listeners, ssl.* and sasl.* broker settings
    listeners: list[str] = _setting([], "a listener as NAME://HOST:PORT (repeatable), like listeners; NAME is "
                                        "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or a name mapped by "
                                        "listener_security_protocol_map; replaces the --host/--port PLAINTEXT "
                                        "listener", metavar="LISTENER", flag="--listener")
    advertised_listeners: list[str] = _setting([], "the address clients are told for a listener, NAME://HOST:PORT "
                                                   "(repeatable), like advertised.listeners", metavar="LISTENER",
                                               flag="--advertised-listener")
    listener_security_protocol_map: list[str] = _setting([], "NAME:PROTOCOL for a listener named other than its "
                                                             "protocol (repeatable), like "
                                                             "listener.security.protocol.map", metavar="NAME:PROTO",
                                                         flag="--listener-security-protocol")
    ssl_certificate_location: str | None = _setting(None, "PEM certificate (chain) of the SSL and SASL_SSL "
                                                          "listeners", metavar="FILE")
    ssl_key_location: str | None = _setting(None, "PEM private key of that certificate", metavar="FILE")
    ssl_key_password: str | None = _setting(None, "password of an encrypted private key", metavar="PASSWORD")
    ssl_ca_location: str | None = _setting(None, "PEM CA certificates that client certificates must chain to",
                                           metavar="FILE")
    ssl_client_auth: str = _setting("none", "client certificates: none, requested or required, like "
                                            "ssl.client.auth", metavar="MODE")
    ssl_principal_mapping_rules: str = _setting("DEFAULT", "certificate subject -> principal name, like "
                                                           "ssl.principal.mapping.rules (DEFAULT, "
                                                           "RULE:pattern/replacement/[LU], comma-separated)",
                                                metavar="RULES")
    sasl_enabled_mechanisms: list[str] = _setting(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                                                  "SASL mechanisms offered, like sasl.enabled.mechanisms (PLAIN "
                                                  "checks the password against the user's SCRAM credential; "
                                                  "OAUTHBEARER needs sasl_oauthbearer_jwks_endpoint_url)",
                                                  metavar="MECHANISM", flag="--sasl-enabled-mechanism")
    # SASL/OAUTHBEARER (KIP-255, KIP-768; kafkacompat/security/oauthbearer.py), named after Kafka's
    # sasl.oauthbearer.* broker settings
    sasl_oauthbearer_jwks_endpoint_url: str | None = _setting(None, "where the identity provider publishes the keys "
                                                                    "that sign access tokens (JWKS): an http(s):// "
                                                                    "URL or a file:// path, like "
                                                                    "sasl.oauthbearer.jwks.endpoint.url; needed by "
                                                                    "OAUTHBEARER and http_authentication oauthbearer",
                                                              metavar="URL")
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = _setting(3_600_000, "how often the JWKS is re-read (also when a "
                                                                         "token names a key id it lacks), like "
                                                                         "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                                                              metavar="MS", minimum=1000)
    sasl_oauthbearer_expected_issuer: str | None = _setting(None, "the `iss` a token must carry (unset: any), like "
                                                                  "sasl.oauthbearer.expected.issuer", metavar="ISS")
    sasl_oauthbearer_expected_audience: list[str] = _setting([], "an `aud` a token must carry, one of these "
                                                                 "(repeatable; unset: any), like "
                                                                 "sasl.oauthbearer.expected.audience",
                                                             metavar="AUD",
                                                             flag="--sasl-oauthbearer-expected-audience")
    sasl_oauthbearer_sub_claim_name: str = _setting("sub", "the claim naming the principal User:<value>, like "
                                                           "sasl.oauthbearer.sub.claim.name", metavar="CLAIM")
    sasl_oauthbearer_scope_claim_name: str = _setting("scope", "the claim holding the token's scopes, like "
                                                               "sasl.oauthbearer.scope.claim.name", metavar="CLAIM")
    sasl_oauthbearer_clock_skew_seconds: int = _setting(30, "leeway when checking `exp`, `nbf` and `iat` against "
                                                            "this clock, like sasl.oauthbearer.clock.skew.seconds",
                                                        metavar="S")
    connections_max_reauth_ms: int = _setting(0, "SASL session lifetime; clients re-authenticate before it ends "
                                                 "and a connection past it is closed, like "
                                                 "connections.max.reauth.ms (0: sessions never expire)",
                                              metavar="MS")
    sasl_server_max_receive_size: int = _setting(524_288, "largest SASL token accepted before authentication, "
                                                          "like sasl.server.max.receive.size", metavar="BYTES",
                                                 minimum=1)
    authentication_timeout_ms: int = _setting(10_000, "close a connection whose TLS handshake or SASL "
                                                      "authentication has not finished within this time",
                                              metavar="MS", minimum=1)
    connection_failed_authentication_delay_ms: int = _setting(
        100, "after a failed SASL authentication, keep the connection open this long once the refusal is sent, "
             "like connection.failed.authentication.delay.ms (clients read the error before the close)",
        metavar="MS", minimum=0)
    # delegation tokens (KIP-48; kafkacompat/security/delegation_tokens.py), named after Kafka's delegation.token.*
    delegation_token_secret_key: str | None = _setting(None, "secret that signs delegation tokens (their HMAC), like "
                                                             "delegation.token.secret.key; unset, the token APIs "
                                                             "answer DELEGATION_TOKEN_AUTH_DISABLED. Every broker of "
                                                             "a cluster needs the same; changing it invalidates every "
                                                             "token", metavar="KEY")
    delegation_token_max_lifetime_ms: int = _setting(7 * 24 * 3600 * 1000, "longest a token lives however often it "
                                                                           "is renewed, like "
                                                                           "delegation.token.max.lifetime.ms",
                                                     metavar="MS", minimum=1)
    delegation_token_expiry_time_ms: int = _setting(24 * 3600 * 1000, "how long a token lives after its creation or "
                                                                      "last renewal (renewals may ask for less), like "
                                                                      "delegation.token.expiry.time.ms",
                                                    metavar="MS", minimum=1)
    delegation_token_expiry_check_interval_ms: int = _setting(3_600_000, "how often tokens past their expiry are "
                                                                         "removed from the store, like "
                                                                         "delegation.token.expiry.check.interval.ms "
                                                                         "(they log no one in from the moment they "
                                                                         "expire)", metavar="MS", minimum=1)
    transactional_id_expiration_ms: int = _setting(
        604_800_000, "how long a transactional id with no open transaction is kept after its last update, "
                     "like transactional.id.expiration.ms", metavar="MS", minimum=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _setting(
        3_600_000, "how often expired transactional ids are removed, like "
                   "transaction.remove.expired.transaction.cleanup.interval.ms", metavar="MS", minimum=1)
    transaction_version: int = _setting(
        2, "the transaction.version feature level until kafka-features sets one (kept in the store), like "
           "kafka-storage format --feature: 2 (KIP-890 transactions v2, the default of a new Kafka 4.1 cluster) "
           "lets Java 4.x producers use it, 1 keeps every client on v1",
        metavar="LEVEL", minimum=1)
    # stream replication between clusters (kafkacompat/replication)
    cluster_name: str | None = _setting(None, "this cluster's name, kept in the store beside its UUID and shown to "
                                              "replicas (default: the name kept, else the data dir's name)",
                                        metavar="NAME")
    replication_client_config: str | None = _setting(
        None, "Kafka client properties (as for --command-config: security.protocol, sasl.mechanism, "
              "sasl.jaas.config, ssl.truststore.location, ...) with which replica links connect and log in to "
              "the destination brokers, like MirrorMaker's target cluster settings", metavar="FILE")
    # the cloud engine (storage/cloud): metadata in PostgreSQL, data as objects in an S3-compatible store
    store: str | None = _setting(None, "a postgresql://USER@HOST:PORT/DB store shared by the brokers of a cluster "
                                       "(default: the on-disk store in --data-dir); needs --object-store",
                                 metavar="URL")
    object_store: str | None = _setting(None, "s3://BUCKET/PREFIX for the data of a postgresql:// store; endpoint, "
                                              "region and credentials from AWS_ENDPOINT_URL, AWS_REGION, "
                                              "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY", metavar="URL")
    store_flush_ms: int = _setting(10, "how long produced batches are gathered before they are written as one "
                                       "object (postgresql:// store; like a broker-side linger.ms)", metavar="MS",
                                   minimum=1)
    store_cache_bytes: int = _setting(64 * 1024 * 1024, "bytes of stored batches kept in memory for fetches "
                                                        "(postgresql:// store)", metavar="BYTES")
    # many brokers as one cluster over a shared PostgreSQL database (kafkacompat/cluster/)
    cluster_url: str | None = _setting(None, "PostgreSQL database (postgresql://USER@HOST:PORT/DB) where brokers "
                                             "register and agree on partition leaders (default: the store's when "
                                             "it is PostgreSQL; unset: this broker alone is the cluster)",
                                       metavar="URL")
    cluster_lease_ms: int = _setting(6000, "a broker that has not renewed its lease for this long is dead and its "
                                           "partitions move, like broker.session.timeout.ms", metavar="MS",
                                     minimum=100)
    cluster_heartbeat_ms: int = _setting(1000, "how often a broker renews its lease and reads the leader table, "
                                               "like broker.heartbeat.interval.ms", metavar="MS", minimum=10)
    # authorization (kafkacompat/security; docs/security.md, "Stream permissions and ACLs")
    authorizer: bool = _setting(False, "check every request against Kafka ACLs and stream permission expressions, "
                                       "like setting authorizer.class.name (on by itself when --super-user is "
                                       "given); off, every client may do everything", metavar="")
    super_users: list[str] = _setting([], "a principal allowed everything, like super.users (repeatable; "
                                          "comma-separated in the environment), e.g. User:admin",
                                      metavar="PRINCIPAL", flag="--super-user")
    allow_everyone_if_no_acl_found: bool = _setting(False, "allow a request on a resource no ACL and no stream "
                                                           "expression names, like "
                                                           "allow.everyone.if.no.acl.found", metavar="")
    user_groups_file: str | None = _setting(None, "file of 'user: group, group' lines giving the groups of "
                                                  "g:GROUP expressions and Group:NAME ACL principals (re-read "
                                                  "when it changes)", metavar="FILE")
    log_level: str = _setting("INFO", "DEBUG, INFO, WARNING or ERROR; DEBUG also prints the traceback of a failed "
                                      "start", metavar="LEVEL")
    log_format: str = _setting("text", "text (one line each) or json (one JSON object a line: time, level, logger, "
                                       "message, traceback; for log shippers)", metavar="FORMAT")

    @property
    def store_url(self) -> str:
        return self.store or self.data_dir

    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host or (
            "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        )
        return host, self.advertised_port or self.port


class ConfigError(ValueError):
    pass


SETTINGS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(BrokerConfig)}


def env_name(setting: str) -> str:
    return ENV_PREFIX + setting.upper()


def flag_name(setting: str) -> str:
    return SETTINGS[setting].metadata.get("flag") or "--" + setting.replace("_", "-")


def setting_kind(field: dataclasses.Field[Any]) -> str:
    """'int', 'str', 'bool' or 'list[str]', optional or not."""
    return str(field.type).replace(" | None", "")


def _coerce(field: dataclasses.Field[Any], raw: Any) -> Any:
    """A value from text (environment) or TOML as the field's type; ConfigError says what is wrong."""
    kind = setting_kind(field)
    if isinstance(raw, str) and kind != "str":
        if kind == "int":
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{field.name} must be an integer, got {raw!r}") from None
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{field.name} must be true or false, got {raw!r}")
        if kind == "list[str]":
            return [part for part in raw.split(",") if part]
    expected = {"int": int, "bool": bool, "str": str, "list[str]": list}.get(kind)
    if expected is None:  # a kind this loader does not know: taken as given
        return raw
    if not isinstance(raw, expected) or (expected is int and isinstance(raw, bool)):
        raise ConfigError(f"{field.name} must be {'a list of strings' if expected is list else kind}, got {raw!r}")
    if expected is list and not all(isinstance(item, str) for item in raw):
        raise ConfigError(f"{field.name} must be a list of strings, got {raw!r}")
    return raw


def _check(config: BrokerConfig) -> None:
    for name, field in SETTINGS.items():
        value = getattr(config, name)
        minimum = field.metadata.get("minimum")
        if setting_kind(field) == "int" and value is not None and minimum is not None and value < minimum:
            raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    for name in ("port", "advertised_port", "http_port"):
        value = getattr(config, name)
        if value is not None and value > 65535:
            raise ConfigError(f"{name} must be a TCP port (at most 65535), got {value}")
    try:
        check_stream_path(config.default_stream)
    except InvalidPathError as exc:
        raise ConfigError(f"default_stream: {exc}") from None
    budget = config.queued_max_request_bytes
    if budget != -1 and budget < config.socket_request_max_bytes:
        raise ConfigError(f"queued_max_request_bytes ({budget}) must be -1 or at least socket_request_max_bytes "
                          f"({config.socket_request_max_bytes})")
    unknown = [a for a in config.group_consumer_assignors if a not in CONSUMER_GROUP_ASSIGNORS]
    if unknown or not config.group_consumer_assignors:
        raise ConfigError(f"group_consumer_assignors must list {' and/or '.join(CONSUMER_GROUP_ASSIGNORS)}, "
                          f"got {config.group_consumer_assignors}")
    if config.transaction_version > 2:
        raise ConfigError(f"transaction_version must be 1 or 2, got {config.transaction_version}")
    if config.share_version > 1:
        raise ConfigError(f"share_version must be 0 or 1, got {config.share_version}")
    if config.group_consumer_migration_policy not in MIGRATION_POLICIES:
        raise ConfigError(f"group_consumer_migration_policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                          f"got {config.group_consumer_migration_policy!r}")
    from .security.listeners import ListenerError, parse_listeners  # here: security imports this module

    try:
        parse_listeners(config)
    except ListenerError as exc:
        raise ConfigError(str(exc)) from None
    if config.store is not None and not config.store.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"store must be a postgresql://USER@HOST:PORT/DB url (use --data-dir for a directory), "
                          f"got {config.store!r}")
    if (config.store is None) != (config.object_store is None):
        raise ConfigError("store and object_store go together: --store postgresql://... --object-store s3://...")
    if config.object_store is not None and not config.object_store.startswith("s3://"):
        raise ConfigError(f"object_store must look like s3://BUCKET/PREFIX, got {config.object_store!r}")
    if config.cluster_heartbeat_ms * 2 > config.cluster_lease_ms:
        raise ConfigError(f"cluster_heartbeat_ms ({config.cluster_heartbeat_ms}) must be at most half of "
                          f"cluster_lease_ms ({config.cluster_lease_ms}), or one late heartbeat ends the lease")
    for principal in config.super_users:
        kind, sep, name = principal.partition(":")
        if not (kind and sep and name):
            raise ConfigError(f"super_users: {principal!r} is not a principal such as User:admin")
    if config.user_groups_file:
        try:
            read_user_groups(config.user_groups_file)
        except OSError as exc:
            raise ConfigError(f"user_groups_file: cannot read {config.user_groups_file}: "
                              f"{exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"user_groups_file: {exc}") from None
    if config.replication_client_config:
        try:
            load_command_config(config.replication_client_config, "the file")
        except SecurityConfigError as exc:
            raise ConfigError(f"replication_client_config: {exc}") from None
    if config.http_authentication not in HTTP_AUTHENTICATIONS:
        raise ConfigError(f"http_authentication must be one of {', '.join(HTTP_AUTHENTICATIONS)}, "
                          f"got {config.http_authentication!r}")
    if config.http_tls and not (config.ssl_certificate_location and config.ssl_key_location):
        raise ConfigError("http_tls needs ssl_certificate_location and ssl_key_location")
    if config.http_authentication == "mtls" and not (config.http_tls and config.ssl_ca_location):
        raise ConfigError("http_authentication mtls needs http_tls and ssl_ca_location (the CA of client certificates)")
    _check_oauthbearer(config)
    if config.log_level.upper() not in LOG_LEVELS:
        raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {config.log_level!r}")
    if config.log_format not in LOG_FORMATS:
        raise ConfigError(f"log_format must be one of {', '.join(LOG_FORMATS)}, got {config.log_format!r}")


def _check_oauthbearer(config: BrokerConfig) -> None:
    from .security.oauthbearer import MECHANISM, check_jwks_location  # here: security imports this module

    wanted = MECHANISM in config.sasl_enabled_mechanisms or config.http_authentication == "oauthbearer"
    url = config.sasl_oauthbearer_jwks_endpoint_url
    if wanted and not url:
        raise ConfigError("OAUTHBEARER (sasl_enabled_mechanisms or http_authentication) needs "
                          "sasl_oauthbearer_jwks_endpoint_url: the identity provider's JWKS (https://... or "
                          "file://...)")
    problem = check_jwks_location(url) if url else None
    if problem:
        raise ConfigError(f"sasl_oauthbearer_jwks_endpoint_url: {problem}")


def _flattened(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Kafka-style dotted keys (super.users = [...]) parse as TOML tables: back to one key each."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flattened(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def resolve_config(
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[BrokerConfig, dict[str, str]]:
    """The merged configuration and, per setting, where its value came from (for --print-config)."""
    values: dict[str, Any] = {}
    sources = {name: "default" for name in SETTINGS}
    if path:
        for key, value in _flattened(_read_file(path)).items():
            name = key.replace("-", "_").replace(".", "_")  # Kafka's spelling (super.users) works too
            if name not in SETTINGS:
                raise ConfigError(f"unknown setting {key!r} in {path}{_did_you_mean(name, SETTINGS)}")
            sources[name] = f"file {path}"
            values[name] = _coerced(SETTINGS[name], value, sources[name])
    env = os.environ if environ is None else environ
    for name, field in SETTINGS.items():
        raw = env.get(env_name(name))
        if raw is not None:
            sources[name] = f"environment {env_name(name)}"
            values[name] = _coerced(field, raw, sources[name])
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = value
            flag = flag_name(name)
            sources[name] = f"flag {'--no-' + flag[2:] if value is False else flag}"
    config = BrokerConfig(**values)
    try:
        _check(config)
    except ConfigError as exc:  # the setting the message starts with, if set anywhere, is named with its source
        name = str(exc).split(" ", 1)[0].rstrip(":")
        if sources.get(name, "default") == "default":
            raise
        raise ConfigError(f"{exc} ({_where(sources[name])})") from None
    return config, sources


def _where(source: str) -> str:
    """Where a value came from, for an error: 'environment variable KAFKACOMPAT_PORT', 'config file x.toml'..."""
    kind, _, name = source.partition(" ")
    return {"environment": f"environment variable {name}", "file": f"config file {name}"}.get(kind, source)


def _coerced(field: dataclasses.Field[Any], raw: Any, source: str) -> Any:
    try:
        return _coerce(field, raw)
    except ConfigError as exc:
        raise ConfigError(f"{exc} ({_where(source)})") from None


def load_config(
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> BrokerConfig:
    """Merge defaults, a TOML file, KAFKACOMPAT_* variables and explicit overrides."""
    return resolve_config(path, environ, overrides)[0]


def _did_you_mean(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per KAFKACOMPAT_* variable nobody reads: a misspelt setting is otherwise silently ignored."""
    env = os.environ if environ is None else environ
    known = {name.upper() for name in SETTINGS} | set(OTHER_VARIABLES)
    warnings = []
    for variable in sorted(env):
        suffix = variable[len(ENV_PREFIX):]
        if variable.startswith(ENV_PREFIX) and suffix not in known:
            close = difflib.get_close_matches(suffix, sorted(known), n=1)
            hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
            warnings.append(f"unknown environment variable {variable} is ignored{hint}")
    return warnings


def render_config(config: BrokerConfig, sources: Mapping[str, str]) -> str:
    """The effective settings as TOML (usable as --config FILE), each with its source as a comment."""
    lines = []
    for name in SETTINGS:
        value = getattr(config, name)
        if value is None:
            text = f"# {name} unset"
        elif name.endswith(SECRET_SUFFIXES):  # a secret is never printed
            text = f"# {name} set (not shown)"
        else:
            text = f"{name} = {_toml(value)}"
        lines.append((text, sources[name]))
    width = max(len(text) for text, _ in lines)
    return "\n".join(f"{text:<{width}}  # {source}" for text, source in lines)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
