"""Deletion vectors (``deletion-vectors.enabled``): a table writing them reads as the same table without them at
every version, through random upserts, deletes, overwrites, compactions, clusterings, restores and expiries;
a covered bucket really is read by position; a commit killed while writing them leaves the previous version;
a commit that loses its version to a concurrent upsert computes its vectors again on the newer state."""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from tidelake.table import Table, VersionExpired
from tidelake.table.reader import MergeOnReadReader, needs_version_order
from tidelake.table.scan import ScanPlanner
from tests.table.manual_clock import HOUR, ManualClock

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])
RETAIN_HOURS = 24

keys = st.integers(0, 15)
rows = st.lists(st.tuples(keys, st.integers(0, 5)), max_size=8)


def rows_of(t: Table, version: int | None = None) -> dict:
    return {tuple(r[k] for k in t.primary_key): tuple(sorted(r.items())) for r in t.scan(version=version).to_pylist()}


def merged_by_key(t: Table, version: int) -> dict:
    """The same files read by the key merge, their vectors ignored (the reader's path without them)."""
    md = t._current.refresh()
    plans = [replace(p, vectors=None) for p in ScanPlanner(md).snapshot(version)]
    out = MergeOnReadReader(t.storage, md.primary_key).read_snapshot(plans, md.schema_at(version),
                                                                   md.schema_at(version).names, None, None)
    return {tuple(r[k] for k in t.primary_key): tuple(sorted(r.items())) for r in out.to_pylist()}


def by_position(t: Table) -> list[bool]:
    """For each bucket of the latest version that has deltas: whether its read goes by its vectors."""
    md = t._current.refresh()
    return [p.vectors is not None for p in ScanPlanner(md).snapshot(md.version) if p.deltas]


def outcome(read):
    """A read's rows, or that it is expired."""
    try:
        return read().to_pylist()
    except VersionExpired:
        return "expired"


def arrow(pairs) -> pa.Table:
    return pa.table({"id": pa.array([k for k, _ in pairs], pa.int64()),
                     "amount": pa.array([a for _, a in pairs], pa.int64())})


_examples = itertools.count()


class TwoTables(RuleBasedStateMachine):
    """The same history on a table with deletion vectors and one without (on a local disk or in memory://)."""

    def __init__(self, store: str = "local"):
        super().__init__()
        self.store = store
        self.dir: str | None = None
        self.dv: Table | None = None
        self.plain: Table | None = None

    @initialize(buckets=st.integers(1, 3), auto_cluster=st.booleans(), every_row=st.booleans())
    def setup(self, buckets, auto_cluster, every_row):
        self.dir = tempfile.mkdtemp(prefix="tidelake-dv-")
        root = self.dir if self.store == "local" else f"memory://dv-{next(_examples)}"
        self.clock = ManualClock(100 * HOUR)
        props = {"write.bucket.num": str(buckets), "acid.data.retain.hours": str(RETAIN_HOURS),
                 "clustering.auto": str(auto_cluster).lower(), "clustering.l0.num": "2", "clustering.l1.num": "2",
                 "clustering.keep.every.row": str(every_row).lower(), "checkpoint.interval": "4"}
        self.dv = Table.create(f"{root}/dv", SCHEMA, ["id"], {**props, "deletion-vectors.enabled": "true"},
                               clock=self.clock, maintenance="inline")
        self.plain = Table.create(f"{root}/plain", SCHEMA, ["id"], props, clock=self.clock, maintenance="inline")

    def teardown(self):
        for t in (self.dv, self.plain):
            if t is not None:
                t.close()
                if self.store != "local":   # (a memory store keeps every object until the process ends)
                    for path in t.storage.list():
                        t.storage.delete(path)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def both(self, fn):
        fn(self.dv)
        fn(self.plain)
        assert self.dv.version == self.plain.version

    @rule(hours=st.integers(0, 12))
    def advance_clock(self, hours):
        self.clock.now += hours * HOUR

    @rule(ups=rows, dels=st.lists(keys, max_size=4))
    def transaction(self, ups, dels):
        def write(t):
            with t.transaction() as tx:
                if ups:
                    tx.upsert(arrow(ups))
                if dels:
                    tx.delete(dels)
        self.both(write)

    @rule(new=rows)
    def overwrite(self, new):
        self.both(lambda t: t.insert_overwrite(arrow(new)))

    @rule()
    def compact(self):
        self.both(lambda t: t.compact())

    @rule()
    def cluster(self):
        self.both(lambda t: t.cluster())

    @precondition(lambda self: self.dv.version > 1)
    @rule(data=st.data())
    def restore(self, data):
        vs = [h["version"] for h in self.dv.history()]
        target = data.draw(st.sampled_from(vs))
        try:
            self.both(lambda t: t.restore(target))
        except VersionExpired:
            pass

    @rule()
    def expire(self):
        self.both(lambda t: t.expire())

    @invariant()
    def every_bucket_with_deltas_is_read_by_position(self):
        """After any commit (data, compaction, clustering, overwrite, restore), but a bucket whose files
        overlap in versions."""
        if self.dv is None:
            return
        md = self.dv._current.refresh()
        for p in ScanPlanner(md).snapshot(md.version):
            if p.deltas and not needs_version_order(p):
                assert p.vectors is not None, f"bucket {p.bucket} at version {md.version} has no vectors"

    @invariant()
    def every_version_reads_the_same(self):
        if self.dv is None:
            return
        for h in self.dv.history():
            v = h["version"]
            try:
                want = rows_of(self.plain, v)
            except VersionExpired:
                with pytest.raises(VersionExpired):
                    rows_of(self.dv, v)
                continue
            assert rows_of(self.dv, v) == want, f"version {v}"
            assert merged_by_key(self.dv, v) == want, f"version {v}, merged by key"
        oldest = min(h["version"] for h in self.dv.history())
        assert outcome(lambda: self.dv.changes(oldest)) == outcome(lambda: self.plain.changes(oldest))


