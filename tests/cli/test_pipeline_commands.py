"""`tidelake pipeline status|reset` against a real broker, without Spark: the offsets an exactly-once
pipeline keeps in its table (and a seo pipeline in its gtoffset file, an auto pipeline in its group) are
read by `status` and moved by `reset --execute`, where the pipeline resumes from."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from clients import Rec, create_topics, produce_confluent, running_broker
from tidelake.cli.main import cli
from tidelake.spark.offset_stores import ClientOffsetFile, offsets_from_app_state
from tidelake.table import Table

APP = "pipeline:orders-g:orders"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("cli-pipeline")) as bs:
        create_topics(bs, ["orders"], 2)
        produce_confluent(bs, "orders", [Rec(p, None, b"{}", 1_700_000_000_000 + i * 1000)
                                         for p in range(2) for i in range(6)])
        yield bs


def config(tmp_path: Path, bootstrap: str, mode: str) -> Path:
    path = tmp_path / f"{mode}.yaml"
    path.write_text(f"source: {{bootstrap_servers: '{bootstrap}', topic: orders, group_id: orders-g}}\n"
                    f"offsets: {mode}\nseo_dir: ./gt\n"
                    "sink: {table: ./t, format: json, primary_key: [id], schema: 'id long'}\n")
    return path


def tl(*args, ok: bool = True):
    result = CliRunner().invoke(cli, ["pipeline", *map(str, args)])
    assert (result.exit_code == 0) == ok, result.output
    return result


def test_exactly_once_reset_moves_the_table_offsets(bootstrap: str, tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, "exactly-once")
    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), ["id"])
    nothing = tl("reset", cfg, "--to-earliest", "--execute", ok=False)
    assert "holds no offsets" in nothing.stderr
    table.commit_staged([], app_id=APP, batch_id=4, app_extra={"offsets": {"0": 5, "1": 6}, "topic": "orders"})

    status = json.loads(tl("status", cfg, "--json").stdout)
    assert [(p["partition"], p["table_offset"], p["log_end_offset"], p["lag"]) for p in status["partitions"]] == \
        [(0, 5, 6, 1), (1, 6, 6, 0)]

    plan = json.loads(tl("reset", cfg, "--to-earliest", "--json").stdout)
    assert plan["store"] == "table" and not plan["executed"]
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan["offsets"]] == [(0, 5, 0), (1, 6, 0)]
    table.refresh()
    assert offsets_from_app_state(table.app_state(APP)) == {0: 5, 1: 6}  # a dry run changes nothing

    tl("reset", cfg, "--to-offset", "2", "--execute")
    table.refresh()  # (the command commits through a table object of its own)
    state = table.app_state(APP)
    assert offsets_from_app_state(state) == {0: 2, 1: 2} and state["batch_id"] == 5  # the next batch id
    tl("reset", cfg, "--shift-by", "-1", "--partition", "1", "--execute")
    table.refresh()
    assert offsets_from_app_state(table.app_state(APP)) == {0: 2, 1: 1}
    tl("reset", cfg, "--to-datetime", "1700000004000", "--execute")
    table.refresh()
    assert offsets_from_app_state(table.app_state(APP)) == {0: 4, 1: 4}
    missing = tl("reset", cfg, "--to-earliest", "--partition", "9", ok=False)
    assert "no partition 9" in missing.stderr


def test_seo_reset_writes_the_gtoffset_file(bootstrap: str, tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, "seo")
    gt = ClientOffsetFile(tmp_path / "gt", "orders-g", "orders")
    gt.write({0: 6, 1: 6})
    tl("reset", cfg, "--shift-by", "-2", "--execute")
    assert gt.read() == {0: 4, 1: 4}
    assert [p["gtoffset"] for p in json.loads(tl("status", cfg, "--json").stdout)["partitions"]] == [4, 4]


def test_auto_reset_commits_the_group_offsets(bootstrap: str, tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, "auto")
    tl("reset", cfg, "--to-latest", "--execute")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "orders-g"})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition("orders", p) for p in range(2)], timeout=10)] == [6, 6]
    finally:
        c.close()
    plain = tl("status", cfg).stdout.splitlines()
    assert plain[0] == "pipeline:orders-g:orders (auto)" and plain[1].split()[0] == "PARTITION"
    assert [line.split()[-1] for line in plain[2:]] == ["0", "0"]  # LAG
