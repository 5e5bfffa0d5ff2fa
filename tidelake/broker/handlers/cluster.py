"""The controller's requests to brokers (ZooKeeper mode): LeaderAndIsr, UpdateMetadata, StopReplica.
A broker that is not one of a cluster (no zookeeper.connect) has no controller to obey: it answers
with STALE_CONTROLLER_EPOCH, as a broker does to a controller it does not recognise.

ElectLeaders (KIP-460, an admin request clients send to the controller) is here too: on a single
broker every partition already has its only possible leader (ELECTION_NOT_NEEDED). So is
ControlledShutdown, a stopping broker's request to the controller. So are Alter/ListPartitionReassignments
(KIP-455): the controller reassigns; elsewhere NOT_CONTROLLER, so Kafka's admin client asks the controller its
metadata names; a single broker has nowhere to move a replica to."""
from __future__ import annotations

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.access import cluster_whole
from tidelake.security.acl.model import Operation as O
from tidelake.broker.registry import api
from tidelake.protocol.messages import (ControlledShutdownRequest, ControlledShutdownResponse, LeaderAndIsrRequest,
                                        LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
                                        UpdateMetadataRequest, UpdateMetadataResponse)


def _single_broker() -> errors.KafkaApiError:
    return errors.StaleControllerEpoch("this broker is not in a cluster (no zookeeper.connect)")


@api(LeaderAndIsrRequest, LeaderAndIsrResponse, 0, 5, access=cluster_whole(O.CLUSTER_ACTION))
async def leader_and_isr(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_leader_and_isr(request, ctx.api_version)


@api(UpdateMetadataRequest, UpdateMetadataResponse, 0, 7, access=cluster_whole(O.CLUSTER_ACTION))
async def update_metadata(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_update_metadata(request, ctx.api_version)


@api(StopReplicaRequest, StopReplicaResponse, 0, 3, access=cluster_whole(O.CLUSTER_ACTION))
async def stop_replica(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_stop_replica(request, ctx.api_version)


_ERTopic = ElectLeadersResponse.ReplicaElectionResult
_ERPartition = _ERTopic.PartitionResult
PREFERRED, UNCLEAN = 0, 1


@api(ElectLeadersRequest, ElectLeadersResponse, 0, 2, access=cluster_whole(O.ALTER))
async def elect_leaders(broker: BrokerContext, ctx: RequestContext, request):
    unclean = ctx.api_version >= 1 and request.election_type == UNCLEAN
    wanted = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if broker.cluster is not None:
        results = await broker.cluster.elect_leaders(wanted, unclean)  # NotController: the client retries
    else:
        results = {}
        for key in (wanted if wanted is not None else
                    [(n, p) for n, info in broker.metadata.topics.items() for p in range(info.partitions)]):
            exists = broker.logs.get(*key) is not None
            results[key] = ((errors.ElectionNotNeeded.code, "a single broker leads every partition") if exists
                            else (errors.UnknownTopicOrPartition.code, f"{key[0]}-{key[1]} does not exist"))
    by_topic: dict[str, list] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(_ERPartition(partition_id=p, error_code=code, error_message=message))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=errors.NONE, replica_election_results=[
        _ERTopic(topic=t, partition_result=ps) for t, ps in by_topic.items()])


@api(ControlledShutdownRequest, ControlledShutdownResponse, 0, 2, access=cluster_whole(O.CLUSTER_ACTION))
async def controlled_shutdown(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise errors.NotController("this broker is not in a cluster (no zookeeper.connect)")
    remaining = await broker.cluster.handle_controlled_shutdown(
        request.broker_id, request.broker_epoch if ctx.api_version >= 2 else -1)
    R = ControlledShutdownResponse.RemainingPartition
    return ControlledShutdownResponse(error_code=errors.NONE, remaining_partitions=[
        R(topic_name=t, partition_index=p) for t, p in remaining])


_ARTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_ARPartition = _ARTopic.ReassignablePartitionResponse


@api(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1,
     access=cluster_whole(O.ALTER))
async def alter_partition_reassignments(broker: BrokerContext, ctx: RequestContext, request):
    wanted = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
              for t in request.topics for p in t.partitions}
    allow_rf_change = ctx.api_version < 1 or request.allow_replication_factor_change
    if broker.cluster is not None:
        results = await broker.cluster.alter_partition_reassignments(wanted, allow_rf_change)  # NotController
    else:
        results = {}
        for (topic, p), target in wanted.items():
            if broker.logs.get(topic, p) is None:
                results[(topic, p)] = (errors.UnknownTopicOrPartition.code, f"{topic}-{p} does not exist")
            elif target is None:
                results[(topic, p)] = (errors.NoReassignmentInProgress.code,
                                       f"no reassignment of {topic}-{p} is in progress")
            elif target != [broker.node_id]:
                results[(topic, p)] = (errors.InvalidReplicaAssignment.code,
                                       f"Unknown broker ids in partition reassignment replica list: "
                                       f"{[r for r in target if r != broker.node_id] or target}")
            else:
                results[(topic, p)] = (errors.NONE, None)
    by_topic: dict[str, list] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(_ARPartition(partition_index=p, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=allow_rf_change, error_code=errors.NONE,
        error_message=None, responses=[_ARTopic(name=t, partitions=ps) for t, ps in by_topic.items()])


_LRTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_LRPartition = _LRTopic.OngoingPartitionReassignment


@api(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0,
     access=cluster_whole(O.DESCRIBE))
async def list_partition_reassignments(broker: BrokerContext, ctx: RequestContext, request):
    wanted = None if request.topics is None else [(t.name, p) for t in request.topics for p in t.partition_indexes]
    ongoing = broker.cluster.list_partition_reassignments(wanted) if broker.cluster is not None else {}
    by_topic: dict[str, list] = {}
    for (topic, p), ra in ongoing.items():
        by_topic.setdefault(topic, []).append(_LRPartition(partition_index=p, replicas=list(ra.replicas),
                                                           adding_replicas=list(ra.adding),
                                                           removing_replicas=list(ra.removing)))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                                              topics=[_LRTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
