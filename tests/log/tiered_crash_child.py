"""A process killed with SIGKILL in the middle of tiered storage's work (tests/log/test_remote_crash.py).

Usage: tiered_crash_child.py DATA_DIR URL OPTIONS_JSON copy|delete KILL_AT

It appends records to a tiered log (printing ``acked FIRST LAST`` once each append returned), then runs
the remote log manager against the real object store, SIGKILLing itself at the KILL_AT-th write or
delete the store receives during the phase under test: the copy of segments (``copy``), or the remote
retention deleting them (``delete``, after a first pass copied everything)."""
from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path

from tidelake.log import LogConfig, LogManager
from tidelake.log.remote import RemoteLogManager, RemoteLogSettings
from tidelake.protocol.records import Record, build_batch
from tidelake.storage import open_storage

NOW = 1_700_000_000_000


def remote_settings(url: str) -> RemoteLogSettings:
    """Passes only when a test runs them (an hour apart), caches of 64 MiB."""
    return RemoteLogSettings(url, {}, task_interval_ms=3_600_000, index_cache_bytes=64 << 20,
                             reader_cache_bytes=64 << 20, list_offsets_timeout_ms=30_000)


class KillingStorage:
    """The real store; the process dies (SIGKILL, no cleanup) at the armed write/delete."""

    def __init__(self, storage, kill_at: int):
        self._storage, self.kill_at, self.count, self.armed = storage, kill_at, 0, False
        self.url, self.options = storage.url, storage.options

    def _tick(self) -> None:
        if self.armed:
            self.count += 1
            if self.count == self.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    def write(self, path, data):
        self._tick()
        return self._storage.write(path, data)

    def write_file(self, path, local_file):
        self._tick()
        return self._storage.write_file(path, local_file)

    def create(self, path, data):
        self._tick()
        return self._storage.create(path, data)

    def delete(self, path):
        self._tick()
        return self._storage.delete(path)

    def __getattr__(self, name):
        return getattr(self._storage, name)


def config(**kw) -> LogConfig:
    return LogConfig(segment_bytes=2000, remote_storage_enable=True, local_retention_bytes=0, retention_ms=-1, **kw)


def main() -> None:
    data_dir, url, options, phase, kill_at, topic_id = sys.argv[1:7]
    storage = KillingStorage(open_storage(url, json.loads(options)), int(kill_at))
    rlm = RemoteLogManager(storage, remote_settings(url))
    logs = LogManager(Path(data_dir), default_config=config(), remote=rlm)
    plog = logs.create("t", 0, config())
    for i in range(40):
        r = plog.append(build_batch([Record(0, NOW + i, b"k", b"v%05d" % i + b"x" * 200)]), now_ms=NOW)
        print(f"acked {r.base_offset} {r.last_offset}", flush=True)
    logs.start_maintenance(3_600_000, topic_ids=lambda _topic: uuid.UUID(topic_id))
    if phase == "delete":
        rlm.run_pass(NOW)
        plog.update_config(config(retention_bytes=3000))
    storage.armed = True
    rlm.run_pass(NOW)
    logs.close()


if __name__ == "__main__":
    main()
