"""The leader's low watermark (Kafka's ``lowWatermarkIfLeader`` and DelayedDeleteRecords), on the replica manager
itself: the smallest log start of the replicas on live brokers, each follower's taken from its Fetch; a
DeleteRecords waiter is answered once it reaches the offset, when a dead broker stops counting, with
REQUEST_TIMED_OUT at its timeout, and NOT_LEADER_OR_FOLLOWER when leadership moves."""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from tidelake import errors
from tidelake.cluster.replica_manager import ReplicaManager
from tidelake.cluster.zk_store import ClusterStore
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch

TOPIC = "trimmed"


def records(n: int) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(build_batch([Record(i, now, None, b"v") for i in range(n)]))


def state(leader: int, epoch: int):
    return SimpleNamespace(partition_index=0, leader=leader, leader_epoch=epoch, replicas=[1, 2, 3], isr=[1, 2, 3],
                           zk_version=0, controller_epoch=1)


def test_delete_records_waits_for_every_live_replicas_log_start(zookeeper, tmp_path):
    store = ClusterStore(zookeeper.connect_string, session_timeout_ms=4000)
    store.start()
    logs = LogManager(tmp_path / "logs")
    alive = {1, 2, 3}

    async def scenario() -> None:
        manager = ReplicaManager(1, logs, store, clock_ms=lambda: int(time.time() * 1000),
                                 lag_time_max_ms=lambda: 30_000, min_insync=lambda topic: 1,
                                 create_log=lambda t, p: logs.create(t, p), notify=lambda t, p: None,
                                 is_alive=lambda broker: broker in alive)
        manager.apply_leader_and_isr(TOPIC, state(1, 0))
        plog = logs.get(TOPIC, 0)
        replica = manager.leader_replica(TOPIC, 0)
        plog.append(records(10), leader_epoch=0)
        for follower in (2, 3):
            manager.follower_fetched(replica, plog, follower, 10, 0)
        assert plog.high_watermark == 10 and manager.low_watermark(replica, plog) == 0

        plog.delete_records_before(4)
        waiting = asyncio.ensure_future(manager.wait_for_low_watermark(TOPIC, 0, 4, 30))
        await asyncio.sleep(0)
        manager.follower_fetched(replica, plog, 2, 10, 4)   # broker 2 has moved its log start
        await asyncio.sleep(0)
        assert not waiting.done() and manager.low_watermark(replica, plog) == 0   # broker 3 has not
        alive.discard(3)   # broker 3 dies: only live replicas count
        manager.brokers_changed()
        assert await waiting == (errors.NONE, 4)

        alive.add(3)
        manager.follower_fetched(replica, plog, 3, 10, 4)
        plog.delete_records_before(6)
        assert await manager.wait_for_low_watermark(TOPIC, 0, 6, 0.05) == (errors.RequestTimedOut.code, 4)

        waiting = asyncio.ensure_future(manager.wait_for_low_watermark(TOPIC, 0, 6, 30))
        await asyncio.sleep(0)
        manager.apply_leader_and_isr(TOPIC, state(2, 1))   # leadership moves to broker 2
        assert await waiting == (errors.NotLeaderOrFollower.code, -1)
        assert await manager.wait_for_low_watermark(TOPIC, 0, 6, 30) == (errors.NotLeaderOrFollower.code, -1)
        await manager.close()

    try:
        asyncio.run(scenario())
    finally:
        logs.close()
        store.stop()
