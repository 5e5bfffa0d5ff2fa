"""Joins with tables read by name follow the changes of both sides: after every round (upstream changes, dimension
updates that move keys between groups, deletes, inserts that make unmatched rows match, both at once) each sink
equals Spark's recompute over the snapshots, with no refresh; a dimension change reads only the upstream rows
with the changed join values; the Arrow join computes what Spark's state query does."""
from __future__ import annotations

import decimal
import math
import random

import duckdb
import pyarrow as pa
import pytest

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.spark.arrow_join import DimensionCache, arrow_join, input_rows
from tidelake.spark.arrow_state import input_states
from tidelake.spark.aggregate_state import ordered
from tidelake.spark.delta_join import SignedRows, join_shape, signed
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.spark.table_pipeline import TablePipeline
from tidelake.spark.transform_plan import plan_transform
from tidelake.table import Table

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("cust", pa.int64()), ("amount", pa.int64())])
REGIONS = pa.schema([("region", pa.string()), ("zone", pa.string())])
STAGES = {   # name -> (transform, the sink's key); which run on Arrow and which on Spark is asserted below
    "zone_arrow": ("SELECT r.zone, count(*) AS n, sum(o.amount) AS total, avg(o.amount) AS mean, min(o.amount) AS lo, "
                   "max(o.amount) AS hi FROM source o JOIN regions r ON o.region = r.region GROUP BY r.zone", ["zone"]),
    "zone_spark": ("SELECT r.zone, count(*) AS n, sum(o.amount) AS total, min(o.amount) AS lo, max(o.amount) AS hi "
                   "FROM source o JOIN regions r ON o.region = r.region WHERE o.amount IS NULL OR o.amount > 10 "
                   "GROUP BY r.zone", ["zone"]),
    "cust_arrow": ("SELECT o.cust, count(*) AS n, count(r.zone) AS zoned, max(r.zone) AS z, min(r.region) AS r0, "
                   "sum(o.amount) AS total FROM source o LEFT JOIN regions r ON o.region = r.region GROUP BY o.cust",
                   ["cust"]),
    "cust_spark": ("SELECT o.cust, count(*) AS n, count(r.zone) AS zoned, max(r.zone) AS z, avg(o.amount) AS mean "
                   "FROM source o LEFT JOIN regions r ON o.region = r.region AND r.zone <> 'q' GROUP BY o.cust",
                   ["cust"]),
    "rows": ("SELECT o.id, o.amount * 2 AS doubled, r.zone FROM source o JOIN regions r ON o.region = r.region "
             "WHERE o.amount > 0", ["id"]),
    "rows_left": ("SELECT o.id, o.cust, r.zone FROM source o LEFT JOIN regions r ON o.region = r.region", ["id"]),
}


def _tables(tmp_path):
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    regions = Table.create(str(tmp_path / "regions"), REGIONS, ["region"], {"write.bucket.num": "1"})
    regions.upsert(pa.table({"region": list("abcd"), "zone": ["x", "x", "y", "z"]}))
    return orders, regions


def _change_orders(orders: Table, rng: random.Random, keys: int = 60) -> None:
    if rng.random() < 0.25:
        orders.delete(pa.table({"id": [rng.randrange(keys) for _ in range(rng.randrange(1, 6))]}))
        return
    ids = sorted({rng.randrange(keys) for _ in range(rng.randrange(1, 20))})
    orders.upsert(pa.table({"id": ids, "region": [rng.choice([*"abcdef", None]) for _ in ids],
                            "cust": [rng.randrange(5) for _ in ids],
                            "amount": [rng.choice([None, rng.randrange(-50, 100)]) for _ in ids]}, schema=ORDERS))


def _change_regions(regions: Table, rng: random.Random) -> str:
    """A dimension change: a region moved to another zone, deleted, or a new region (matching unmatched rows)."""
    what = rng.choice(["move", "delete", "insert"])
    present = [r["region"] for r in regions.scan().to_pylist()]
    if what == "delete" and len(present) > 1:
        regions.delete(pa.table({"region": [rng.choice(present)]}))
    elif what == "insert":
        regions.upsert(pa.table({"region": [rng.choice("abcdefg")], "zone": [rng.choice("xyzq")]}))
    else:
        regions.upsert(pa.table({"region": [rng.choice(present)], "zone": [rng.choice("xyzwq")]}))
    return what


def _pipeline(tmp_path, spark, name):
    transform, _ = STAGES[name]
    cfg = PipelineConfig.from_dict({"source": {"table": "orders", "tables": {"regions": "regions"}},
                                    "transform": transform, "sink": {"table": name}}, base_dir=tmp_path)
    return TablePipeline(cfg, spark=spark)


def _rows(table: pa.Table, key: list[str]) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in key))


def _same(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-12) if isinstance(a, float) and isinstance(b, float) else a == b


