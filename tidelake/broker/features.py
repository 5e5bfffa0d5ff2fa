"""The feature flags a broker advertises in ApiVersions v3+ (KIP-584), as a Kafka 4.x broker does for the
features tidelake implements: ``transaction.version`` (KIP-890), supported 0-2 and finalized at the
broker config ``transaction.version`` (2, Kafka 4.0's level for a new cluster: transactions v2; 1 pins
the v1 protocol, whose clients never see the epoch bump or the implicit AddPartitions; UpdateFeatures on a broker
alone finalizes another level, kept in the metadata file and winning over the config); ``streams.version``
(KIP-1071's streams groups), supported 0-1 and finalized at 1; ``group.version`` and ``share.version`` at 1 (below)."""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.metadata import ApiVersionsResponse

from tidelake.broker.config import BrokerConfig

TRANSACTION_VERSION = "transaction.version"  # the feature's and the broker config's name
TRANSACTION_VERSION_SUPPORTED = (0, 2)  # the levels this broker can run, as Kafka 4.x's TransactionVersion
# The finalized features' epoch where no metadata offset is at hand. Kafka's is the metadata offset that finalized
# them; ApiVersions answers the metadata file's (``MetadataStore.metadata_offset``), which UpdateFeatures moves.
# Clients take finalized features only from an epoch >= 0.
FINALIZED_FEATURES_EPOCH = 0
# KIP-1071's streams groups: level 1 serves StreamsGroupHeartbeat / StreamsGroupDescribe; Kafka 4.4 finalizes it at 1
# for a new cluster, and its Streams client with group.protocol=streams refuses a broker that does not
STREAMS_VERSION = "streams.version"
STREAMS_VERSION_SUPPORTED = (0, 1)
STREAMS_VERSION_FINALIZED = 1


@dataclass(frozen=True)
class Features:
    transaction_version: int  # the finalized level of transaction.version

    @classmethod
    def of(cls, config: BrokerConfig) -> "Features":
        return cls(config.feature_level(TRANSACTION_VERSION))

    @property
    def transactions_v2(self) -> bool:
        """Whether the v2 transaction protocol runs: epoch bump per transaction, implicit AddPartitions."""
        return self.transaction_version >= 2

    def supported(self) -> list:
        low, high = TRANSACTION_VERSION_SUPPORTED
        return [ApiVersionsResponse.SupportedFeatureKey(name=TRANSACTION_VERSION, min_version=low, max_version=high),
                ApiVersionsResponse.SupportedFeatureKey(name=STREAMS_VERSION, min_version=STREAMS_VERSION_SUPPORTED[0],
                                                        max_version=STREAMS_VERSION_SUPPORTED[1]),
                *fixed_supported()]

    def finalized(self) -> list:
        level = STREAMS_VERSION_FINALIZED
        streams = ApiVersionsResponse.FinalizedFeatureKey(name=STREAMS_VERSION, max_version_level=level,
                                                          min_version_level=level)
        # a feature at level 0 is not finalized (Kafka lists none then)
        if self.transaction_version == 0:
            return [streams, *fixed_finalized()]
        level = self.transaction_version
        return [ApiVersionsResponse.FinalizedFeatureKey(name=TRANSACTION_VERSION, max_version_level=level,
                                                        min_version_level=level), streams, *fixed_finalized()]


# -- the features tidelake serves at one level only, and UpdateFeatures' view of all of them (wt-kcli2) ------------
# group.version (KIP-848's consumer group protocol) and share.version (KIP-932's share groups): tidelake serves both
# always, at Kafka's level 1, and can run no other (share.version 2 is KIP-1191's share-group dead-letter queue,
# which it lacks), so each is supported 1-1 and finalized at 1. metadata.version is not advertised: its levels
# version KRaft's metadata records and inter-broker protocols, and tidelake has neither (its metadata is a file,
# or ZooKeeper's znodes), so no level would mean anything; kraft.version and eligible.leader.replicas.version
# likewise (no Raft quorum, no ELR).
GROUP_VERSION, SHARE_VERSION = "group.version", "share.version"
FIXED_FEATURE_LEVELS = {GROUP_VERSION: 1, SHARE_VERSION: 1}


def fixed_supported() -> list:
    return [ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=level, max_version=level)
            for name, level in FIXED_FEATURE_LEVELS.items()]


def fixed_finalized() -> list:
    return [ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in FIXED_FEATURE_LEVELS.items()]


def supported_levels(name: str) -> tuple[int, int] | None:
    """The levels of feature ``name`` this broker advertises (None: a feature it does not know)."""
    if name == TRANSACTION_VERSION:
        return TRANSACTION_VERSION_SUPPORTED
    if name == STREAMS_VERSION:
        return STREAMS_VERSION_SUPPORTED
    if name in FIXED_FEATURE_LEVELS:
        return FIXED_FEATURE_LEVELS[name], FIXED_FEATURE_LEVELS[name]
    return None


def finalized_level(config: BrokerConfig, name: str) -> int:
    """Feature ``name``'s finalized level (0: not finalized, as Kafka reads an absent feature)."""
    if name == TRANSACTION_VERSION:
        return Features.of(config).transaction_version
    if name == STREAMS_VERSION:
        return STREAMS_VERSION_FINALIZED
    return FIXED_FEATURE_LEVELS.get(name, 0)
