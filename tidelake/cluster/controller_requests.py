"""Which broker the controller tells what (Kafka's ``ControllerBrokerRequestBatch``): LeaderAndIsr to a
partition's live replicas, UpdateMetadata to every live broker, StopReplica to one broker, each built from the
controller's context (with the recipient's broker epoch) and queued on its channels, which exist only while it is
the controller.
"""
from __future__ import annotations

from tidelake.cluster import znodes
from tidelake.cluster.controller_channels import ControllerChannels
from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.requests import leader_and_isr_request, stop_replica_request, update_metadata_request
from tidelake.cluster.znodes import BrokerRegistration, PartitionState


class ControllerRequests:
    def __init__(self, context: ControllerContext):
        self.context = context
        self.channels: ControllerChannels | None = None
        self._listener = ""

    def open(self, listener: str) -> None:
        """Elected: one channel per live broker from now on, to its ``listener`` endpoint."""
        self._listener = listener
        self.channels = ControllerChannels(self.context.broker_id)

    def close(self) -> None:
        if self.channels is not None:
            self.channels.close()
            self.channels = None

    def add_broker(self, broker_id: int, registration: BrokerRegistration) -> None:
        ep = registration.endpoint(self._listener) if any(
            e.listener == self._listener for e in registration.endpoints) else registration.endpoint()
        self.channels.add_broker(broker_id, ep.host, ep.port)

    def remove_broker(self, broker_id: int) -> None:
        self.channels.remove_broker(broker_id)

    def leader_and_isr(self, partitions: list[tuple[str, int]], *, is_new: bool = False,
                       only: int | None = None) -> None:
        """LeaderAndIsr for ``partitions`` to their live replicas (or only to broker ``only``)."""
        ctx = self.context
        by_broker: dict[int, list] = {}
        for key in partitions:
            st = ctx.states.get(key)
            if st is None or key[0] in ctx.deleting:
                continue
            assignment = ctx.assignments[key[0]]
            replicas = assignment.partitions[key[1]]
            adding, removing = assignment.adding.get(key[1], []), assignment.removing.get(key[1], [])
            for bid in replicas:
                # a broker in controlled shutdown is told nothing more (it would fetch and rejoin an ISR)
                if bid in ctx.live and bid not in ctx.shutting_down and (only is None or bid == only):
                    by_broker.setdefault(bid, []).append((key[0], key[1], st, replicas, adding, removing))
        for bid, states in by_broker.items():
            leaders = {s[2].leader for s in states if s[2].leader in ctx.live}
            live_leaders = [(b, ctx.live[b], self._listener) for b in leaders]
            self.channels.send(bid, *leader_and_isr_request(ctx.broker_id, ctx.epoch, ctx.live[bid].epoch, states,
                                                            is_new, live_leaders))

    def update_metadata(self, deleting: set[str] = frozenset()) -> None:
        """Every partition's state to every live broker; the topics ``deleting`` with leader -2."""
        ctx = self.context
        partitions = []
        for (topic, p), st in sorted(ctx.states.items()):
            replicas = ctx.assignments[topic].partitions[p]
            offline = [r for r in replicas if r not in ctx.live]
            if topic in deleting:
                st = PartitionState(znodes.LEADER_DURING_DELETE, st.leader_epoch, st.isr, st.controller_epoch,
                                    st.zk_version)
            partitions.append((topic, p, st, replicas, offline))
        by_epoch = update_metadata_request(ctx.broker_id, ctx.epoch, [reg.epoch for reg in ctx.live.values()],
                                           partitions, list(ctx.live.values()))
        for bid, reg in ctx.live.items():
            self.channels.send(bid, *by_epoch[reg.epoch])

    def stop_replica(self, broker_id: int, topic: str, partitions: list[int], *, delete: bool) -> None:
        reg = self.context.live.get(broker_id)
        if reg is None:  # gone: nothing to stop there
            return
        self.channels.send(broker_id, *stop_replica_request(self.context.broker_id, self.context.epoch, reg.epoch,
                                                            topic, partitions, delete=delete))
