"""The controller's inter-broker requests, built from Kafka's JSON specs (``protocol/messages.py``):
LeaderAndIsr v5, UpdateMetadata v7, StopReplica v3 (the newest versions of ZooKeeper mode's specs).

Each carries the recipient's broker epoch (KIP-380) as the controller knows it, so a broker that restarted since
refuses what was meant for its previous process (STALE_BROKER_EPOCH). The field is named MaxBrokerEpoch in these
specs and BrokerEpoch in Kafka 3.x's; it is the same int64 at the same place."""
from __future__ import annotations

from typing import Any, Iterable

from tidelake.cluster.znodes import SECURITY_PROTOCOL_IDS, BrokerRegistration, PartitionState
from tidelake.protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3

_LTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_LPartition = _LTopic.LeaderAndIsrPartitionState
_LLive = LeaderAndIsrRequest.LeaderAndIsrLiveLeader
_UTopic = UpdateMetadataRequest.UpdateMetadataTopicState
_UPartition = _UTopic.UpdateMetadataPartitionState
_UBroker = UpdateMetadataRequest.UpdateMetadataBroker
_UEndpoint = _UBroker.UpdateMetadataEndpoint
_STopic = StopReplicaRequest.StopReplicaTopic


def leader_and_isr_request(controller_id: int, controller_epoch: int, broker_epoch: int,
                           states: Iterable[tuple[str, int, PartitionState, list[int], list[int], list[int]]],
                           is_new: bool, live_leaders: Iterable[tuple[int, BrokerRegistration, str]]
                           ) -> tuple[Any, int]:
    """``states``: (topic, partition, state, replicas, adding replicas, removing replicas) — the last two
    non-empty while the partition is being reassigned (KIP-455)."""
    by_topic: dict[str, list] = {}
    for topic, p, st, replicas, adding, removing in states:
        by_topic.setdefault(topic, []).append(_LPartition(
            partition_index=p, controller_epoch=st.controller_epoch, leader=st.leader, leader_epoch=st.leader_epoch,
            isr=list(st.isr), zk_version=st.zk_version, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing), is_new=is_new))
    leaders = []
    for bid, reg, listener in live_leaders:
        ep = next((e for e in reg.endpoints if e.listener == listener), reg.endpoint())
        leaders.append(_LLive(broker_id=bid, host_name=ep.host, port=ep.port))
    return LeaderAndIsrRequest(controller_id=controller_id, controller_epoch=controller_epoch,
                               max_broker_epoch=broker_epoch,
                               topic_states=[_LTopic(topic_name=t, partition_states=ps) for t, ps in by_topic.items()],
                               live_leaders=leaders), LEADER_AND_ISR_VERSION


def update_metadata_request(controller_id: int, controller_epoch: int, broker_epochs: Iterable[int],
                            partitions: Iterable[tuple[str, int, PartitionState, list[int], list[int]]],
                            live: Iterable[BrokerRegistration]) -> dict[int, tuple[Any, int]]:
    """One request per recipient's broker epoch in ``broker_epochs`` (the same topics and brokers in each)."""
    by_topic: dict[str, list] = {}
    for topic, p, st, replicas, offline in partitions:
        by_topic.setdefault(topic, []).append(_UPartition(
            partition_index=p, controller_epoch=st.controller_epoch, leader=st.leader, leader_epoch=st.leader_epoch,
            isr=list(st.isr), zk_version=st.zk_version, replicas=list(replicas), offline_replicas=list(offline)))
    brokers = [_UBroker(id=reg.broker_id, endpoints=[
        _UEndpoint(port=ep.port, host=ep.host, listener=ep.listener,
                   security_protocol=SECURITY_PROTOCOL_IDS.get(ep.protocol, 0)) for ep in reg.endpoints],
        rack=reg.rack) for reg in live]
    topic_states = [_UTopic(topic_name=t, partition_states=ps) for t, ps in by_topic.items()]
    return {epoch: (UpdateMetadataRequest(controller_id=controller_id, controller_epoch=controller_epoch,
                                          max_broker_epoch=epoch, topic_states=topic_states, live_brokers=brokers),
                    UPDATE_METADATA_VERSION) for epoch in set(broker_epochs)}


def stop_replica_request(controller_id: int, controller_epoch: int, broker_epoch: int, topic: str,
                         partitions: list[int], *, delete: bool = True) -> tuple[Any, int]:
    """StopReplica: with ``delete`` the replicas of a topic being deleted drop their logs; without, a broker
    in controlled shutdown stops replicating them."""
    return StopReplicaRequest(controller_id=controller_id, controller_epoch=controller_epoch,
                              max_broker_epoch=broker_epoch,
                              delete_partitions=delete,
                              topics=[_STopic(name=topic, partition_indexes=list(partitions))]), STOP_REPLICA_VERSION


# -- reading them at any version: v0-1 LeaderAndIsr / v0-4 UpdateMetadata / v0 StopReplica list partitions
# ungrouped, each naming its topic; newer versions group them by topic ----------------------------------
def _grouped(grouped: bool, topic_states, ungrouped) -> list[tuple[str, list]]:
    if grouped:
        return [(ts.topic_name, list(ts.partition_states)) for ts in topic_states]
    by_topic: dict[str, list] = {}
    for ps in ungrouped:
        by_topic.setdefault(ps.topic_name, []).append(ps)
    return list(by_topic.items())


def leader_and_isr_topics(request, version: int) -> list[tuple[str, list]]:
    """(topic, partition states) of a LeaderAndIsr request of any version."""
    return _grouped(version >= 2, request.topic_states, request.ungrouped_partition_states)


def update_metadata_topics(request, version: int) -> list[tuple[str, list]]:
    return _grouped(version >= 5, request.topic_states, request.ungrouped_partition_states)


PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


def update_metadata_brokers(request, version: int) -> list[tuple[int, list[tuple[str, str, int]], str | None]]:
    """(broker id, [(listener, host, port)], rack) per live broker; before v3 a listener is named by its
    security protocol, before v1 a broker has one PLAINTEXT endpoint."""
    out = []
    for b in request.live_brokers:
        if version >= 1:
            eps = [(e.listener if version >= 3 else PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"),
                    e.host, e.port) for e in b.endpoints]
        else:
            eps = [("PLAINTEXT", b.v0_host, b.v0_port)]
        out.append((b.id, eps, b.rack if version >= 2 else None))
    return out


def stop_replica_partitions(request, version: int) -> list[tuple[str, list[int]]]:
    if version >= 1:
        return [(t.name, list(t.partition_indexes)) for t in request.topics]
    by_topic: dict[str, list[int]] = {}
    for p in request.ungrouped_partitions:
        by_topic.setdefault(p.topic_name, []).append(p.partition_index)
    return list(by_topic.items())


# BrokerEpoch in one version, MaxBrokerEpoch from the next on (these specs' names of the same field)
_BROKER_EPOCH_VERSIONS = {LeaderAndIsrRequest.API_KEY: 2, UpdateMetadataRequest.API_KEY: 5,
                          StopReplicaRequest.API_KEY: 1}


def broker_epoch(request, version: int) -> int:
    """The recipient's broker epoch a LeaderAndIsr / UpdateMetadata / StopReplica carries; -1 if none."""
    first = _BROKER_EPOCH_VERSIONS[request.API_KEY]
    if version > first:
        return request.max_broker_epoch
    return request.broker_epoch if version == first else -1
