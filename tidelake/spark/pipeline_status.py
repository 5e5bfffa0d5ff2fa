"""Where a pipeline is: per partition the broker's watermarks, the group's committed offsets, the gtoffset file's
and the table's, and the lag measured from the offsets of the pipeline's own mode; plus what its table commits
say about bad records, throughput and freshness. ``tidelake pipeline status`` and the web console show this.

No pyspark imports: reading the status never starts Spark.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile, Offsets, offsets_from_app_state
from tidelake.spark.pipeline_config import PipelineConfig

# where each offset mode keeps its progress (the others: the broker group)
STORE_OF_MODE = {"exactly-once": "table", "seo": "gtoffset"}


def progress_store(mode: str) -> str:
    """``table``, ``gtoffset`` or ``group``: where an offset mode keeps how far the pipeline got."""
    return STORE_OF_MODE.get(mode, "group")


@dataclass(frozen=True)
class Positions:
    """Every offset of the pipeline's topic that matters, per partition."""

    partitions: list[int]
    earliest: Offsets
    latest: Offsets
    committed: Offsets            # the broker group's (partitions without a commit left out)
    gtoffset: Offsets | None      # the seo file's, None when there is none
    table: Offsets | None         # the table's (exactly-once), None before its first commit

    def progress(self, mode: str) -> Offsets:
        """The offsets ``mode`` resumes from."""
        return {"table": self.table, "gtoffset": self.gtoffset}.get(progress_store(mode), self.committed) or {}

    def rows(self, mode: str) -> list[dict[str, Any]]:
        """One row per partition, as ``tidelake pipeline status --json`` prints them."""
        progress = self.progress(mode)
        return [{"partition": p, "log_start_offset": self.earliest[p], "group_offset": self.committed.get(p),
                 "gtoffset": (self.gtoffset or {}).get(p), "table_offset": (self.table or {}).get(p),
                 "log_end_offset": self.latest[p],
                 "lag": self.latest[p] - progress[p] if p in progress else self.latest[p] - self.earliest[p]}
                for p in self.partitions]


def table_state(cfg: PipelineConfig) -> tuple[dict | None, Offsets | None]:
    """(app state, offsets) the sink table holds for this pipeline; (None, None) before its first commit."""
    from tidelake.table import Table
    options = cfg.sink.storage_options or None
    if not Table.exists(cfg.sink.table, storage_options=options):
        return None, None
    state = Table.open(cfg.sink.table, storage_options=options).app_state(cfg.app_id)
    return state, offsets_from_app_state(state)


def broker_offsets(cfg: PipelineConfig, client_config: Mapping[str, Any], timeout: float) -> BrokerOffsets:
    """The clients that read ``cfg``'s topic and group (close it after use). ``client_config``: librdkafka
    settings (bootstrap, timeouts, security); the pipeline's own ``source.kafka`` settings win."""
    src = cfg.source
    return BrokerOffsets(src.bootstrap_servers, src.topic, src.group_id, {**client_config, **src.kafka},
                         timeout=timeout)


def positions(cfg: PipelineConfig, client_config: Mapping[str, Any], timeout: float,
              broker: BrokerOffsets | None = None) -> Positions:
    """Read every position of ``cfg``'s topic: the broker (watermarks, group), the gtoffset file, the table.
    ``broker``: clients kept from an earlier call (a long-running reader); else new ones, closed after."""
    src = cfg.source
    with contextlib.nullcontext(broker) if broker is not None else broker_offsets(cfg, client_config, timeout) as b:
        partitions = b.partitions()
        earliest, latest = b.watermarks(partitions)
        committed = b.committed(partitions) or {}
    gt = ClientOffsetFile(cfg.seo_dir, src.group_id, src.topic).read() if cfg.seo_dir else None
    return Positions(partitions, earliest, latest, committed, gt, table_state(cfg)[1])


def bad_records(cfg: PipelineConfig, state: Mapping | None) -> dict[str, Any]:
    """What ``on_error`` did so far, as counted in the table's commits (exactly-once pipelines keep the counts)."""
    extra = (state or {}).get("extra") or {}
    return {"on_error": cfg.on_error, "skipped": extra.get("skipped_total", 0),
            "dead_lettered": extra.get("dead_lettered_total", 0), "dead_letter_topic": cfg.dead_letter_topic}


@dataclass(frozen=True)
class Progress:
    """The pipeline's batches as its table commits record them (commits carrying its app id)."""

    commits: int = 0
    last_commit_ms: int | None = None     # freshness: how old the newest data in the table is
    last_batch_id: int | None = None
    records_per_second: float | None = None  # offsets advanced per second over the retained app commits
    batches: list[dict[str, Any]] = field(default_factory=list)  # newest last: version, time, records

    @classmethod
    def of_history(cls, history: list[Mapping[str, Any]], app_id: str) -> "Progress":
        """From ``Table.history()`` (oldest first): the app's commits and the offsets each one advanced."""
        batches, previous = [], None
        for e in history:
            app = e.get("app")
            if not app or app.get("app_id") != app_id:
                continue
            offsets = {int(p): int(o) for p, o in ((app.get("extra") or {}).get("offsets") or {}).items()}
            total = sum(offsets.values())
            records = None if previous is None else max(0, total - previous)
            batches.append({"version": e["version"], "timestamp_ms": e["timestamp_ms"],
                            "batch_id": app.get("batch_id"), "records": records, "offsets_total": total})
            previous = total
        if not batches:
            return cls()
        rate = None
        if len(batches) >= 2:
            span = (batches[-1]["timestamp_ms"] - batches[0]["timestamp_ms"]) / 1000
            moved = batches[-1]["offsets_total"] - batches[0]["offsets_total"]
            rate = moved / span if span > 0 else None
        return cls(commits=len(batches), last_commit_ms=batches[-1]["timestamp_ms"],
                   last_batch_id=batches[-1]["batch_id"], records_per_second=rate, batches=batches)
