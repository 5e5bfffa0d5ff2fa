"""Immutable metadata: typed actions and entries, replay returning new objects, the log's JSON format."""
from __future__ import annotations

import json
import os

import pyarrow as pa

from tidelake.table import DataFile, Table
from tidelake.table.metadata import (AddFile, ChangeSchema, LogEntry, RemoveFile, SetAppState, SetProperties,
                                     TableMetadata)

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64())])


def f(path, bucket=0, version=None):
    return DataFile(path=path, kind="delta", bucket=bucket, level=0, rows=1, bytes=10,
                    min_version=version, max_version=version)


def created() -> TableMetadata:
    return TableMetadata().apply(LogEntry(0, 1000, "create", -1, (ChangeSchema(SCHEMA), SetProperties({"write.bucket.num": "2"})),
                                          primary_key=("id",)))


def test_apply_returns_new_metadata_and_leaves_the_old_untouched():
    m0 = created()
    m1 = m0.apply(LogEntry(1, 2000, "upsert", 0, (AddFile(f("a", 0, 1)), SetAppState("app", 7, {"o": 1}))))
    m2 = m1.apply(LogEntry(2, 3000, "overwrite", 1, (RemoveFile("a"), AddFile(f("b", 1, 2)))))
    assert (m0.version, m1.version, m2.version) == (0, 1, 2)
    assert m0.files == {} and m1.files["a"].live and not m2.files["a"].live
    assert m1.files["a"].intervals == ((1, None),) and m2.files["a"].intervals == ((1, 2),)
    assert [fe.file.path for fe in m2.live_files(2)] == ["b"] and [fe.file.path for fe in m2.live_files(1)] == ["a"]
    assert m1.apps["app"][-1].batch_id == 7 and 2 not in m1.commits
    assert m2.version_at_or_before(2999) == 1 and m2.version_at_or_before(999) is None
    expired, dead = m2.expire(2)
    assert dead == ["a"] and "a" in m2.files and "a" not in expired.files and min(expired.commits) == 2


def test_entries_round_trip_through_the_log_format(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id"], {"write.bucket.num": "2", "clustering.auto": "false"})
    files = t.stage_files(pa.table({"id": [1, 2], "amount": [3, 4]}))
    v = t.commit_staged(files, app_id="q", batch_id=0, app_extra={"offsets": {"0": 5}})
    with open(os.path.join(t.path, "_tidelake_log", f"{v:020d}.json")) as fh:
        raw = json.load(fh)
    # the on-disk format: plain JSON keys, L0 files stamped with their commit's version
    assert raw["operation"] == "upsert" and raw["app"] == {"app_id": "q", "batch_id": 0, "extra": {"offsets": {"0": 5}}}
    assert {a["min_version"] for a in raw["add"]} == {v} and raw["remove"] == [] and raw["rows_added"] == 2
    e = LogEntry.from_json(raw)
    assert e.to_json() == raw and e.of(SetAppState) == [SetAppState("q", 0, {"offsets": {"0": 5}})]
    assert all(isinstance(a, AddFile) and a.file.min_version == v for a in e.of(AddFile))
    md = t.metadata
    assert TableMetadata.from_json(json.loads(json.dumps(md.to_json()))) == md   # checkpoint round trip


def test_pinned_metadata_holds_one_version():
    m = created()
    m = m.apply(LogEntry(1, 2000, "upsert", 0, (AddFile(f("a", 0, 1)),)))
    m = m.apply(LogEntry(2, 3000, "overwrite", 1, (RemoveFile("a"), AddFile(f("b", 1, 2)))))
    p = m.pinned(1)
    assert set(p.files) == {"a"} and p.version == 1 and p.schema_at(1) == SCHEMA and p.bucket_num == 2
