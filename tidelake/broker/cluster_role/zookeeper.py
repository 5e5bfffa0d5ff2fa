"""One broker of a ZooKeeper cluster: the cluster as the controller last told it (its ``ClusterMember``, which
also answers the controller's requests itself)."""
from __future__ import annotations

from tidelake import errors
from tidelake.broker.cluster_role.protocol import PartitionState
from tidelake.cluster.member import ClusterMember, LiveBroker


class ZooKeeperView:
    def __init__(self, member: ClusterMember):
        self._member = member

    async def wait_for_first_metadata(self) -> None:
        # a broker that has not heard from the controller yet would answer "no controller, no other brokers",
        # and librdkafka's admin client then waits out its whole timeout instead of asking again
        await self._member.wait_for_first_metadata()

    def live_brokers(self, listener: str) -> list[LiveBroker]:
        return self._member.live_brokers(listener)

    def controller_id(self) -> int:
        return self._member.controller_id

    def partition_states(self, topic: str, start: int, end: int) -> list[PartitionState]:
        out = []
        for p in range(start, end):
            pm = self._member.partition(topic, p)
            if pm is None:
                out.append(PartitionState(p, errors.LeaderNotAvailable.code, -1, -1, [], [], []))
            else:
                code = errors.NONE if pm.leader >= 0 else errors.LeaderNotAvailable.code
                out.append(PartitionState(p, code, pm.leader, pm.leader_epoch, pm.replicas, pm.isr, pm.offline))
        return out

    def knows_partition(self, topic: str, partition: int) -> bool:
        return self._member.partition(topic, partition) is not None
