"""The broker's metrics listener (``metrics.listen``): its own ``CollectorRegistry`` with the
``BrokerCollector``, and its health: live while the broker's event loop answers (or while it is still
loading), ready once the data directory and both coordinators are loaded and the listeners serve."""
from __future__ import annotations

from typing import Callable, Mapping

from prometheus_client import CollectorRegistry

from tidelake.observability.broker_collector import BrokerCollector
from tidelake.observability.broker_state import BrokerStateSnapshot
from tidelake.observability.broker_stats import BrokerStats
from tidelake.observability.health import Flag, Health
from tidelake.observability.server import MetricsServer


class BrokerObserver:
    def __init__(self, host: str, port: int, *, stats: BrokerStats, read_state: Callable[[], BrokerStateSnapshot],
                 ping: Callable[[], None], api_names: Mapping[int, str]):
        self.logs_loaded = Flag("loading the data directory", "data directory loaded")
        self.coordinators_loaded = Flag("loading the group and transaction coordinators", "coordinators loaded")
        self.serving = Flag("binding the listeners", "listeners serving")
        self._ping = ping
        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(stats, self._read_state_when_loaded(read_state), api_names))
        health = Health()
        health.add_live("event_loop", self._loop_answers)
        for name, flag in (("data_dir", self.logs_loaded), ("coordinators", self.coordinators_loaded),
                           ("listeners", self.serving)):
            health.add_ready(name, flag.check)
        self.server = MetricsServer(host, port, self.registry, health)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> "BrokerObserver":
        self.server.start()
        return self

    def stop(self) -> None:
        self.serving.clear()
        self.server.stop()

    def _read_state_when_loaded(self, read: Callable[[], BrokerStateSnapshot]) -> Callable[[], BrokerStateSnapshot | None]:
        # before the coordinators are loaded the loop is busy loading: report the counters only
        return lambda: read() if self.coordinators_loaded.ok else None

    def _loop_answers(self) -> tuple[bool, str]:
        if not self.serving.ok:
            return True, "starting"
        try:
            self._ping()
        except TimeoutError:
            return False, "the broker's event loop did not answer within 5 s"
        return True, "event loop answers"
