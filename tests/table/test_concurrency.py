"""Commits: MaxCompute's conflict table, real concurrent writers (threads and processes), atomicity
under kill -9. The conflict table and the concurrent processes run on a local disk and on S3 (moto's
server, which enforces If-None-Match: put-if-absent is the only thing writers share there)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

from tidelake.table import CommitConflict, Table, conflict_rule

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def data(ids, amount=0):
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array([amount] * len(ids), pa.int64())})


def as_dict(t):
    return {r["id"]: r["amount"] for r in t.to_pylist()}


def interleave(monkeypatch, table: Table, other) -> None:
    """The table's next commit first lets another writer commit: the job read version N, the
    other job commits N+1, then this job tries to commit."""
    commit = table.committer.commit

    def first_the_other(operation, **kw):
        monkeypatch.setattr(table.committer, "commit", commit)
        other()
        return commit(operation, **kw)
    monkeypatch.setattr(table.committer, "commit", first_the_other)


OPS = {
    "insert": lambda t: t.insert_into(data([100, 101], 1)),
    "upsert": lambda t: t.upsert(data([200, 3], 2)),
    "update": lambda t: t.update(pa.table({"id": [1], "amount": [9]})),
    "delete": lambda t: t.delete([2]),
    "overwrite": lambda t: t.insert_overwrite(data([1, 2, 3], 7)),
    "compact": lambda t: t.compact(),
    "cluster": lambda t: t.cluster(),
}


def expected_conflict(mine: str, other: str) -> bool:
    if other == "cluster":
        return mine == "cluster"                          # the same input files were clustered
    if mine == "cluster":
        return other in ("overwrite", "compact")          # its inputs were replaced
    if "overwrite" in (mine, other) or {"update", "delete"} & {mine, other}:
        return True
    return mine == other and mine in ("insert", "compact")


class Place:
    """Where a test's tables go: ``url(name)`` a fresh location, ``options`` for the Table API, ``env`` for
    subprocesses (AWS's variables on S3)."""

    def __init__(self, tmp_path, s3=None):
        self.tmp_path, self.s3 = tmp_path, s3
        self.options = s3.options if s3 else None
        self.env = {**os.environ, **(s3.env if s3 else {})}

    def url(self, name: str) -> str:
        return self.s3.url(name) if self.s3 else str(self.tmp_path / name)


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path):
    return Place(tmp_path, request.getfixturevalue("s3_server") if request.param == "s3" else None)


def seeded(url, options=None):
    t = Table.create(url, SCHEMA, ["id"], {"write.bucket.num": "1", "clustering.auto": "false"},
                     storage_options=options)
    for i in range(3):
        t.upsert(data([1 + 2 * i, 2 + 2 * i], i))
    return t


@pytest.mark.parametrize("mine", list(OPS))
@pytest.mark.parametrize("other", list(OPS))
def test_conflict_table(place, monkeypatch, mine, other):
    url = place.url("t")
    seeded(url, place.options)
    me = Table.open(url, storage_options=place.options)
    someone = Table.open(url, storage_options=place.options)
    interleave(monkeypatch, me, lambda: OPS[other](someone))
    if expected_conflict(mine, other):
        with pytest.raises(CommitConflict) as ei:
            OPS[mine](me)
        assert ei.value.this_operation == mine and ei.value.other_operation == other
        assert f"this {mine}" in str(ei.value) and other in str(ei.value)
        expected = seeded(place.url("ref"), place.options)
        OPS[other](expected)
    else:
        OPS[mine](me)
        assert [h["operation"] for h in me.history()][-2:] == [other, mine]
        expected = seeded(place.url("ref"), place.options)   # same jobs one after the other
        OPS[other](expected)
        OPS[mine](expected)
    assert as_dict(me.scan()) == as_dict(expected.scan())
    for v in range(me.version + 1):                       # every version stays readable
        me.scan(version=v)


def test_conflict_rule_names():
    assert conflict_rule("insert", "insert") == "insert into vs insert into"
    assert conflict_rule("upsert", "upsert") is None
    assert conflict_rule("delete", "cluster") is None
    assert conflict_rule("compact", "compact", {1}, {2}) is None


def _race(tmp_path, operation, n_threads=3):
    """n threads, each with its own Table, read the same version, then commit at once."""
    Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false"})
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads

    def job(i):
        t = Table.open(str(tmp_path / "t"))
        rv = t.version
        files = t.stage_files(data([i * 10, i * 10 + 1], i))
        barrier.wait(timeout=30)
        try:
            results[i] = t.commit_staged(files, operation=operation, read_version=rv)
        except CommitConflict as e:
            results[i] = e
    threads = [threading.Thread(target=job, args=(i,)) for i in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return Table.open(str(tmp_path / "t")), results


def test_threads_insert_vs_insert_one_wins(tmp_path):
    t, results = _race(tmp_path, "insert")
    wins = [i for i, r in enumerate(results) if isinstance(r, int)]
    assert len(wins) == 1 and all(isinstance(r, CommitConflict) for i, r in enumerate(results) if i not in wins)
    assert as_dict(t.scan()) == {wins[0] * 10: wins[0], wins[0] * 10 + 1: wins[0]}
    assert t.version == 1


def test_threads_upserts_all_commit(tmp_path):
    t, results = _race(tmp_path, "upsert", 4)
    assert sorted(results) == [1, 2, 3, 4]
    assert len(t.scan()) == 8


def test_shared_table_many_threads(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "4", "clustering.l0.num": "3"})
    errors = []

    def job(i):
        try:
            for j in range(5):
                t.upsert(data([i * 100 + j], j))
        except Exception as e:   # noqa: BLE001 - any error fails the test below
            errors.append(e)
    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert errors == []
    assert as_dict(t.scan()) == {i * 100 + j: j for i in range(4) for j in range(5)}
    assert sum(1 for h in t.history() if h["operation"] == "upsert") == 20


