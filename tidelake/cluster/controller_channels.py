"""The controller's requests to brokers: one queue and one sender task per live broker (Kafka's
``ControllerChannelManager`` / ``RequestSendThread``), so a slow or stopped broker never holds up
the controller's event processing or the requests to the others. A request that fails (broker gone,
timeout) is retried until the broker leaves the live set, since LeaderAndIsr must reach it."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from tidelake.cluster.channel import BrokerChannel, ChannelError

log = logging.getLogger("tidelake.cluster.controller")

RETRY_BACKOFF_S = 0.3


class ControllerChannels:
    def __init__(self, controller_id: int, timeout_s: float = 10.0):
        self.controller_id = controller_id
        self.timeout_s = timeout_s
        self._queues: dict[int, asyncio.Queue] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._channels: dict[int, BrokerChannel] = {}
        self._closing: list[asyncio.Task] = []  # cancelled sender tasks not yet finished

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        if broker_id in self._channels:
            ch = self._channels[broker_id]
            if (ch.host, ch.port) == (host, port):
                return
            self.remove_broker(broker_id)
        self._channels[broker_id] = BrokerChannel(broker_id, host, port, client_id=f"controller-{self.controller_id}",
                                                  timeout_s=self.timeout_s)
        self._queues[broker_id] = asyncio.Queue()
        self._tasks[broker_id] = asyncio.get_running_loop().create_task(self._send_loop(broker_id))

    def remove_broker(self, broker_id: int) -> None:
        task = self._tasks.pop(broker_id, None)
        if task is not None:
            task.cancel()
            self._closing.append(task)
        ch = self._channels.pop(broker_id, None)
        if ch is not None:
            ch.close()
        q = self._queues.pop(broker_id, None)
        if q is not None:
            # Python 3.11's asyncio.wait_for can swallow a cancellation that races with the response: the
            # sender then finds this end mark (and no channel) instead of waiting on its queue for ever
            q.put_nowait(None)

    def send(self, broker_id: int, message: Any, version: int) -> None:
        q = self._queues.get(broker_id)
        if q is not None:
            q.put_nowait((message, version))

    async def _send_loop(self, broker_id: int) -> None:
        q, ch = self._queues[broker_id], self._channels[broker_id]
        while True:
            item = await q.get()
            if item is None:
                return
            message, version = item
            while self._channels.get(broker_id) is ch:  # retried until the broker leaves
                try:
                    response = await ch.request(message, version)
                    code = response.error_code  # LeaderAndIsr, UpdateMetadata and StopReplica all have one
                    if code:
                        log.warning("broker %d answered %s with error %d", broker_id, type(message).__name__, code)
                    break
                except ChannelError as e:
                    log.info("controller request %s to %s failed (%s); retrying", type(message).__name__, ch, e)
                    await asyncio.sleep(RETRY_BACKOFF_S)

    def close(self) -> None:
        for broker_id in list(self._channels):
            self.remove_broker(broker_id)
        self._closing = [t for t in self._closing if not t.done()]

    async def wait_closed(self) -> None:
        """Let the cancelled sender tasks finish (nothing left pending when the loop closes)."""
        await asyncio.gather(*self._closing, return_exceptions=True)
        self._closing = []
