"""An aggregate's state over an increment computed with pyarrow equals the state query Spark runs (the reference),
and a plain aggregate's incremental step then runs no Spark job."""
from __future__ import annotations

import datetime
import random

import pyarrow as pa
import pytest

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.spark.aggregate_state import ordered
from tidelake.spark.arrow_state import arrow_computable, arrow_states
from tidelake.spark.pipeline_config import PipelineConfig
from tidelake.spark.table_pipeline import TablePipeline
from tidelake.spark.transform_plan import plan_transform
from tidelake.table import Table

ROWS = pa.schema([("id", pa.int64()), ("k", pa.string()), ("flag", pa.bool_()), ("day", pa.date32()),
                  ("n", pa.int32()), ("big", pa.int64()), ("name", pa.string()), ("x", pa.float64())])
QUERY = ("SELECT k, flag, count(*) AS c, count(n) AS cn, sum(n) AS sn, avg(big) AS ab, min(day) AS d0, "
         "max(name) AS m1, min(n) AS n0, max(big) AS b1 FROM source GROUP BY k, flag")


def _random_rows(rng: random.Random, count: int, null_groups: bool = True) -> pa.Table:
    """``null_groups``: null group keys too (a sink cannot hold them: its key is the group columns)."""
    def maybe(v):
        return None if rng.random() < 0.2 else v

    def group(v):
        return maybe(v) if null_groups else v
    return pa.table({
        "id": list(range(count)),
        "k": [group(rng.choice(["a", "b", "é", "B", ""])) for _ in range(count)],
        "flag": [group(rng.random() < 0.5) for _ in range(count)],
        "day": [maybe(datetime.date(2026, 1, 1) + datetime.timedelta(days=rng.randrange(400))) for _ in range(count)],
        "n": [maybe(rng.randrange(-2**31, 2**31)) for _ in range(count)],
        "big": [maybe(rng.randrange(-2**40, 2**40)) for _ in range(count)],
        "name": [maybe(rng.choice(["x", "xy", "Z", "ä", "zz"])) for _ in range(count)],
        "x": [maybe(rng.random()) for _ in range(count)],
    }, schema=ROWS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arrow_state_equals_the_spark_state_query(spark, seed):
    rows = _random_rows(random.Random(seed), 300)
    plan = plan_transform(QUERY, ["id"])
    assert arrow_computable(plan, rows.schema)
    view = f"__arrow_state_{seed}"
    spark.createDataFrame(rows.to_pandas(), schema="id long, k string, flag boolean, day date, n int, big long, "
                                                   "name string, x double").createOrReplaceTempView(view)
    want = ordered(spark.sql(plan.state_sql(plan.input_sql({"source": view}))).toArrow(), plan)
    assert sorted(arrow_states(plan, rows).to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)


def test_what_arrow_does_not_compute_exactly_goes_to_spark():
    schema = ROWS
    assert not arrow_computable(plan_transform("SELECT k, sum(x) FROM source GROUP BY k", ["id"]), schema)
    assert not arrow_computable(plan_transform("SELECT x, count(*) FROM source GROUP BY x", ["id"]), schema)
    assert not arrow_computable(plan_transform("SELECT k, sum(n + 1) FROM source GROUP BY k", ["id"]), schema)
    assert not arrow_computable(plan_transform("SELECT k, sum(n) FROM source WHERE n > 0 GROUP BY k", ["id"]), schema)
    assert not arrow_computable(plan_transform("SELECT d.z, sum(n) FROM source s JOIN d ON s.k = d.k GROUP BY d.z",
                                               ["id"]), schema)
    assert arrow_computable(plan_transform("SELECT s.k, max(s.name), sum(n) FROM source s GROUP BY s.k", ["id"]), schema)


def test_a_plain_aggregate_step_runs_no_spark_job(tmp_path, spark):
    orders = Table.create(str(tmp_path / "orders"), ROWS, ["id"], {"write.bucket.num": "2"})
    rng = random.Random(9)
    orders.upsert(_random_rows(rng, 200, null_groups=False))
    cfg = PipelineConfig.from_dict({"source": {"table": "orders"}, "transform": QUERY, "sink": {"table": "out"}},
                                   base_dir=tmp_path)
    p = TablePipeline(cfg, spark=spark)
    assert p.step().kind == "backfill"
    orders.upsert(_random_rows(rng, 50, null_groups=False).slice(20))
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup())
    assert p.step().kind == "incremental"
    assert set(tracker.getJobIdsForGroup()) == jobs
    got = sorted(p.results().to_pylist(), key=repr)
    assert got == sorted(p.recompute(orders.version).to_pylist(), key=repr)
