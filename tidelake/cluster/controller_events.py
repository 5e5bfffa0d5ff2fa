"""The controller's event queue (Kafka's ``ControllerEventManager``): events are processed one at a time on the
broker's event loop, so the controller's state needs no lock. ZooKeeper watches fire on kazoo's thread and only
enqueue; a request (ElectLeaders, ControlledShutdown, AlterPartitionReassignments) is an event that carries the
future its caller awaits. A failed event is logged and fails its request; kinds in ``retried`` (the election)
are enqueued again after a pause rather than given up.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from kazoo.exceptions import KazooException

log = logging.getLogger("tidelake.cluster.controller")

RETRY_PAUSE_S = 0.5


@dataclass
class ControllerEvent:
    kind: str
    topic: str | None = None  # "partitions": the topic whose assignment changed
    args: tuple = ()  # a request's arguments
    future: asyncio.Future | None = None  # a request's answer


class ControllerEventQueue:
    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]], retried: frozenset[str] = frozenset()):
        self._process = process
        self._retried = retried
        self._queue: asyncio.Queue[ControllerEvent] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._task = self._loop.create_task(self._run())

    async def stop(self) -> None:
        """Cancel the event in progress; nothing more is processed."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass

    def put(self, kind: str, topic: str | None = None) -> None:
        self._queue.put_nowait(ControllerEvent(kind, topic))

    def watch(self, kind: str, topic: str | None = None) -> Callable:
        """A kazoo watch callback (kazoo's thread) that enqueues ``kind`` on the broker's loop."""
        loop = self._loop

        def fire(_event=None) -> None:
            try:
                loop.call_soon_threadsafe(self.put, kind, topic)
            except RuntimeError:  # the broker's loop is closed: it is shutting down
                pass
        return fire

    async def request(self, kind: str, *args) -> Any:
        """Enqueue a request and wait for the answer its processing sets on the event's future."""
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(ControllerEvent(kind, args=args, future=future))
        return await future

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if isinstance(e, KazooException):  # e.g. our session expired mid-call: the new one re-elects
                    log.warning("controller event %s failed: ZooKeeper %s", event.kind, type(e).__name__)
                else:
                    log.exception("controller event %s failed", event.kind)
                if event.future is not None and not event.future.done():
                    event.future.set_exception(e)
                if event.kind in self._retried:
                    await asyncio.sleep(RETRY_PAUSE_S)
                    self.put(event.kind, event.topic)
