"""compat_tests/java/ShareGroups.java, compiled against kafka-clients 4.1.0 (KafkaShareConsumer is 4.x only).

Shared by the single-broker comparison with Kafka 4.1
(compat_tests/test_share_groups_java.py) and the cluster failover test
(tests/cluster/test_share_failover.py).
"""

from __future__ import annotations

import functools

from ..reference import kafka_home
from .java import JVM_FLAGS, SOURCES, compile_sources

CLIENT_JARS_41 = ("kafka-clients-4.1.0.jar", "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar",
                  "zstd-jni-1.5.6-10.jar", "slf4j-api-1.7.36.jar")


@functools.cache
def share_groups_program() -> list[str]:
    """`java ... ShareGroups`; skips the test without the Kafka 4.1 distribution or a JDK."""
    libs = kafka_home() / "libs"
    cp = ":".join(str(libs / jar) for jar in CLIENT_JARS_41)
    classes = compile_sources([str(SOURCES / name) for name in ("ShareGroups.java", "TestProgram.java")], cp)
    return ["java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", "ShareGroups"]
