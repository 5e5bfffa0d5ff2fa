"""RemoteLogSettings: where tiered storage keeps segments and how its manager and reader run (the
broker's remote.log.* configs, read once at start)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RemoteLogSettings:
    url: str                                  # remote.log.storage.url
    options: dict[str, str] = field(default_factory=dict)  # remote.log.storage.<S3 option>
    task_interval_ms: int = 30000             # remote.log.manager.task.interval.ms
    index_cache_bytes: int = 1 << 30          # remote.log.index.file.cache.total.size.bytes
    reader_cache_bytes: int = 256 << 20       # remote.log.reader.cache.bytes
