"""Table -> table pipelines: every incremental result equals a full recompute at the same upstream version;
the sink's commit records the upstream range, so a restart resumes and a replayed batch is dropped."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.table_pipeline import TablePipeline
from tidelake.spark.transform_plan import plan_transform
from tidelake.table import Table

ORDERS = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.int64())])
AGGREGATES = ("SELECT region, count(*) AS n, sum(amount) AS total, avg(amount) AS mean, min(amount) AS lo, "
              "max(amount) AS hi, count(amount) AS c FROM source GROUP BY region")
JOINED = ("SELECT r.zone, count(*) AS n, sum(o.amount) AS total, min(o.amount) AS lo, max(o.amount) AS hi "
          "FROM source o JOIN regions r ON o.region = r.region WHERE o.amount IS NULL OR o.amount > 10 "
          "GROUP BY r.zone")


def _tables(tmp_path):
    orders = Table.create(str(tmp_path / "orders"), ORDERS, ["id"], {"write.bucket.num": "2"})
    regions = Table.create(str(tmp_path / "regions"), pa.schema([("region", pa.string()), ("zone", pa.string())]),
                           ["region"], {"write.bucket.num": "1"})
    regions.upsert(pa.table({"region": list("abcd"), "zone": ["x", "x", "y", "z"]}))
    return orders, regions


def _change(orders: Table, rng: random.Random, keys: int) -> None:
    """One commit of random upserts (new and existing keys), or of deletes."""
    if rng.random() < 0.3:
        orders.delete(pa.table({"id": [rng.randrange(keys) for _ in range(rng.randrange(1, 6))]}))
        return
    ids = sorted({rng.randrange(keys) for _ in range(rng.randrange(1, 25))})
    orders.upsert(pa.table({"id": ids, "region": [rng.choice("abcd") for _ in ids],
                            "amount": [rng.choice([None, rng.randrange(-50, 100)]) for _ in ids]}, schema=ORDERS))


def _pipeline(tmp_path, spark, transform, sink_table="out", sink=None, **extra):
    cfg = PipelineConfig.from_dict({"source": {"table": "orders", "tables": {"regions": "regions"}},
                                    "transform": transform, "sink": {"table": sink_table, **(sink or {})},
                                    **extra}, base_dir=tmp_path)
    return TablePipeline(cfg, spark=spark)


def _rows(table: pa.Table, key: list[str]) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in key))


def _check(p: TablePipeline, orders: Table, key: list[str]) -> None:
    got = p.results()
    want = p.recompute(orders.version).select(got.column_names)
    assert _rows(got, key) == _rows(want, key), f"at upstream version {orders.version}"


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_incremental_aggregates_equal_a_full_recompute(tmp_path_factory, spark, seed):
    tmp_path = tmp_path_factory.mktemp("agg")
    rng = random.Random(seed)
    orders, _ = _tables(tmp_path)
    _change(orders, rng, 40)
    by_region = _pipeline(tmp_path, spark, AGGREGATES, "by_region")
    by_zone = _pipeline(tmp_path, spark, JOINED, "by_zone")
    for _ in range(3):
        for p, key in ((by_region, ["region"]), (by_zone, ["zone"])):
            p.step()
            _check(p, orders, key)
        for _ in range(rng.randrange(1, 4)):
            _change(orders, rng, 40)
    assert {by_region.position().batch_id, by_zone.position().batch_id} == {2}


def test_a_retracted_min_max_is_answered_by_the_kept_values_and_an_emptied_group_is_deleted(tmp_path, spark):
    orders, _ = _tables(tmp_path)
    orders.upsert(pa.table({"id": [1, 2, 3, 4], "region": ["a", "a", "b", "b"], "amount": [5, 9, 1, 7]}))
    p = _pipeline(tmp_path, spark, AGGREGATES, "by_region")
    assert p.step().kind == "backfill"
    orders.upsert(pa.table({"id": [1, 3], "region": ["a", "b"], "amount": [6, 3]}))   # a's min 5 leaves; b's min 1
    result = p.step()
    assert (result.kind, result.recomputed_groups) == ("incremental", 0)
    _check(p, orders, ["region"])
    orders.upsert(pa.table({"id": [5], "region": ["a"], "amount": [100]}))   # only adds: nothing recomputed
    assert p.step().recomputed_groups == 0
    _check(p, orders, ["region"])
    orders.delete(pa.table({"id": [3, 4]}))   # b loses every row: its group is deleted
    result = p.step()
    assert result.deletes == 1
    assert [r["region"] for r in p.results().to_pylist()] == ["a"]


def test_row_wise_and_changes_transforms_follow_the_upstream(tmp_path, spark):
    orders, regions = _tables(tmp_path)
    rng = random.Random(7)
    _change(orders, rng, 30)
    rows = _pipeline(tmp_path, spark, "SELECT o.id, o.amount * 2 AS doubled, r.zone FROM source o "
                                      "JOIN regions r ON o.region = r.region WHERE o.amount > 0", "big")
    events = _pipeline(tmp_path, spark, "SELECT id, amount, _op FROM changes WHERE id % 2 = 0", "even",
                       sink={"primary_key": ["id"]})
    for _ in range(3):
        rows.step()
        events.step()
        _check(rows, orders, ["id"])
        even = orders.scan(filter=[("id", "in", list(range(0, 30, 2)))]).select(["id", "amount"])
        assert _rows(events.results(), ["id"]) == _rows(even, ["id"])
        _change(orders, rng, 30)
    regions.upsert(pa.table({"region": ["a"], "zone": ["w"]}))   # a table read by name changed: rows rejoined
    assert rows.step().kind == "incremental"
    _check(rows, orders, ["id"])


def test_a_restart_resumes_from_the_range_the_sink_recorded(tmp_path, spark):
    orders, _ = _tables(tmp_path)
    rng = random.Random(3)
    _change(orders, rng, 20)
    first = _pipeline(tmp_path, spark, AGGREGATES, "by_region")
    first.step()
    consumed = orders.version
    _change(orders, rng, 20)
    _change(orders, rng, 20)
    restarted = _pipeline(tmp_path, spark, AGGREGATES, "by_region")   # a new process: only the sink knows
    assert restarted.position().version == consumed and restarted.pending() == 2
    result = restarted.step()
    assert (result.batch_id, result.from_version, result.to_version) == (1, consumed, orders.version)
    state = Table.open(str(tmp_path / "by_region")).app_state(restarted.config.app_id)
    assert (state["batch_id"], state["extra"]["from_version"], state["extra"]["to_version"], state["version"]) == (
        1, consumed, orders.version, result.sink_version)
    _check(restarted, orders, ["region"])
    assert first.step() is None   # the first instance sees the range consumed: nothing is applied twice
    _check(first, orders, ["region"])


def test_what_cannot_be_incremental_is_refused_with_its_reason_or_run_full(tmp_path, spark):
    assert plan_transform(AGGREGATES, ["id"]).kind == "aggregate"
    reasons = {
        "SELECT region, count(DISTINCT amount) AS d FROM source GROUP BY region": "distinct aggregate",
        "SELECT id, rank() OVER (ORDER BY amount) AS r FROM source": "window functions",
        "SELECT region, sum(amount) / count(*) AS m FROM source GROUP BY region": "expression over aggregates",
        "SELECT region, total FROM source ORDER BY total DESC LIMIT 3": "top-N",
        "SELECT amount, region FROM source": "keeps the upstream's key",
        "SELECT region, percentile(amount, 0.5) AS p FROM source GROUP BY region": "no incremental form",
    }
    for sql, reason in reasons.items():
        plan = plan_transform(sql, ["id"])
        assert plan.kind == "full" and reason in plan.reason, (sql, plan.reason)
    orders, _ = _tables(tmp_path)
    orders.upsert(pa.table({"id": [1, 2, 3], "region": ["a", "b", "b"], "amount": [5, 9, 1]}))
    distinct = "SELECT region, count(DISTINCT amount) AS d FROM source GROUP BY region"
    with pytest.raises(PipelineConfigError, match="cannot be maintained incrementally: COUNT\\(DISTINCT amount\\)"):
        _pipeline(tmp_path, spark, distinct, "d").plan()
    full = _pipeline(tmp_path, spark, distinct, "d", refresh="full", sink={"primary_key": ["region"]})
    assert full.step().kind == "full"
    orders.upsert(pa.table({"id": [4], "region": ["a"], "amount": [6]}))
    assert full.step().kind == "full"
    _check(full, orders, ["region"])


def test_table_source_config_errors(tmp_path):
    def load(raw):
        return PipelineConfig.from_dict(raw, base_dir=tmp_path)
    with pytest.raises(PipelineConfigError, match="needs transform"):
        load({"source": {"table": "a"}, "sink": {"table": "b"}})
    with pytest.raises(PipelineConfigError, match="takes no Kafka settings"):
        load({"source": {"table": "a", "topic": "t"}, "transform": "SELECT * FROM source", "sink": {"table": "b"}})
    with pytest.raises(PipelineConfigError, match="refresh must be one of"):
        load({"source": {"table": "a"}, "transform": "SELECT * FROM source", "sink": {"table": "b"},
              "refresh": "sometimes"})
    with pytest.raises(PipelineConfigError, match="state.extremes.kept must be a whole number >= 1"):
        load({"source": {"table": "a"}, "transform": "SELECT * FROM source", "sink": {"table": "b"},
              "state": {"extremes": {"kept": 0}}})
    with pytest.raises(PipelineConfigError, match="the one setting is state.extremes.kept"):
        load({"source": {"table": "a"}, "transform": "SELECT * FROM source", "sink": {"table": "b"},
              "state": {"extremes": {"keep": 3}}})
    with pytest.raises(PipelineConfigError, match="own source"):
        load({"source": {"table": "a"}, "transform": "SELECT * FROM source", "sink": {"table": "a"}})
    cfg = load({"source": {"table": "a"}, "transform": "SELECT * FROM source", "sink": {"table": "b"},
                "trigger": {"interval": "500ms", "min_versions": 3}})
    assert (cfg.trigger.interval, cfg.trigger.min_versions, cfg.source.table) == (0.5, 3, str(tmp_path / "a"))
