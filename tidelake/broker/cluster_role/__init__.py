"""What differs, beyond the partitions, between a broker alone and one of a ZooKeeper cluster, behind two small
interfaces chosen once where ``Broker`` builds its context: ``ControllerRequests`` (the controller's requests and
the admin requests a controller answers) and ``ClusterView`` (the brokers, controller and partition leaders
metadata answers name)."""
from tidelake.broker.cluster_role.protocol import ClusterView, ControllerRequests, PartitionState
from tidelake.broker.cluster_role.single import SingleBrokerController, SingleBrokerView
from tidelake.broker.cluster_role.zookeeper import ZooKeeperView

__all__ = ["ClusterView", "ControllerRequests", "PartitionState", "SingleBrokerController", "SingleBrokerView",
           "ZooKeeperView"]
