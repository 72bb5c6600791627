"""The API-version table this broker serves, and header versions per API.

Only what is implemented is advertised: Java clients call some APIs
(DescribeTopicPartitions, GetTelemetrySubscriptions, ...) by themselves as
soon as they appear in ApiVersions.
"""

from __future__ import annotations

import functools

from kio.index import KioIndexError, load_entity_module
from kio.schema.index import api_key_map
from kio.static.constants import EntityType

from .admin_api import STREAM_ADMIN_KEY, STREAM_ADMIN_NAME, STREAM_ADMIN_VERSION
from .replication_api import REPLICATE_KEY, REPLICATE_NAME, REPLICATE_VERSION

# api key -> (min, max) served. Filled in as handlers are registered.
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (0, 13),  # Produce; 0-2 answered with UNSUPPORTED_VERSION (librdkafka needs min 0); v13 names topics by id
    1: (4, 17),  # Fetch
    2: (1, 10),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch; v8+ batches groups
    10: (0, 6),  # FindCoordinator; v4+ batches keys
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn; v4+ is the brokers' batched form, v5 transactions v2 (KIP-890)
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn; v5 is transactions v2: a new epoch at every end (KIP-890)
    27: (1, 1),  # WriteTxnMarkers (Kafka 4.1 serves v1 only): kafka-transactions.sh abort
    28: (0, 5),  # TxnOffsetCommit; v5 adds the group to the transaction (KIP-890 part 2)
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    35: (1, 4),  # DescribeLogDirs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    55: (0, 2),  # DescribeQuorum: the controller as the metadata quorum's one voter (Kafka forwards it)
    57: (0, 2),  # UpdateFeatures; v2 answers no per-feature results
    60: (0, 1),  # DescribeCluster
    64: (0, 0),  # UnregisterBroker
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848); v1: the client makes its member id
    69: (0, 1),  # ConsumerGroupDescribe
    61: (0, 0),  # DescribeProducers
    74: (0, 1),  # ListConfigResources (v0: ListClientMetricsResources)
    75: (0, 0),  # DescribeTopicPartitions
    65: (0, 0),  # DescribeTransactions
    66: (0, 2),  # ListTransactions
    17: (0, 1),  # SaslHandshake; v0: the tokens follow as bare frames
    36: (0, 2),  # SaslAuthenticate; v1+ carries the session lifetime (KIP-368 re-authentication)
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    29: (1, 3),  # DescribeAcls (v0 is gone since Kafka 4.0)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    38: (1, 3),  # CreateDelegationToken (v0 is gone since Kafka 4.0); v3 names an owner (KIP-373)
    39: (1, 2),  # RenewDelegationToken
    40: (1, 2),  # ExpireDelegationToken
    41: (1, 3),  # DescribeDelegationToken; v3 shows each token's requester
    34: (1, 2),  # AlterReplicaLogDirs (v0 is gone since Kafka 4.0)
    76: (1, 1),  # ShareGroupHeartbeat (KIP-932; v0 was Kafka 4.0's early access, gone in 4.1)
    78: (1, 1),  # ShareFetch
    79: (1, 1),  # ShareAcknowledge
    77: (1, 1),  # ShareGroupDescribe
    90: (0, 0),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
    88: (0, 0),  # StreamsGroupHeartbeat (KIP-1071; v0 is what Kafka Streams 4.1 sends)
    89: (0, 0),  # StreamsGroupDescribe
}

# Private APIs this broker serves but never advertises: stock clients must not see them.
UNADVERTISED: dict[int, tuple[int, int]] = {
    STREAM_ADMIN_KEY: (STREAM_ADMIN_VERSION, STREAM_ADMIN_VERSION),  # the admin CLI's stream API
    REPLICATE_KEY: (REPLICATE_VERSION, REPLICATE_VERSION),  # stream replication between clusters
}

API_VERSIONS_KEY = 18


def api_name(api_key: int) -> str:
    if api_key == STREAM_ADMIN_KEY:
        return STREAM_ADMIN_NAME
    if api_key == REPLICATE_KEY:
        return REPLICATE_NAME
    return api_key_map.get(api_key, f"api_{api_key}")


@functools.cache
def schema(api_key: int, version: int, kind: EntityType) -> type:
    """The kio dataclass for (api, version, request|response)."""
    module = load_entity_module(api_key_map[api_key], version, kind)
    suffix = "Request" if kind == EntityType.request else "Response"
    for name in dir(module):
        obj = getattr(module, name)
        if (
            isinstance(obj, type)
            and name.endswith(suffix)
            and getattr(obj, "__type__", None) == kind
            and getattr(obj, "__api_key__", None) == api_key
        ):
            return obj
    raise LookupError(f"no {suffix} schema for api {api_key} v{version}")


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api, version) uses compact encodings and tagged fields."""
    try:
        return bool(schema(api_key, version, EntityType.request).__flexible__)
    except (LookupError, KioIndexError, ImportError):
        return False
