"""Classic group state machine, driven by calls and a fake clock (no network)."""
from __future__ import annotations

import asyncio

from tidelake import errors
from tidelake.coordinator.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup
from tidelake.coordinator.group_config import GroupConfig
from tidelake.coordinator.offsets import decode_group_value, group_metadata_value

PROTOS = [("range", b"sub-range"), ("roundrobin", b"sub-rr")]
NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)  # a new group's first join completes at once


def run(coro):
    return asyncio.run(coro)


def join(g, member_id="", now=0, instance=None, client="c", protocols=PROTOS, session=10000, rebalance=30000, v4=True):
    return g.join(member_id=member_id, group_instance_id=instance, client_id=client, client_host="/127.0.0.1",
                  session_timeout_ms=session, rebalance_timeout_ms=rebalance, protocol_type="consumer",
                  protocols=protocols, require_known_member_id=v4, now_ms=now)


async def join_known(g, now=0, **kw):
    """The v4+ dance: first JoinGroup gets MEMBER_ID_REQUIRED and an id, the second joins with it."""
    first = await join(g, now=now, **kw)
    assert first.error == errors.MemberIdRequired.code and first.member_id.startswith(kw.get("client", "c"))
    return join(g, member_id=first.member_id, now=now, **kw)


def test_two_members_join_sync_stable_then_session_expiry():
    async def scenario():
        persisted = []
        g = ClassicGroup("g", NO_DELAY, 0, persist=lambda grp: persisted.append(grp.to_record()))
        f1 = await join_known(g, client="a")
        r1 = await f1  # alone: the join completes at once
        assert r1.error == 0 and r1.generation_id == 1 and r1.leader == r1.member_id
        assert [m[0] for m in r1.members] == [r1.member_id] and r1.protocol_name == "range"
        assert g.state == COMPLETING_REBALANCE
        s1 = await g.sync(member_id=r1.member_id, group_instance_id=None, generation_id=1, protocol_type="consumer",
                          protocol_name="range", assignments={r1.member_id: b"A1"}, now_ms=1)
        assert (s1.error, s1.assignment, g.state) == (0, b"A1", STABLE)

        # a second member joins: the first learns through its heartbeat, then rejoins
        f2 = await join_known(g, client="b", now=100)
        assert g.state == PREPARING_REBALANCE and not f2.done()
        assert g.heartbeat(member_id=r1.member_id, group_instance_id=None, generation_id=1, now_ms=200) == \
            errors.RebalanceInProgress.code
        f1b = join(g, member_id=r1.member_id, client="a", now=300)
        r1b, r2 = await f1b, await f2
        assert r1b.generation_id == r2.generation_id == 2
        assert r1b.leader == r1.member_id and len(r1b.members) == 2 and r2.members == []
        leader_sync = g.sync(member_id=r1.member_id, group_instance_id=None, generation_id=2, protocol_type=None,
                             protocol_name=None, assignments={r1.member_id: b"X", r2.member_id: b"Y"}, now_ms=400)
        follower_sync = g.sync(member_id=r2.member_id, group_instance_id=None, generation_id=2, protocol_type=None,
                               protocol_name=None, assignments=None, now_ms=400)
        assert (await leader_sync).assignment == b"X" and (await follower_sync).assignment == b"Y"
        assert g.state == STABLE and persisted[-1].generation == 2 and len(persisted[-1].members) == 2
        # the GroupMetadataValue written round-trips
        assert decode_group_value(group_metadata_value(persisted[-1])) == persisted[-1]

        # member b stops heart-beating; a keeps going; after b's session timeout the group rebalances
        g.heartbeat(member_id=r1.member_id, group_instance_id=None, generation_id=2, now_ms=9000)
        g.tick(10000)
        assert g.state == STABLE
        g.tick(10401)
        assert r2.member_id not in g.members and g.state == PREPARING_REBALANCE
        assert g.heartbeat(member_id=r2.member_id, group_instance_id=None, generation_id=2, now_ms=10402) == \
            errors.UnknownMemberId.code
        r1c = await join(g, member_id=r1.member_id, client="a", now=10500)
        assert r1c.generation_id == 3 and [m[0] for m in r1c.members] == [r1.member_id]
    run(scenario())


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    async def scenario():
        g = ClassicGroup("g", NO_DELAY, 0)
        ra = await (await join_known(g, client="a", rebalance=5000))
        await g.sync(member_id=ra.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                     protocol_name=None, assignments={}, now_ms=0)
        fb = await join_known(g, client="b", now=10, rebalance=5000)
        # a keeps heart-beating but never rejoins
        for t in range(1000, 5001, 1000):
            g.heartbeat(member_id=ra.member_id, group_instance_id=None, generation_id=1, now_ms=t)
            g.tick(t)
        assert not fb.done()
        g.tick(5011)
        rb = await fb
        assert rb.error == 0 and rb.generation_id == 2 and [m[0] for m in rb.members] == [rb.member_id]
        assert ra.member_id not in g.members
    run(scenario())


