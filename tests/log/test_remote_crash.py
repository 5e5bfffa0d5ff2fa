"""kill -9 in the middle of tiered storage's copy and of its remote deletion, at every step: after a
restart no acknowledged record is lost (each offset from the log start on reads back, from disk or the
object store), nothing is both deleted locally and missing remotely, and the leftovers are cleaned."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tidelake.log import LogConfig, LogManager
from tidelake.log.remote import RemoteLogManager, RemoteLogSettings, RemotePartitionMetadata
from tidelake.protocol.records import decode_records, iter_batches
from tidelake.storage import open_storage

CHILD = Path(__file__).with_name("tiered_crash_child.py")
TOPIC_ID = uuid.UUID("3f1c2a9e-0000-4000-8000-000000000405")  # the topic "t" in the child and after its restart


def topic_ids(topic: str) -> uuid.UUID:
    return TOPIC_ID
TRIALS = 20
WAIT_S = 30


def remote_settings(url: str) -> RemoteLogSettings:
    """Passes only when a test runs them (an hour apart), caches of 64 MiB."""
    return RemoteLogSettings(url, {}, task_interval_ms=3_600_000, index_cache_bytes=64 << 20,
                             reader_cache_bytes=64 << 20, list_offsets_timeout_ms=30_000)


def run_child(tmp: Path, url: str, options: dict, phase: str, kill_at: int) -> tuple[set[int], int]:
    """The acknowledged offsets and the child's exit code (-9: killed where armed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parents[2]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(CHILD), str(tmp), url, json.dumps(options), phase, str(kill_at),
                           str(TOPIC_ID)],
                          capture_output=True, text=True, timeout=120, env=env)
    acked: set[int] = set()
    for line in proc.stdout.splitlines():
        _, first, last = line.split()
        acked.update(range(int(first), int(last) + 1))
    assert proc.returncode in (0, -9), proc.stderr[-2000:]
    return acked, proc.returncode


def value_at(logs: LogManager, offset: int) -> bytes:
    """The record at ``offset``, from the local log or (below its local start) the object store."""
    plog = logs.get("t", 0)
    if offset >= plog.local_log_start_offset:
        data = bytes(plog.read(offset, 1).data)
    else:
        ready = threading.Event()
        for _ in range(10):
            ready.clear()
            got = logs.remote.reader.read("t", 0, offset, 1, 1 << 62, min_one=True, read_committed=False,
                                          on_ready=ready.set)
            if got is not None:
                data = got.data
                break
            assert ready.wait(WAIT_S)
        else:
            raise AssertionError(f"offset {offset}: still fetching")
    pos, h = next(iter_batches(data))
    assert h.base_offset == offset
    return decode_records(data, pos, h)[0].value


def check_after_restart(tmp: Path, url: str, options: dict, acked: set[int], phase: str) -> int:
    storage = open_storage(url, options)
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, local_retention_bytes=0, retention_ms=-1)
    logs = LogManager(tmp, default_config=cfg, remote=RemoteLogManager(storage, remote_settings(url)))
    logs.load()
    plog = logs.get("t", 0)
    plog.update_config(cfg)
    logs.start_maintenance(3_600_000, topic_ids=topic_ids)
    try:
        leftovers = len(logs.remote.metadata("t", 0).unfinished)
        # no offset between the log start and the local log start that no remote segment holds
        meta = logs.remote.metadata("t", 0)
        assert plog.local_log_start_offset == plog.log_start_offset or meta.end_offset >= plog.local_log_start_offset
        logs.remote.run_pass()
        assert logs.remote.metadata("t", 0).unfinished == []
        if phase == "copy":   # no retention: the log still starts at 0
            assert plog.log_start_offset == 0
        else:                 # retention.bytes=3000 deleted the oldest, never more than it allows
            assert meta.size_bytes + plog.size_bytes >= 3000
        for offset in sorted(acked):
            if offset >= plog.log_start_offset:
                assert value_at(logs, offset).startswith(b"v%05d" % offset)
        assert max(acked) < plog.log_end_offset
        # after the pass every remote folder is a finished segment: the leftovers were cleaned
        prefix = RemotePartitionMetadata(storage, "t", 0, TOPIC_ID).prefix
        folders = {p.rpartition("/")[0] for p in storage.list(prefix)}
        assert folders == {s.folder for s in logs.remote.metadata("t", 0).segments}
        return leftovers
    finally:
        logs.close()


@pytest.mark.slow_faults
@pytest.mark.parametrize("phase", ["copy", "delete"])
def test_kill_9_at_every_step_of_a_copy_or_a_remote_deletion_loses_no_acked_record(tmp_path, s3_server, phase):
    killed = leftovers = 0
    for trial in range(1, TRIALS + 1):
        tmp = tmp_path / f"trial-{trial}"
        url = s3_server.url(f"crash-{phase}")
        acked, code = run_child(tmp, url, s3_server.options, phase, kill_at=trial)
        killed += code == -9
        assert len(acked) == 40
        leftovers += check_after_restart(tmp, url, s3_server.options, acked, phase)
    assert killed == TRIALS   # each trial died at its own step of the work (none ran out of writes)
    assert leftovers > 0      # and some left a copy or deletion half done, which the restart finished
