"""``ReplicaFetchers``: a follower's copy of its leaders' logs (Kafka's ``ReplicaFetcherThread``), one
task per leader broker.

Before fetching a partition after a leader change, the follower truncates its log where it
diverges from the new leader's (KIP-101/KIP-279): it asks the leader (OffsetForLeaderEpoch) where
the follower's latest leader epoch ended; if the leader knows an older epoch only, the follower
repeats the question for that one; it truncates to the smaller of the leader's end offset and its
own end of that epoch. Then it fetches (Fetch with its replica id) from its log end, appends the
batches as the leader wrote them and takes the leader's high watermark (bounded by its own log end)
and log start offset (DeleteRecords).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable

from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest

from tidelake import errors
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.metadata_cache import Endpoint
from tidelake.log import PartitionLog
from tidelake.protocol.records import parse_header

log = logging.getLogger("tidelake.cluster.fetcher")

FETCH_VERSION = 12  # topic names, replica id, current leader epoch
EPOCH_VERSION = 4
BACKOFF_S = 0.2


@dataclass
class FetchState:
    plog: PartitionLog
    leader_epoch: int
    truncated: bool = False  # the divergence check against this leader epoch is done


class LeaderFetcher:
    """Fetches the partitions this broker follows from one leader."""

    def __init__(self, broker_id: int, leader_id: int, endpoint: Endpoint, *, max_wait_ms: int, max_bytes: int,
                 on_replicated: Callable[[str, int], None]):
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.channel = BrokerChannel(leader_id, endpoint.host, endpoint.port, client_id=f"replica-fetcher-{broker_id}",
                                     timeout_s=max(10.0, max_wait_ms / 1000 + 10))
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.on_replicated = on_replicated
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, topic: str, partition: int, plog: PartitionLog, leader_epoch: int) -> None:
        self.partitions[(topic, partition)] = FetchState(plog, leader_epoch)
        self._wake.set()

    def remove(self, topic: str, partition: int) -> None:
        self.partitions.pop((topic, partition), None)

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        self.channel.close()

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                pending = [k for k, s in self.partitions.items() if not s.truncated]
                if pending:
                    await self._truncate(pending)
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except ChannelError as e:
                log.debug("fetch from leader %d failed: %s", self.leader_id, e)
                await asyncio.sleep(BACKOFF_S)
            except Exception:
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                await asyncio.sleep(BACKOFF_S)

    # -- truncation (KIP-101 / KIP-279) ---------------------------------------------------------------
    async def _truncate(self, keys: list[tuple[str, int]]) -> None:
        asked = {k: self.partitions[k].plog.leader_epoch_cache.latest_epoch for k in keys}
        for _round in range(8):
            if not asked:
                return
            answers = await self._end_offsets(asked)
            next_round = {}
            for key, (code, epoch, end_offset) in answers.items():
                state = self.partitions.get(key)
                if state is None:
                    continue
                plog = state.plog
                if code != errors.NONE:
                    log.debug("OffsetForLeaderEpoch %s-%d from leader %d: error %d", *key, self.leader_id, code)
                    continue
                mine = asked[key]
                if mine < 0:  # no epochs here: nothing written under any leader to diverge
                    state.truncated = True
                    continue
                if epoch < 0 or end_offset < 0:
                    # the leader knows none of our epochs: keep only what was committed
                    target = plog.high_watermark
                elif epoch == mine:
                    target = min(end_offset, plog.log_end_offset)
                else:
                    # the leader's latest epoch at or below ours is older: our end of *that* epoch
                    _e, my_end = plog.leader_epoch_cache.end_offset_for(epoch, plog.log_end_offset)
                    if _e != epoch:
                        next_round[key] = epoch  # we never had that epoch: ask again with an older one
                        continue
                    target = min(end_offset, my_end)
                if target < plog.log_end_offset:
                    log.info("broker %d: truncating %s-%d from %d to %d (leader %d, epoch %d)", self.broker_id,
                             *key, plog.log_end_offset, target, self.leader_id, state.leader_epoch)
                    plog.truncate_to(target)
                state.truncated = True
            asked = next_round

    async def _end_offsets(self, asked: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int, int]]:
        R = OffsetForLeaderEpochRequest
        by_topic: dict[str, list] = {}
        for (topic, p), epoch in asked.items():
            by_topic.setdefault(topic, []).append(R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=p, current_leader_epoch=self.partitions[(topic, p)].leader_epoch, leader_epoch=epoch))
        req = R(replica_id=self.broker_id, topics=[R.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                   for t, ps in by_topic.items()])
        resp = await self.channel.request(req, EPOCH_VERSION)
        return {(t.topic, p.partition): (p.error_code, p.leader_epoch, p.end_offset)
                for t in resp.topics for p in t.partitions}

    # -- fetching --------------------------------------------------------------------------------------
    async def _fetch_once(self) -> None:
        R = FetchRequest
        ready = {k: s for k, s in self.partitions.items() if s.truncated}
        if not ready:
            await asyncio.sleep(BACKOFF_S)
            return
        by_topic: dict[str, list] = {}
        for (topic, p), s in ready.items():
            by_topic.setdefault(topic, []).append(R.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=s.leader_epoch, fetch_offset=s.plog.log_end_offset,
                last_fetched_epoch=-1, log_start_offset=s.plog.log_start_offset, partition_max_bytes=self.max_bytes))
        req = R(replica_id=self.broker_id, max_wait_ms=self.max_wait_ms, min_bytes=1, max_bytes=self.max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                forgotten_topics_data=[], rack_id="")
        resp = await self.channel.request(req, FETCH_VERSION)
        backoff = False
        for t in resp.responses:
            for pd in t.partitions:
                key = (t.topic, pd.partition_index)
                state = self.partitions.get(key)
                if state is None or state is not ready.get(key):
                    continue  # removed or re-added while the fetch was in flight
                if pd.error_code != errors.NONE:
                    if pd.error_code == errors.OffsetOutOfRange.code:
                        plog = state.plog
                        if 0 <= plog.log_end_offset < pd.log_start_offset:
                            # away longer than the leader's retention: continue from the leader's log start
                            log.info("broker %d: %s-%d ends at %d, before the leader's log start %d: starting over "
                                     "there", self.broker_id, *key, plog.log_end_offset, pd.log_start_offset)
                            plog.truncate_fully_and_start_at(pd.log_start_offset)
                            continue
                        state.truncated = False  # ahead of the leader: find the divergence point again
                    backoff = True
                    continue
                plog = state.plog
                data = pd.records
                if data:
                    data = data if isinstance(data, (bytes, bytearray)) else bytes(data)
                    base = parse_header(data, 0).base_offset
                    if base < plog.log_end_offset == plog.log_start_offset:
                        # an empty log restarted inside a batch: start at the batch (as Kafka's follower does
                        # on UnexpectedAppendOffsetException)
                        plog.truncate_fully_and_start_at(base)
                    plog.append_replicated(data)
                plog.high_watermark = min(pd.high_watermark, plog.log_end_offset)
                if pd.log_start_offset > plog.log_start_offset:  # DeleteRecords on the leader
                    plog.delete_records_before(min(pd.log_start_offset, plog.high_watermark))
                self.on_replicated(*key)
        if backoff:
            await asyncio.sleep(BACKOFF_S)


class ReplicaFetchers:
    """The fetchers of this broker, one per leader; a partition moves between them as leaders change."""

    def __init__(self, broker_id: int, *, endpoint_of: Callable[[int], Endpoint | None], max_wait_ms: int,
                 max_bytes: int, on_replicated: Callable[[str, int], None]):
        self.broker_id = broker_id
        self.endpoint_of = endpoint_of
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.on_replicated = on_replicated
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}  # partition -> leader

    def follow(self, topic: str, partition: int, plog: PartitionLog, leader: int, leader_epoch: int) -> None:
        self.stop_following(topic, partition)
        endpoint = self.endpoint_of(leader)
        if endpoint is None:
            log.warning("broker %d: no endpoint known for leader %d of %s-%d", self.broker_id, leader, topic, partition)
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is not None and (fetcher.channel.host, fetcher.channel.port) != (endpoint.host, endpoint.port):
            asyncio.get_running_loop().create_task(self.fetchers.pop(leader).close())
            fetcher = None
        if fetcher is None:
            fetcher = self.fetchers[leader] = LeaderFetcher(
                self.broker_id, leader, endpoint, max_wait_ms=self.max_wait_ms, max_bytes=self.max_bytes,
                on_replicated=self.on_replicated)
        fetcher.add(topic, partition, plog, leader_epoch)
        self._following[(topic, partition)] = leader

    def stop_following(self, topic: str, partition: int) -> None:
        leader = self._following.pop((topic, partition), None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(topic, partition)

    async def close(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.close()
        self.fetchers.clear()
