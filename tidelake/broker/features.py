"""The feature flags a broker advertises in ApiVersions v3+ (KIP-584), as a Kafka 4.x broker does for the
features tidelake implements: ``transaction.version`` (KIP-890), supported 0-2 and finalized at the
broker config ``transaction.version`` (2, Kafka 4.0's level for a new cluster: transactions v2; 1 pins
the v1 protocol, whose clients never see the epoch bump or the implicit AddPartitions); ``streams.version``
(KIP-1071's streams groups), supported 0-1 and finalized at 1."""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.metadata import ApiVersionsResponse

from tidelake.broker.config import BrokerConfig

TRANSACTION_VERSION = "transaction.version"  # the feature's and the broker config's name
TRANSACTION_VERSION_SUPPORTED = (0, 2)  # the levels this broker can run, as Kafka 4.x's TransactionVersion
# The finalized features' epoch. Kafka's is the metadata offset that finalized them; a broker here finalizes
# them from its config at start, once. Clients take finalized features only from an epoch >= 0.
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
        return cls(config.get_int(TRANSACTION_VERSION))

    @property
    def transactions_v2(self) -> bool:
        """Whether the v2 transaction protocol runs: epoch bump per transaction, implicit AddPartitions."""
        return self.transaction_version >= 2

    def supported(self) -> list:
        low, high = TRANSACTION_VERSION_SUPPORTED
        return [ApiVersionsResponse.SupportedFeatureKey(name=TRANSACTION_VERSION, min_version=low, max_version=high),
                ApiVersionsResponse.SupportedFeatureKey(name=STREAMS_VERSION, min_version=STREAMS_VERSION_SUPPORTED[0],
                                                        max_version=STREAMS_VERSION_SUPPORTED[1])]

    def finalized(self) -> list:
        level = STREAMS_VERSION_FINALIZED
        streams = ApiVersionsResponse.FinalizedFeatureKey(name=STREAMS_VERSION, max_version_level=level,
                                                          min_version_level=level)
        # a feature at level 0 is not finalized (Kafka lists none then)
        if self.transaction_version == 0:
            return [streams]
        level = self.transaction_version
        return [ApiVersionsResponse.FinalizedFeatureKey(name=TRANSACTION_VERSION, max_version_level=level,
                                                        min_version_level=level), streams]
