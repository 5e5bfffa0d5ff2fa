"""Merge engines (merge_engine.py, engine_commit.py): each engine against a plain-Python reference over
random interleavings of transactions (upserts and deletes, several changes of one key in one commit),
compactions and clusterings; the latest state is checked after every step, and every data version's
change feed (with and without before-images) against the difference of the reference's states. Then
the engines' properties, refusals, and two writers into one partial-update table."""
from __future__ import annotations

import itertools
import threading

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelake.table import InvalidProperty, Table
from tidelake.table.merge_engine import MergeRefused

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.string()), ("c", pa.bool_()),
                    ("seq", pa.int64())])
COLUMNS = SCHEMA.names

CONFIGS = {
    "partial-update": {"merge-engine": "partial-update"},
    "partial-update+seq": {"merge-engine": "partial-update", "sequence.field": "seq"},
    # the change feed's before-images written by the commits (change files), after the engine's fold
    "partial-update+lookup": {"merge-engine": "partial-update", "changelog.producer": "lookup"},
    "aggregation": {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
                    "fields.b.aggregate-function": "listagg", "fields.c.aggregate-function": "bool_and",
                    "aggregation.remove-record-on-delete": "true"},
    "aggregation+seq": {"merge-engine": "aggregation", "sequence.field": "seq", "fields.a.aggregate-function": "max",
                        "fields.b.aggregate-function": "first_value", "fields.c.aggregate-function": "bool_or",
                        "aggregation.remove-record-on-delete": "true"},
    "aggregation-count": {"merge-engine": "aggregation", "fields.a.aggregate-function": "count",
                          "fields.b.aggregate-function": "last_value", "fields.c.aggregate-function": "bool_and",
                          "fields.seq.aggregate-function": "min", "aggregation.remove-record-on-delete": "true"},
    "aggregation-columnar": {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
                             "fields.b.aggregate-function": "first_value", "fields.c.aggregate-function": "bool_or",
                             "fields.seq.aggregate-function": "max", "aggregation.remove-record-on-delete": "true"},
    "aggregation-last-values": {"merge-engine": "aggregation", "fields.c.aggregate-function": "last_value",
                                "aggregation.remove-record-on-delete": "true"},
    "first-row": {"merge-engine": "first-row"},
    "deduplicate+seq": {"merge-engine": "deduplicate", "sequence.field": "seq"},
}


# ---------------------------------------------------------------- the reference
def _agg(fn, acc, v):
    if fn == "count":
        return acc + (v is not None)
    if fn == "last_value":
        return v
    if fn == "first_value":
        return acc
    if fn == "last_non_null_value":
        return acc if v is None else v
    if v is None:
        return acc
    if acc is None:
        return v
    return {"sum": lambda: acc + v, "max": lambda: max(acc, v), "min": lambda: min(acc, v),
            "listagg": lambda: acc + "," + v, "bool_and": lambda: acc and v, "bool_or": lambda: acc or v}[fn]()


def reference(config: dict, state: dict, changes: list) -> dict:
    """``state`` ({id: row}) after ``changes`` [(op, row)], by the engine ``config`` describes."""
    state = dict(state)
    engine, seq = config["merge-engine"], config.get("sequence.field")
    for op, row in changes:
        k = row["id"]
        live = state.get(k)
        if op == "d":
            state.pop(k, None)
            continue
        if seq and live is not None and row[seq] < live[seq]:
            continue
        if live is None:
            new = dict(row)
            if engine == "aggregation":
                for c in COLUMNS[1:]:
                    if config.get(f"fields.{c}.aggregate-function") == "count":
                        new[c] = int(row[c] is not None)
        elif engine == "deduplicate":
            new = dict(row)
        elif engine == "first-row":
            new = live
        elif engine == "partial-update":
            new = {c: live[c] if row[c] is None else row[c] for c in COLUMNS}
        else:
            new = {"id": k}
            for c in COLUMNS[1:]:
                if c == seq:
                    new[c] = row[c]
                else:
                    new[c] = _agg(config.get(f"fields.{c}.aggregate-function", "last_non_null_value"), live[c], row[c])
        state[k] = new
    return state


# ---------------------------------------------------------------- the random programs
def _row(seq_required: bool):
    return st.fixed_dictionaries({
        "id": st.integers(0, 5), "a": st.none() | st.integers(0, 3), "b": st.none() | st.sampled_from(["x", "y"]),
        "c": st.none() | st.booleans(), "seq": st.integers(0, 3) if seq_required else st.none() | st.integers(0, 3)})


