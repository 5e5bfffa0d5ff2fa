"""DescribeQuorum (API 55, KIP-595/KIP-836/KIP-853): what ``kafka-metadata-quorum describe --status|--replication``
and the Admin client's ``describeMetadataQuorum`` ask of the ``__cluster_metadata`` partition.

tidelake has no Raft metadata quorum; the answer describes what stands in its place (``ClusterView.metadata_quorum``):
- a broker alone is its quorum's one voter and leader, at leader epoch 1 (a quorum elected once), its high
  watermark and log end offset the number of metadata states written to its metadata file (Kafka's: the metadata
  log's offset), fetched and caught up "now", as Kafka reports its leader; no observers.
- in a cluster (ZooKeeper mode) the controller ZooKeeper elected is the one voter and leader, the leader epoch is
  the controller epoch, and the other live brokers are observers; the metadata lives in ZooKeeper, with no log
  offsets: high watermark, log end offsets and timestamps are -1 (unknown). This keeps the tool's one question,
  who decides the metadata and since which election, answered truthfully; Kafka 3.x brokers in ZooKeeper mode
  refused the API instead, and a 4.x tool then prints an UnsupportedVersionException.
Directory ids are the zero id, as Kafka's for a voter of a static quorum (kraft.version 0). A request naming
anything but partition 0 of ``__cluster_metadata`` is answered UNKNOWN_TOPIC_OR_PARTITION per partition, as
Kafka's Raft client answers it."""
from __future__ import annotations

import uuid

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from tidelake import errors
from tidelake.broker.access import cluster_whole
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.security.acl.model import Operation

METADATA_TOPIC = "__cluster_metadata"
ZERO_DIRECTORY_ID = uuid.UUID(int=0)
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."

_Topic = DescribeQuorumResponse.TopicData
_Partition = _Topic.PartitionData


def _replica(replica_id: int, log_end_offset: int, timestamp: int):
    return _Partition.ReplicaState(replica_id=replica_id, replica_directory_id=ZERO_DIRECTORY_ID,
                                               log_end_offset=log_end_offset, last_fetch_timestamp=timestamp,
                                               last_caught_up_timestamp=timestamp)


@api(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2, access=cluster_whole(Operation.DESCRIBE))
async def describe_quorum(broker: BrokerContext, ctx: RequestContext, request):
    asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)] or len(request.topics) != 1:
        return DescribeQuorumResponse(error_code=errors.NONE, error_message=None, nodes=[], topics=[
            _Topic(topic_name=t.topic_name, partitions=[
                _Partition(partition_index=p.partition_index, error_code=errors.UnknownTopicOrPartition.code,
                           error_message=UNKNOWN_PARTITION_MESSAGE, leader_id=-1, leader_epoch=-1, high_watermark=-1,
                           current_voters=[], observers=[]) for p in t.partitions])
            for t in request.topics])
    quorum = broker.cluster_view.metadata_quorum()
    now = broker.clock_ms() if quorum.high_watermark >= 0 else -1
    partition = _Partition(
        partition_index=0, error_code=errors.NONE, error_message=None, leader_id=quorum.leader_id,
        leader_epoch=quorum.leader_epoch, high_watermark=quorum.high_watermark,
        current_voters=[_replica(quorum.leader_id, quorum.high_watermark, now)],
        observers=[_replica(b, -1, -1) for b in quorum.observers])
    return DescribeQuorumResponse(error_code=errors.NONE, error_message=None,
                                  topics=[_Topic(topic_name=METADATA_TOPIC, partitions=[partition])],
                                  nodes=_voter_nodes(broker, ctx, quorum.leader_id))


def _voter_nodes(broker: BrokerContext, ctx: RequestContext, leader_id: int) -> list:
    """The voter's address on the listener the client came in by (Kafka lists its controller listener)."""
    Node = DescribeQuorumResponse.Node
    listener = ctx.session.listener
    if leader_id == broker.node_id:
        endpoint = broker.endpoint_for(ctx)
        host, port = endpoint.host, endpoint.port
    else:
        found = [b for b in broker.cluster_view.live_brokers(listener) if b.broker_id == leader_id]
        if not found:
            return []
        host, port = found[0].host, found[0].port
    return [Node(node_id=leader_id, listeners=[Node.Listener(name=listener, host=host, port=port)])]
