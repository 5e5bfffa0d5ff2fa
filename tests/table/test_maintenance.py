"""Automatic maintenance off the commit path: background worker, inline mode, crash safety, and
automatic maintenance never failing a data commit."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

from tidelake.table import CommitConflict, Table

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def data(ids, amount=0):
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array([amount] * len(ids), pa.int64())})


def as_dict(t):
    return {r["id"]: r["amount"] for r in t.to_pylist()}


def make(path, maintenance=None, **props):
    p = {"write.bucket.num": "2", "clustering.auto": "false"}
    p.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return Table.create(str(path), SCHEMA, ["id"], p, maintenance=maintenance)


def test_commit_returns_while_compaction_is_still_running(tmp_path, monkeypatch):
    t = make(tmp_path / "t", compaction_delta_num=1)
    gate, started = threading.Event(), threading.Event()
    compact = t.maintenance.compact

    def held_compaction(*args, **kw):
        started.set()
        assert gate.wait(60)
        return compact(*args, **kw)
    monkeypatch.setattr(t.maintenance, "compact", held_compaction)
    committed = threading.Event()
    writer = threading.Thread(target=lambda: (t.upsert(data([1, 2])), committed.set()))
    writer.start()
    assert started.wait(60)                 # the compaction this commit made due has begun ...
    assert committed.wait(60)               # ... and the commit returned without waiting for it
    assert {f.kind for f in t.plan()} == {"delta"}
    gate.set()
    writer.join(60)
    assert t.maintenance.wait(60)
    assert {f.kind for f in t.plan()} == {"base"}
    assert as_dict(t.scan()) == {1: 0, 2: 0}


def test_inline_mode_runs_maintenance_inside_the_commit(tmp_path):
    t = make(tmp_path / "t", maintenance="inline", compaction_delta_num=2)
    t.upsert(data([1, 2], 1))
    v = t.upsert(data([1, 2], 2))
    assert [h["operation"] for h in t.history()][-2:] == ["upsert", "compact"] and t.version == v + 1
    # the property does the same for tables opened without the option
    p = make(tmp_path / "p", maintenance_mode="inline", compaction_delta_num=1)
    p.upsert(data([1]))
    assert Table.open(p.path).history()[-1]["operation"] == "compact"


def test_worker_thread_ends_when_idle_and_close_stops_it(tmp_path):
    t = make(tmp_path / "t", clustering_auto="true", clustering_l0_num=2)
    for i in range(3):
        t.upsert(data([i]))
    assert t.maintenance.wait(60)
    assert not [th for th in threading.enumerate() if th.name.startswith("tidelake-maintenance")]
    assert "cluster" in [h["operation"] for h in t.history()]
    with Table.open(t.path) as closed:
        pass
    closed.upsert(data([10]))              # a closed table still commits; maintenance starts no more
    closed.upsert(data([11]))
    assert closed.maintenance.wait(0) and closed.history()[-1]["operation"] == "upsert"


def test_automatic_maintenance_never_fails_a_data_commit(tmp_path, monkeypatch):
    """A delete that read before an automatic compaction committed still commits (the compaction
    changed no row); a manual compaction in its place makes it fail (conflict table)."""
    t = make(tmp_path / "t")
    t.upsert(data([1, 2, 3], 1))
    t.upsert(data([1, 2, 3], 2))
    other = Table.open(t.path)
    commit = t.committer.commit

    def auto_compaction_first(operation, **kw):
        monkeypatch.setattr(t.committer, "commit", commit)
        assert other.maintenance.compact(auto=True) is not None
        return commit(operation, **kw)
    monkeypatch.setattr(t.committer, "commit", auto_compaction_first)
    t.delete([2])
    assert [h["operation"] for h in t.history()][-2:] == ["compact", "delete"]
    assert as_dict(t.scan()) == {1: 2, 3: 2}

    def manual_compaction_first(operation, **kw):
        monkeypatch.setattr(t.committer, "commit", commit)
        assert other.compact() is not None      # the tombstone of key 2 is merged away
        return commit(operation, **kw)
    monkeypatch.setattr(t.committer, "commit", manual_compaction_first)
    with pytest.raises(CommitConflict):
        t.delete([3])


CRASHING_WRITER = textwrap.dedent("""
    import os, signal, sys
    import pyarrow as pa
    sys.path.insert(0, {root!r})
    from tidelake.table import Table
    from tidelake.table.commit import Committer
    from tidelake.table.maintenance import Maintenance

    def die(*args, **kw):
        os.kill(os.getpid(), signal.SIGKILL)
    if sys.argv[2] == "before-maintenance":      # killed between the data commit and its maintenance
        Maintenance.run_automatic = die
    else:                                         # killed after writing the new bases, before publishing
        publish = Committer.commit
        Committer.commit = lambda self, op, **kw: die() if op == "compact" else publish(self, op, **kw)
    t = Table.open(sys.argv[1], maintenance="inline")
    t.upsert(pa.table({{"id": pa.array([1, 2, 3, 4], pa.int64()), "amount": pa.array([9] * 4, pa.int64())}}))
""")


@pytest.mark.parametrize("moment", ["before-maintenance", "before-publishing"])
def test_crash_between_data_commit_and_maintenance(tmp_path, moment):
    t = make(tmp_path / "t", compaction_delta_num=2, acid_data_retain_hours=0)
    t.upsert(data([1, 2, 3, 4], 1))
    script = tmp_path / "crash.py"
    script.write_text(CRASHING_WRITER.format(root=ROOT))
    p = subprocess.run([sys.executable, str(script), t.path, moment], timeout=120)
    assert p.returncode == -9
    after = Table.open(t.path)
    assert after.history()[-1]["operation"] == "upsert"          # the data commit is in, no compaction
    assert as_dict(after.scan()) == {1: 9, 2: 9, 3: 9, 4: 9}
    assert {f.kind for f in after.plan()} == {"delta"}
    after.upsert(data([5], 1))                                   # the next commit finds the due work
    assert after.maintenance.wait(60)
    assert "compact" in [h["operation"] for h in after.history()]
    assert {f.kind for f in after.plan()} == {"base"}
    assert as_dict(after.scan()) == {1: 9, 2: 9, 3: 9, 4: 9, 5: 1}
    after.purge()                                                # orphans of the killed run go too
    live = {f.path for f in after.plan()}
    on_disk = {os.path.relpath(os.path.join(d, f), t.path) for d, _, fs in os.walk(os.path.join(t.path, "data")) for f in fs}
    assert on_disk == live


EXITING_WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    sys.path.insert(0, {root!r})
    from tidelake.table import Table
    Table.open(sys.argv[1]).upsert(pa.table({{"id": pa.array([1, 2], pa.int64()), "amount": pa.array([1, 1], pa.int64())}}))
    print("committed", flush=True)
""")


def test_process_exit_lets_running_maintenance_finish(tmp_path):
    """A short-lived writer exits right after its commit: exit waits for the compaction it started
    (bounded) instead of cutting it off, and the process exits cleanly."""
    t = make(tmp_path / "t", compaction_delta_num=1)
    script = tmp_path / "exit.py"
    script.write_text(EXITING_WRITER.format(root=ROOT))
    p = subprocess.run([sys.executable, str(script), t.path], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == "committed\n", p.stderr
    assert [h["operation"] for h in Table.open(t.path).history()] == ["create", "upsert", "compact"]
