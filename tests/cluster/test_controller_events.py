"""The controller's typed events: every event type has the controller's handler, dispatch is by type, a failed
election is enqueued again, a failed request fails its caller's future. No ZooKeeper: the queue alone, and a
controller that is not elected."""
from __future__ import annotations

import asyncio
import inspect

import pytest

from tidelake.cluster import controller_events
from tidelake.cluster.controller import Controller
from tidelake.cluster.controller_events import (BrokersChanged, ControllerEvent, ControllerEventQueue,
                                                ControllerRequest, Elect, ElectLeaders, PartitionsChanged)


def event_types() -> set[type]:
    return {cls for _, cls in inspect.getmembers(controller_events, inspect.isclass)
            if issubclass(cls, ControllerEvent) and cls not in (ControllerEvent, ControllerRequest)}


def test_every_event_type_has_a_handler():
    controller = Controller(1, None, unclean_default=lambda: False)
    assert len(event_types()) == 11
    assert set(controller.handlers) == event_types()


def test_events_are_processed_in_order_and_a_failed_election_is_retried():
    seen: list[ControllerEvent] = []

    async def process(event: ControllerEvent) -> None:
        seen.append(event)
        if isinstance(event, Elect) and seen.count(event) == 1:
            raise RuntimeError("ZooKeeper said no")

    async def scenario() -> None:
        queue = ControllerEventQueue(process)
        queue.start()
        queue.put(Elect())
        queue.put(PartitionsChanged("t"))
        queue.put(BrokersChanged())
        for _ in range(200):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.01)
        await queue.stop()

    asyncio.run(scenario())
    assert seen == [Elect(), PartitionsChanged("t"), BrokersChanged(), Elect()]


def test_a_failed_request_fails_its_callers_future_once_and_is_not_retried():
    calls: list[ControllerEvent] = []

    async def process(event: ControllerEvent) -> None:
        calls.append(event)
        raise ValueError("no such partition")

    async def scenario() -> None:
        queue = ControllerEventQueue(process)
        queue.start()
        with pytest.raises(ValueError, match="no such partition"):
            await asyncio.wait_for(queue.request(lambda future: ElectLeaders(future, [("t", 0)], False)), 5)
        await queue.stop()

    asyncio.run(scenario())
    assert len(calls) == 1 and isinstance(calls[0], ElectLeaders) and calls[0].partitions == [("t", 0)]


def test_a_controller_not_elected_drops_what_only_the_active_one_handles():
    async def scenario() -> None:
        controller = Controller(1, None, unclean_default=lambda: False)
        await controller._process(BrokersChanged())   # would read /brokers/ids through the (absent) store

    asyncio.run(scenario())