@pytest.mark.parametrize("store", ["local", "memory"])
def test_a_table_with_deletion_vectors_reads_as_one_without_at_every_version(store):
    run_state_machine_as_test(lambda: TwoTables(store), settings=settings(
        max_examples=20, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]))


def make(tmp_path, name="t", **props) -> Table:
    p = {"write.bucket.num": "2", "clustering.auto": "false", "maintenance.mode": "inline",
         "deletion-vectors.enabled": "true"}
    p.update(props)
    return Table.create(str(tmp_path / name), SCHEMA, ["id"], p)


def vector_files_on_disk(t: Table) -> set[str]:
    return {p for p in t.storage.list("data") if os.path.basename(p).startswith("dv-")}


def test_upserts_supersede_by_position_and_compaction_folds_the_vectors_away(tmp_path):
    t = make(tmp_path)
    t.upsert(arrow([(i, 0) for i in range(100)]))
    for r in range(1, 4):
        t.upsert(arrow([(i, r) for i in range(r, 100, 7)]))
    t.delete(list(range(50, 60)))
    assert by_position(t) == [True, True]
    md = t._current.refresh()
    marked = sum(md.vectors_at(b, md.version).deleted for b in range(2))
    assert marked == sum(1 for r in range(1, 4) for _ in range(r, 100, 7)) + 10   # (distinct keys)
    want = {i: 0 for i in range(100)}
    for r in range(1, 4):
        want.update({i: r for i in range(r, 100, 7)})
    for i in range(50, 60):
        want.pop(i)
    assert {r["id"]: r["amount"] for r in t.scan().to_pylist()} == want
    t.compact()
    assert by_position(t) == [] and {r["id"]: r["amount"] for r in t.scan().to_pylist()} == want
    t.upsert(arrow([(1, 9)]))                     # the new base gets its vectors from the next commit on
    want[1] = 9
    assert by_position(t) == [True] and {r["id"]: r["amount"] for r in t.scan().to_pylist()} == want


