"""The leader's ISR expansion against a real ZooKeeper: while the new ISR is being written, the high watermark
already waits for the joining follower (Kafka's maximal ISR). Otherwise a write acknowledged in that window could be
missing on a follower ZooKeeper already names in-sync, which the controller may then elect."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from tidelake.cluster.replica_manager import ReplicaManager
from tidelake.cluster.zk_store import ClusterStore
from tidelake.cluster.znodes import PartitionState
from tidelake.log import LogManager
from tidelake.protocol.records import Record, build_batch

TOPIC = "orders"
NOW = 1_700_000_000_000


class HeldIsrWrites(ClusterStore):
    """The real store, whose partition-state writes wait until the test releases them: the window between the
    leader deciding on a new ISR and ZooKeeper holding it, made as long as the test needs."""

    def __init__(self, connect_string: str):
        super().__init__(connect_string, session_timeout_ms=4000)
        self.release = threading.Event()
        self.writing = threading.Event()

    def update_partition_state(self, *args, **kwargs):
        self.writing.set()
        assert self.release.wait(10), "the test never released the ISR write"
        return super().update_partition_state(*args, **kwargs)


def records(n: int) -> bytearray:
    return bytearray(build_batch([Record(i, NOW, None, b"v") for i in range(n)]))


def test_a_joining_follower_counts_for_the_high_watermark_while_its_isr_entry_is_written(zookeeper, tmp_path):
    store = HeldIsrWrites(zookeeper.connect_string)
    store.start()
    logs = LogManager(tmp_path / "logs")

    async def scenario() -> None:
        manager = ReplicaManager(1, logs, store, clock_ms=lambda: NOW, lag_time_max_ms=lambda: 30_000,
                                 min_insync=lambda topic: 1, create_log=lambda t, p: logs.create(t, p),
                                 notify=lambda t, p: None, is_alive=lambda broker: True)
        written = store.create_partition_state(TOPIC, 0, PartitionState(1, 0, [1], 1),
                                               controller_epoch_version=_controller_epoch_version(store))
        manager.apply_leader_and_isr(TOPIC, SimpleNamespace(partition_index=0, leader=1, leader_epoch=0,
                                                            replicas=[1, 2], isr=[1], zk_version=written.zk_version,
                                                            controller_epoch=1))
        plog = logs.get(TOPIC, 0)
        replica = manager.leader_replica(TOPIC, 0)
        plog.append(records(3), leader_epoch=0)
        manager.leader_appended(TOPIC, 0, plog)
        assert plog.high_watermark == 3  # the ISR is the leader alone

        # broker 2 has caught up: the leader starts writing ISR [1, 2]; ZooKeeper may name it in-sync any moment
        manager.follower_fetched(replica, plog, 2, 3)
        await asyncio.to_thread(store.writing.wait, 10)
        assert store.writing.is_set()
        plog.append(records(2), leader_epoch=0)
        manager.leader_appended(TOPIC, 0, plog)
        assert plog.high_watermark == 3, "acknowledged past what the joining follower has"
        manager.follower_fetched(replica, plog, 2, 5)
        assert plog.high_watermark == 5

        store.release.set()
        for _ in range(200):
            if replica.isr == [1, 2]:
                break
            await asyncio.sleep(0.05)
        assert replica.isr == [1, 2] and store.partition_state(TOPIC, 0).isr == [1, 2]
        await manager.close()

    try:
        asyncio.run(scenario())
    finally:
        store.release.set()
        logs.close()
        store.stop()


def _controller_epoch_version(store: ClusterStore) -> int:
    store.zk.ensure_path("/controller_epoch")
    return store.zk.exists("/controller_epoch").version