def _program(seq_required: bool):
    change = st.one_of(st.tuples(st.just("u"), _row(seq_required)),
                       st.tuples(st.just("d"), st.integers(0, 5).map(lambda k: {"id": k})))
    step = st.one_of(st.tuples(st.just("txn"), st.lists(change, min_size=1, max_size=6)),
                     st.tuples(st.just("upsert"), st.lists(st.tuples(st.just("u"), _row(seq_required)), max_size=6)),
                     st.just(("compact", None)), st.just(("cluster", None)))
    return st.lists(step, min_size=1, max_size=7)


_tables = itertools.count()


def _state(table: Table, version: int | None = None) -> dict:
    return {r["id"]: r for r in table.scan(version=version).to_pylist()}


def _feed_matches(table: Table, v: int, before: dict, after: dict) -> None:
    """The change feed of version v (alone) is the difference of the reference's states before and after it."""
    want_images, want_plain = [], []
    for k in sorted(before.keys() | after.keys()):
        old, new = before.get(k), after.get(k)
        if old == new:
            continue
        if new is None:
            want_images.append(("delete", old))
            want_plain.append(("delete", k))
        else:
            want_images += [("insert", new)] if old is None else [("update_preimage", old), ("update_postimage", new)]
            want_plain.append(("upsert", new))
    images = table.changes(start_version=v - 1, end_version=v, before_images=True).to_pylist()
    got_images = [(r["_op"], {c: r[c] for c in COLUMNS}) for r in images]
    assert _canonical(got_images) == _canonical(want_images), f"version {v} before-images"
    plain = table.changes(start_version=v - 1, end_version=v).to_pylist()
    got_plain = [(r["_op"], r["id"] if r["_op"] == "delete" else {c: r[c] for c in COLUMNS}) for r in plain]
    assert _canonical(got_plain) == _canonical(want_plain), f"version {v} changes()"


def _canonical(changes: list) -> list:
    """(op, row) pairs comparable whatever the order of the rows and of each row's columns."""
    return sorted(((op, tuple(row[c] for c in COLUMNS) if isinstance(row, dict) else row) for op, row in changes),
                  key=repr)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_engine_against_reference(name):
    config = CONFIGS[name]

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(program=_program("sequence.field" in config), buckets=st.integers(1, 2))
    def run(program, buckets):
        url = f"memory://engines-{next(_tables)}"
        t = Table.create(url, SCHEMA, ["id"], {**config, "write.bucket.num": str(buckets), "clustering.l0.num": "2",
                                               "maintenance.mode": "inline"})
        try:
            states = {0: {}}          # data version -> the reference's state
            for kind, arg in program:
                latest = states[max(states)]
                if kind in ("txn", "upsert"):
                    with t.transaction() as tx:
                        for op, row in arg:
                            if op == "u":
                                tx.upsert([row])
                            else:
                                tx.delete([row["id"]])
                    states[tx.version] = reference(config, latest, arg)
                elif kind == "compact":
                    t.compact()
                else:
                    t.cluster()
                assert _state(t) == states[max(states)], f"after {kind} {arg}"
            versions = sorted(states)
            for v in versions[1:]:   # (each data version's own state, and what its feed says changed)
                assert _state(t, v) == states[v]
                _feed_matches(t, v, states[max(u for u in versions if u < v)], states[v])
        finally:
            t.close()
    run()


# ---------------------------------------------------------------- properties and refusals
def test_engine_properties_are_checked_at_creation(tmp_path):
    bad = [{"merge-engine": "replace"},
           {"merge-engine": "partial-update", "sequence.field": "nope"},
           {"merge-engine": "partial-update", "sequence.field": "id"},
           {"merge-engine": "first-row", "sequence.field": "seq"},
           {"merge-engine": "aggregation", "fields.b.aggregate-function": "sum"},
           {"merge-engine": "aggregation", "fields.a.aggregate-function": "median"},
           {"merge-engine": "aggregation", "fields.zz.aggregate-function": "sum"},
           {"merge-engine": "deduplicate", "fields.a.aggregate-function": "sum"}]
    for i, props in enumerate(bad):
        with pytest.raises(InvalidProperty) as e:
            Table.create(str(tmp_path / f"t{i}"), SCHEMA, ["id"], props)
        assert "\n" not in str(e.value)
    t = Table.create(str(tmp_path / "ok"), SCHEMA, ["id"], {"merge-engine": "aggregation",
                                                             "fields.a.aggregate-function": "sum"})
    with pytest.raises(InvalidProperty, match="fixed at creation"):
        t.set_properties({"merge-engine": "deduplicate"})
    with pytest.raises(InvalidProperty, match="fixed at creation"):
        t.set_properties({"fields.a.aggregate-function": "max"})
    t.close()


