"""Topic deletion as Kafka's ZooKeeper-mode controller runs it: ``TopicDeletionManager``, which the controller owns
and calls when ``/admin/delete_topics`` changes (a DeleteTopics request writes a child there) and on failover, for
requests no controller has finished.

For each topic named there: every broker first hears that it is going (UpdateMetadata with leader -2), the live
brokers hosting its replicas get StopReplica with delete (they drop the replicas and their files), then its
znodes and the request go and the controller forgets it. Meanwhile the topic is in the context's ``deleting``
set, which elections, reassignments and LeaderAndIsr leave alone. A request for a topic the
controller does not know only has its znodes removed.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from tidelake.cluster.controller_context import ControllerContext
from tidelake.cluster.controller_requests import ControllerRequests
from tidelake.cluster.zk_store import ClusterStore

log = logging.getLogger("tidelake.cluster.controller")


class TopicDeletionManager:
    """The controller's topic deletion, run on its event queue: it reads the requests and removes the topics'
    znodes through ``store``, tells the brokers through ``requests`` and forgets the topics in ``context``."""

    def __init__(self, context: ControllerContext, store: ClusterStore, requests: ControllerRequests):
        self.context = context
        self.store = store
        self.requests = requests

    async def on_delete_requests(self, watch: Callable) -> None:
        """Delete every topic ``/admin/delete_topics`` names; ``watch`` fires on its next change."""
        names = await asyncio.to_thread(self.store.topics_to_delete, watch)
        for name in names:
            if name not in self.context.assignments:
                await asyncio.to_thread(self.store.delete_topic_nodes, name)
                continue
            self.context.deleting.add(name)
            parts = sorted(self.context.assignments[name].partitions.items())
            # brokers first hear the topic is going (leader -2), then drop its replicas and files
            self.requests.update_metadata(deleting={name})
            for bid in self.context.live:
                hosted = [p for p, replicas in parts if bid in replicas]
                if hosted:
                    self.requests.stop_replica(bid, name, hosted, delete=True)
            await asyncio.to_thread(self.store.delete_topic_nodes, name)
            self.context.forget_topic(name)
            log.info("controller: deleted topic %s", name)
        if names:
            self.requests.update_metadata()
