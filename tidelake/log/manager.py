"""LogManager: every partition log under one data directory (``<data-dir>/<topic>-<partition>/``),
and their maintenance (on the LogMaintenance thread once ``start_maintenance`` was called)."""
from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Callable

from tidelake.clock import wall_ms
from tidelake.log.config import LogConfig
from tidelake.log.maintenance import LogMaintenance
from tidelake.log.partition import PartitionLog
from tidelake.log.remote.manager import RemoteLogManager, TopicIds

log = logging.getLogger(__name__)

_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    """Opens, creates and maintains partition logs. The broker keeps topic configs itself and passes
    a LogConfig to ``create``/``load``; logs loaded by ``load()`` start with ``default_config`` until
    the broker calls ``PartitionLog.update_config``."""

    def __init__(self, data_dir: Path, *, clock_ms: Callable[[], int] | None = None,
                 default_config: LogConfig | None = None,
                 config_for: Callable[[str, int], LogConfig | None] | None = None,
                 remote: RemoteLogManager | None = None):
        self.data_dir = Path(data_dir)
        self.clock_ms = clock_ms or wall_ms
        self.default_config = default_config or LogConfig()
        self.config_for = config_for  # optional: topic config lookup used by load()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.RLock()
        self._maintenance: LogMaintenance | None = None
        self.compaction_enabled = True  # log.cleaner.enable
        self.remote = remote  # tiered storage (remote.log.storage.system.enable): it applies tiered logs' retention

    def load(self) -> None:
        """Open (and recover) every ``<topic>-<partition>/`` directory under the data dir."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            for d in sorted(self.data_dir.iterdir()):
                m = _DIR_NAME.match(d.name)
                if not d.is_dir() or m is None:
                    continue
                key = (m["topic"], int(m["partition"]))
                if key in self._logs:
                    continue
                cfg = (self.config_for(*key) if self.config_for else None) or self.default_config
                self._logs[key] = PartitionLog.open(d, cfg, clock_ms=self.clock_ms)

    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """Open the partition's log, creating its directory if new (an existing log is returned)."""
        with self._lock:
            key = (topic, partition)
            plog = self._logs.get(key)
            if plog is not None:
                if config is not None:
                    plog.update_config(config)
                return plog
            plog = PartitionLog.open(self.data_dir / partition_dir_name(topic, partition),
                                     config or self.default_config, clock_ms=self.clock_ms)
            self._logs[key] = plog
            return plog

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def delete_topic(self, topic: str) -> None:
        """Delete every partition directory of ``topic``."""
        with self._lock:
            for key in [k for k in self._logs if k[0] == topic]:
                plog = self._logs.pop(key)
                plog.delete()
                if self.remote is not None and plog.config.remote_storage_enable:
                    self.remote.partition_deleted(*key)

    def delete(self, topic: str, partition: int) -> None:
        """Delete one partition's directory (a replica moved away by a reassignment)."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()

    def all_logs(self) -> dict[tuple[str, int], PartitionLog]:
        with self._lock:
            return dict(self._logs)

    # ------------------------------------------------------------------ maintenance
    def start_maintenance(self, interval_ms: int = 1000, *, compaction: bool = True,
                          leads: Callable[[str, int], bool] | None = None,
                          topic_ids: TopicIds | None = None) -> None:
        """Run maintenance passes on the LogMaintenance thread every ``interval_ms`` until ``close()``
        (``compaction=False``: log.cleaner.enable=false), and tiered storage's on its own thread
        (``leads``: whether this broker leads a partition, the one that copies it; None: a single broker;
        ``topic_ids``: each topic's id, which keys its remote folder, required with tiered storage)."""
        if self.remote is not None and topic_ids is None:
            raise ValueError("tiered storage needs the topics' ids (topic_ids=)")
        with self._lock:
            self.compaction_enabled = compaction
            if self._maintenance is None:
                self._maintenance = LogMaintenance(self._maintenance_pass, max(0.01, interval_ms / 1000))
                self._maintenance.start()
        if self.remote is not None:
            self.remote.start(self.all_logs, topic_ids, leads)

    def run_maintenance(self, now_ms: int | None = None, *, compaction: bool = True) -> None:
        """One pass of the background work: roll by segment.ms, flush by flush.ms (and fsync closed
        segments), retention, compaction of the logs that are due (``compaction=False``:
        log.cleaner.enable=false).

        Once ``start_maintenance`` runs the thread, this only wakes it (``now_ms`` is then the
        thread's clock): a caller on an event loop never does the work itself. Otherwise the pass runs
        here, at ``now_ms``."""
        self.compaction_enabled = compaction
        if self._maintenance is not None:
            self._maintenance.trigger()
            return
        self._maintenance_pass(now_ms)

    def _maintenance_pass(self, now_ms: int | None = None) -> None:
        now = self.clock_ms() if now_ms is None else now_ms
        for (topic, partition), plog in self.all_logs().items():
            if plog.closed:
                continue
            try:
                plog.maybe_roll(now)
                plog.maybe_flush(now)
                if plog.config.delete and not self.tiered(plog):
                    deleted = plog.apply_retention(now)
                    if deleted:
                        log.info("retention deleted %d segment(s) of %s-%d; log start offset now %d",
                                 deleted, topic, partition, plog.log_start_offset)
                if self.compaction_enabled and plog.config.compact and not plog.closed:
                    stats = plog.maybe_compact(now)
                    if stats is not None and stats.segments_cleaned:
                        log.info("compacted %s-%d: %d segment(s), %d -> %d bytes, %d record(s) and %d tombstone(s) "
                                 "removed", topic, partition, stats.segments_cleaned, stats.bytes_before,
                                 stats.bytes_after, stats.records_removed, stats.tombstones_removed)
            except Exception:
                if not plog.closed:  # a log deleted or closed meanwhile is not an error
                    log.exception("maintenance of %s-%d failed", topic, partition)

    def tiered(self, plog: PartitionLog) -> bool:
        """Whether tiered storage keeps this log's older segments (then it applies the log's retention)."""
        return self.remote is not None and plog.config.remote_storage_enable

    def flush(self) -> None:
        for plog in self.all_logs().values():
            if not plog.closed:
                plog.flush()

    def close(self) -> None:
        """Stop the maintenance thread and close every log. Logs are closed before the thread is
        joined: a compaction pass in progress sees its log closed and stops."""
        maintenance, self._maintenance = self._maintenance, None
        if self.remote is not None:
            self.remote.stop()
        if maintenance is not None:
            maintenance.stop()
        with self._lock:
            for plog in self._logs.values():
                plog.close()
            self._logs.clear()
        if maintenance is not None:
            maintenance.join()
