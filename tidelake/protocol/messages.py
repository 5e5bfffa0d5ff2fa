"""Kafka API messages kafka-python does not ship, generated the same way kafka-python generates its
own: from Kafka's JSON message specs in ``tidelake/protocol/schemas/<Name>.json``."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "tidelake.protocol.schemas"


# KIP-848, the consumer group protocol
class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS): pass
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS): pass
class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS): pass
class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS): pass


# Inter-broker requests of ZooKeeper mode (controller -> broker)
class LeaderAndIsrRequest(ApiMessage, load_json=_SCHEMAS): pass
class LeaderAndIsrResponse(ApiMessage, load_json=_SCHEMAS): pass
class UpdateMetadataRequest(ApiMessage, load_json=_SCHEMAS): pass
class UpdateMetadataResponse(ApiMessage, load_json=_SCHEMAS): pass
class StopReplicaRequest(ApiMessage, load_json=_SCHEMAS): pass
class StopReplicaResponse(ApiMessage, load_json=_SCHEMAS): pass
class ControlledShutdownRequest(ApiMessage, load_json=_SCHEMAS): pass  # broker -> controller
class ControlledShutdownResponse(ApiMessage, load_json=_SCHEMAS): pass


# KIP-932, share groups (Kafka 4.2's versions)
class ShareGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS): pass
class ShareGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS): pass
class ShareGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS): pass
class ShareGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS): pass
class ShareFetchRequest(ApiMessage, load_json=_SCHEMAS): pass
class ShareFetchResponse(ApiMessage, load_json=_SCHEMAS): pass
class ShareAcknowledgeRequest(ApiMessage, load_json=_SCHEMAS): pass
class ShareAcknowledgeResponse(ApiMessage, load_json=_SCHEMAS): pass
class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS): pass
class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS): pass
class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS): pass
class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS): pass
class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS): pass
class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS): pass


# KIP-932's inter-broker share-state APIs: a partition leader reads and writes its share-partitions' state at the
# share coordinator (the leader of the state's __share_group_state partition)
class InitializeShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS): pass
class InitializeShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS): pass
class ReadShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS): pass
class ReadShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS): pass
class WriteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS): pass
class WriteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS): pass
class DeleteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS): pass
class DeleteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS): pass


# KIP-1071, streams groups (Kafka 4.4's versions)
class StreamsGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS): pass
class StreamsGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS): pass
class StreamsGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS): pass
class StreamsGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS): pass