def test_composite_string_key(tmp_path):
    schema = pa.schema([("region", pa.string()), ("id", pa.int32()), ("amount", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, ["region", "id"],
                     {"write.bucket.num": "2", "clustering.auto": "false", "deletion-vectors.enabled": "true"},
                     maintenance="inline")
    plain = Table.create(str(tmp_path / "p"), schema, ["region", "id"],
                         {"write.bucket.num": "2", "clustering.auto": "false"}, maintenance="inline")

    def batch(ids, amount, region="eu"):
        return pa.table({"region": [region] * len(ids), "id": pa.array(ids, pa.int32()),
                         "amount": pa.array([amount] * len(ids), pa.int64())})
    for x in (t, plain):
        x.upsert(pa.concat_tables([batch(range(20), 0), batch(range(20), 0, "us")]))
        x.upsert(batch(range(0, 20, 3), 1))
        x.delete(pa.table({"region": ["us", "us"], "id": pa.array([4, 5], pa.int32())}))
        x.upsert(batch(range(0, 20, 2), 2, "us"))
    assert all(by_position(t))
    for v in range(1, t.version + 1):
        assert rows_of(t, v) == rows_of(plain, v) == merged_by_key(t, v)


def test_a_commit_killed_while_writing_its_vectors_leaves_the_previous_version(tmp_path):
    t = make(tmp_path)
    t.upsert(arrow([(i, 0) for i in range(50)]))
    t.upsert(arrow([(i, 1) for i in range(0, 50, 2)]))
    before, version, on_disk = rows_of(t), t.version, set(t.storage.list("data"))
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal
        import pyarrow as pa
        from tidelake.table import Table, dv_commit
        written = []
        def write_then_die(storage, bucket, covers, vectors):
            index = real(storage, bucket, covers, vectors)
            written.append(index)
            if len(written) == 2:   # the second bucket's vectors are on disk, the commit is not
                os.kill(os.getpid(), signal.SIGKILL)
            return index
        real, dv_commit.write_vectors = dv_commit.write_vectors, write_then_die
        t = Table.open({str(tmp_path / "t")!r}, maintenance="inline")
        t.upsert(pa.table({{"id": pa.array(range(50), pa.int64()), "amount": pa.array([7] * 50, pa.int64())}}))
        print("committed")
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    left = set(t.storage.list("data")) - on_disk
    assert {os.path.basename(x)[:3] for x in left} >= {"dv-", "del"}   # its deltas and vectors were written
    again = Table.open(t.path, maintenance="inline")
    assert again.version == version and rows_of(again) == before
    again.upsert(arrow([(1, 5)]))                 # the next commit builds on the previous version's vectors
    before[(1,)] = (("amount", 5), ("id", 1))
    assert rows_of(again) == before == merged_by_key(again, again.version) and all(by_position(again))
    again.close()


def test_a_commit_that_loses_its_version_computes_its_vectors_again(tmp_path, monkeypatch):
    a = make(tmp_path)
    b = Table.open(a.path, maintenance="inline")  # another writer (its own committer, as another process)
    v1 = a.upsert(arrow([(i, 0) for i in range(10)]))
    writer = a.committer.vectors
    write = writer.write
    attempts = []

    def racing_write(md, after, adds):
        out = write(md, after, adds)
        attempts.append(md.version)
        if len(attempts) == 1:   # the other writer takes this version while this attempt's vectors are written
            b.upsert(arrow([(2, 20), (3, 20), (4, 20)]))
        return out
    monkeypatch.setattr(writer, "write", racing_write)
    with a.transaction() as tx:                   # a blind upsert read at v1: no conflict, a retry
        tx.upsert(arrow([(3, 30), (5, 30)]))
    assert attempts == [v1, v1 + 1] and tx.version == v1 + 2
    want = {i: 0 for i in range(10)} | {2: 20, 3: 30, 4: 20, 5: 30}
    # key 3's row of the other writer is superseded too (vectors of the state published on, not of v1)
    assert {r["id"]: r["amount"] for r in a.scan().to_pylist()} == want and all(by_position(a))
    assert merged_by_key(a, tx.version) == rows_of(a)
    # the losing attempt's vectors files were deleted: only the published ones are left
    assert vector_files_on_disk(a) == a._current.refresh().vector_paths()
    b.close()


def test_an_upsert_published_while_a_compaction_ran_gets_vectors_afresh_with_the_new_base(tmp_path, monkeypatch):
    a = make(tmp_path)
    b = Table.open(a.path, maintenance="inline")
    a.upsert(arrow([(i, 0) for i in range(20)]))
    a.upsert(arrow([(i, 1) for i in range(0, 20, 2)]))
    commit = a.committer.commit

    def racing_commit(operation, **kw):
        if operation == "compact":   # the compaction read its version; an upsert is published meanwhile
            b.upsert(arrow([(1, 2), (2, 2)]))
        return commit(operation, **kw)
    monkeypatch.setattr(a.committer, "commit", racing_commit)
    a.compact()
    want = {i: (1 if i % 2 == 0 else 0) for i in range(20)} | {1: 2, 2: 2}
    # the upsert's vectors were of the files the compaction replaced: the compaction works them out afresh
    # for the new base and the upsert's delta
    assert {r["id"]: r["amount"] for r in a.scan().to_pylist()} == want and all(by_position(a))
    assert merged_by_key(a, a.version) == rows_of(a)
    monkeypatch.undo()
    a.upsert(arrow([(3, 3)]))
    want[3] = 3
    assert {r["id"]: r["amount"] for r in a.scan().to_pylist()} == want and all(by_position(a))
    assert merged_by_key(a, a.version) == rows_of(a)
    b.close()


def test_retention_deletes_vectors_no_retained_version_reads(tmp_path):
    t = make(tmp_path)
    for r in range(4):
        t.upsert(arrow([(i, r) for i in range(0, 30, r + 1)]))
    assert len(vector_files_on_disk(t)) == 8
    t.compact()
    t.upsert(arrow([(1, 9)]))
    t.maintenance.purge()
    md = t._current.refresh()
    assert vector_files_on_disk(t) == md.vector_paths() and len(md.vector_paths()) == 1   # (the last commit's bucket)
    assert {r["id"]: r["amount"] for r in t.scan().to_pylist()}[1] == 9
    assert Table.open(t.path).scan().num_rows == t.scan().num_rows   # (from the checkpoint the purge wrote)


def test_a_bad_deletion_vectors_property_is_refused_naming_it(tmp_path):
    with pytest.raises(Exception, match="deletion-vectors.enabled"):
        make(tmp_path, **{"deletion-vectors.enabled": "yes"})


def test_check_names_a_missing_vectors_file_and_a_read_fails_in_one_line(tmp_path):
    from tidelake.table.check import check_table
    t = make(tmp_path)
    t.upsert(arrow([(i, 0) for i in range(20)]))
    t.upsert(arrow([(i, 1) for i in range(0, 20, 2)]))
    assert check_table(t.path).ok
    md = t._current.refresh()
    lost = md.vectors_at(0, md.version)
    t.storage.delete(lost.path)
    report = check_table(t.path)
    assert [p.path.endswith(lost.path) and "missing (the deletion vectors of bucket 0" in p.problem
            for p in report.problems] == [True]
    with pytest.raises(VersionExpired, match=f"deletion vectors file {lost.path} is missing"):
        t.scan()


def test_spark_tasks_reading_bucket_by_bucket_get_the_whole_read(tmp_path):
    """A Spark read ships the table (or a pinned snapshot) to one task per bucket: each reads its bucket by
    its vectors, at the latest version and at an older one."""
    import pickle
    t = make(tmp_path, **{"write.bucket.num": "4"})
    t.upsert(arrow([(i, 0) for i in range(200)]))
    t.upsert(arrow([(i, 1) for i in range(0, 200, 3)]))
    old = t.version
    t.delete(list(range(0, 200, 5)))
    t.upsert(arrow([(i, 2) for i in range(0, 200, 7)]))
    for version in (old, t.version):
        shipped = [pickle.loads(pickle.dumps(t.snapshot(version))) for _ in range(4)]
        parts = [s.scan(buckets={b}) for b, s in enumerate(shipped)]
        assert all(p.vectors is not None for p in ScanPlanner(shipped[0].metadata).snapshot(version) if p.deltas)
        got = {r["id"]: r["amount"] for p in parts for r in p.to_pylist()}
        assert sum(p.num_rows for p in parts) == len(got)
        assert got == {r["id"]: r["amount"] for r in t.scan(version=version).to_pylist()}
        assert got == {k[0]: dict(v)["amount"] for k, v in merged_by_key(t, version).items()}


def test_turned_on_for_a_table_with_history_and_off_again(tmp_path):
    t = make(tmp_path, **{"deletion-vectors.enabled": "false"})
    t.upsert(arrow([(i, 0) for i in range(40)]))
    t.upsert(arrow([(i, 1) for i in range(0, 40, 2)]))
    t.delete([3, 4])
    assert not any(by_position(t))
    t.set_properties({"deletion-vectors.enabled": "true"})
    t.upsert(arrow([(i, 2) for i in range(0, 40, 5)]))   # each bucket's vectors afresh: its whole history
    assert by_position(t) == [True, True] and rows_of(t) == merged_by_key(t, t.version)
    want = {i: 0 for i in range(40)} | {i: 1 for i in range(0, 40, 2)} | {i: 2 for i in range(0, 40, 5)}
    del want[3], want[4]
    assert {r["id"]: r["amount"] for r in t.scan().to_pylist()} == want
    t.set_properties({"deletion-vectors.enabled": "false"})
    t.upsert(arrow([(1, 3)]))                     # a commit without vectors: its bucket is merged by key again
    want[1] = 3
    assert sorted(by_position(t)) == [False, True] and {r["id"]: r["amount"] for r in t.scan().to_pylist()} == want