def test_unknown_member_illegal_generation_and_inconsistent_protocol():
    async def scenario():
        g = ClassicGroup("g", NO_DELAY, 0)
        assert (await join(g, member_id="nobody")).error == errors.UnknownMemberId.code
        r = await (await join_known(g))
        assert g.heartbeat(member_id=r.member_id, group_instance_id=None, generation_id=7, now_ms=1) == \
            errors.IllegalGeneration.code
        bad = await join(g, client="x", protocols=[("other", b"")], v4=False)
        assert bad.error == errors.InconsistentGroupProtocol.code
        assert (await join(g, session=10)).error == errors.InvalidSessionTimeout.code
        # commits: a member with the right generation may commit only once the group is stable
        assert g.validate_offset_commit(r.member_id, None, 1) == errors.RebalanceInProgress.code
        await g.sync(member_id=r.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                     protocol_name=None, assignments={}, now_ms=2)
        assert g.validate_offset_commit(r.member_id, None, 1) == 0
        assert g.validate_offset_commit(r.member_id, None, 0) == errors.IllegalGeneration.code
        assert g.validate_offset_commit("", None, -1) == errors.UnknownMemberId.code
    run(scenario())


def test_static_member_rejoin_keeps_assignment_and_fences_old_id():
    async def scenario():
        g = ClassicGroup("g", NO_DELAY, 0)
        a = await join(g, instance="inst-a", client="a")
        b_f = join(g, instance="inst-b", client="b")
        assert a.error == 0 and not b_f.done()  # a was alone in generation 1; b triggers generation 2
        a2 = await join(g, member_id=a.member_id, instance="inst-a", client="a")
        b = await b_f
        assert a2.generation_id == b.generation_id == 2
        await asyncio.gather(
            g.sync(member_id=a.member_id, group_instance_id="inst-a", generation_id=2, protocol_type=None,
                   protocol_name=None, assignments={a.member_id: b"PA", b.member_id: b"PB"}, now_ms=1),
            g.sync(member_id=b.member_id, group_instance_id="inst-b", generation_id=2, protocol_type=None,
                   protocol_name=None, assignments=None, now_ms=1))
        # b restarts (new process, unknown member id, same instance id): no rebalance, same assignment
        b_new = await join(g, instance="inst-b", client="b", now=50)
        assert b_new.error == 0 and b_new.generation_id == 2 and b_new.member_id != b.member_id
        assert g.state == STABLE
        s = await g.sync(member_id=b_new.member_id, group_instance_id="inst-b", generation_id=2, protocol_type=None,
                         protocol_name=None, assignments=None, now_ms=60)
        assert s.assignment == b"PB"
        # the old incarnation is fenced
        assert g.heartbeat(member_id=b.member_id, group_instance_id="inst-b", generation_id=2, now_ms=70) == \
            errors.FencedInstanceId.code
        assert g.leave([(b.member_id, "inst-b")], 80) == [errors.FencedInstanceId.code]
        assert g.leave([("", "inst-b")], 90) == [0] and g.state == PREPARING_REBALANCE
    run(scenario())


def test_last_member_leaving_empties_the_group_and_reload_restores_it():
    async def scenario():
        saved = []
        g = ClassicGroup("g", NO_DELAY, 0, persist=lambda grp: saved.append(grp.to_record()))
        r = await (await join_known(g))
        await g.sync(member_id=r.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                     protocol_name=None, assignments={r.member_id: b"asg"}, now_ms=1)
        reloaded = ClassicGroup.from_record("g", decode_group_value(group_metadata_value(saved[-1])), NO_DELAY, 5)
        assert reloaded.state == STABLE and reloaded.generation == 1
        assert reloaded.heartbeat(member_id=r.member_id, group_instance_id=None, generation_id=1, now_ms=6) == 0
        assert (await reloaded.sync(member_id=r.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                                    protocol_name=None, assignments=None, now_ms=7)).assignment == b"asg"
        assert g.leave([(r.member_id, None)], 10) == [0]
        assert g.state == EMPTY and saved[-1].members == [] and saved[-1].generation == 2
    run(scenario())


def test_pending_member_that_never_rejoins_does_not_block_the_rebalance():
    async def scenario():
        g = ClassicGroup("g", NO_DELAY, 0)
        a = await (await join_known(g, client="a"))
        await g.sync(member_id=a.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                     protocol_name=None, assignments={}, now_ms=0)
        ghost = await join(g, client="ghost", now=100, session=6000)  # gets an id, never comes back
        assert ghost.error == errors.MemberIdRequired.code
        b_f = await join_known(g, client="b", now=200)
        a_f = join(g, member_id=a.member_id, client="a", now=300)
        g.tick(5000)
        assert not a_f.done() and not b_f.done()  # still waiting for the pending member
        g.tick(6101)  # its session timeout passed: the join completes without it
        ra, rb = await a_f, await b_f
        assert ra.generation_id == rb.generation_id == 2 and len(ra.members) == 2
        assert ghost.member_id not in g.members
    run(scenario())


