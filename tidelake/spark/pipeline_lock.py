"""``PipelineLock``: one running instance per pipeline (``pipeline run`` or a ``pipeline serve`` stage).

Two instances of one config would both plan the same batches from the same offsets: the table fences the
second's commit, but its log claims batches the first committed, and in the modes kept at the broker both
write. The lock is a ``ProcessLock`` (an ``flock``, released by the kernel on kill -9) on a file beside what the
pipeline writes: ``.<table>.pipeline.lock`` beside a local sink table (so two configs writing one table are
refused too), or beside the config file for an ``s3://`` table. Its holder's pid and host name it in the refusal.
"""
from __future__ import annotations

import os
from pathlib import Path

from tidelake.process_lock import ProcessLock, ProcessLocked
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.storage import is_local


class PipelineRunning(RuntimeError):
    """Another live process runs this pipeline (or writes its sink table)."""


def lock_path(cfg: PipelineConfig, config_file: str | os.PathLike) -> Path:
    if is_local(cfg.sink.table):
        table = Path(cfg.sink.table)
        return table.parent / f".{table.name}.pipeline.lock"
    config = Path(config_file).resolve()
    return config.parent / f".{config.name}.pipeline.lock"


class PipelineLock(ProcessLock):
    def __init__(self, cfg: PipelineConfig, config_file: str | os.PathLike):
        super().__init__(lock_path(cfg, config_file))
        self.config_file, self.table = os.path.basename(config_file), cfg.sink.table

    def acquire(self) -> "PipelineLock":
        try:
            super().acquire()
        except ProcessLocked as e:
            raise PipelineRunning(f"{self.config_file}: a pipeline writing {self.table} is already running "
                                  f"({e.holder}; lock {self.path}): stop it first") from None
        return self
