"""What differs, beyond the partitions, between a broker alone and one of a ZooKeeper cluster, behind small
interfaces chosen once where ``Broker`` builds its context: ``ControllerRequests`` (the controller's requests and
the admin requests a controller answers), ``ClusterView`` (the brokers, controller and partition leaders
metadata answers name), ``Coordination`` (who coordinates a group or a transactional id; producer ids),
``TopicAdmin`` (creating, deleting, growing and configuring topics) and ``GroupConfigAdmin`` (a group's configs)."""
from tidelake.broker.cluster_role.protocol import (ClusterView, ControllerRequests, Coordination, CoordinatorAnswer,
                                                  CreatedTopic, GroupConfigAdmin, PartitionState, TopicAdmin)
from tidelake.broker.cluster_role.single import (SingleBrokerController, SingleBrokerCoordination,
                                                SingleBrokerGroupConfigs, SingleBrokerTopics, SingleBrokerView)
from tidelake.broker.cluster_role.zookeeper import (ZooKeeperCoordination, ZooKeeperGroupConfigs, ZooKeeperTopics,
                                                   ZooKeeperView)

__all__ = ["ClusterView", "ControllerRequests", "Coordination", "CoordinatorAnswer", "CreatedTopic", "GroupConfigAdmin",
           "PartitionState", "SingleBrokerController", "SingleBrokerCoordination", "SingleBrokerGroupConfigs",
           "SingleBrokerTopics", "SingleBrokerView", "TopicAdmin", "ZooKeeperCoordination", "ZooKeeperGroupConfigs",
           "ZooKeeperTopics", "ZooKeeperView"]
