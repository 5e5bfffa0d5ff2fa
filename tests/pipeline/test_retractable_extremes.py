"""Retractable min/max (aggregate_state.py, merged column-wise by arrow_merge.py): each group keeps its
``state.extremes.kept`` lowest/highest values with their counts, so a step that deletes every group's min and max
row reads no upstream snapshot, and a group is recomputed only when retractions empty its truncated list. Under
hard changes (each group's min and max row deleted every round, rows moved between groups, amounts set to NULL,
inserts, an aggregate over an aggregate, a join on the Spark path) every sink equals a full recompute after every
round."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from counting_storage import CountingStorage
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.spark.arrow_merge import merge
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.spark.table_pipeline import TablePipeline
from tidelake.spark.transform_plan import kept_type, plan_transform
from tidelake.storage import open_storage
from tidelake.table import Table

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
BY_REGION = ("SELECT region, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi "
             "FROM source GROUP BY region")   # the pyarrow path
BY_ZONE = ("SELECT r.zone, count(*) AS n, min(o.amount) AS lo, max(o.amount) AS hi FROM source o "
           "JOIN regions r ON o.region = r.region GROUP BY r.zone")   # the Spark path
# an aggregate over an aggregate: stage 1's sink as source, its groups moving between stage 2's groups
OVER_REGIONS = "SELECT n > 12 AS big, count(*) AS groups, min(lo) AS lo, max(hi) AS hi FROM source GROUP BY n > 12"


def _tables(tmp_path, rows: int, rng: random.Random) -> Table:
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"],
                          {"write.bucket.num": "2", "changelog.producer": "lookup"})
    regions = Table.create(str(tmp_path / "regions"), pa.schema([("region", pa.string()), ("zone", pa.string())]),
                           ["region"], {"write.bucket.num": "1"})
    regions.upsert(pa.table({"region": list("abcde"), "zone": ["x", "x", "y", "y", "z"]}))
    orders.upsert(pa.table({"id": list(range(rows)), "region": [rng.choice("abcde") for _ in range(rows)],
                            "amount": [rng.choice([None, *range(-40, 200)]) for _ in range(rows)]}, schema=ORDERS))
    return orders


def _pipeline(tmp_path, spark, transform, sink, source="orders", kept=None):
    raw = {"source": {"table": source, "tables": {"regions": "regions"}}, "transform": transform,
           "sink": {"table": sink}}
    if kept is not None:
        raw["state"] = {"extremes": {"kept": kept}}
    return TablePipeline(PipelineConfig.from_dict(raw, base_dir=tmp_path), spark=spark)


def _hard_round(orders: Table, rng: random.Random, next_id: int) -> int:
    """Delete each region's min and max row, move rows between regions, set amounts NULL, insert rows."""
    rows = orders.scan().to_pylist()
    doomed = set()
    for region in "abcde":
        valued = [r for r in rows if r["region"] == region and r["amount"] is not None]
        if valued:
            doomed.add(min(valued, key=lambda r: r["amount"])["id"])
            doomed.add(max(valued, key=lambda r: r["amount"])["id"])
    orders.delete(pa.table({"id": sorted(doomed)}))
    left = [r for r in rows if r["id"] not in doomed]
    moved = rng.sample(left, 6)
    orders.upsert(pa.table({"id": [r["id"] for r in moved],
                            "region": [rng.choice("abcde") for _ in moved],
                            "amount": [None if k % 3 == 0 else rng.randrange(-40, 200) for k in range(len(moved))]},
                           schema=ORDERS))
    new = list(range(next_id, next_id + 4))
    orders.upsert(pa.table({"id": new, "region": [rng.choice("abcde") for _ in new],
                            "amount": [rng.randrange(-60, 260) for _ in new]}, schema=ORDERS))
    return next_id + len(new)


def _equal(p: TablePipeline, key: str) -> None:
    got = p.results()
    want = p.recompute(p.upstream().refresh()).select(got.column_names)
    order = lambda r: str(r[key])   # noqa: E731
    assert sorted(got.to_pylist(), key=order) == sorted(want.to_pylist(), key=order), p.name


