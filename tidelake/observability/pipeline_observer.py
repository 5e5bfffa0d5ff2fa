"""The pipeline's metrics listener (``metrics: {listen: HOST:PORT}``): its own ``CollectorRegistry`` with
the ``PipelineCollector`` and the sink table's ``TableCollector``; live while the process serves, ready
while the last batch committed within ``ready_intervals`` batch intervals."""
from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from tidelake.observability.health import Health
from tidelake.observability.pipeline_collector import PipelineCollector
from tidelake.observability.pipeline_stats import PipelineStats
from tidelake.observability.server import MetricsServer
from tidelake.observability.table_collector import TableCollector


class PipelineObserver:
    def __init__(self, host: str, port: int, stats: PipelineStats, *, pipeline: str, topic: str):
        self.stats = stats
        self.registry = CollectorRegistry()
        self.registry.register(PipelineCollector(stats, pipeline, topic))
        health = Health()
        health.add_live("process", lambda: (True, "serving"))
        health.add_ready("batches", stats.ready)
        self.server = MetricsServer(host, port, self.registry, health)
        self._table: TableCollector | None = None

    @property
    def url(self) -> str:
        return self.server.url

    def watch_table(self, table: Any) -> None:
        """Expose the sink table's metrics too (once it is open)."""
        if self._table is None:
            self._table = TableCollector(table)
            self.registry.register(self._table)

    def start(self) -> "PipelineObserver":
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
