"""Model test: random upserts, deletes, overwrites, compactions, clusterings, restores and expiries
against an in-memory oracle; every step checks the latest state, and rules read random retained
versions and random increments (begin, end]. Run on a local disk, in memory:// and on S3 (moto's
server), fewer examples on S3 (every file operation is an HTTP request there)."""
from __future__ import annotations

import itertools
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from tidelake.table import Table, VersionExpired
from tests.table.manual_clock import HOUR, ManualClock

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])
RETAIN_HOURS = 24

keys = st.integers(0, 12)
rows = st.lists(st.tuples(keys, st.integers(0, 5)), max_size=8)


_examples = itertools.count()


class TableModel(RuleBasedStateMachine):
    def __init__(self, store: str = "local", s3=None):
        super().__init__()
        self.store, self.s3 = store, s3

    def location(self) -> tuple[str, dict | None]:
        """(url, storage options) of a fresh table for this example."""
        if self.store == "s3":
            return self.s3.url("model"), self.s3.options
        if self.store == "memory":
            return f"memory://model-{next(_examples)}", None
        self.dir = tempfile.mkdtemp(prefix="tidelake-model-")
        return f"{self.dir}/t", None

    @initialize(buckets=st.integers(1, 3), auto_cluster=st.booleans(), background=st.booleans(),
                every_row=st.booleans())
    def setup(self, buckets, auto_cluster, background, every_row):
        url, options = self.location()
        self.clock = ManualClock(100 * HOUR)
        self.t = Table.create(url, SCHEMA, ["id"], {
            "write.bucket.num": str(buckets), "acid.data.retain.hours": str(RETAIN_HOURS),
            "clustering.auto": str(auto_cluster).lower(), "clustering.l0.num": "2", "clustering.l1.num": "2",
            "clustering.keep.every.row": str(every_row).lower(), "checkpoint.interval": "5"}, clock=self.clock,
            maintenance="background" if background else "inline", storage_options=options)
        self.states = {0: {}}          # version -> {id: amount}
        self.deltas = {0: []}          # version -> sorted [(id, op, amount)] of data commits

    def teardown(self):
        if hasattr(self, "t"):
            self.t.close()
            if self.store != "local":   # (moto and memory stores keep every object until the process ends)
                for path in self.t.storage.list():
                    self.t.storage.delete(path)
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def latest(self):
        return self.states[max(self.states)]

    def record(self, new_state, changes):
        """The table's commits since the last record: the first is the data commit, any later
        ones are automatic maintenance (no logical change)."""
        self.t.maintenance.wait()      # background maintenance of this write done: versions are final
        versions = [h["version"] for h in self.t.history() if h["version"] > max(self.states)]
        assert versions, "the write made no version"
        for i, v in enumerate(versions):
            self.states[v] = dict(new_state)
            self.deltas[v] = sorted(changes, key=lambda c: c[0]) if i == 0 else []

    def record_maintenance(self):
        self.t.maintenance.wait()
        for h in self.t.history():
            if h["version"] > max(self.states):
                self.states[h["version"]] = dict(self.latest())
                self.deltas[h["version"]] = []

    def horizon(self):
        limit = self.clock.now - RETAIN_HOURS * HOUR
        hist = {h["version"]: h["timestamp_ms"] for h in self.t.history()}
        old = [v for v in self.states if v in hist and hist[v] <= limit]
        return max(old) if old else min(hist)

    # ------------------------------------------------------------------ rules
    @rule(hours=st.integers(0, 12))
    def advance_clock(self, hours):
        self.clock.now += hours * HOUR

    @rule(ups=rows, dels=st.lists(keys, max_size=4))
    def transaction(self, ups, dels):
        state = dict(self.latest())
        last = {}
        for k, a in ups:
            state[k] = a
            last[k] = ("upsert", a)
        for k in dels:
            state.pop(k, None)
            last[k] = ("delete", None)
        with self.t.transaction() as tx:
            if ups:
                tx.upsert(pa.table({"id": pa.array([k for k, _ in ups], pa.int64()), "amount": pa.array([a for _, a in ups], pa.int64())}))
            if dels:
                tx.delete(dels)
        self.record(state, [(k, op, a) for k, (op, a) in last.items()])

    @rule(new=rows)
    def overwrite(self, new):
        old = self.latest()
        state = {}
        for k, a in new:
            state[k] = a
        self.t.insert_overwrite(pa.table({"id": pa.array([k for k, _ in new], pa.int64()), "amount": pa.array([a for _, a in new], pa.int64())}))
        changes = [(k, "upsert", a) for k, a in state.items()] + [(k, "delete", None) for k in old if k not in state]
        self.record(state, changes)

    @rule()
    def compact(self):
        self.t.compact()
        self.record_maintenance()

    @rule()
    def cluster(self):
        self.t.cluster()
        self.record_maintenance()

    @precondition(lambda self: len(self.states) > 1)
    @rule(data=st.data())
    def restore(self, data):
        h = self.horizon()
        target = data.draw(st.sampled_from(sorted(v for v in self.states if v >= h)))
        old, new = self.latest(), self.states[target]
        self.t.restore(target)
        changes = [(k, "upsert", a) for k, a in new.items() if old.get(k, -1) != a] + \
                  [(k, "delete", None) for k in old if k not in new]
        self.record(new, changes)

    @rule()
    def expire(self):
        h = self.horizon()
        self.t.expire()
        for v in [v for v in self.states if v < h]:
            del self.states[v]
            del self.deltas[v]

    @rule(data=st.data())
    def read_version(self, data):
        h = self.horizon()
        v = data.draw(st.sampled_from(sorted(self.states)))
        if v < h:
            with pytest.raises(VersionExpired):
                self.t.scan(version=v)
        else:
            got = {r["id"]: r["amount"] for r in self.t.scan(version=v).to_pylist()}
            assert got == self.states[v], f"version {v}"

    @rule(data=st.data())
    def read_increment(self, data):
        h = self.horizon()
        vs = sorted(v for v in self.states if v >= h)
        s = data.draw(st.sampled_from([h - 1] + vs))
        e = data.draw(st.sampled_from([v for v in vs if v >= s] or [s]))
        got = [(r["_commit_version"], r["id"], r["_op"], r["amount"] if r["_op"] == "upsert" else None)
               for r in self.t.changes(start_version=s, end_version=e).to_pylist()]
        want = [(v, k, op, a) for v in sorted(self.deltas) if s < v <= e for k, op, a in self.deltas[v]]
        assert got == want, f"changes ({s}, {e}]"

    @invariant()
    def latest_matches(self):
        if hasattr(self, "t"):
            got = {r["id"]: r["amount"] for r in self.t.scan().to_pylist()}
            assert got == self.latest()
            assert self.t.version == max(self.states)


# examples per store: S3 is kept to about half a minute on a shared 2-core machine
EXAMPLES = {"local": 20, "memory": 20, "s3": 15}


@pytest.mark.parametrize("store", list(EXAMPLES))
def test_table_model(store, request):
    s3 = request.getfixturevalue("s3_server") if store == "s3" else None
    run_state_machine_as_test(lambda: TableModel(store, s3), settings=settings(
        max_examples=EXAMPLES[store], stateful_step_count=25, deadline=None,
        suppress_health_check=[HealthCheck.too_slow]))
