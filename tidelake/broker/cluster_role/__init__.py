"""What differs, beyond the partitions, between a broker alone and one of a ZooKeeper cluster, behind two small
interfaces chosen once where ``Broker`` builds its context: ``ControllerRequests`` (the controller's requests and
the admin requests a controller answers), ``ClusterView`` (the brokers, controller and partition leaders
metadata answers name), ``Coordination`` (who coordinates a group or a transactional id; producer ids) and
``TopicAdmin`` (creating, deleting, growing and configuring topics)."""
from tidelake.broker.cluster_role.protocol import (ClusterView, ControllerRequests, Coordination, CoordinatorAnswer,
                                                  CreatedTopic, PartitionState, TopicAdmin)
from tidelake.broker.cluster_role.single import (SingleBrokerController, SingleBrokerCoordination, SingleBrokerTopics,
                                                SingleBrokerView)
from tidelake.broker.cluster_role.zookeeper import ZooKeeperCoordination, ZooKeeperTopics, ZooKeeperView

__all__ = ["ClusterView", "ControllerRequests", "Coordination", "CoordinatorAnswer", "CreatedTopic", "PartitionState",
           "SingleBrokerController", "SingleBrokerCoordination", "SingleBrokerTopics", "SingleBrokerView", "TopicAdmin",
           "ZooKeeperCoordination", "ZooKeeperTopics", "ZooKeeperView"]
