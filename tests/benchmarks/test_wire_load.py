"""The broker benchmark's lean load generator (benchmarks/wire_load.py) moves what it claims: what it
reports as produced is what a real client reads back, and what it reports as consumed is what is there.
Run against tidelake and Tansu, as the benchmark does."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.clients import consume_confluent, create_topics, running_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import wire_load  # noqa: E402


@pytest.mark.parametrize("kind", ["tidelake", "tansu"])
@pytest.mark.parametrize("size,acks", [(100, 1), (10 * 1024, -1)])
def test_wire_load_counts_match_a_real_consumer(tmp_path, kind, size, acks):
    per_batch = wire_load.records_per_batch(size)
    with running_broker(kind, tmp_path / "data") as bootstrap:
        create_topics(bootstrap, ["wl"], 2)
        r = wire_load.produce(bootstrap, "wl", 1, acks, size, 2 * per_batch + 1)
        # rounded up to whole batches: three of them
        assert r == {"count": 3 * per_batch, "bytes": 3 * per_batch * size, "errors": 0}
        got = consume_confluent(bootstrap, {("wl", 1): 3 * per_batch})
        recs = got[("wl", 1)]
        assert len(recs) == 3 * per_batch
        assert [x.offset for x in recs] == list(range(3 * per_batch))
        assert {len(x.value) for x in recs} == {size} and len({x.value for x in recs}) == 1
        assert ("wl", 0) not in got
        c = wire_load.consume(bootstrap, "wl", 1, 3 * per_batch, size)
        assert c == {"count": 3 * per_batch, "bytes": 3 * per_batch * size, "errors": 0}


def test_wire_load_reports_partition_errors(tmp_path):
    """A produce to a partition that does not exist is counted as an error, not as data."""
    with running_broker("tidelake", tmp_path / "data") as bootstrap:
        create_topics(bootstrap, ["wl"], 1)
        r = wire_load.produce(bootstrap, "wl", 5, 1, 100, 10)
        assert r["errors"] == 1 and r["count"] == 0
