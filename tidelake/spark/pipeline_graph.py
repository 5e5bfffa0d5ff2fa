"""The pipelines of a directory as one graph: a stage per YAML, an edge where a stage reads another's sink.

``PipelineGraph.load(DIR)`` checks every file (pipeline_yaml.py), refuses two stages writing one table and a
cycle (naming its path: ``a -> b -> a``), and orders the stages so every stage comes after those it reads
(Kahn's algorithm, ties by name). ``stage_status`` is what ``pipeline graph``, the console and ``pipeline serve``'s
metrics show per stage: its upstream's position, the position consumed, the lag in versions (records for a Kafka
stage) and seconds, and the freshness. No pyspark imports.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.pipeline_yaml import load_pipeline_yaml
from tidelake.table import Table, TableError, TableNotFound


class GraphError(PipelineConfigError):
    """Pipelines that do not form a DAG (a cycle, two writers of one table) or a directory without any."""


@dataclass(frozen=True)
class Stage:
    name: str  # the sink table's name
    file: str  # the YAML
    config: PipelineConfig

    @property
    def reads(self) -> list[str]:
        """The table paths this stage reads (empty for a Kafka stage)."""
        src = self.config.source
        return [src.table, *src.tables.values()] if src.table is not None else []

    @property
    def upstream_label(self) -> str:
        src = self.config.source
        return f"topic {src.topic}" if src.table is None else os.path.basename(src.table.rstrip("/"))


@dataclass(frozen=True)
class PipelineGraph:
    stages: list[Stage]  # dependency order
    upstreams: dict[str, list[str]]  # stage -> the stages whose sinks it reads

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "PipelineGraph":
        files = sorted(Path(directory).glob("*.yaml")) + sorted(Path(directory).glob("*.yml"))
        if not files:
            raise GraphError(f"{directory}: no pipeline files (*.yaml)")
        return cls.of([Stage(load_pipeline_yaml(f).name, f.name, load_pipeline_yaml(f)) for f in files])

    @classmethod
    def of(cls, stages: list[Stage]) -> "PipelineGraph":
        writers: dict[str, Stage] = {}
        for s in stages:
            other = writers.get(s.config.sink.table)
            if other is not None:
                raise GraphError(f"{s.file} and {other.file} both write {s.config.sink.table}")
            writers[s.config.sink.table] = s
        names = {s.name: s for s in stages}
        if len(names) != len(stages):
            raise GraphError("two stages' sink tables share a name: " + ", ".join(sorted(
                n for n in names if sum(s.name == n for s in stages) > 1)))
        upstreams = {s.name: sorted({writers[p].name for p in s.reads if p in writers}) for s in stages}
        _refuse_cycles(upstreams, {s.name: s.file for s in stages})
        order, done = [], set()
        while len(order) < len(stages):
            ready = sorted(n for n in names if n not in done and all(u in done for u in upstreams[n]))
            order.extend(ready)
            done.update(ready)
        return cls([names[n] for n in order], upstreams)

    def downstream(self, name: str) -> list[str]:
        return [n for n, ups in self.upstreams.items() if name in ups]


def _refuse_cycles(upstreams: Mapping[str, list[str]], files: Mapping[str, str]) -> None:
    state: dict[str, int] = {}   # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for up in upstreams[node]:
            if state.get(up) == 1:
                cycle = path[path.index(up):] + [up]
                raise GraphError("pipelines form a cycle: " + " -> ".join(reversed(cycle)) +
                                 f" ({', '.join(files[n] for n in reversed(cycle[:-1]))})")
            if up not in state:
                visit(up, path + [up])
        state[node] = 2

    for name in sorted(upstreams):
        if name not in state:
            visit(name, [name])


@dataclass(frozen=True)
class StageStatus:
    name: str
    kind: str  # kafka | table
    upstream: str
    upstream_position: int | None  # the upstream table's latest version (a Kafka stage: its log end, summed)
    consumed: int | None  # the upstream version (offsets, summed) the sink's last commit recorded
    lag: int | None  # versions (a Kafka stage: records)
    lag_seconds: float | None  # how long the oldest unconsumed upstream commit has waited (0 when caught up)
    freshness_seconds: float | None  # age of the newest upstream data the sink holds
    sink_version: int | None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _open(path: str) -> Table | None:
    try:
        return Table.open(path)
    except TableNotFound:
        return None


def table_stage_status(stage: Stage, now_ms: int | None = None) -> StageStatus:
    """A table stage's position, from its upstream's log and its sink's last commit."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    cfg = stage.config
    try:
        upstream, sink = _open(cfg.source.table), _open(cfg.sink.table)
    except TableError as e:
        return StageStatus(stage.name, "table", stage.upstream_label, None, None, None, None, None, None, str(e))
    if upstream is None:
        return StageStatus(stage.name, "table", stage.upstream_label, None, None, None, None, None, None,
                           "upstream table not created yet")
    md = upstream.metadata
    state = sink.app_state(cfg.app_id) if sink is not None else None
    consumed = state["extra"].get("to_version") if state else None
    lag = md.version - consumed if consumed is not None else md.version
    waiting = [md.timestamps[v] for v in range((consumed if consumed is not None else -1) + 1, md.version + 1)
               if v in md.timestamps]
    lag_seconds = max(0.0, (now_ms - min(waiting)) / 1000) if lag and waiting else 0.0
    freshness = None
    if consumed is not None and consumed in md.timestamps:
        # the newest upstream commit the sink reflects; caught up, the data is as fresh as the upstream's
        freshness = max(0.0, (now_ms - md.timestamps[consumed]) / 1000) if lag else 0.0
    return StageStatus(stage.name, "table", stage.upstream_label, md.version, consumed, lag, lag_seconds, freshness,
                       state["version"] if state else None)


def kafka_stage_status(stage: Stage, client_config: Mapping[str, Any], timeout: float,
                       now_ms: int | None = None) -> StageStatus:
    """A Kafka stage's position, read from the broker now."""
    from tidelake.spark.pipeline_status import positions   # confluent-kafka: only for Kafka stages
    try:
        pos = positions(stage.config, client_config, timeout)
    except Exception as e:   # a down broker is this stage's status line, not the graph's failure
        return StageStatus(stage.name, "kafka", stage.upstream_label, None, None, None, None, None, None,
                           str(e).splitlines()[0])
    return kafka_stage_position(stage, pos, now_ms)


def kafka_stage_position(stage: Stage, pos, now_ms: int | None = None) -> StageStatus:
    """A Kafka stage's position from its topic's positions (``pipeline_status.Positions``): the log end and the
    offsets its mode keeps, summed over partitions. ``pipeline graph`` and the console's graph both read it."""
    from tidelake.spark.pipeline_status import Progress
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    cfg = stage.config
    progress = pos.progress(cfg.offsets)
    end = sum(pos.latest.values())
    consumed = sum(progress.get(p, pos.earliest[p]) for p in pos.partitions)
    sink = _open(cfg.sink.table)
    last_ms = Progress.of_history(sink.history(), cfg.app_id).last_commit_ms if sink is not None else None
    lag = end - consumed
    age = max(0.0, (now_ms - last_ms) / 1000) if last_ms is not None else None
    return StageStatus(stage.name, "kafka", stage.upstream_label, end, consumed, lag, age if lag else 0.0,
                       age if lag else 0.0, sink.version if sink is not None else None)
