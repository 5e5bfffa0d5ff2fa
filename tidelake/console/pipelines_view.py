"""The pipelines of ``--pipelines DIR``: every ``*.yaml``/``*.yml`` there, validated as ``tidelake pipeline run``
would, and their status computed as ``tidelake pipeline status`` does (``tidelake.spark.pipeline_status``),
plus throughput and freshness from the table's commits and the dead-letter topic's size."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cachetools import TTLCache

from tidelake.console.broker_view import BrokerView, BrokerUnavailable


@dataclass(frozen=True)
class PipelineEntry:
    name: str          # the file name without its extension: the page's address
    path: str
    config: Any = None  # PipelineConfig, or None when the file is not a valid pipeline
    error: str | None = None


@dataclass(frozen=True)
class PipelineStatus:
    entry: PipelineEntry
    store: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    lag: int | None = None
    bad_records: dict[str, Any] = field(default_factory=dict)
    progress: Any = None                 # pipeline_status.Progress
    freshness_s: float | None = None     # seconds since the pipeline's last table commit
    dead_letter_records: int | None = None
    error: str | None = None
    stage: Any = None                    # pipeline_graph.StageStatus: what `pipeline graph` prints for it


@dataclass(frozen=True)
class GraphRow:
    """One stage of the directory's pipeline graph, in dependency order."""
    depth: int
    name: str              # the stage (its sink table's name)
    pipeline: str          # the file's page name
    upstream: str
    reads: list[str]       # the stages it reads
    upstream_position: int | None
    consumed: int | None
    lag: int | None        # versions, or records for a Kafka stage
    lag_s: float | None
    freshness_s: float | None
    error: str | None = None


