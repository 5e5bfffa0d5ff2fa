"""Fast tests of the pipeline's pure parts: offset correction and planning, the gtoffset file, Debezium and JSON
parsing, the last change per key, config validation. No broker, no Spark."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tidelake.spark.changes import BadChangeEvent, check_primary_key, parse_changes
from tidelake.spark.value_formats import value_format
from tidelake.spark.offset_modes import Batch, correct_offsets
from tidelake.spark.offset_range import OffsetRange, offsets_to_json, parse_duration
from tidelake.spark.offset_stores import ClientOffsetFile, offsets_from_app_state
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError
from tidelake.spark.runner import Pipeline
from tidelake.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])


# ------------------------------------------------------------------------------------------- offsets
def test_parse_duration():
    assert parse_duration("2s") == 2.0
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1.5m") == 90.0
    assert parse_duration(3) == 3.0
    assert parse_duration("1500", default_unit="ms") == 1.5  # the Kafka source's batchInterval: bare ms
    assert parse_duration("1min") == 60.0
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
    """The runner plans with the Kafka source's planner: rate x interval per partition, up to ``once``'s stop."""
    config = {**BASE, "source": {**BASE["source"], "max_rate_per_partition": 10, "batch_interval": "2s",
                                 "topic": "t"}}
    pipeline = Pipeline(config)  # max 20 records per partition per batch
    start = {0: 0, 1: 10, 2: 5, 3: 8}
    latest = {0: 100, 1: 12, 2: 5, 3: 100}
    ranges = pipeline._plan(start, latest, stop_at={0: 100, 1: 12, 2: 5, 3: 15})
    assert ranges == [OffsetRange("t", 0, 0, 20), OffsetRange("t", 1, 10, 12), OffsetRange("t", 3, 8, 15)]
    assert Batch.after(0, start, ranges).end == {0: 20, 1: 12, 2: 5, 3: 15}
    uncapped = Pipeline({**BASE, "source": {k: v for k, v in config["source"].items()
                                            if k != "max_rate_per_partition"}})
    assert uncapped._plan(start, latest, stop_at=None)[0] == OffsetRange("t", 0, 0, 100)


def test_offsets_json_is_sparks_format():
    assert offsets_to_json({("orders", 1): 5, ("orders", 0): 3}) == {"orders": {"0": 3, "1": 5}}


def test_gtoffset_file_layout_and_atomic_rewrite(tmp_path):
    gt = ClientOffsetFile(tmp_path, "g1", "test3")
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
def _kafka_rows(*events) -> pa.RecordBatch:
    """(partition, offset, value) triples -> Kafka rows; a value is bytes, an object (as JSON) or None."""
    values = [e if e is None or isinstance(e, (bytes, str)) else json.dumps(e) for _, _, e in events]
    return pa.RecordBatch.from_pydict({
        "value": pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary()),
        "partition": pa.array([p for p, _, _ in events], pa.int32()),
        "offset": pa.array([o for _, o, _ in events], pa.int64())})


def _change(value, fmt: str = "debezium-json") -> tuple[str, dict] | None:
    """One value -> (op, row) or None when it carries no change."""
    rows = parse_changes(_kafka_rows((0, 0, value)), SCHEMA, value_format(fmt)).to_pylist()
    if not rows:
        return None
    (row,) = rows
    op = {0: "upsert", 1: "delete"}[row.pop("_op")]
    del row["_kafka_partition"], row["_kafka_offset"]
    return op, row


def test_debezium_ops_with_and_without_schema_wrapper():
    c = {"before": None, "after": {"id": 1, "amount": 5}, "op": "c", "ts_ms": 1}
    assert _change(json.dumps(c).encode()) == ("upsert", {"id": 1, "amount": 5})
    wrapped = {"schema": {"type": "struct"}, "payload": {**c, "op": "u", "after": {"id": 1, "amount": 6}}}
    assert _change(json.dumps(wrapped)) == ("upsert", {"id": 1, "amount": 6})
    assert _change({"op": "r", "after": {"id": 2}}) == ("upsert", {"id": 2, "amount": None})
    d = {"before": {"id": 1, "amount": 6}, "after": None, "op": "d", "ts_ms": 2}
    assert _change(json.dumps(d)) == ("delete", {"id": 1, "amount": 6})
    assert _change(None) is None  # tombstone after a delete
    assert _change(b"null") is None  # a JSON null is no change either
    with pytest.raises(BadChangeEvent, match="truncate"):  # not applied yet: never silently ignored
        _change({"op": "t", "before": None, "after": None})
    assert _change({"schema": {}, "payload": None}) is None
    for bad in (b"not json", {"op": "c", "after": None}, {"op": "d", "before": None}, {"op": "x", "after": {}},
                b"[1, 2]", b"\xff{}"):
        with pytest.raises(BadChangeEvent):
            _change(bad)


def test_plain_json_format():
    assert _change(b'{"id": 4, "amount": 1}', "json") == ("upsert", {"id": 4, "amount": 1})
    assert _change(b'{"id": 4,\n "amount": 1}\n', "json") == ("upsert", {"id": 4, "amount": 1})  # newlines
    assert _change(None, "json") is None
    with pytest.raises(BadChangeEvent):
        _change(b"3", "json")


def test_typed_columns_from_json_numbers_and_text():
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ms")), ("day", pa.date32()),
                        ("price", pa.decimal128(10, 2)), ("name", pa.string())])
    changes = parse_changes(_kafka_rows((0, 0, {"id": 1, "at": 1_700_000_000_000, "day": 19_000, "price": "1.25",
                                                "name": "a"})), schema, value_format("json"))
    import datetime as dt
    from decimal import Decimal
    assert changes.select(schema.names).to_pylist() == [
        {"id": 1, "at": dt.datetime(2023, 11, 14, 22, 13, 20), "day": dt.date(2022, 1, 8),
         "price": Decimal("1.25"), "name": "a"}]


def _events(*events) -> pa.Table:
    """(partition, offset, event) triples -> changes, in (partition, offset) order as a staging task sees them."""
    return parse_changes(_kafka_rows(*events), SCHEMA, value_format("debezium-json")).sort_by(
        [("_kafka_partition", "ascending"), ("_kafka_offset", "ascending")])


def test_last_event_per_key_in_offset_order_wins(tmp_path):
    """Changes are parsed in arrival order and staged with their op; the table keeps each key's last change."""
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
    assert changes.schema.field("_op").type == pa.int8()  # the table's encoding: 0 upsert, 1 delete
    table = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "2"})
    files = table.stage_files(changes.drop_columns(["_kafka_partition", "_kafka_offset"]), op="changes")
    assert sum(f.rows for f in files) == 4 and sum(f.deletes for f in files) == 1  # one change per key
    table.commit_staged(files)
    assert sorted(table.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "amount": 30}, {"id": 3, "amount": 99}, {"id": 4, "amount": None}]
    deleted = table.changes(start_version=0).filter(pa.compute.equal(pa.compute.field("_op"), "delete"))
    assert deleted.column("id").to_pylist() == [2]