def _check(p: TablePipeline, orders: Table, key: list[str], round_: int) -> None:
    """The sink equals the transform recomputed by DuckDB over both tables' snapshots (an independent engine)."""
    got = p.results()
    regions = Table.open(p.config.source.tables["regions"])
    db = duckdb.connect()
    db.register("orders_now", orders.scan())
    db.register("regions_now", regions.scan())
    want = db.sql(p.plan().bound({"source": "orders_now", "regions": "regions_now"})).arrow().read_all()
    got_rows, want_rows = _rows(got, key), _rows(want.select(got.column_names), key)
    assert len(got_rows) == len(want_rows) and all(
        all(_same(g[c], w[c]) for c in g) for g, w in zip(got_rows, want_rows)), (
        f"{p.config.sink.table} at round {round_}: {got_rows} != {want_rows}")


@pytest.mark.parametrize("names", [("zone_arrow", "cust_arrow"), ("zone_spark", "cust_spark"), ("rows", "rows_left")])
def test_joins_follow_both_sides_changes_equal_to_a_recompute(tmp_path, spark, names):
    rng = random.Random(11)
    orders, regions = _tables(tmp_path)
    _change_orders(orders, rng)
    _change_orders(orders, rng)
    pipelines = {name: _pipeline(tmp_path, spark, name) for name in names}
    for name, p in pipelines.items():
        assert p.step().kind == "backfill"
        _check(p, orders, STAGES[name][1], 0)
    ran_spark = set()
    for round_ in range(1, 5):
        what = round_ % 3   # 0: both sides at once, 1: the dimension alone, 2: the upstream alone
        if what != 2:
            _change_regions(regions, rng)
        if what != 1:
            _change_orders(orders, rng)
        for name, p in pipelines.items():
            result = p.step()
            assert result is not None and result.kind == "incremental", (name, result)
            if "spark_job" in result.phases:
                ran_spark.add(name)
            _check(p, orders, STAGES[name][1], round_)
    assert ran_spark == {n for n in names if "arrow" not in n}   # the others: the Arrow join, no Spark job


def test_dimension_deletes_inserts_and_moves(tmp_path, spark):
    """The cases by hand: a region moved to another zone, a region deleted (inner: its rows vanish; left: they turn
    NULL-joined), a new region that makes unmatched rows match."""
    orders, regions = _tables(tmp_path)
    orders.upsert(pa.table({"id": list(range(8)), "region": ["a", "a", "b", "c", "e", "e", None, "d"],
                            "cust": [0, 1, 0, 1, 0, 1, 0, 1], "amount": [5, 50, 7, 70, 9, 90, 3, 1]}, schema=ORDERS))
    by_zone, by_cust = _pipeline(tmp_path, spark, "zone_arrow"), _pipeline(tmp_path, spark, "cust_arrow")
    rows = _pipeline(tmp_path, spark, "rows_left")
    for p in (by_zone, by_cust, rows):
        p.step()
    regions.upsert(pa.table({"region": ["a"], "zone": ["y"]}))   # a's rows (the min 5 and max 50) move x -> y
    regions.delete(pa.table({"region": ["c"]}))
    regions.upsert(pa.table({"region": ["e"], "zone": ["x"]}))   # e's rows match now
    for p, key in ((by_zone, ["zone"]), (by_cust, ["cust"]), (rows, ["id"])):
        assert p.step().kind == "incremental"
        _check(p, orders, key, 1)
    assert {r["zone"]: (r["n"], r["lo"], r["hi"]) for r in by_zone.results().to_pylist()} == {
        "x": (3, 7, 90), "y": (2, 5, 50), "z": (1, 1, 1)}
    assert {r["id"]: r["zone"] for r in rows.results().to_pylist()}[3] is None   # c deleted: NULL-joined


def test_a_dimension_change_reads_only_the_affected_upstream_rows(tmp_path, spark):
    orders, regions = _tables(tmp_path)
    n = 400
    orders.upsert(pa.table({"id": list(range(n)), "region": [("abcd" * n)[i] for i in range(n)],
                            "cust": [i % 7 for i in range(n)], "amount": list(range(n))}, schema=ORDERS))
    p = _pipeline(tmp_path, spark, "zone_arrow")
    p.step()
    regions.upsert(pa.table({"region": ["b"], "zone": ["z"]}))
    result = p.step()
    assert (result.kind, result.rejoined) == ("incremental", n // 4)   # b's rows, not the table's
    assert result.changes == 1   # the dimension's one change row (b's update)
    _check(p, orders, ["zone"], 1)


def test_right_and_full_joins_are_refresh_full_only(tmp_path):
    cfg = PipelineConfig.from_dict({"source": {"table": "orders", "tables": {"regions": "regions"}},
                                    "transform": "SELECT r.zone, count(*) AS n FROM source o RIGHT JOIN regions r "
                                                 "ON o.region = r.region GROUP BY r.zone", "sink": {"table": "s"}},
                                   base_dir=tmp_path)
    _tables(tmp_path)
    with pytest.raises(Exception, match="RIGHT join keeps the rows of regions"):
        TablePipeline(cfg).plan()
    shape = join_shape("SELECT o.id FROM source o CROSS JOIN regions r", ("regions",))
    assert shape.reason and not shape.wrong


DECIMALS = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("g", pa.string()), ("amount", pa.decimal128(9, 2)),
                      ("n", pa.int64())])
