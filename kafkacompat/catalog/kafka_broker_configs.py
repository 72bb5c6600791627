"""Kafka 4.1's broker config names, as its KafkaConfig and DynamicBrokerConfig define them (data only).

IncrementalAlterConfigs and AlterConfigs on a broker answer as Kafka 4.1
does: a name Kafka can change at run time is accepted (and kept, shown by
DescribeConfigs) even when kafkacompat has nothing it governs, a name Kafka
reads only at start is refused, a name Kafka does not know is accepted.
The table was read from the 4.1.0 jars (KafkaConfig.configDef and
DynamicBrokerConfig.AllDynamicConfigs / PerBrokerConfigs): name -> (type,
the value check Kafka's ConfigDef applies, per broker only).
"""

from __future__ import annotations

import dataclasses

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
TYPE_NAMES = {INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE"}


@dataclasses.dataclass(frozen=True, slots=True)
class AtLeast:
    low: int


@dataclasses.dataclass(frozen=True, slots=True)
class Between:
    low: float
    high: float
    also: int | None = None  # one more value allowed outside the range (compression.gzip.level's -1)


@dataclasses.dataclass(frozen=True, slots=True)
class OneOf:
    values: tuple[str, ...]


Check = AtLeast | Between | OneOf | None

# name -> (type, check, per broker only: "Cannot update these configs at default cluster level")
DYNAMIC: dict[str, tuple[int, Check, bool]] = {
    "background.threads": (INT, AtLeast(1), False),
    "compression.gzip.level": (INT, Between(1, 9, also=-1), False),
    "compression.lz4.level": (INT, Between(1, 17), False),
    "compression.type": (STRING, OneOf(('uncompressed', 'zstd', 'lz4', 'snappy', 'gzip', 'producer',)), False),
    "compression.zstd.level": (INT, Between(-131072, 22), False),
    "listener.security.protocol.map": (STRING, None, True),
    "listeners": (STRING, None, True),
    "log.cleaner.backoff.ms": (LONG, AtLeast(0), False),
    "log.cleaner.dedupe.buffer.size": (LONG, None, False),
    "log.cleaner.delete.retention.ms": (LONG, AtLeast(0), False),
    "log.cleaner.io.buffer.load.factor": (DOUBLE, None, False),
    "log.cleaner.io.buffer.size": (INT, AtLeast(0), False),
    "log.cleaner.io.max.bytes.per.second": (DOUBLE, None, False),
    "log.cleaner.max.compaction.lag.ms": (LONG, AtLeast(1), False),
    "log.cleaner.min.cleanable.ratio": (DOUBLE, Between(0, 1), False),
    "log.cleaner.min.compaction.lag.ms": (LONG, AtLeast(0), False),
    "log.cleaner.threads": (INT, AtLeast(0), False),
    "log.cleanup.policy": (LIST, OneOf(('compact', 'delete',)), False),
    "log.flush.interval.messages": (LONG, AtLeast(1), False),
    "log.flush.interval.ms": (LONG, None, False),
    "log.index.interval.bytes": (INT, AtLeast(0), False),
    "log.index.size.max.bytes": (INT, AtLeast(4), False),
    "log.local.retention.bytes": (LONG, AtLeast(-2), False),
    "log.local.retention.ms": (LONG, AtLeast(-2), False),
    "log.message.timestamp.after.max.ms": (LONG, AtLeast(0), False),
    "log.message.timestamp.before.max.ms": (LONG, AtLeast(0), False),
    "log.message.timestamp.type": (STRING, OneOf(('CreateTime', 'LogAppendTime',)), False),
    "log.preallocate": (BOOLEAN, None, False),
    "log.retention.bytes": (LONG, None, False),
    "log.retention.ms": (LONG, None, False),
    "log.roll.jitter.ms": (LONG, None, False),
    "log.roll.ms": (LONG, None, False),
    "log.segment.bytes": (INT, AtLeast(1048576), False),
    "log.segment.delete.delay.ms": (LONG, AtLeast(0), False),
    "max.connection.creation.rate": (INT, AtLeast(0), False),
    "max.connections": (INT, AtLeast(0), False),
    "max.connections.per.ip": (INT, AtLeast(0), False),
    "max.connections.per.ip.overrides": (STRING, None, False),
    "message.max.bytes": (INT, AtLeast(0), False),
    "metric.reporters": (LIST, None, False),
    "min.insync.replicas": (INT, AtLeast(1), False),
    "num.io.threads": (INT, AtLeast(1), False),
    "num.network.threads": (INT, AtLeast(1), False),
    "num.recovery.threads.per.data.dir": (INT, AtLeast(1), False),
    "num.replica.fetchers": (INT, None, False),
    "principal.builder.class": (CLASS, None, True),
    "producer.id.expiration.ms": (INT, AtLeast(1), False),
    "remote.fetch.max.wait.ms": (INT, AtLeast(1), False),
    "remote.list.offsets.request.timeout.ms": (LONG, AtLeast(1), False),
    "remote.log.index.file.cache.total.size.bytes": (LONG, AtLeast(1), False),
    "remote.log.manager.copier.thread.pool.size": (INT, AtLeast(1), False),
    "remote.log.manager.copy.max.bytes.per.second": (LONG, AtLeast(1), False),
    "remote.log.manager.expiration.thread.pool.size": (INT, AtLeast(1), False),
    "remote.log.manager.fetch.max.bytes.per.second": (LONG, AtLeast(1), False),
    "remote.log.reader.threads": (INT, AtLeast(1), False),
    "sasl.enabled.mechanisms": (LIST, None, True),
    "sasl.jaas.config": (PASSWORD, None, True),
    "sasl.kerberos.kinit.cmd": (STRING, None, True),
    "sasl.kerberos.min.time.before.relogin": (LONG, None, True),
    "sasl.kerberos.principal.to.local.rules": (LIST, None, True),
    "sasl.kerberos.service.name": (STRING, None, True),
    "sasl.kerberos.ticket.renew.jitter": (DOUBLE, None, True),
    "sasl.kerberos.ticket.renew.window.factor": (DOUBLE, None, True),
    "sasl.login.refresh.buffer.seconds": (SHORT, None, True),
    "sasl.login.refresh.min.period.seconds": (SHORT, None, True),
    "sasl.login.refresh.window.factor": (DOUBLE, None, True),
    "sasl.login.refresh.window.jitter": (DOUBLE, None, True),
    "sasl.mechanism.inter.broker.protocol": (STRING, None, True),
    "ssl.cipher.suites": (LIST, None, True),
    "ssl.client.auth": (STRING, OneOf(('required', 'requested', 'none',)), True),
    "ssl.enabled.protocols": (LIST, None, True),
    "ssl.endpoint.identification.algorithm": (STRING, None, True),
    "ssl.engine.factory.class": (CLASS, None, True),
    "ssl.key.password": (PASSWORD, None, True),
    "ssl.keymanager.algorithm": (STRING, None, True),
    "ssl.keystore.certificate.chain": (PASSWORD, None, True),
    "ssl.keystore.key": (PASSWORD, None, True),
    "ssl.keystore.location": (STRING, None, True),
    "ssl.keystore.password": (PASSWORD, None, True),
    "ssl.keystore.type": (STRING, None, True),
    "ssl.protocol": (STRING, None, True),
    "ssl.provider": (STRING, None, True),
    "ssl.secure.random.implementation": (STRING, None, True),
    "ssl.trustmanager.algorithm": (STRING, None, True),
    "ssl.truststore.certificates": (PASSWORD, None, True),
    "ssl.truststore.location": (STRING, None, True),
    "ssl.truststore.password": (PASSWORD, None, True),
    "ssl.truststore.type": (STRING, None, True),
    "transaction.partition.verification.enable": (BOOLEAN, None, False),
    "unclean.leader.election.enable": (BOOLEAN, None, False),
}

# Kafka 4.1's broker configs read only at start: "Cannot update these configs dynamically"
STATIC = frozenset("""
    add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms advertised.listeners alter.config.policy.class.name
    alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name auto.create.topics.enable
    auto.leader.rebalance.enable broker.heartbeat.interval.ms broker.id broker.rack
    broker.session.timeout.ms client.quota.callback.class connection.failed.authentication.delay.ms connections.max.idle.ms
    connections.max.reauth.ms controlled.shutdown.enable controller.listener.names controller.performance.always.log.threshold.ms
    controller.performance.sample.period.ms controller.quorum.append.linger.ms controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
    controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms
    controller.quorum.voters controller.quota.window.num controller.quota.window.size.seconds controller.socket.timeout.ms
    create.topic.policy.class.name default.replication.factor delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
    delegation.token.max.lifetime.ms delegation.token.secret.key delete.records.purgatory.purge.interval.requests delete.topic.enable
    early.start.listeners fetch.max.bytes fetch.purgatory.purge.interval.requests group.consumer.assignors
    group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms group.consumer.max.session.timeout.ms group.consumer.max.size
    group.consumer.migration.policy group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms group.consumer.regex.refresh.interval.ms
    group.consumer.session.timeout.ms group.coordinator.append.linger.ms group.coordinator.rebalance.protocols group.coordinator.threads
    group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size group.min.session.timeout.ms
    group.share.assignors group.share.delivery.count.limit group.share.enable group.share.heartbeat.interval.ms
    group.share.max.heartbeat.interval.ms group.share.max.record.lock.duration.ms group.share.max.session.timeout.ms group.share.max.share.sessions
    group.share.max.size group.share.min.heartbeat.interval.ms group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
    group.share.partition.max.record.locks group.share.persister.class.name group.share.record.lock.duration.ms group.share.session.timeout.ms
    group.streams.heartbeat.interval.ms group.streams.max.heartbeat.interval.ms group.streams.max.session.timeout.ms group.streams.max.size
    group.streams.max.standby.replicas group.streams.min.heartbeat.interval.ms group.streams.min.session.timeout.ms group.streams.num.standby.replicas
    group.streams.session.timeout.ms initial.broker.registration.timeout.ms inter.broker.listener.name internal.metadata.delete.delay.millis
    internal.metadata.log.segment.bytes internal.metadata.max.batch.size.in.bytes internal.metadata.max.fetch.size.in.bytes kafka.metrics.polling.interval.secs
    kafka.metrics.reporters leader.imbalance.check.interval.seconds log.cleaner.enable log.dir
    log.dir.failure.timeout.ms log.dirs log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
    log.flush.start.offset.checkpoint.interval.ms log.initial.task.delay.ms log.retention.check.interval.ms log.retention.hours
    log.retention.minutes log.roll.hours log.roll.jitter.hours max.incremental.fetch.session.cache.slots
    max.request.partition.size.limit metadata.log.dir metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
    metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms metadata.max.retention.bytes
    metadata.max.retention.ms metrics.num.samples metrics.recording.level metrics.sample.window.ms
    node.id num.partitions num.replica.alter.log.dirs.threads offset.metadata.max.bytes
    offsets.commit.timeout.ms offsets.load.buffer.size offsets.retention.check.interval.ms offsets.retention.minutes
    offsets.topic.compression.codec offsets.topic.num.partitions offsets.topic.replication.factor offsets.topic.segment.bytes
    process.roles producer.id.expiration.check.interval.ms producer.purgatory.purge.interval.requests queued.max.request.bytes
    queued.max.requests quota.window.num quota.window.size.seconds remote.log.manager.copy.quota.window.num
    remote.log.manager.copy.quota.window.size.seconds remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds remote.log.manager.task.interval.ms
    remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
    remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
    remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks remote.log.storage.manager.class.name remote.log.storage.manager.class.path
    remote.log.storage.manager.impl.prefix remote.log.storage.system.enable replica.fetch.backoff.ms replica.fetch.max.bytes
    replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms replica.high.watermark.checkpoint.interval.ms
    replica.lag.time.max.ms replica.selector.class replica.socket.receive.buffer.bytes replica.socket.timeout.ms
    replication.quota.window.num replication.quota.window.size.seconds request.timeout.ms sasl.client.callback.handler.class
    sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
    sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms sasl.mechanism.controller.protocol sasl.oauthbearer.assertion.algorithm
    sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file
    sasl.oauthbearer.assertion.private.key.passphrase sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id sasl.oauthbearer.client.credentials.client.secret
    sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.refresh.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.jwt.retriever.class
    sasl.oauthbearer.jwt.validator.class sasl.oauthbearer.scope sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class sasl.server.max.receive.size security.inter.broker.protocol
    security.providers server.max.startup.time.ms share.coordinator.append.linger.ms share.coordinator.cold.partition.snapshot.interval.ms
    share.coordinator.load.buffer.size share.coordinator.snapshot.update.records.per.snapshot share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
    share.coordinator.state.topic.num.partitions share.coordinator.state.topic.prune.interval.ms share.coordinator.state.topic.replication.factor share.coordinator.state.topic.segment.bytes
    share.coordinator.threads share.coordinator.write.timeout.ms share.fetch.purgatory.purge.interval.requests socket.connection.setup.timeout.max.ms
    socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes socket.request.max.bytes
    socket.send.buffer.bytes ssl.allow.dn.changes ssl.allow.san.changes ssl.principal.mapping.rules
    telemetry.max.bytes transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms transaction.remove.expired.transaction.cleanup.interval.ms
    transaction.state.log.load.buffer.size transaction.state.log.min.isr transaction.state.log.num.partitions transaction.state.log.replication.factor
    transaction.state.log.segment.bytes transaction.two.phase.commit.enable transactional.id.expiration.ms unclean.leader.election.interval.ms
    unstable.api.versions.enable unstable.feature.versions.enable
""".split())

LISTENER_PREFIX = "listener.name."  # listener.name.<listener>.<config>: per listener, so per broker
