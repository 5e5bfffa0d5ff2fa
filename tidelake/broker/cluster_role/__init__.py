"""What differs, beyond the partitions, between a broker alone and one of a ZooKeeper cluster, behind two small
interfaces chosen once where ``Broker`` builds its context: ``ControllerRequests`` (the controller's requests and
the admin requests a controller answers), ``ClusterView`` (the brokers, controller and partition leaders
metadata answers name) and ``Coordination`` (who coordinates a group or a transactional id; producer ids)."""
from tidelake.broker.cluster_role.protocol import (ClusterView, ControllerRequests, Coordination, CoordinatorAnswer,
                                                  PartitionState)
from tidelake.broker.cluster_role.single import SingleBrokerController, SingleBrokerCoordination, SingleBrokerView
from tidelake.broker.cluster_role.zookeeper import ZooKeeperCoordination, ZooKeeperView

__all__ = ["ClusterView", "ControllerRequests", "Coordination", "CoordinatorAnswer", "PartitionState",
           "SingleBrokerController", "SingleBrokerCoordination", "SingleBrokerView", "ZooKeeperCoordination",
           "ZooKeeperView"]
