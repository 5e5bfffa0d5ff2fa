"""``TxnMarkerSender``: the transaction coordinator's COMMIT/ABORT markers to the leaders of a
transaction's partitions, over Kafka's inter-broker WriteTxnMarkers (Kafka's
``TransactionMarkerChannelManager``).

A transaction's partitions are grouped by their leader (from the ``MetadataCache`` the controller keeps
current); one WriteTxnMarkers goes to each leader, this broker included. Partitions answered with a
retriable error (NOT_LEADER_OR_FOLLOWER after a leader change, too few in-sync replicas, a timeout or a
lost connection) are sent again, to the leader the refreshed metadata names, until every marker is
written or the coordinator stops owning the transaction (``still_owner``); a deleted partition needs no
marker. The coordinator's ``done`` callback runs on the broker's loop once every marker is written
(True) or the send gave up (False: the transaction stays Prepare* and is retried).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from kafka.protocol.producer import WriteTxnMarkersRequest

from tidelake import errors
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.metadata_cache import MetadataCache

log = logging.getLogger("tidelake.cluster.txn_markers")

WRITE_TXN_MARKERS_VERSION = 2  # v2 (KIP-1228) names the transaction version the marker ends
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0
CLOSE_WAIT_S = 2.0
# errors after which the same marker is sent again (to the partition's leader of the moment)
RETRIABLE = {errors.NotLeaderOrFollower.code, errors.UnknownTopicOrPartition.code, errors.NotEnoughReplicas.code,
             errors.NotEnoughReplicasAfterAppend.code, errors.RequestTimedOut.code,
             errors.CoordinatorLoadInProgress.code, errors.UnknownLeaderEpoch.code}

TopicPartition = tuple[str, int]


class TxnMarkerSender:
    def __init__(self, broker_id: int, cache: MetadataCache, listener: Callable[[], str], *,
                 give_up_s: float = 120.0):
        self.broker_id = broker_id
        self.cache = cache
        self.listener = listener  # the inter-broker listener's name
        self.give_up_s = give_up_s
        self._channels: dict[int, BrokerChannel] = {}
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def send(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
             partitions: list[TopicPartition], done: Callable[[bool], None],
             still_owner: Callable[[], bool] = lambda: True, *, transaction_version: int) -> None:
        """Write the markers; ``transaction_version``: the protocol the transaction's client spoke (2: its
        epoch was bumped for the marker)."""
        task = asyncio.get_running_loop().create_task(
            self._send(producer_id, producer_epoch, commit, coordinator_epoch, partitions, done, still_owner,
                       transaction_version))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition], done: Callable[[bool], None],
                    still_owner: Callable[[], bool], transaction_version: int) -> None:
        what = f"{'COMMIT' if commit else 'ABORT'} markers of producer {producer_id} epoch {producer_epoch}"
        remaining = set(partitions)
        deadline = time.monotonic() + self.give_up_s
        while remaining:
            if self._closed:  # the broker is stopping (checked too in case a cancellation was swallowed)
                return
            if not still_owner():
                log.info("%s: no longer the coordinator, %d partition(s) left to the next one", what,
                         len(remaining))
                done(False)
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                pm = self.cache.partition(*tp)
                if pm is None:
                    if tp[0] not in self.cache.partitions:  # deleted: nothing to mark
                        log.warning("%s: %s-%d no longer exists", what, *tp)
                        remaining.discard(tp)
                    continue
                if pm.leader >= 0:
                    by_leader.setdefault(pm.leader, []).append(tp)
            results = await asyncio.gather(*(
                self._send_to(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch, transaction_version)
                for leader, tps in by_leader.items()))
            for codes in results:
                for tp, code in codes.items():
                    if code == errors.NONE:
                        remaining.discard(tp)
                    elif code not in RETRIABLE:
                        # a newer producer epoch or coordinator already wrote there (Kafka's coordinator
                        # gives up on such a partition too): nothing this marker can still change
                        log.warning("%s: %s-%d answered error %d; not retried", what, *tp, code)
                        remaining.discard(tp)
            if remaining:
                if time.monotonic() >= deadline:
                    log.warning("%s: %d partition(s) still unmarked after %g s; retried later", what,
                                len(remaining), self.give_up_s)
                    done(False)
                    return
                await asyncio.sleep(RETRY_BACKOFF_S)
        done(True)

    async def _send_to(self, leader: int, tps: list[TopicPartition], producer_id: int, producer_epoch: int,
                       commit: bool, coordinator_epoch: int, transaction_version: int) -> dict[TopicPartition, int]:
        ep = self.cache.endpoint(leader, self.listener())
        if ep is None:
            return {tp: errors.NotLeaderOrFollower.code for tp in tps}
        ch = self._channels.get(leader)
        if ch is None or (ch.host, ch.port) != (ep.host, ep.port):
            if ch is not None:
                ch.close()
            ch = self._channels[leader] = BrokerChannel(leader, ep.host, ep.port,
                                                        client_id=f"broker-{self.broker_id}-txn-markers",
                                                        timeout_s=REQUEST_TIMEOUT_S)
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        M = WriteTxnMarkersRequest.WritableTxnMarker
        T = M.WritableTxnMarkerTopic
        request = WriteTxnMarkersRequest(markers=[M(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[T(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
        try:
            response = await ch.request(request, WRITE_TXN_MARKERS_VERSION)
        except ChannelError as e:
            log.info("WriteTxnMarkers to broker %d failed (%s); retrying", leader, e)
            return {tp: errors.RequestTimedOut.code for tp in tps}
        out = {tp: errors.NotLeaderOrFollower.code for tp in tps}  # whatever the answer leaves out
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, p.partition_index)] = p.error_code
        return out

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            # bounded: Python 3.11's asyncio.wait_for can swallow a cancellation racing with a response
            await asyncio.wait(list(self._tasks), timeout=CLOSE_WAIT_S)
        self._tasks.clear()
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