def test_offsets_of_empty_groups_expire_after_retention():
    from tidelake.coordinator.group_coordinator import GroupCoordinator
    from tidelake.coordinator.offsets import OffsetAndMetadata, OffsetStore
    log: list = []
    config = GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=1000,
                         offsets_retention_check_interval_ms=100)
    gc = GroupCoordinator(config, write=lambda p, recs: log.extend(recs), partitions_of=lambda t: 2)

    async def scenario():
        gc.commit("idle", [("t", 0, OffsetAndMetadata(5, -1, "", 0))], 0)
        gc.commit("idle", [("t", 1, OffsetAndMetadata(7, -1, "", 600))], 600)
        active = gc.classic_group("busy", create=True, now_ms=0)
        r = await (await join_known(active))
        await active.sync(member_id=r.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                          protocol_name=None, assignments={}, now_ms=0)
        gc.commit("busy", [("t", 0, OffsetAndMetadata(3, -1, "", 0))], 0)
        active.heartbeat(member_id=r.member_id, group_instance_id=None, generation_id=1, now_ms=1400)
        gc.tick(1500)
        assert gc.offsets.get("idle", "t", 0) is None and gc.offsets.get("idle", "t", 1) is not None
        assert gc.offsets.get("busy", "t", 0) is not None  # a group with members keeps its offsets
        gc.tick(1700)
        assert "idle" not in gc.known_group_ids()  # no offsets, no members: the group is gone
        # the tombstones were written, so a replay agrees
        replayed = OffsetStore()
        for k, v in log:
            replayed.apply_record(k, v)
        assert replayed.known_groups() == {"busy"}
    run(scenario())


def test_a_group_whose_last_member_left_keeps_its_protocol_type():
    """Kafka keeps an emptied group's protocol type: ListGroups / DescribeGroups show ``consumer``
    (an empty one reads as a "simple" group to clients), and the persisted record keeps it."""
    from tidelake.coordinator.group_coordinator import GroupCoordinator
    log: list = []
    gc = GroupCoordinator(NO_DELAY, write=lambda p, recs: log.extend(recs), partitions_of=lambda t: 1)

    async def scenario():
        g = gc.classic_group("g", create=True, now_ms=0)
        r = await (await join_known(g))
        await g.sync(member_id=r.member_id, group_instance_id=None, generation_id=1, protocol_type=None,
                     protocol_name=None, assignments={r.member_id: b"asg"}, now_ms=1)
        assert g.leave([(r.member_id, None)], 10) == [0]
        assert (g.state, g.protocol_type, g.protocol, g.leader) == (EMPTY, "consumer", None, None)
        assert gc.group_state("g") == (EMPTY, "consumer", "classic")
        reloaded = GroupCoordinator(NO_DELAY, write=lambda p, recs: None, partitions_of=lambda t: 1)
        reloaded.load(log, 20)
        assert reloaded.groups["g"].protocol_type == "consumer"
        assert reloaded.group_state("g") == (EMPTY, "consumer", "classic")
        # the first member of an empty group sets its protocol type, as when it was new
        w = g.join(member_id="", group_instance_id=None, client_id="w", client_host="/h", session_timeout_ms=10000,
                   rebalance_timeout_ms=30000, protocol_type="connect", protocols=[("default", b"")],
                   require_known_member_id=False, now_ms=50)
        assert (await w).error == 0 and g.protocol_type == "connect"
    run(scenario())


def test_first_rebalance_of_a_new_group_waits_the_initial_delay_by_default():
    assert GroupConfig().initial_rebalance_delay_ms == 3000  # Kafka's group.initial.rebalance.delay.ms

    async def scenario():
        g = ClassicGroup("g", GroupConfig(), 0)
        f = await join_known(g)
        g.tick(2999)
        assert not f.done() and g.state == PREPARING_REBALANCE
        g.tick(3000)
        assert (await f).error == 0 and g.state == COMPLETING_REBALANCE
    run(scenario())


def test_group_config_defaults_are_the_ones_the_broker_shows():
    """One default per setting: the broker's config table (what DescribeConfigs shows) and the
    coordinator's config agree, and Kafka names override them."""
    from tidelake.broker.config import BrokerConfig
    assert GroupConfig.from_properties(BrokerConfig()) == GroupConfig()
    assert GroupConfig.from_properties(None) == GroupConfig()
    c = GroupConfig.from_properties(BrokerConfig({"group.initial.rebalance.delay.ms": "0",
                                                  "group.consumer.assignors": "range, uniform"}))
    assert (c.initial_rebalance_delay_ms, c.consumer_assignors) == (0, ("range", "uniform"))
