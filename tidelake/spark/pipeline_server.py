"""``tidelake pipeline serve DIR``: every pipeline of a directory in one long-lived process, one Spark session.

Each pass walks the graph in dependency order (pipeline_graph.py): a Kafka stage reads what its topic holds
(``Pipeline.run(once=True)``: nothing to read returns at once) once its ``trigger.interval`` has passed since it
last ran; a table stage steps when its trigger says so (``TablePipeline.due``: ``min_versions`` new upstream
versions, or any once ``interval`` has passed). So a commit upstream is picked up by the next stage in the same
pass, and a new stage backfills from its upstream's snapshot on its first step. Every stage keeps its own
exactly-once position in its sink, so a kill -9 of the server loses and duplicates nothing. With
``--metrics-listen``, /metrics serves each stage's lag and freshness (StageCollector).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from tidelake.spark.pipeline_graph import PipelineGraph, Stage, StageStatus, table_stage_status
from tidelake.spark.runner import Pipeline
from tidelake.spark.session import spark_session
from tidelake.spark.table_pipeline import TablePipeline

log = logging.getLogger("tidelake.pipeline")

POLL_SECONDS = 0.1  # between passes with nothing to do


@dataclass
class ServeSummary:
    passes: int = 0
    runs: dict[str, int] = field(default_factory=dict)  # stage -> batches/steps committed
    stopped_by: str = ""


class PipelineServer:
    def __init__(self, graph: PipelineGraph, spark=None):
        self.graph = graph
        self._spark = spark
        self._stop = threading.Event()
        self.runners: dict[str, Pipeline | TablePipeline] = {}
        self._last_run: dict[str, float] = {}
        self._statuses: list[StageStatus] = []

    def spark(self):
        if self._spark is None:
            self._spark = spark_session(self.graph.stages[0].config.spark, "tidelake-pipeline-serve")
        return self._spark

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def runner(self, stage: Stage) -> Pipeline | TablePipeline:
        if stage.name not in self.runners:
            cls = TablePipeline if stage.config.is_table_source else Pipeline
            self.runners[stage.name] = cls(stage.config, spark=self.spark())
        return self.runners[stage.name]

    def statuses(self) -> list[StageStatus]:
        """The table stages' lag and freshness, as of the last pass (the metrics read these)."""
        return list(self._statuses)

    def run_pass(self) -> dict[str, int]:
        """One walk of the graph; the stages that committed something and how much."""
        ran: dict[str, int] = {}
        for stage in self.graph.stages:
            if self.stopping:
                break
            runner = self.runner(stage)
            now = time.monotonic()
            if isinstance(runner, Pipeline):
                if now - self._last_run.get(stage.name, 0.0) < stage.config.trigger.interval:
                    continue
                self._last_run[stage.name] = now
                summary = runner.run(once=True)
                if summary.batches:
                    ran[stage.name] = len(summary.batches)
                continue
            if not runner.due(runner.pending()):
                continue
            if runner.step() is not None:
                ran[stage.name] = 1
        self._statuses = [table_stage_status(s) for s in self.graph.stages if s.config.is_table_source]
        return ran

    def serve(self, max_passes: int | None = None) -> ServeSummary:
        summary = ServeSummary(runs={s.name: 0 for s in self.graph.stages})
        log.info("serving %d pipelines in this order: %s", len(self.graph.stages),
                 " -> ".join(s.name for s in self.graph.stages))
        while not self.stopping:
            if max_passes is not None and summary.passes >= max_passes:
                summary.stopped_by = "max-passes"
                return summary
            ran = self.run_pass()
            summary.passes += 1
            for name, n in ran.items():
                summary.runs[name] += n
            if not ran:
                self._stop.wait(POLL_SECONDS)
        summary.stopped_by = "signal"
        return summary
