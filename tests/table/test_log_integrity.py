"""A damaged table log is an error naming the file, never a silent rollback; `table check` finds every
kind of damage and `--repair` fixes only what loses nothing. Each test damages a copy of a real table."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

from tidelake.table import Table
from tidelake.table.check import check_table
from tidelake.table.errors import CorruptLog
from tidelake.table.log import LAST_CHECKPOINT, LOG_DIR, checkpoint_name, entry_name

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def rows(ids, v):
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Versions 0 (create) .. 6, a checkpoint at 5 (checkpoint.interval=5)."""
    path = str(tmp_path_factory.mktemp("pristine") / "t")
    t = Table.create(path, SCHEMA, ["id"], {"write.bucket.num": "2", "checkpoint.interval": "5",
                                            "clustering.auto": "false"},
                     maintenance="inline")
    for v in range(1, 7):
        t.upsert(rows(list(range(v * 10)), v))
    assert t.version == 6
    t.close()
    return path


@pytest.fixture
def table_copy(pristine, tmp_path):
    dst = str(tmp_path / "t")
    shutil.copytree(pristine, dst)
    return dst


def log_file(path, name):
    return os.path.join(path, LOG_DIR, name)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def assert_one_line_error(res, *fragments):
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_pristine_table_checks_clean(table_copy):
    report = check_table(table_copy)
    assert report.ok and report.version == 6 and report.entries == 7 and report.checkpoints == 1
    assert report.data_files > 0
    res = cli("table", "check", table_copy)
    assert res.returncode == 0 and res.stdout.strip().startswith("ok:"), res.stdout


def test_gap_in_the_log_is_an_error_not_an_older_table(table_copy):
    os.remove(log_file(table_copy, entry_name(2)))
    os.remove(log_file(table_copy, checkpoint_name(5)))
    os.remove(log_file(table_copy, LAST_CHECKPOINT))
    with pytest.raises(CorruptLog) as e:
        Table.open(table_copy)
    assert e.value.path.endswith(entry_name(2)) and "gap" in str(e.value)
    assert_one_line_error(cli("table", "scan", table_copy), entry_name(2), "gap")
    # no write on top of it
    assert_one_line_error(cli("table", "delete", table_copy, "--where", "id = 1"), entry_name(2))
    assert not os.path.exists(log_file(table_copy, entry_name(7)))
    report = check_table(table_copy)
    gap = [p for p in report.problems if p.path.endswith(entry_name(2))]
    assert gap and not gap[0].repairable
    assert check_table(table_copy, repair=True).problems == report.problems  # nothing "repaired" away


def test_gap_after_the_checkpoint(table_copy):
    # the last entry stays, one after the checkpoint is lost: still an error
    os.rename(log_file(table_copy, entry_name(6)), log_file(table_copy, entry_name(7)))
    with pytest.raises(CorruptLog, match="gap"):
        Table.open(table_copy)


