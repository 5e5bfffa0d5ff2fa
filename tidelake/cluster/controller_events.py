"""The controller's events and their queue (Kafka's ``ControllerEventManager``): events are processed one at a
time on the broker's event loop, so the controller's state needs no lock. ZooKeeper watches fire on kazoo's
thread and only enqueue; a request (ElectLeaders, ControlledShutdown, AlterPartitionReassignments) is an event
that carries the future its caller awaits. Each event is its own type, dispatched by type (the controller's
table of handlers). A failed event is logged and fails its request; a ``retried`` one (the election) is
enqueued again after a pause rather than given up.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, ClassVar

from kazoo.exceptions import KazooException

log = logging.getLogger("tidelake.cluster.controller")

RETRY_PAUSE_S = 0.5

Partition = tuple[str, int]


@dataclass(frozen=True)
class ControllerEvent:
    #: processed only by the elected controller (dropped elsewhere)
    active_only: ClassVar[bool] = True
    #: enqueued again after a failure
    retried: ClassVar[bool] = False


@dataclass(frozen=True)
class ControllerRequest(ControllerEvent):
    """An event a caller awaits: its processing sets ``future`` (a request reaching a broker that is not the
    controller is answered NOT_CONTROLLER by its handler)."""
    active_only: ClassVar[bool] = False
    future: asyncio.Future


# -- what ZooKeeper watches and the controller's own clock report --------------------------------------------
@dataclass(frozen=True)
class Elect(ControllerEvent):
    """/controller changed (or our session was renewed): run the election."""
    active_only: ClassVar[bool] = False
    retried: ClassVar[bool] = True


@dataclass(frozen=True)
class BrokersChanged(ControllerEvent):
    """/brokers/ids changed: brokers joined, left or restarted."""


@dataclass(frozen=True)
class TopicsChanged(ControllerEvent):
    """/brokers/topics changed: new topics."""


@dataclass(frozen=True)
class PartitionsChanged(ControllerEvent):
    """/brokers/topics/<topic> changed: partitions added to ``topic``."""
    topic: str


@dataclass(frozen=True)
class DeletionsRequested(ControllerEvent):
    """/admin/delete_topics changed."""


@dataclass(frozen=True)
class IsrChanged(ControllerEvent):
    """/isr_change_notification changed: leaders changed ISRs."""


@dataclass(frozen=True)
class RebalanceDue(ControllerEvent):
    """leader.imbalance.check.interval.seconds passed (auto.leader.rebalance.enable)."""


@dataclass(frozen=True)
class ZkReassignment(ControllerEvent):
    """/admin/reassign_partitions changed."""


# -- requests only the controller answers ---------------------------------------------------------------------
@dataclass(frozen=True)
class ElectLeaders(ControllerRequest):
    partitions: list[Partition] | None   # None: all
    unclean: bool


@dataclass(frozen=True)
class AlterReassignments(ControllerRequest):
    wanted: dict[Partition, list[int] | None]   # None: cancel
    allow_rf_change: bool


@dataclass(frozen=True)
class ControlledShutdown(ControllerRequest):
    broker_id: int
    broker_epoch: int


class ControllerEventQueue:
    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]]):
        self._process = process
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

    def put(self, event: ControllerEvent) -> None:
        self._queue.put_nowait(event)

    def watch(self, event: ControllerEvent) -> Callable:
        """A kazoo watch callback (kazoo's thread) that enqueues ``event`` on the broker's loop."""
        loop = self._loop

        def fire(_event=None) -> None:
            try:
                loop.call_soon_threadsafe(self.put, event)
            except RuntimeError:  # the broker's loop is closed: it is shutting down
                pass
        return fire

    async def request(self, make: Callable[[asyncio.Future], ControllerRequest]) -> Any:
        """Enqueue the request ``make`` builds around a new future, and wait for the answer its processing sets."""
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(make(future))
        return await future

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                name = type(event).__name__
                if isinstance(e, KazooException):  # e.g. our session expired mid-call: the new one re-elects
                    log.warning("controller event %s failed: ZooKeeper %s", name, type(e).__name__)
                else:
                    log.exception("controller event %s failed", name)
                if isinstance(event, ControllerRequest) and not event.future.done():
                    event.future.set_exception(e)
                if event.retried:
                    await asyncio.sleep(RETRY_PAUSE_S)
                    self.put(event)
