"""The column-wise state merge (arrow_merge.py) against the state computed afresh from the rows it stands for.

Rounds of hard changes over many groups — rows moving between groups, amounts set to NULL, each group's min and
max rows deleted, groups emptied, inserts into new groups — each merged into the previous round's merged state
(a sink's), checked against ``arrow_states`` of the rows as they now are: counts and sums equal, a vanished
group deleted, and each min/max list exactly the truth's when it keeps every value, else a prefix of the truth's
sorted values (exactly every value up to its boundary) — unless the group is listed for recompute, whose state
the next round takes from the truth (as the step's refill does). No Spark: pyarrow only.
"""
from __future__ import annotations

import decimal
import random

import pyarrow as pa
import pytest

from tidelake.spark.arrow_merge import merge, replaced
from tidelake.spark.arrow_state import arrow_states
from tidelake.spark.transform_plan import plan_transform

ROWS = pa.schema([("id", pa.int64()), ("g", pa.string()), ("h", pa.int64()), ("amount", pa.int64()),
                  ("price", pa.decimal128(12, 2)), ("name", pa.string())])
QUERY = ("SELECT g, h, count(*) AS c, count(amount) AS ca, sum(amount) AS s, avg(price) AS ap, min(amount) AS lo, "
         "max(amount) AS hi, max(name) AS top, min(price) AS cheap FROM source GROUP BY g, h")
LISTS = {"__m4": "min", "__m5": "max", "__m6": "max", "__m7": "min"}


def _row(rng: random.Random, i: int, groups: str) -> dict:
    return {"id": i, "g": rng.choice(groups), "h": rng.choice([None, 1, 2]),
            "amount": rng.choice([None, *range(-20, 40)]),
            "price": rng.choice([None, decimal.Decimal(rng.randrange(-999, 9999)) / 100]),
            "name": rng.choice([None, "a", "b", "é", "Z", "zz", ""])}


def _table(rows: dict[int, dict]) -> pa.Table:
    return pa.Table.from_pylist(list(rows.values()), schema=ROWS)


def _by_group(state: pa.Table) -> dict[tuple, dict]:
    return {(r["__g0"], r["__g1"]): r for r in state.to_pylist()}


def _round(rng: random.Random, live: dict[int, dict], next_id: int, groups: str) -> tuple[dict, dict, int, tuple]:
    """(retracted rows, added rows, the next id, the group emptied) of one change; ``live`` updated in place."""
    retract, add = {}, {}
    by_group: dict[tuple, list[dict]] = {}
    for r in live.values():
        by_group.setdefault((r["g"], r["h"]), []).append(r)
    for rows in by_group.values():   # each group's min and max amount deleted
        valued = [r for r in rows if r["amount"] is not None]
        if valued:
            for r in (min(valued, key=lambda r: r["amount"]), max(valued, key=lambda r: r["amount"])):
                retract[r["id"]] = r
    emptied = rng.choice(sorted(by_group, key=repr))   # one group emptied
    retract.update({r["id"]: r for r in by_group[emptied]})
    for r in rng.sample(sorted(live.values(), key=lambda r: r["id"]), min(15, len(live))):   # moved, NULLs
        if r["id"] not in retract:
            retract[r["id"]] = r
            add[r["id"]] = {**r, "g": rng.choice(groups + "XY"), "amount": rng.choice([None, rng.randrange(-30, 50)])}
    for _ in range(12):   # inserts, some into new groups
        add[next_id] = _row(rng, next_id, groups + "XYZ")
        next_id += 1
    for r in add.values():   # (the emptied group stays empty)
        if (r["g"], r["h"]) == emptied:
            r["g"] = "Q"
    for i in retract:
        del live[i]
    live.update(add)
    return retract, add, next_id, emptied


@pytest.mark.parametrize("kept", [2, 3, 1000])
def test_the_merged_state_equals_the_state_of_the_rows(kept):
    rng = random.Random(kept)
    plan = plan_transform(QUERY, ["id"])
    live = {i: _row(rng, i, "abcdef") for i in range(300)}
    state = arrow_states(plan, _table(live), kept)
    next_id = 1000
    recomputed = 0
    for _ in range(6):
        retract, add, next_id, emptied = _round(rng, live, next_id, "abcdef")
        merged = merge(state, arrow_states(plan, _table(retract)), arrow_states(plan, _table(add)), plan, kept)
        truth = _by_group(arrow_states(plan, _table(live)))
        got = _by_group(merged.states)
        assert set(got) == set(truth)
        gone = {(r["__g0"], r["__g1"]) for r in merged.deleted.to_pylist()}
        assert emptied in gone and not gone & set(truth)
        again = {(r["__g0"], r["__g1"]) for r in merged.recompute.to_pylist()}
        for key, want in truth.items():
            have = got[key]
            assert {k: v for k, v in have.items() if k not in LISTS} == \
                   {k: v for k, v in want.items() if k not in LISTS}, key
            if key in again:
                continue
            for column in LISTS:
                values, full = have[column], want[column]
                assert len(values) <= kept and values == full[:len(values)], (key, column)
                assert bool(values) == bool(full), (key, column)   # (an emptied truncated list is recomputed)
                if kept >= 1000:
                    assert values == full
        recomputed += len(again)
        refill = arrow_states(plan, _table({i: r for i, r in live.items() if (r["g"], r["h"]) in again}), kept)
        state = replaced(merged.states, refill, plan)
    if kept == 1000:
        assert recomputed == 0
    else:
        assert recomputed > 0
