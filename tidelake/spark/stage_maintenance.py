"""How a table stage is maintained, in words (``tidelake pipeline validate``): the plan kind, the state it keeps,
and what makes it read the upstream's snapshot again (SPEC T13). No pyspark imports."""
from __future__ import annotations

from tidelake.spark.delta_join import join_shape
from tidelake.spark.transform_plan import TransformPlan


def _state(plan: TransformPlan, kept: int) -> str:
    parts = ["row count"]
    for a in plan.aggregates:
        call = f"{a.function}({a.argument if a.argument is not None else '*'})"
        if a.argument is None:
            continue   # count(*): the row count
        if a.function == "count":
            parts.append(f"{call}: non-null count")
        elif a.function in ("sum", "avg"):
            parts.append(f"{call}: sum and non-null count")
        else:
            side = "lowest" if a.function == "min" else "highest"
            parts.append(f"{call}: the {kept} {side} distinct values with their counts, and non-null count")
    return "per group: " + "; ".join(parts)


def _lookups(plan: TransformPlan) -> str:
    """What a change of a table read by name costs: "" where it is a maintained join (delta_join.py)."""
    if not plan.tables:
        return ""
    shape = join_shape(plan.sql, plan.tables)
    if shape.maintained:
        return ""
    return (f"a change of {', '.join(plan.tables)} (read by name) refreshes the whole result from the snapshots "
            f"once ({shape.reason or shape.wrong})")


def _joins(plan: TransformPlan) -> list[tuple[str, str]]:
    if not plan.tables or not join_shape(plan.sql, plan.tables).maintained:
        return []
    return [("joins", f"a change of {', '.join(plan.tables)} rejoins only the upstream rows whose join value it "
                      f"changed (retracted through its old version, added through its new one)")]


def describe_maintenance(plan: TransformPlan, refresh: str, kept: int) -> list[tuple[str, str]]:
    """(what, how) lines for a stage whose transform planned as ``plan``; ``kept``: ``state.extremes.kept``."""
    if refresh == "full" or not plan.incremental:
        why = plan.reason if not plan.incremental else "refresh: full is set (the transform could be incremental)"
        return [("maintained", "full refresh: every step re-runs the transform over the upstream's snapshot and "
                               "overwrites the sink"), ("why", why)]
    lookups = _lookups(plan)
    if plan.kind == "aggregate":
        extremes = any(a.function in ("min", "max") and a.argument is not None for a in plan.aggregates)
        recompute = [f"a group whose min/max list was truncated (more than {kept} distinct values) and is emptied "
                     f"by retractions refills it from the upstream's snapshot (that group only)"] if extremes else []
        recompute += [lookups] if lookups else []
        return [("maintained", "incremental aggregate: each step retracts the changed rows' before-images from "
                               "their groups' state and adds their after-images"),
                ("state", _state(plan, kept) + " (hidden columns of the sink)"),
                ("recomputes", "; ".join(recompute) or "never: every change is answered from the state"),
                *_joins(plan)]
    if plan.kind == "rows":
        return [("maintained", "incremental rows: each step re-runs the transform over the changed keys' "
                               "after-images; keys that leave the output are deleted"),
                ("state", "none (the sink is keyed by the upstream's key)"),
                ("recomputes", lookups or "never"), *_joins(plan)]
    return [("maintained", "incremental changes: each step runs the transform over the increment's change rows "
                           "and upserts (or, by _op, deletes) the result"),
            ("state", "none"), ("recomputes", "never")]
