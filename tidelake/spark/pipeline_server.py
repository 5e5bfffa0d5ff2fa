"""``tidelake pipeline serve DIR``: every pipeline of a directory in one long-lived process, one Spark session.

Every stage runs in a thread of its own, so a stage runs as soon as its upstream commits and never waits for
another branch or for a slow stage elsewhere in the graph: a Kafka stage is one continuous run
(``Pipeline.run()``: its broker clients and its table stay open between batches, a batch every
``batch_interval``); a table stage steps whenever its trigger says so (``TablePipeline.due``: ``min_versions``
new upstream versions, or any once ``interval`` has passed), checking its upstream every ``POLL_SECONDS``. A new
stage backfills from its upstream's snapshot on its first step. Every stage keeps its own exactly-once position
in its sink, so a kill -9 of the server loses and duplicates nothing. A stage that fails stops the server, which
raises its error. ``run_pass`` (tests) walks the graph once in dependency order instead. With
``--metrics-listen``, /metrics serves each stage's lag and freshness (StageCollector).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace

from tidelake.spark.pipeline_graph import PipelineGraph, Stage, StageStatus, table_stage_status
from tidelake.spark.runner import Pipeline
from tidelake.spark.session import spark_session
from tidelake.spark.table_pipeline import TablePipeline

log = logging.getLogger("tidelake.pipeline")

POLL_SECONDS = 0.1  # between two looks of a table stage at its upstream
STATUS_SECONDS = 1.0  # between two updates of the stages' statuses (metrics)


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
            config = self.graph.stages[0].config.spark
            # the stages' jobs share the executors fairly (one pool each): a long full refresh does not queue a
            # Kafka stage's next batch behind it
            fair = replace(config, conf={"spark.scheduler.mode": "FAIR", **config.conf})
            self._spark = spark_session(fair, "tidelake-pipeline-serve")
        return self._spark

    def stop(self) -> None:
        self._stop.set()
        for runner in list(self.runners.values()):
            runner.stop()

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
        """Run every stage in its own thread until stopped (``max_passes``: that many ``run_pass`` instead)."""
        summary = ServeSummary(runs={s.name: 0 for s in self.graph.stages})
        log.info("serving %d pipelines (dependency order: %s)", len(self.graph.stages),
                 " -> ".join(s.name for s in self.graph.stages))
        if max_passes is not None:
            while not self.stopping and summary.passes < max_passes:
                for name, n in self.run_pass().items():
                    summary.runs[name] += n
                summary.passes += 1
            summary.stopped_by = "signal" if self.stopping else "max-passes"
            return summary
        failures: list[BaseException] = []
        for stage in self.graph.stages:   # (here, not in the threads: one runner per stage, each stoppable)
            self.runner(stage)
        threads = [threading.Thread(target=self._stage_thread, args=(stage, summary, failures),
                                    name=f"stage-{stage.name}", daemon=True) for stage in self.graph.stages]
        for t in threads:
            t.start()
        while not self.stopping:
            self._statuses = [table_stage_status(s) for s in self.graph.stages if s.config.is_table_source]
            self._stop.wait(STATUS_SECONDS)
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        summary.stopped_by = "signal"
        return summary

    def _stage_thread(self, stage: Stage, summary: ServeSummary, failures: list[BaseException]) -> None:
        """One stage until the server stops; its error stops the server."""
        try:
            runner = self.runner(stage)
            self.spark().sparkContext.setLocalProperty("spark.scheduler.pool", stage.name)   # (this thread's jobs)
            if isinstance(runner, Pipeline):
                # until stop(): one batch per batch_interval, clients and table kept open
                summary.runs[stage.name] += len(runner.run().batches)
                return
            while not self.stopping:
                if runner.due(runner.pending()) and runner.step() is not None:
                    summary.runs[stage.name] += 1
                    continue
                self._stop.wait(POLL_SECONDS)
        except BaseException as e:   # (the server raises it once every stage has stopped)
            failures.append(e)
            self.stop()
