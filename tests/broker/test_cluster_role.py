"""The two sides of each interface chosen at start-up (a broker alone, one of a ZooKeeper cluster) answer the
same calls with the same parameters, so no handler needs to ask which one it has."""
from __future__ import annotations

import inspect

import pytest

from tidelake.broker.cluster_role import (ClusterView, ControllerRequests, Coordination, GroupConfigAdmin,
                                          SingleBrokerController, SingleBrokerCoordination, SingleBrokerGroupConfigs,
                                          SingleBrokerTopics, SingleBrokerView, TopicAdmin, ZooKeeperCoordination,
                                          ZooKeeperGroupConfigs, ZooKeeperTopics, ZooKeeperView)
from tidelake.broker.coordinator_appends import CoordinatorAppends, LeaderAppends, LocalAppends
from tidelake.broker.partition_service import LocalPartitions, PartitionService, ReplicatedPartitions
from tidelake.cluster.member import ClusterMember


def _methods(protocol) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(protocol).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


@pytest.mark.parametrize("protocol, implementations", [
    (ControllerRequests, [SingleBrokerController, ClusterMember]),
    (ClusterView, [SingleBrokerView, ZooKeeperView]),
    (Coordination, [SingleBrokerCoordination, ZooKeeperCoordination]),
    (TopicAdmin, [SingleBrokerTopics, ZooKeeperTopics]),
    (GroupConfigAdmin, [SingleBrokerGroupConfigs, ZooKeeperGroupConfigs]),
    (CoordinatorAppends, [LocalAppends, LeaderAppends]),
    (PartitionService, [LocalPartitions, ReplicatedPartitions]),
])
def test_both_sides_implement_the_whole_interface(protocol, implementations):
    wanted = _methods(protocol)
    assert wanted
    for cls in implementations:
        for name, signature in wanted.items():
            method = getattr(cls, name, None)
            assert method is not None, f"{cls.__name__} lacks {name}"
            assert list(inspect.signature(method).parameters) == list(signature.parameters), (cls.__name__, name)
            assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(vars(protocol)[name]), \
                (cls.__name__, name)