WRITER = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    sys.path.insert(0, {root!r})
    from tidelake.table import Table, CommitConflict
    path, mode, wid, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    t = Table.open(path)
    ok = conflicts = 0
    for j in range(n):
        ids = [wid * 1000 + j * 10 + k for k in range(10)]
        batch = pa.table({{"id": pa.array(ids, pa.int64()), "amount": pa.array([j] * 10, pa.int64())}})
        if mode == "cluster":
            try:
                t.cluster()
            except CommitConflict as e:
                print("CLUSTER-CONFLICT", e, flush=True); sys.exit(3)
            continue
        try:
            if mode == "insert":
                t.insert_into(batch)
            else:
                t.upsert(batch)
            ok += 1
            print("OK", j, flush=True)
        except CommitConflict:
            conflicts += 1
            print("CONFLICT", j, flush=True)
    print("DONE", ok, conflicts, flush=True)
""")


def _spawn(place, *args):
    # written once: rewriting it while an earlier process is still starting up could hand that
    # process a truncated (empty) script, which exits 0 having done nothing
    script = place.tmp_path / "writer.py"
    if not script.exists():
        script.write_text(WRITER.format(root=ROOT))
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE, text=True,
                            env=place.env)


def test_processes_concurrent_upserts_and_clustering(place):
    path = place.url("t")
    Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false"},
                 storage_options=place.options)
    procs = [_spawn(place, path, "upsert", w, 8) for w in range(3)] + [_spawn(place, path, "cluster", 9, 15)]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=180)
        outs.append(out)
        assert p.returncode == 0 and "DONE" in out, out
    t = Table.open(path, storage_options=place.options)
    assert as_dict(t.scan()) == {w * 1000 + j * 10 + k: j for w in range(3) for j in range(8) for k in range(10)}
    assert sum(1 for h in t.history() if h["operation"] == "upsert") == 24   # none lost, none doubled
    assert [h["version"] for h in t.history()] == list(range(t.version + 1))
    for h in t.history():     # every version, including ones clustered concurrently, reads completely
        snap = as_dict(t.scan(version=h["version"]))
        per_batch: dict = {}
        for k, v in snap.items():
            per_batch.setdefault((k // 1000, v), 0)
            per_batch[(k // 1000, v)] += 1
        assert set(per_batch.values()) <= {10}


def test_processes_concurrent_inserts_conflict_cleanly(place):
    path = place.url("t")
    Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false"},
                 storage_options=place.options)
    procs = [_spawn(place, path, "insert", w, 6) for w in range(3)]
    committed = set()
    total = 0
    for w, p in enumerate(procs):
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0 and "DONE" in out, out
        for line in out.splitlines():
            kind, *rest = line.split()
            if kind == "OK":
                committed.add((w, int(rest[0])))
            if kind in ("OK", "CONFLICT"):
                total += 1
    assert total == 18
    t = Table.open(path, storage_options=place.options)
    assert as_dict(t.scan()) == {w * 1000 + j * 10 + k: j for (w, j) in committed for k in range(10)}
    assert t.version == len(committed)


KILLED_WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    sys.path.insert(0, {root!r})
    from tidelake.table import Table
    t = Table.open(sys.argv[1])
    i = t.version
    while True:
        i += 1
        # batch i: 20 new keys with amount i, and key 0 set to i, in one commit
        ids = [0] + [i * 100 + k for k in range(20)]
        with t.transaction() as tx:
            tx.upsert(pa.table({{"id": pa.array(ids, pa.int64()), "amount": pa.array([i] * 21, pa.int64())}}))
        print("committed", i, flush=True)
""")


def check_consistent(t: Table, v: int) -> None:
    snap = as_dict(t.scan(version=v))
    batches = {}
    for k, a in snap.items():
        if k:
            batches.setdefault(a, []).append(k)
    assert all(len(ks) == 20 for ks in batches.values()), f"partial commit visible at version {v}"
    if batches:
        assert snap[0] == max(batches)


def test_kill_9_during_commits_leaves_old_or_new_version(tmp_path):
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "3", "clustering.l0.num": "3",
                                        "compaction.delta.num": "5", "checkpoint.interval": "4"})
    script = tmp_path / "killed.py"
    script.write_text(KILLED_WRITER.format(root=ROOT))
    rng = random.Random(7)
    wanted = {"upsert", "cluster", "compact"}
    for round_no in range(12):
        # at least 3 rounds, and more (bounded) until the killed writers' automatic maintenance has committed too:
        # on a loaded machine a writer may be killed before its background clustering/compaction publishes
        if round_no >= 3 and wanted <= {h["operation"] for h in Table.open(path).history()}:
            break
        p = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE, text=True)
        reader = Table.open(path)
        try:
            for _ in range(rng.randint(2, 8)):        # let it commit a few times, then kill at random
                line = p.stdout.readline()
                assert line.startswith("committed"), line
            # from the 4th round on, a writer whose maintenance has not published yet (a busy machine) goes on
            # committing until it has: the wait is on the table's history, bounded only as a last guard
            for _ in range(500 if round_no >= 3 else 0):
                if wanted <= {h["operation"] for h in Table.open(path).history()}:
                    break
                line = p.stdout.readline()
                assert line.startswith("committed"), line
            check_consistent(reader, reader.version)  # a concurrent reader sees whole commits only
            threading.Event().wait(rng.uniform(0, 0.3))
        finally:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(30)
        t = Table.open(path)
        for h in t.history():
            check_consistent(t, h["version"])
    ops = {h["operation"] for h in Table.open(path).history()}
    assert wanted <= ops