DIM = pa.schema([("k", pa.int32()), ("zone", pa.string()), ("w", pa.decimal128(5, 1))])


@pytest.mark.parametrize("outer", [False, True])
def test_the_arrow_join_equals_the_spark_state_query(tmp_path, spark, outer):
    """The same signed rows through the Arrow join and through Spark's state query: NULL join keys (matching
    nothing), dimension keys held twice, keys only one side has, decimals, avg."""
    rng = random.Random(5 + outer)
    dim = Table.create(str(tmp_path / "dim"), DIM, ["k", "zone"], {"write.bucket.num": "1"})
    dim.upsert(pa.table({"k": [1, 2, 2, 3, None][:4], "zone": ["x", "y", "w", "x"],
                         "w": [decimal.Decimal("1.5"), None, decimal.Decimal("-2.0"), decimal.Decimal("3.3")]},
                        schema=DIM))
    rows = pa.table({"id": list(range(200)), "k": [rng.choice([1, 2, 3, 4, None]) for _ in range(200)],
                     "g": [rng.choice(["p", "q"]) for _ in range(200)],
                     "amount": [rng.choice([None, decimal.Decimal(rng.randrange(-10**6, 10**6)) / 100])
                                for _ in range(200)],
                     "n": [rng.choice([None, rng.randrange(-10**12, 10**12)]) for _ in range(200)]}, schema=DECIMALS)
    join = "LEFT JOIN" if outer else "JOIN"
    sql = (f"SELECT o.g, d.zone, count(*) AS c, sum(o.amount) AS s, avg(o.amount) AS a, min(d.w) AS w0, "
           f"max(o.amount) AS m, avg(o.n) AS an, count(d.k) AS ck FROM source o {join} dim d ON o.k = d.k "
           f"GROUP BY o.g, d.zone")
    plan = plan_transform(sql, ["id"])
    shape = join_shape(plan.sql, plan.tables)
    how = arrow_join(plan, shape, DECIMALS, {"dim": DIM})
    assert how is not None
    terms = [SignedRows(signed(rows.slice(0, 80), -1), {"dim": dim.version}),
             SignedRows(signed(rows.slice(60), +1), {"dim": dim.version})]
    inputs = input_rows(how, terms, {"dim": dim}, DimensionCache())
    views = {"dim": "__dj_dim"}
    spark.read.format("tidelake").load(str(tmp_path / "dim")).createOrReplaceTempView("__dj_dim")
    from pyspark.sql.pandas.types import from_arrow_schema
    both = pa.concat_tables([t.rows for t in terms])
    spark.createDataFrame(both, schema=from_arrow_schema(both.schema)).createOrReplaceTempView("__dj_src")
    state = spark.sql(plan.state_sql(plan.input_sql({**views, "source": "__dj_src"}, signed=True), by_sign=True))
    want = state.toArrow()
    sign = inputs.column("__sign").to_pylist()
    for s in (-1, 1):
        mine = input_states(plan, inputs.filter(pa.array([x == s for x in sign])))
        theirs = ordered(want.filter(pa.array([x == s for x in want.column("__sign").to_pylist()])).drop_columns(
            ["__sign"]), plan)
        assert sorted(mine.to_pylist(), key=repr) == sorted(theirs.to_pylist(), key=repr), s


def test_a_refresh_full_stage_follows_a_change_of_a_table_read_by_name_alone(tmp_path, spark):
    """(It used to see nothing to do: only aggregate and row-wise stages looked at the tables read by name.)"""
    orders, regions = _tables(tmp_path)
    orders.upsert(pa.table({"id": [1, 2, 3], "region": ["a", "b", "c"], "cust": [0, 0, 1], "amount": [5, 6, 7]},
                           schema=ORDERS))
    cfg = PipelineConfig.from_dict({"source": {"table": "orders", "tables": {"regions": "regions"}},
                                    "transform": STAGES["zone_arrow"][0], "refresh": "full",
                                    "sink": {"table": "full", "primary_key": ["zone"]}}, base_dir=tmp_path)
    p = TablePipeline(cfg, spark=spark)
    assert p.step().kind == "full"
    regions.upsert(pa.table({"region": ["a"], "zone": ["w"]}))
    result = p.step()
    assert result is not None and result.kind == "full"
    _check(p, orders, ["zone"], 1)