def test_aggregation_refuses_a_delete_whole_and_leaves_the_table_as_it_was(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"merge-engine": "aggregation",
                                                           "fields.a.aggregate-function": "sum"})
    t.upsert([{"id": 1, "a": 2}, {"id": 2, "a": 3}])
    v = t.version
    with pytest.raises(MergeRefused, match=r"version 2: merge-engine=aggregation refuses the delete of key id=1"):
        with t.transaction() as tx:
            tx.upsert([{"id": 2, "a": 10}])
            tx.delete([1])
    assert t.version == v
    assert sorted((r["id"], r["a"]) for r in t.scan().to_pylist()) == [(1, 2), (2, 3)]
    t.close()


def test_a_null_sequence_value_is_refused(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"merge-engine": "partial-update", "sequence.field": "seq"})
    with pytest.raises(MergeRefused, match="sequence.field 'seq' is null in the upsert of key id=7"):
        t.upsert([{"id": 7, "a": 1}])
    assert t.scan().num_rows == 0
    t.close()


def test_a_sum_out_of_its_column_range_is_refused_in_one_line(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("n", pa.int8())])
    t = Table.create(str(tmp_path / "t"), schema, ["id"], {"merge-engine": "aggregation",
                                                           "fields.n.aggregate-function": "sum"})
    t.upsert([{"id": 1, "n": 100}])
    with pytest.raises(MergeRefused, match="does not fit the schema"):
        t.upsert([{"id": 1, "n": 100}])
    assert t.scan().to_pylist() == [{"id": 1, "n": 100}]
    t.close()


def test_two_writers_into_one_partial_update_table_each_keep_their_columns(tmp_path):
    """Two writers (orders, payments) racing on the same keys: each commit folds onto the state it is
    published on, so no writer's columns are lost to the other's."""
    schema = pa.schema([("order_id", pa.int64()), ("amount", pa.int64()), ("paid", pa.bool_())])
    path = str(tmp_path / "t")
    Table.create(path, schema, ["order_id"], {"merge-engine": "partial-update", "write.bucket.num": "2"}).close()
    errors = []

    def writer(column, value):
        try:
            with Table.open(path) as t:
                for i in range(0, 40, 4):
                    t.upsert([{"order_id": k, column: value(k)} for k in range(i, i + 4)])
        except Exception as e:   # (reported below: a thread's exception is not the test's)
            errors.append(e)
    threads = [threading.Thread(target=writer, args=("amount", lambda k: k * 10)),
               threading.Thread(target=writer, args=("paid", lambda k: k % 2 == 0))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    with Table.open(path) as t:
        rows = sorted(t.scan().to_pylist(), key=lambda r: r["order_id"])
    assert rows == [{"order_id": k, "amount": k * 10, "paid": k % 2 == 0} for k in range(40)]


def test_an_overwrite_folds_its_own_rows_from_an_empty_table(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"merge-engine": "partial-update", "write.bucket.num": "2"})
    t.upsert([{"id": 1, "a": 1, "b": "x"}, {"id": 2, "a": 2}])
    t.insert_overwrite([{"id": 1, "a": 5}, {"id": 1, "c": True}, {"id": 3, "b": "y"}])
    assert sorted(t.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "a": 5, "b": None, "c": True, "seq": None}, {"id": 3, "a": None, "b": "y", "c": None, "seq": None}]
    assert sorted((r["id"], r["_op"]) for r in t.changes(start_version=1).to_pylist()) == [
        (1, "upsert"), (2, "delete"), (3, "upsert")]
    t.close()


def test_a_commit_adding_a_column_folds_its_rows_with_that_column(tmp_path):
    """Schema evolution in the same commit (``add_columns``, as the pipeline's): the new column's values are
    folded with the rest, not dropped."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"merge-engine": "partial-update"})
    t.upsert([{"id": 1, "a": 1}])
    extra = [pa.field("d", pa.string())]
    files = t.stage_files([{"id": 1, "d": "new"}, {"id": 2, "b": "x"}], add_columns=extra)
    t.commit_staged(files, add_columns=extra)
    assert sorted(t.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "a": 1, "b": None, "c": None, "seq": None, "d": "new"},
        {"id": 2, "a": None, "b": "x", "c": None, "seq": None, "d": None}]
    t.close()
