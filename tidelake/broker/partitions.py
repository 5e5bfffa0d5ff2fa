"""Appends to partition logs that also wake the Fetch long-polls waiting on those partitions.

A Fetch that finds fewer than ``min_bytes`` parks in ``wait_for_data`` on the partitions it asked
for; every append (client records, coordinator records, transaction markers), DeleteRecords and
topic deletion calls ``notify`` so the parked Fetch answers at once instead of at its deadline.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Callable, Iterable

from tidelake.errors import UnknownTopicOrPartition
from tidelake.log import AppendResult, LogManager


class Partitions:
    def __init__(self, logs: LogManager, clock_ms: Callable[[], int]):
        self.logs = logs
        self.clock_ms = clock_ms
        self._waiters: dict[tuple[str, int], list[asyncio.Future]] = collections.defaultdict(list)

    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *,
               now_ms: int | None = None, leader_epoch: int = 0) -> AppendResult:
        """Append RecordBatches and wake the partition's fetchers. Raises UnknownTopicOrPartition or
        the log's errors (CorruptMessage, OutOfOrderSequenceNumber …)."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition}")
        result = plog.append(data, now_ms=self.clock_ms() if now_ms is None else now_ms, leader_epoch=leader_epoch)
        if not result.duplicate:
            self.notify(topic, partition)
        return result

    def append_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int = 0, now_ms: int | None = None) -> int:
        """Write a COMMIT/ABORT control batch and wake fetchers (the LSO moved)."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition}")
        offset = plog.append_marker(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                    coordinator_epoch=coordinator_epoch,
                                    now_ms=self.clock_ms() if now_ms is None else now_ms)
        self.notify(topic, partition)
        return offset

    def notify(self, topic: str | None, partition: int) -> None:
        """Wake every Fetch waiting on this partition (new data, HW, LSO or log start moved)."""
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify_topic(self, topic: str) -> None:
        for key in [k for k in self._waiters if k[0] == topic]:
            self.notify(*key)

    async def wait_for_data(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Sleep until one of ``partitions`` is notified or the timeout passes."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters[key].append(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    try:
                        waiting.remove(fut)
                    except ValueError:
                        pass
                    if not waiting:
                        self._waiters.pop(key, None)

    def cancel_waiters(self) -> None:
        """Broker stopping: no Fetch stays parked."""
        for futs in self._waiters.values():
            for f in futs:
                if not f.done():
                    f.cancel()
        self._waiters.clear()
