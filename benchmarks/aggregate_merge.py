"""The many-groups aggregate step's state work alone, without Spark (issue 34): CPU time, so a shared machine's
load does not count.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/aggregate_merge.py

100,000 customers x 10 orders; a change of 5,000 retracted and 10,000 added orders (~14,000 groups touched): the
increment's state (``arrow_state.arrow_states``), its merge with the sink's state of those groups
(``arrow_merge.merge``) and the sink rows (``aggregate_state.sink_rows``), each the best of 3 by
``time.process_time``.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tidelake.spark.aggregate_state import hidden_fields, sink_rows, sink_state  # noqa: E402
from tidelake.spark.arrow_merge import merge  # noqa: E402
from tidelake.spark.arrow_state import arrow_states  # noqa: E402
from tidelake.spark.transform_plan import plan_transform  # noqa: E402

QUERY = ("SELECT customer, count(*) AS orders, sum(amount) AS revenue, min(amount) AS lo, max(amount) AS hi, "
         "avg(amount) AS mean FROM source GROUP BY customer")
OUTPUT = pa.schema([("customer", pa.int64()), ("orders", pa.int64()), ("revenue", pa.int64()), ("lo", pa.int64()),
                    ("hi", pa.int64()), ("mean", pa.float64())])


def main() -> None:
    rng = np.random.default_rng(1)
    plan = plan_transform(QUERY, ["id"])
    rows, customers = 1_000_000, 100_000
    customer = np.arange(rows) % customers
    orders = pa.table({"customer": customer, "amount": rng.integers(1, 10_000, rows)})
    before = orders.take(rng.choice(rows, 5_000, replace=False))
    after = pa.table({"customer": rng.integers(0, customers, 10_000), "amount": rng.integers(1, 10_000, 10_000)})
    touched = np.unique(np.concatenate([before.column("customer").to_numpy(), after.column("customer").to_numpy()]))
    schema = pa.schema(list(OUTPUT) + hidden_fields(plan, OUTPUT, {1: pa.int64(), 4: pa.int64()}))
    sink = sink_rows(arrow_states(plan, orders.filter(pa.array(np.isin(customer, touched))), 256), plan,
                     OUTPUT.names, schema)
    best: dict[str, float] = {}
    for _ in range(3):
        t0 = time.process_time()
        retract, add = arrow_states(plan, before), arrow_states(plan, after)
        t1 = time.process_time()
        merged = merge(sink_state(sink, plan, OUTPUT.names), retract, add, plan, 256)
        t2 = time.process_time()
        out = sink_rows(merged.states, plan, OUTPUT.names, schema)
        t3 = time.process_time()
        for name, seconds in (("state", t1 - t0), ("merge", t2 - t1), ("sink_rows", t3 - t2), ("total", t3 - t0)):
            best[name] = min(best.get(name, float("inf")), seconds)
    print(f"{out.num_rows:,} groups: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in best.items()))


if __name__ == "__main__":
    main()
