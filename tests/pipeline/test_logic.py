"""Fast tests of the pipeline's pure parts: offset correction and planning, the gtoffset file, Debezium folding,
config validation. No broker, no Spark."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tidelake.spark.debezium import (BadChangeEvent, RowChange, changes_to_arrow, fold_last_per_key,
                                     parse_debezium, parse_json)
from tidelake.spark.offsets import (GtoffsetFile, OffsetRange, advance, correct_offsets, offsets_from_app_state,
                                    offsets_json, parse_duration, plan_ranges)
from tidelake.spark.runner import PipelineConfig, PipelineConfigError

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])


# ------------------------------------------------------------------------------------------- offsets
def test_parse_duration():
    assert parse_duration("2s") == 2.0
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1.5m") == 90.0
    assert parse_duration(3) == 3.0
    with pytest.raises(ValueError):
        parse_duration("two seconds")


def test_correct_offsets_no_file_starts_at_earliest():
    start, corrections = correct_offsets(None, {0: 5, 1: 0}, {0: 50, 1: 10})
    assert start == {0: 5, 1: 0}
    assert {c.kind for c in corrections} == {"none-stored"}


def test_correct_offsets_low_and_high_out_of_range():
    # The paper's step (3): A below M -> M (low), A above N -> N (high), inside [M, N] unchanged.
    stored = {0: 3, 1: 70, 2: 20, 3: 40}
    earliest = {0: 10, 1: 0, 2: 0, 3: 40}
    latest = {0: 50, 1: 60, 2: 30, 3: 40}
    start, corrections = correct_offsets(stored, earliest, latest)
    assert start == {0: 10, 1: 60, 2: 20, 3: 40}
    assert [(c.partition, c.stored, c.corrected, c.kind) for c in corrections] == [
        (0, 3, 10, "low"), (1, 70, 60, "high")]


def test_correct_offsets_new_partition_starts_at_earliest():
    start, corrections = correct_offsets({0: 7}, {0: 0, 1: 2}, {0: 9, 1: 4})
    assert start == {0: 7, 1: 2}
    assert [(c.partition, c.kind) for c in corrections] == [(1, "none-stored")]


def test_plan_ranges_caps_by_rate_latest_and_stop():
    start = {0: 0, 1: 10, 2: 5, 3: 8}
    latest = {0: 100, 1: 12, 2: 5, 3: 100}
    ranges = plan_ranges("t", start, latest, max_records_per_partition=20, stop_at={3: 15})
    assert ranges == [OffsetRange("t", 0, 0, 20), OffsetRange("t", 1, 10, 12), OffsetRange("t", 3, 8, 15)]
    assert advance(start, ranges) == {0: 20, 1: 12, 2: 5, 3: 15}
    assert plan_ranges("t", start, latest)[0] == OffsetRange("t", 0, 0, 100)


def test_offsets_json_is_sparks_format():
    assert json.loads(offsets_json("orders", {1: 5, 0: 3})) == {"orders": {"0": 3, "1": 5}}


def test_gtoffset_file_layout_and_atomic_rewrite(tmp_path):
    gt = GtoffsetFile(tmp_path, "g1", "test3")
    assert gt.path == tmp_path / "g1" / "test3" / "gtoffset"
    assert gt.read() is None
    gt.write({0: 10, 3: 7, 1: 2})
    assert gt.read() == {0: 10, 1: 2, 3: 7}
    gt.write({0: 11, 1: 2, 3: 7})
    assert gt.read() == {0: 11, 1: 2, 3: 7}
    assert os.listdir(gt.path.parent) == ["gtoffset"]  # no temporary file left behind
    assert json.loads(gt.path.read_text())["group_id"] == "g1"


def test_offsets_from_app_state():
    assert offsets_from_app_state(None) is None
    assert offsets_from_app_state({"batch_id": 3, "extra": {"offsets": {"0": 5, "2": 9}}}) == {0: 5, 2: 9}


# ------------------------------------------------------------------------------------------- debezium
def test_debezium_ops_with_and_without_schema_wrapper():
    c = {"before": None, "after": {"id": 1, "amount": 5}, "op": "c", "ts_ms": 1}
    assert parse_debezium(json.dumps(c).encode()) == RowChange("upsert", {"id": 1, "amount": 5})
    wrapped = {"schema": {"type": "struct"}, "payload": {**c, "op": "u", "after": {"id": 1, "amount": 6}}}
    assert parse_debezium(json.dumps(wrapped)) == RowChange("upsert", {"id": 1, "amount": 6})
    assert parse_debezium({"op": "r", "after": {"id": 2}}) == RowChange("upsert", {"id": 2})
    d = {"before": {"id": 1, "amount": 6}, "after": None, "op": "d", "ts_ms": 2}
    assert parse_debezium(json.dumps(d)) == RowChange("delete", {"id": 1, "amount": 6})
    assert parse_debezium(None) is None  # tombstone after a delete
    assert parse_debezium({"op": "t", "before": None, "after": None}) is None  # truncate
    assert parse_debezium({"schema": {}, "payload": None}) is None
    for bad in (b"not json", {"op": "c", "after": None}, {"op": "d", "before": None}, {"op": "x", "after": {}},
                b"[1, 2]"):
        with pytest.raises(BadChangeEvent):
            parse_debezium(bad)


def test_plain_json_format():
    assert parse_json(b'{"id": 4, "amount": 1}') == RowChange("upsert", {"id": 4, "amount": 1})
    assert parse_json(None) is None
    with pytest.raises(BadChangeEvent):
        parse_json(b"3")


def _events(*events):
    """(partition, offset, event) triples -> changes table."""
    return changes_to_arrow([json.dumps(e) if e is not None else None for _, _, e in events],
                            [p for p, _, _ in events], [o for _, o, _ in events], SCHEMA)


def test_fold_last_event_per_key_in_offset_order_wins():
    changes = _events(
        (0, 12, {"op": "u", "before": {"id": 1}, "after": {"id": 1, "amount": 30}}),  # out of input order
        (0, 10, {"op": "c", "after": {"id": 1, "amount": 10}}),
        (0, 11, {"op": "u", "after": {"id": 1, "amount": 20}}),
        (1, 3, {"op": "c", "after": {"id": 2, "amount": 1}}),
        (1, 4, {"op": "d", "before": {"id": 2, "amount": 1}}),
        (1, 5, None),  # tombstone
        (1, 6, {"op": "d", "before": {"id": 3, "amount": 0}}),
        (1, 7, {"op": "c", "after": {"id": 3, "amount": 99, "extra": "dropped"}}),
        (0, 13, {"op": "r", "after": {"id": 4}}),
    )
    assert changes.num_rows == 8
    upserts, deletes = fold_last_per_key(changes, ["id"])
    assert upserts.schema == SCHEMA and deletes.schema == SCHEMA
    assert sorted(upserts.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "amount": 30}, {"id": 3, "amount": 99}, {"id": 4, "amount": None}]
    assert deletes.to_pylist() == [{"id": 2, "amount": 1}]


def test_fold_empty_and_missing_key():
    upserts, deletes = fold_last_per_key(_events(), ["id"])
    assert upserts.num_rows == deletes.num_rows == 0
    with pytest.raises(BadChangeEvent):
        fold_last_per_key(_events((0, 1, {"op": "c", "after": {"amount": 1}})), ["id"])


# ------------------------------------------------------------------------------------------- config
BASE = {"source": {"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "group_id": "g",
                   "max_rate_per_partition": 50, "batch_interval": "2s"},
        "offsets": "exactly-once",
        "sink": {"table": "out", "format": "debezium-json", "primary_key": ["id"],
                 "schema": "id long, amount long", "buckets": 4}}


def test_config_from_dict(tmp_path):
    cfg = PipelineConfig.from_dict(BASE, base_dir=tmp_path)
    assert cfg.source.batch_interval == 2.0
    assert cfg.source.max_records_per_partition == 100  # rate x interval
    assert cfg.sink.table == str(tmp_path / "out")
    assert cfg.app_id == "pipeline:g:t"


@pytest.mark.parametrize("change, message", [
    ({"offsets": "sometimes"}, "offsets must be"),
    ({"offsets": "seo"}, "seo_dir"),
    ({"source": {"topic": "t", "group_id": "g"}}, "bootstrap_servers"),
    ({"sink": {"table": "x", "format": "avro", "primary_key": ["id"]}}, "sink.format"),
    ({"sink": {"table": "x", "format": "json"}}, "primary_key"),
    ({"commit": "later"}, "commit must be"),
])
def test_config_errors(change, message):
    with pytest.raises(PipelineConfigError, match=message):
        PipelineConfig.from_dict({**BASE, **change})


def test_cli_example_config_is_valid(tmp_path):
    import yaml
    from click.testing import CliRunner

    from tidelake.cli.main import cli

    result = CliRunner().invoke(cli, ["pipeline", "example"])
    assert result.exit_code == 0
    cfg = PipelineConfig.from_dict(yaml.safe_load(result.output), base_dir=tmp_path)
    assert cfg.offsets == "exactly-once" and cfg.source.max_records_per_partition == 2000
    assert cfg.sink.primary_key == ["id"] and cfg.sink.table == str(tmp_path / "orders-table")
