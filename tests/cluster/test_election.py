"""Leader election choices, without ZooKeeper or brokers; the cases follow Kafka's
PartitionLeaderElectionAlgorithmsTest where Kafka has one."""
from __future__ import annotations

from tidelake import errors
from tidelake.cluster.election import (Election, Refused, controlled_shutdown_election, imbalanced_partitions,
                                       new_partition_election, offline_election, preferred_election,
                                       reassignment_election, unclean_election, unclean_would_elect)
from tidelake.cluster.znodes import NO_LEADER, PartitionState


def state(leader: int, isr: list[int], epoch: int = 5) -> PartitionState:
    return PartitionState(leader, epoch, isr, controller_epoch=1, zk_version=3)


# -- a new partition ------------------------------------------------------------------------------------------

def test_a_new_partition_is_led_by_its_first_live_replica_with_the_live_replicas_as_isr():
    assert new_partition_election([3, 1, 2], {1, 2}) == Election(1, [1, 2])
    assert new_partition_election([3, 1, 2], {1, 2, 3}) == Election(3, [3, 1, 2])


def test_a_new_partition_without_live_replicas_waits_for_its_first_replica():
    assert new_partition_election([3, 1], set()) == Election(NO_LEADER, [3])


# -- offline (brokers came or went) ---------------------------------------------------------------------------

def test_offline_election_takes_the_first_live_isr_member_in_assignment_order():
    # Kafka's testOfflinePartitionLeaderElection: assignment [2, 4], ISR [2, 4], live [4]
    assert offline_election([2, 4], state(2, [2, 4]), {4}, set()) == Election(4, [4])
    # assignment order decides, not ISR order
    assert offline_election([3, 2, 4], state(1, [4, 2, 1]), {2, 4}, set()).leader == 2


def test_offline_election_keeps_a_live_leader_and_drops_dead_replicas_from_the_isr():
    assert offline_election([1, 2, 3], state(2, [1, 2, 3]), {2, 3}, set()) == Election(2, [2, 3])
    assert offline_election([1, 2, 3], state(2, [2, 3]), {1, 2, 3}, set()) == Election(2, [2, 3])


def test_offline_election_skips_brokers_in_controlled_shutdown():
    assert offline_election([1, 2, 3], state(1, [1, 2, 3]), {2, 3}, {2}) == Election(3, [2, 3])


def test_last_isr_member_gone_without_unclean_election_leaves_the_partition_offline_keeping_it_in_the_isr():
    # Kafka's ...LastIsrOfflineUncleanLeaderElectionDisabled: assignment [2, 4], ISR [2], live [4]
    chosen = offline_election([2, 4], state(2, [2]), {4}, set())
    assert chosen == Election(NO_LEADER, [2])
    assert unclean_would_elect(chosen, [2, 4], {4})
    assert not unclean_would_elect(offline_election([2, 4], state(2, [2]), set(), set()), [2, 4], set())
    assert not unclean_would_elect(offline_election([2, 4], state(2, [2, 4]), {4}, set()), [2, 4], {4})


def test_unclean_offline_election_takes_the_first_live_replica_as_the_whole_isr():
    # Kafka's ...LastIsrOfflineUncleanLeaderElectionEnabled: assignment [2, 4], ISR [2], live [4]
    assert offline_election([2, 4], state(2, [2]), {4}, set(), unclean=True) == Election(4, [4], unclean=True)
    # a clean choice is still preferred when there is one
    assert offline_election([2, 4, 5], state(2, [2, 5]), {4, 5}, set(), unclean=True) == Election(5, [5])


# -- preferred (ElectLeaders, auto rebalance) -----------------------------------------------------------------

def test_preferred_election_moves_leadership_to_the_first_assigned_replica():
    # Kafka's testPreferredReplicaPartitionLeaderElection: assignment [2, 4], ISR [2, 4], live [2, 4]
    assert preferred_election([2, 4], state(4, [4, 2]), {2, 4}, set()) == Election(2, [4, 2])


def test_preferred_election_is_refused_unless_the_preferred_replica_is_live_in_sync_and_staying():
    not_available = errors.PreferredLeaderNotAvailable.code
    # ...PreferredReplicaInIsrNotLive, ...NotInIsrLive, ...NotInIsrNotLive, and one shutting down
    for st, live, stopping in ((state(4, [2, 4]), {4}, set()), (state(4, [4]), {2, 4}, set()),
                               (state(NO_LEADER, []), set(), set()), (state(4, [2, 4]), {2, 4}, {2})):
        refused = preferred_election([2, 4], st, live, stopping)
        assert isinstance(refused, Refused) and refused.code == not_available, (st, live, stopping)
    assert preferred_election([2, 4], state(4, [4]), {2, 4}, set()).message == \
        "preferred replica 2 is not alive and in the ISR [4]"


def test_preferred_election_is_not_needed_when_the_preferred_replica_leads():
    assert preferred_election([2, 4], state(2, [2, 4]), {2, 4}, set()) == \
        Refused(errors.ElectionNotNeeded.code, "the preferred replica leads already")


