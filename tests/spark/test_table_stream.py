"""``spark.readStream.format("tidelake")``: a table's change feed as a Spark stream, on local Spark."""
from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_fixtures import spark  # noqa: F401  (fixture)

from tidelake.spark.table_stream import admit_versions
from tidelake.table import Table, VersionNotFound

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.int64())])
HOUR = 3_600_000


def make(path, clock=None, **props) -> Table:
    p = {"write.bucket.num": "4", "clustering.auto": "false", "maintenance.mode": "inline"}
    p.update(props)
    return Table.create(path, SCHEMA, ["id"], p, clock=clock)


def data(ids, amount, name="n"):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids],
                     "amount": pa.array([amount] * len(ids), pa.int64())})


def run_available_now(spark, path, out, checkpoint, **options):  # noqa: F811
    """One Trigger.AvailableNow run of the stream into a Parquet sink; returns the rows each batch read."""
    reader = spark.readStream.format("tidelake")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (reader.load(path).writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the stream did not finish"
    finally:
        query.stop()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def sink_rows(out) -> list[tuple]:
    t = pq.read_table(out)
    return sorted((r["_commit_version"], r["id"], r["_op"], r["amount"]) for r in t.to_pylist())


def test_stream_with_before_images_batches_by_version_and_resumes_from_its_checkpoint(spark, tmp_path):  # noqa: F811
    path, out, checkpoint = str(tmp_path / "t"), str(tmp_path / "out"), str(tmp_path / "cp")
    t = make(path)
    v1 = t.upsert(data([1, 2, 3], 10))
    v2 = t.upsert(data([2, 4], 20))
    v3 = t.delete([3])
    t.compact()                                   # a version with no changes
    per_batch = run_available_now(spark, path, out, checkpoint, startingVersion=0, readChangeFeed="true",
                                  maxVersionsPerTrigger=1)
    assert per_batch == [3, 3, 1]                 # one version per batch (the compaction's reads nothing)
    assert sink_rows(out) == sorted([(v1, 1, "insert", 10), (v1, 2, "insert", 10), (v1, 3, "insert", 10),
                                     (v2, 2, "update_preimage", 10), (v2, 2, "update_postimage", 20),
                                     (v2, 4, "insert", 20), (v3, 3, "delete", 10)])
    schema = pq.read_table(out).schema
    assert schema.names == ["id", "name", "amount", "_op", "_commit_version", "_commit_time"]
    assert pa.types.is_timestamp(schema.field("_commit_time").type)

    # a restart goes on after the checkpointed version: only the new changes
    v5 = t.upsert(data([4, 5], 30))
    v6 = t.delete([1, 99])                        # 99 never existed: no row
    run_available_now(spark, path, out, checkpoint, startingVersion=0, readChangeFeed="true",
                      maxVersionsPerTrigger=1)
    assert [r for r in sink_rows(out) if r[0] > v3] == sorted([
        (v5, 4, "update_preimage", 20), (v5, 4, "update_postimage", 30), (v5, 5, "insert", 30),
        (v6, 1, "delete", 10)])


def test_row_cap_admits_whole_versions(spark, tmp_path):  # noqa: F811
    path = str(tmp_path / "t")
    t = make(path)
    for i in range(4):
        t.upsert(data(list(range(i * 10, i * 10 + 10)), i))   # 10 changes per version
    per_batch = run_available_now(spark, path, str(tmp_path / "out"), str(tmp_path / "cp"), startingVersion=1,
                                  maxRowsPerTrigger=25)
    assert per_batch == [20, 10]                  # versions 2+3, then 4: never a version split
    assert {r[2] for r in sink_rows(str(tmp_path / "out"))} == {"upsert"}


def test_stream_from_an_expired_version_fails_naming_the_retention_property(spark, tmp_path):  # noqa: F811
    path, out, checkpoint = str(tmp_path / "t"), str(tmp_path / "out"), str(tmp_path / "cp")
    past = int(time.time() * 1000) - 10 * HOUR
    old = make(path, clock=lambda: past, **{"retention.auto": "false"})   # (24 hours: all retained)
    old.upsert(data([1], 1))
    v2 = old.upsert(data([1], 2))
    options = dict(startingVersion=0, readChangeFeed="true")
    assert run_available_now(spark, path, out, checkpoint, **options) == [3]   # insert, preimage, postimage
    t = Table.open(path)
    t.set_properties({"acid.data.retain.hours": "1"})
    v3 = t.upsert(data([1], 3))
    t.expire()
    assert t.history()[0]["version"] == v2            # versions 0 and 1 are gone
    # a restart goes on from its checkpoint (version 2, still readable): its startingVersion no longer matters
    assert run_available_now(spark, path, out, checkpoint, **options) == [2]
    assert [r[:3] for r in sink_rows(out) if r[0] == v3] == [(v3, 1, "update_postimage"), (v3, 1, "update_preimage")]
    # a new query from version 0 cannot read version 1
    with pytest.raises(Exception, match=r"acid\.data\.retain\.hours") as failure:
        run_available_now(spark, path, str(tmp_path / "out2"), str(tmp_path / "cp2"), **options)
    assert "cannot go on after version 0" in str(failure.value)


def test_batch_read_change_feed_and_stream_option_errors(spark, tmp_path):  # noqa: F811
    path = str(tmp_path / "t")
    t = make(path)
    v1 = t.upsert(data([1, 2], 1))
    v2 = t.upsert(data([2, 3], 2))
    df = (spark.read.format("tidelake").option("startingVersion", v1).option("endingVersion", v2)
          .option("readChangeFeed", "true").load(path))
    assert sorted((r.id, r._op, r.amount) for r in df.collect()) == [
        (2, "update_postimage", 2), (2, "update_preimage", 1), (3, "insert", 2)]
    assert spark.read.format("tidelake").option("startingVersion", "latest").load(path).count() == 0
    # (the other option errors: test_starting_position_of_a_new_query, without Spark)
    query = (spark.readStream.format("tidelake").load(path).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        with pytest.raises(Exception, match="give option startingVersion"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_admission_takes_whole_versions_at_least_one():
    rows = {2: 10, 3: 10, 4: 50, 6: 5}           # version 5 wrote nothing (e.g. a compaction)
    assert admit_versions(1, 6, rows, None, None) == 6
    assert admit_versions(1, 6, rows, 25, None) == 3
    assert admit_versions(3, 6, rows, 25, None) == 4      # one version over the cap still goes alone
    assert admit_versions(4, 6, rows, 25, None) == 6      # an empty version costs nothing
    assert admit_versions(1, 6, rows, None, 2) == 3
    assert admit_versions(6, 6, rows, 1, 1) == 6


def test_starting_position_of_a_new_query(tmp_path):
    from tidelake.spark.table_stream import StreamOptions
    t = make(str(tmp_path / "t"))
    t.upsert(data([1], 1))
    t1 = t.latest_timestamp()
    v2 = t.upsert(data([2], 2))
    assert StreamOptions.parse({"startingVersion": "1"}).starting_version(t) == 1
    assert StreamOptions.parse({"startingVersion": "latest"}).starting_version(t) == v2
    with pytest.raises(VersionNotFound, match="startingVersion 3 does not exist"):
        StreamOptions.parse({"startingVersion": "3"}).starting_version(t)
    # a time: the changes committed after it, as the batch read's startingTimestamp
    assert StreamOptions.parse({"startingTimestamp": str(t1)}).starting_version(t) == 1
    assert StreamOptions.parse({"startingTimestamp": str(t1 - 1)}).starting_version(t) == 0
    for bad, message in [({"startingVersion": "-1"}, "a version"), ({"startingVersion": "x"}, "a version"),
                         ({"startingVersion": "1", "startingTimestamp": "5"}, "not both"),
                         ({"startingVersion": "1", "endingVersion": "2"}, "no end"),
                         ({"startingVersion": "1", "readChangeFeed": "yes"}, "true or false"),
                         ({"startingVersion": "1", "maxVersionsPerTrigger": "many"}, "positive integer")]:
        with pytest.raises(ValueError, match=message):
            StreamOptions.parse(bad)
