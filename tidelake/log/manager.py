"""LogManager: every partition log under one data directory (``<data-dir>/<topic>-<partition>/``)."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Callable

from tidelake.log.config import LogConfig
from tidelake.log.partition import PartitionLog

_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    """Opens, creates and maintains partition logs. The broker keeps topic configs itself and passes
    a LogConfig to ``create``/``load``; logs loaded by ``load()`` start with ``default_config`` until
    the broker calls ``PartitionLog.update_config``."""

    def __init__(self, data_dir: Path, *, clock_ms: Callable[[], int] | None = None,
                 default_config: LogConfig | None = None,
                 config_for: Callable[[str, int], LogConfig | None] | None = None):
        self.data_dir = Path(data_dir)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.default_config = default_config or LogConfig()
        self.config_for = config_for  # optional: topic config lookup used by load()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.RLock()

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
            log = self._logs.get(key)
            if log is not None:
                if config is not None:
                    log.update_config(config)
                return log
            log = PartitionLog.open(self.data_dir / partition_dir_name(topic, partition),
                                    config or self.default_config, clock_ms=self.clock_ms)
            self._logs[key] = log
            return log

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def delete_topic(self, topic: str) -> None:
        """Delete every partition directory of ``topic``."""
        with self._lock:
            for key in [k for k in self._logs if k[0] == topic]:
                self._logs.pop(key).delete()

    def delete_partition(self, topic: str, partition: int) -> None:
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            if log is not None:
                log.delete()

    def all_logs(self) -> dict[tuple[str, int], PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def run_maintenance(self, now_ms: int | None = None, *, compaction: bool = True) -> None:
        """One pass of the background work: roll by segment.ms, flush by flush.ms (and checkpoint
        closed segments), retention, compaction of the logs that are due (``compaction=False``:
        log.cleaner.enable=false)."""
        now = self.clock_ms() if now_ms is None else now_ms
        for log in self.all_logs().values():
            if log.closed:
                continue
            log.maybe_roll(now)
            log.maybe_flush(now)
            if log.config.delete:
                log.apply_retention(now)
            if compaction and log.config.compact:
                log.maybe_compact(now)

    def flush(self) -> None:
        for log in self.all_logs().values():
            if not log.closed:
                log.flush()

    def close(self) -> None:
        with self._lock:
            for log in self._logs.values():
                log.close()
            self._logs.clear()