# -- unclean (ElectLeaders with election type 1) --------------------------------------------------------------

def test_unclean_election_prefers_a_live_isr_member_and_else_takes_any_live_replica():
    assert unclean_election([2, 4, 5], state(2, [2, 5]), {4, 5}) == Election(5, [2, 5])
    assert unclean_election([2, 4, 5], state(2, [2]), {4, 5}) == Election(4, [4], unclean=True)


def test_unclean_election_is_refused_with_a_live_leader_or_no_live_replica():
    assert unclean_election([2, 4], state(2, [2]), {2, 4}).code == errors.ElectionNotNeeded.code
    assert unclean_election([2, 4], state(NO_LEADER, [2]), {7}) == \
        Refused(errors.EligibleLeadersNotAvailable.code, "no replica is alive")


# -- controlled shutdown --------------------------------------------------------------------------------------

def test_controlled_shutdown_hands_leadership_to_the_next_isr_member():
    # Kafka's testControlledShutdownPartitionLeaderElection: assignment [2, 4], ISR [2, 4], live [2, 4], 2 stops
    assert controlled_shutdown_election([2, 4], state(2, [2, 4]), {2, 4}, {2}, 2) == Election(4, [4])


def test_controlled_shutdown_of_a_follower_only_takes_it_out_of_the_isr():
    assert controlled_shutdown_election([2, 4, 5], state(4, [2, 4, 5]), {2, 4, 5}, {2}, 2) == Election(4, [4, 5])


def test_controlled_shutdown_changes_nothing_without_another_isr_member_to_take_over():
    # Kafka's ...LastIsrShuttingDown and ...AllIsrSimultaneouslyShutdown
    assert controlled_shutdown_election([2, 4], state(2, [2]), {2, 4}, {2}, 2) is None
    assert controlled_shutdown_election([2, 4], state(2, [2, 4]), {2, 4}, {2, 4}, 2) is None
    # a follower that is the last ISR member, or not in the ISR, stays as it is
    assert controlled_shutdown_election([2, 4], state(4, [2]), {2, 4}, {2}, 2) is None
    assert controlled_shutdown_election([2, 4], state(4, [4]), {2, 4}, {2}, 2) is None


# -- reassignment ---------------------------------------------------------------------------------------------

def test_reassignment_keeps_a_live_leader_that_stays_a_replica():
    # Kafka's testReassignPartitionLeaderElection: target [2, 4], ISR [2, 4], live [2, 4]
    assert reassignment_election([2, 4, 1], [2, 4, 1], [], state(4, [2, 4, 1]), {1, 2, 4}, set()) == \
        Election(4, [2, 4, 1])


def test_completing_a_reassignment_moves_leadership_into_the_target_and_drops_removed_replicas():
    # RS [4, 5, 1, 2] moving from [1, 2] to [4, 5]: the leader 1 leaves, 4 (first of the target in the ISR) leads
    assert reassignment_election([4, 5], [4, 5], [1, 2], state(1, [1, 2, 4, 5]), {1, 2, 4, 5}, set()) == \
        Election(4, [4, 5])
    assert reassignment_election([4, 5], [4, 5], [1, 2], state(1, [1, 2, 4, 5]), {1, 2, 4, 5}, {4}).leader == 5


def test_reassignment_without_a_live_target_in_the_isr_has_no_leader_and_keeps_the_last_isr_member():
    # Kafka's ...WithNoLiveIsr and ...WithEmptyIsr
    assert reassignment_election([2, 4], [2, 4], [], state(2, [2]), set(), set()) == Election(NO_LEADER, [2])
    assert reassignment_election([4, 5], [4, 5], [1], state(1, [1]), {1, 4, 5}, set()) == Election(NO_LEADER, [1])


# -- auto leader rebalance ------------------------------------------------------------------------------------

def test_imbalance_returns_the_partitions_of_brokers_leading_too_few_of_their_preferred_ones():
    replicas = {("t", 0): [1, 2], ("t", 1): [1, 2], ("t", 2): [2, 1], ("u", 0): [3, 1]}
    states = {("t", 0): state(2, [1, 2]), ("t", 1): state(1, [1, 2]), ("t", 2): state(2, [2, 1]),
              ("u", 0): state(1, [1])}
    # broker 1 leads 1 of its 2 (50% imbalance), broker 3 none of its 1 but it is not in the ISR
    assert imbalanced_partitions(replicas, states, {1, 2, 3}, set(), 10) == [("t", 0)]
    assert imbalanced_partitions(replicas, states, {1, 2, 3}, set(), 50) == []
    assert imbalanced_partitions(replicas, states, {2, 3}, set(), 10) == []
    assert imbalanced_partitions(replicas, states, {1, 2, 3}, {1}, 10) == []
    states[("u", 0)] = state(1, [1, 3])
    assert imbalanced_partitions(replicas, states, {1, 2, 3}, set(), 10) == [("t", 0), ("u", 0)]