@pytest.mark.parametrize("kept", [256, 2])
def test_hard_changes_stay_equal_to_a_recompute(tmp_path, spark, kept):
    """256: every group's list is complete, nothing is ever recomputed; 2: retractions empty the truncated lists
    and the groups refill from the snapshot, still equal."""
    rng = random.Random(kept)
    orders = _tables(tmp_path, 60, rng)
    by_region = _pipeline(tmp_path, spark, BY_REGION, "by_region", kept=kept)
    by_zone = _pipeline(tmp_path, spark, BY_ZONE, "by_zone", kept=kept)
    over = _pipeline(tmp_path, spark, OVER_REGIONS, "over", source="by_region", kept=kept)
    stages = ((by_region, "region"), (by_zone, "zone"), (over, "big"))
    recomputed = {p.name: 0 for p, _ in stages}
    next_id = 1000
    for _ in range(4):
        for p, key in stages:
            result = p.step()
            recomputed[p.name] += result.recomputed_groups
            _equal(p, key)
        next_id = _hard_round(orders, rng, next_id)
    if kept == 256:
        assert recomputed == {"by_region": 0, "by_zone": 0, "over": 0}
    else:
        assert recomputed["by_region"] > 0 and recomputed["by_zone"] > 0


def test_a_step_that_retracts_every_groups_extremes_reads_no_upstream_snapshot(tmp_path, spark):
    rng = random.Random(5)
    orders = _tables(tmp_path, 400, rng)
    p = _pipeline(tmp_path, spark, BY_REGION, "by_region")
    assert p.step().kind == "backfill"
    storage = CountingStorage(open_storage(str(tmp_path / "orders")))
    p._upstream = Table.open(storage)   # the upstream as the pipeline reads it, every file it opens recorded
    next_id = 5000
    for _ in range(2):
        start = orders.refresh()
        snapshot_files = {f.path for f in orders.plan(version=start)}
        next_id = _hard_round(orders, rng, next_id)
        storage.calls.clear()
        result = p.step()
        assert (result.kind, result.recomputed_groups) == ("incremental", 0)
        opened = {path for _, path in storage.calls}
        assert snapshot_files and not opened & snapshot_files   # only the change's own files
        _equal(p, "region")


def _kept(was, had, retract, left, add, function, kept):
    """One group's kept list after an increment, through the column-wise merge (arrow_merge.py): ``had``/``left``
    the group's non-null count before / after the retractions; None: listed for recompute."""
    plan = plan_transform(f"SELECT k, {function}(v) AS x FROM source GROUP BY k", ["id"])

    def state(values, count):
        return pa.table({"__g0": ["g"], "__rows": pa.array([count], pa.int64()), "__n0": pa.array([count], pa.int64()),
                         "__m0": pa.array([[{"value": v, "count": c} for v, c in values]], kept_type(pa.int64()))})
    merged = merge(state(was, had), state(retract, had - left), state(add, sum(c for _, c in add)), plan, kept)
    if merged.recompute.num_rows:
        return None
    return [(e["value"], e["count"]) for e in merged.states.column("__m0")[0].as_py()]


def test_a_kept_list_answers_what_it_holds_and_says_when_it_cannot():
    # complete (1, 5, 5): the min 1 retracted, 3 added
    assert _kept([(1, 1), (5, 2)], 3, [(1, 1)], 2, [(3, 1)], "min", 2) == [(3, 1), (5, 2)]
    # truncated (1, 2 kept of 1, 2, 7, 9): a retraction beyond the boundary is untracked, an add inside counts in
    assert _kept([(1, 1), (2, 1)], 4, [(9, 1)], 3, [(0, 1)], "min", 2) == [(0, 1), (1, 1)]
    assert _kept([(9, 1), (7, 1)], 4, [(9, 1)], 3, [(8, 1)], "max", 2) == [(8, 1), (7, 1)]
    # emptied while values beyond remain: the one case the state cannot answer (the group refills)
    assert _kept([(1, 1), (2, 1)], 4, [(1, 1), (2, 1)], 2, [], "min", 2) is None
    # the retractions left only kept values: complete again, so an add beyond the old boundary counts in
    assert _kept([(1, 1)], 2, [(5, 1)], 1, [(10, 1)], "min", 2) == [(1, 1), (10, 1)]
    # nothing kept of a group with values (a truncated list left empty): only a refill answers
    assert _kept([], 3, [], 3, [(4, 1)], "max", 2) is None
