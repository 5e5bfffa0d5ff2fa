"""The elected controller's view of the cluster (Kafka's ``ControllerContext``): its epoch, the live brokers,
every topic's replica assignment and every partition's state as last read from or written to ZooKeeper.

The controller and the components it owns (the reassigner, the request batches) read and update this one
object on the controller's event queue; it is emptied when the controller resigns.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tidelake.cluster.znodes import BrokerRegistration, PartitionState, TopicAssignment


@dataclass
class ControllerContext:
    broker_id: int
    active: bool = False  # elected, and not resigned since
    epoch: int = 0  # /controller_epoch as this controller set it
    epoch_version: int = -1  # that znode's version: every partition-state write checks it
    live: dict[int, BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    shutting_down: set[int] = field(default_factory=set)  # brokers in controlled shutdown: never elected

    def replicas(self, key: tuple[str, int]) -> list[int]:
        return self.assignments[key[0]].partitions[key[1]]

    def resign(self) -> None:
        """Forget everything but the epoch: a new election reads the cluster again."""
        self.active = False
        self.live.clear()
        self.assignments.clear()
        self.states.clear()
        self.deleting.clear()
        self.shutting_down.clear()
