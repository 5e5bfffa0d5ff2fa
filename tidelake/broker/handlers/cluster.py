"""The controller's requests to brokers (ZooKeeper mode): LeaderAndIsr, UpdateMetadata, StopReplica.
A broker that is not one of a cluster (no zookeeper.connect) has no controller to obey: it answers
with STALE_CONTROLLER_EPOCH, as a broker does to a controller it does not recognise."""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.protocol.messages import (LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest,
                                        StopReplicaResponse, UpdateMetadataRequest, UpdateMetadataResponse)


def _single_broker() -> errors.KafkaApiError:
    return errors.StaleControllerEpoch("this broker is not in a cluster (no zookeeper.connect)")


@api(LeaderAndIsrRequest, LeaderAndIsrResponse, 0, 5)
async def leader_and_isr(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_leader_and_isr(request, ctx.api_version)


@api(UpdateMetadataRequest, UpdateMetadataResponse, 0, 7)
async def update_metadata(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_update_metadata(request, ctx.api_version)


@api(StopReplicaRequest, StopReplicaResponse, 0, 3)
async def stop_replica(broker: BrokerContext, ctx: RequestContext, request):
    if broker.cluster is None:
        raise _single_broker()
    return await broker.cluster.handle_stop_replica(request, ctx.api_version)