def test_a_table_opened_before_the_damage_does_not_commit_into_the_gap(table_copy):
    t = Table.open(table_copy)
    assert t.version == 6
    # another process published 7 and 8; 7 is then lost
    other = Table.open(table_copy)
    other.upsert(rows([1], 70))
    other.upsert(rows([1], 80))
    os.remove(log_file(table_copy, entry_name(7)))
    with pytest.raises(CorruptLog, match="gap"):
        t.upsert(rows([2], 99))
    assert sorted(os.listdir(os.path.join(table_copy, LOG_DIR))).count(entry_name(9)) == 0


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_entry_is_named(table_copy, damage):
    path = log_file(table_copy, entry_name(6))
    data = open(path).read()
    with open(path, "w") as fh:
        fh.write({"truncated": data[: len(data) // 2], "garbage": "not json at all {", "empty": ""}[damage])
    with pytest.raises(CorruptLog) as e:
        Table.open(table_copy)
    assert e.value.path == path
    assert_one_line_error(cli("table", "scan", table_copy), entry_name(6))
    assert_one_line_error(cli("table", "history", table_copy), entry_name(6))
    report = check_table(table_copy)
    assert [p.path for p in report.problems] == [path] and not report.problems[0].repairable
    res = cli("table", "check", table_copy)
    assert res.returncode == 1 and "Traceback" not in res.stderr and entry_name(6) in res.stdout


def test_damaged_checkpoint_with_its_entries_is_rebuilt(table_copy):
    expected = Table.open(table_copy).scan().sort_by("id")
    cp = log_file(table_copy, checkpoint_name(5))
    with open(cp, "r+") as fh:
        fh.truncate(os.path.getsize(cp) // 2)
    with pytest.raises(CorruptLog) as e:
        Table.open(table_copy)
    assert e.value.path == cp
    report = check_table(table_copy)
    assert [p.path for p in report.problems] == [cp] and report.problems[0].repairable
    res = cli("table", "check", "--repair", table_copy)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "repaired: rebuilt" in res.stdout and res.stdout.strip().splitlines()[-1].startswith("ok:")
    t = Table.open(table_copy)
    assert t.version == 6 and t.scan().sort_by("id").equals(expected)


def test_truncated_checkpoint_after_purge_is_an_error_not_an_index_error(table_copy):
    t = Table.open(table_copy, maintenance="inline")
    t.purge()   # entries before 6 are deleted: the checkpoint at 6 is the only record of them
    t.close()
    cp = log_file(table_copy, checkpoint_name(6))
    assert os.path.exists(cp) and not os.path.exists(log_file(table_copy, entry_name(0)))
    with open(cp, "r+") as fh:
        fh.truncate(100)
    with pytest.raises(CorruptLog) as e:
        Table.open(table_copy)
    assert e.value.path == cp
    assert_one_line_error(cli("table", "scan", table_copy), checkpoint_name(6))
    report = check_table(table_copy, repair=True)
    assert not report.ok and not report.repaired
    assert [p.path for p in report.problems] == [cp] and not report.problems[0].repairable


def test_damaged_checkpoint_pointer(table_copy):
    with open(log_file(table_copy, LAST_CHECKPOINT), "w") as fh:
        fh.write("{oops")
    with pytest.raises(CorruptLog, match=LAST_CHECKPOINT):
        Table.open(table_copy)
    report = check_table(table_copy, repair=True)
    assert report.ok and report.repaired
    assert json.load(open(log_file(table_copy, LAST_CHECKPOINT))) == {"version": 5}
    assert Table.open(table_copy).version == 6


def test_missing_or_damaged_data_file(table_copy):
    t = Table.open(table_copy)
    live = sorted(fe.file.path for fe in t.metadata.live_files(t.version))
    os.remove(os.path.join(table_copy, live[0]))
    with open(os.path.join(table_copy, live[1]), "r+b") as fh:
        fh.truncate(20)
    report = check_table(table_copy, repair=True)
    by_path = {os.path.relpath(p.path, table_copy): p for p in report.problems}
    assert set(by_path) == {live[0], live[1]}
    assert "missing data file" in by_path[live[0]].problem
    assert "size" in by_path[live[1]].problem
    assert not any(p.repairable for p in report.problems) and not report.repaired
    res = cli("table", "check", "--json", table_copy)
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["ok"] is False and len(out["problems"]) == 2
    res = cli("table", "scan", table_copy)
    assert_one_line_error(res)
    assert live[0] in res.stderr or live[1] in res.stderr   # whichever the reader reached first


@pytest.fixture
def measured(tmp_path):
    """One data file of 20,000 rows: an LZ4 key column and random doubles (stored uncompressed)."""
    import numpy as np
    path = str(tmp_path / "m")
    t = Table.create(path, pa.schema([("id", pa.int64()), ("x", pa.float64())]), ["id"],
                     {"write.bucket.num": "1", "clustering.auto": "false"})
    t.upsert(pa.table({"id": np.arange(20_000), "x": np.random.default_rng(7).random(20_000)}))
    (f,) = [fe.file.path for fe in t.metadata.live_files(t.version)]
    return path, f


def overwrite_in_place(path: str, column: str, *, page_header: bool = False) -> None:
    """Flip 16 bytes in the middle of ``column``'s first row group (or in its first page's header): same
    size, same footer."""
    import pyarrow.parquet as pq
    meta = pq.read_metadata(path)
    chunk = meta.row_group(0).column(meta.schema.to_arrow_schema().get_field_index(column))
    at = chunk.data_page_offset + (2 if page_header else chunk.total_compressed_size // 2)
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(at)
        data = fh.read(16)
        fh.seek(at)
        fh.write(bytes(b ^ 0x5A for b in data))
    assert os.path.getsize(path) == size


@pytest.mark.parametrize("column", ["id", "x"])
def test_check_reads_every_page_not_only_the_footer(measured, column):
    """A same-size file with overwritten bytes passed `check` (footer and row count fine) while `scan`
    failed ("id": LZ4 data that no longer decompresses) or, worse, read other numbers ("x": plain doubles
    still decode). check decodes every page and verifies the CRC-32 the writer stored in each page header."""
    path, rel = measured
    before = Table.open(path).scan()
    overwrite_in_place(os.path.join(path, rel), column)
    report = check_table(path, repair=True)
    assert not report.ok and not report.repaired
    (problem,) = report.problems
    assert problem.path == os.path.join(path, rel) and not problem.repairable
    assert "row group 0 of 1 does not decode" in problem.problem and "\n" not in problem.problem, problem.problem
    if column == "x":
        assert "CRC" in problem.problem   # only the checksum can tell: the bytes decode
        assert not Table.open(path).scan().equals(before)
    res = cli("table", "check", path)
    assert res.returncode == 1
    assert f"problem: {os.path.join(path, rel)}: row group 0 of 1 does not decode" in res.stdout
    assert "--repair cannot mend this: restore this file from a backup" in res.stdout, res.stdout
    res = cli("table", "check", path, "--repair")
    assert res.returncode == 1 and "--repair cannot mend this" in res.stdout, res.stdout


@pytest.mark.parametrize("page_header", [False, True])
def test_a_damaged_page_is_one_line_from_scan(measured, page_header):
    """(pyarrow's message for a damaged page header spans two lines)"""
    path, rel = measured
    overwrite_in_place(os.path.join(path, rel), "id", page_header=page_header)
    assert not check_table(path).ok
    res = cli("table", "scan", path)
    assert_one_line_error(res, rel, "table check")
