"""RemoteLogSettings: where tiered storage keeps segments and how its manager and reader run (the
broker's remote.log.* configs, read once at start; their defaults live with the configs' definitions)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteLogSettings:
    url: str                  # remote.log.storage.url
    options: dict[str, str]   # remote.log.storage.<S3 option>
    task_interval_ms: int     # remote.log.manager.task.interval.ms
    index_cache_bytes: int    # remote.log.index.file.cache.total.size.bytes
    reader_cache_bytes: int   # remote.log.reader.cache.bytes
    list_offsets_timeout_ms: int  # remote.list.offsets.request.timeout.ms