class PipelineCatalog:
    def __init__(self, directory: str | None, view: BrokerView, client_config: Mapping[str, Any], timeout: float,
                 ttl: float = 2.0):
        self.directory = Path(directory) if directory else None
        self.view, self.client_config, self.timeout = view, dict(client_config), timeout
        self._parsed: dict[str, tuple[float, PipelineEntry]] = {}
        self._status: TTLCache = TTLCache(maxsize=256, ttl=ttl)
        self._clients: dict[str, Any] = {}   # config path -> (config, BrokerOffsets) kept between pages
        self._lock = threading.RLock()   # reentrant: a status read holds it while getting the clients

    def close(self) -> None:
        with self._lock:
            for _, clients in self._clients.values():
                clients.close()
            self._clients.clear()

    def _broker_offsets(self, entry: PipelineEntry):
        """The pipeline's broker clients, made once per config version (connections kept between pages)."""
        from tidelake.spark.pipeline_status import broker_offsets
        with self._lock:
            kept = self._clients.get(entry.path)
            if kept is not None and kept[0] is entry.config:
                return kept[1]
            if kept is not None:
                kept[1].close()
            clients = broker_offsets(entry.config, {**self.client_config,
                                                    "bootstrap.servers": entry.config.source.bootstrap_servers},
                                     self.timeout)
            self._clients[entry.path] = (entry.config, clients)
            return clients

    def entries(self) -> list[PipelineEntry]:
        if self.directory is None:
            return []
        out = []
        for path in sorted([*self.directory.glob("*.yaml"), *self.directory.glob("*.yml")]):
            mtime = path.stat().st_mtime
            cached = self._parsed.get(str(path))
            if cached is None or cached[0] != mtime:
                cached = (mtime, self._parse(path))
                self._parsed[str(path)] = cached
            out.append(cached[1])
        return out

    @staticmethod
    def _parse(path: Path) -> PipelineEntry:
        from tidelake.spark.pipeline_yaml import load_pipeline_yaml
        try:
            return PipelineEntry(path.stem, str(path), load_pipeline_yaml(str(path)))
        except (ValueError, OSError) as e:   # PipelineConfigError is a ValueError naming file:line
            return PipelineEntry(path.stem, str(path), error=str(e))

    def entry(self, name: str) -> PipelineEntry:
        for e in self.entries():
            if e.name == name:
                return e
        raise KeyError(name)

    def sink_tables(self) -> list[str]:
        return [e.config.sink.table for e in self.entries() if e.config is not None]

    def status(self, name: str) -> PipelineStatus:
        entry = self.entry(name)
        key = (name, id(entry))
        if key not in self._status:
            self._status[key] = self._compute(entry)
        return self._status[key]

    def graph(self) -> tuple[list[GraphRow], str | None]:
        """The valid pipelines as one graph (``pipeline graph``'s view): rows in dependency order, or the reason
        they do not form one (a cycle, two writers of a table)."""
        from tidelake.spark.pipeline_graph import GraphError, PipelineGraph, Stage
        entries = {Path(e.path).name: e for e in self.entries() if e.config is not None}
        try:
            graph = PipelineGraph.of([Stage(e.config.name, file, e.config) for file, e in entries.items()])
        except GraphError as e:
            return [], str(e)
        depth: dict[str, int] = {}
        rows = []
        for stage in graph.stages:
            ups = graph.upstreams[stage.name]
            depth[stage.name] = 1 + max(depth[u] for u in ups) if ups else 0
            entry = entries[stage.file]
            status = self.status(entry.name)
            st = status.stage   # the stage's status as `pipeline graph` computes it, from this status's reads
            if st is None:
                rows.append(GraphRow(depth[stage.name], stage.name, entry.name, stage.upstream_label, ups, None, None,
                                     None, None, None, status.error))
            else:
                rows.append(GraphRow(depth[stage.name], stage.name, entry.name, st.upstream, ups, st.upstream_position,
                                     st.consumed, st.lag, st.lag_seconds, st.freshness_seconds, st.error or None))
        return rows, None

    def _compute(self, entry: PipelineEntry) -> PipelineStatus:
        from confluent_kafka import KafkaException

        from tidelake.spark.pipeline_graph import Stage, kafka_stage_position, table_stage_status
        from tidelake.spark.pipeline_status import Progress, bad_records, positions, progress_store, table_state
        from tidelake.table import Table
        cfg = entry.config
        if cfg is None:
            return PipelineStatus(entry, error=entry.error)
        stage = Stage(cfg.name, Path(entry.path).name, cfg)
        if cfg.is_table_source:   # its position is in its upstream's log and its sink's commits, no broker
            st = table_stage_status(stage)
            return PipelineStatus(entry, store="table", lag=st.lag, progress=Progress(),
                                  freshness_s=st.freshness_seconds, error=st.error or None, stage=st)
        state, _ = table_state(cfg)
        progress = Progress.of_history(Table.open(cfg.sink.table).history(), cfg.app_id) \
            if Table.exists(cfg.sink.table) else Progress()
        freshness = time.time() - progress.last_commit_ms / 1000 if progress.last_commit_ms else None
        common = dict(store=progress_store(cfg.offsets), bad_records=bad_records(cfg, state), progress=progress,
                      freshness_s=freshness)
        try:
            with self._lock:   # one page at a time uses a pipeline's clients
                pos = positions(cfg, {}, self.timeout, broker=self._broker_offsets(entry))
        except (KafkaException, RuntimeError, ValueError) as e:   # ValueError: KafkaSourceError
            return PipelineStatus(entry, **common, error=f"{cfg.source.topic} at {cfg.source.bootstrap_servers}: {e}")
        rows = pos.rows(cfg.offsets)
        return PipelineStatus(entry, **common, rows=rows, lag=sum(r["lag"] for r in rows),
                              dead_letter_records=self._dead_letters(cfg), stage=kafka_stage_position(stage, pos))

    def _dead_letters(self, cfg) -> int | None:
        """Records in the dead-letter topic when it lives on the console's broker."""
        if not cfg.dead_letter_topic:
            return None
        try:
            return self.view.topic(cfg.dead_letter_topic).messages
        except (KeyError, BrokerUnavailable):
            return None