def test_empty_and_missing_key():
    assert _events().num_rows == 0
    with pytest.raises(BadChangeEvent):
        check_primary_key(_events((0, 1, {"op": "c", "after": {"amount": 1}})), ["id"])


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


# ------------------------------------------------------------------------------------------- offset modes
class RecordingGroup:
    """Stands in for the broker's consumer group: records what the modes commit."""

    def __init__(self, committed=None):
        self.stored, self.commits, self.shown = committed, [], []

    def committed(self):
        return self.stored

    def commit(self, offsets):
        self.commits.append(dict(offsets))

    def show_progress(self, offsets):
        self.shown.append(dict(offsets))


def test_offset_modes_record_progress_where_the_paper_says(tmp_path):
    from tidelake.spark.offset_modes import AutoCommit, CommitAfterWrite, SimilarExactlyOnce

    first, second = Batch(0, [], {0: 10}), Batch(1, [], {0: 20})
    # auto: the log end is committed before the batch is read.
    group = RecordingGroup({0: 5})
    auto = AutoCommit(group)
    assert auto.stored() == {0: 5}
    auto.before_read({0: 40})
    auto.after_write(first)
    assert group.commits == [{0: 40}]
    # commit-after (commitAsync): queued after the write, sent with the next batch; a finished run flushes.
    group = RecordingGroup()
    after = CommitAfterWrite(group)
    after.after_write(first)
    assert group.commits == []
    after.before_read({0: 40})
    after.after_write(second)
    assert group.commits == [{0: 10}]
    after.finish()
    assert group.commits == [{0: 10}, {0: 20}]
    sync_group = RecordingGroup()
    CommitAfterWrite(sync_group, sync=True).after_write(first)
    assert sync_group.commits == [{0: 10}]
    # seo: the gtoffset file is where to start and is rewritten after the write; the group only shows lag.
    group = RecordingGroup({0: 99})
    seo = SimilarExactlyOnce(ClientOffsetFile(tmp_path, "g", "t"), group)
    assert seo.stored() is None  # no file: the group's offsets do not count
    seo.after_write(first)
    assert seo.stored() == {0: 10} and group.shown == [{0: 10}] and group.commits == []


def test_exactly_once_keeps_offsets_in_the_table_commit(tmp_path):
    from tidelake.spark.offset_modes import ExactlyOnce, PipelineFencedError

    table = Table.create(str(tmp_path / "t"), SCHEMA, ["id"])
    group = RecordingGroup()
    mode = ExactlyOnce(table, "app", "t", group)
    assert mode.stored() is None and mode.next_batch_id() == 0
    batch = Batch.after(0, {0: 0, 1: 5}, [OffsetRange("t", 0, 0, 10)])
    table.commit_staged([], **mode.table_commit(batch))
    mode.after_write(batch)
    assert mode.stored() == {0: 10, 1: 5} and mode.next_batch_id() == 1 and group.shown == [{0: 10, 1: 5}]
    # Another instance committed batch 1 first, with other offsets: this one must stop.
    table.commit_staged([], **mode.table_commit(Batch(1, [], {0: 12, 1: 5})))
    with pytest.raises(PipelineFencedError):
        mode.after_write(Batch(1, [], {0: 11, 1: 5}))
