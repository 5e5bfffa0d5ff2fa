"""A join aggregate's input rows computed with pyarrow instead of a Spark job (SPEC T13, issue 34).

For ``SELECT <keys>, <aggregates> FROM source o [LEFT] JOIN dim d ON o.x = d.y [...] GROUP BY <keys>`` with no
WHERE, each ON clause one equality of bare columns of the same integer, string or date type, and every group key
and aggregate argument a bare column of either side: the signed upstream rows (delta_join.py) are hash-joined
with each dimension at the version the term names, which gives exactly Spark's join — NULL join values match
nothing (an inner join drops the row, a left join keeps it NULL-joined) and several matching rows each give a
row. The result are the aggregation's input rows (``__g<j>``, ``__a<i>``, ``__sign``) for
``arrow_state.input_states``. Anything else runs on Spark (the state query), the reference.

The dimensions are read with ``Table.scan`` and kept in memory by (path, version, columns): a step that does
not change them reads none.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import sqlglot
from sqlglot import exp

from tidelake.spark.arrow_state import exact_argument, exact_group_key
from tidelake.spark.delta_join import JoinShape, SignedRows
from tidelake.spark.transform_plan import SIGN_COLUMN, TransformPlan
from tidelake.table import Table

_JOIN_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_date)


@dataclass(frozen=True)
class ArrowJoin:
    """Where each input column comes from: (alias, column); the source's alias is ``shape.source_alias``."""
    shape: JoinShape
    columns: dict[str, tuple[str, str]]  # __g<j> / __a<i> -> (alias, column)


def _resolve(sql: str, schemas: dict[str, pa.Schema]) -> tuple[str, str] | None:
    node = sqlglot.parse_one(sql, read="spark")
    if not isinstance(node, exp.Column):
        return None
    if node.table:
        alias = node.table.lower()
        return (alias, node.name) if alias in schemas and node.name in schemas[alias].names else None
    holders = [a for a, s in schemas.items() if node.name in s.names]
    return (holders[0], node.name) if len(holders) == 1 else None


def arrow_join(plan: TransformPlan, shape: JoinShape, source: pa.Schema, tables: dict[str, pa.Schema]
               ) -> ArrowJoin | None:
    """The Arrow form of this join aggregate, or None where only Spark computes it exactly. ``tables``: each
    table read by name's schema, by name."""
    if plan.kind != "aggregate" or not shape.maintained or not shape.lookups or plan.group_columns:
        return None
    tree = sqlglot.parse_one(plan.sql, read="spark")
    if tree.args.get("where") or len(tree.args.get("joins") or []) != len(shape.lookups):
        return None
    schemas = {shape.source_alias: source, **{lk.alias: tables[lk.name] for lk in shape.lookups}}
    for lk in shape.lookups:
        s, d = source.field(lk.source_column).type, tables[lk.name].field(lk.column).type
        if not lk.only_equality or s != d or not any(is_(s) for is_ in _JOIN_TYPES):
            return None
    columns = {}
    for j, g in enumerate(plan.group_sql):
        where = _resolve(g, schemas)
        if where is None or not exact_group_key(schemas[where[0]].field(where[1]).type):
            return None
        columns[f"__g{j}"] = where
    for i, a in enumerate(plan.aggregates):
        if a.argument is None:
            continue
        where = _resolve(a.argument, schemas)
        if where is None or not exact_argument(a.function, schemas[where[0]].field(where[1]).type):
            return None
        columns[f"__a{i}"] = where
    return ArrowJoin(shape, columns)


class DimensionCache:
    """Tables read by name, in memory by (path, version, columns); only the newest version of a path is kept."""

    def __init__(self):
        self._tables: dict[str, tuple[tuple[int, tuple[str, ...]], pa.Table]] = {}

    def get(self, table: Table, version: int, columns: list[str]) -> pa.Table:
        path = table.storage.url
        wanted = (version, tuple(columns))
        held = self._tables.get(path)
        if held is not None and held[0] == wanted:
            return held[1]
        data = table.scan(version=version, columns=columns).combine_chunks()
        if held is None or held[0][0] <= version:
            self._tables[path] = (wanted, data)
        return data


def input_rows(join: ArrowJoin, inputs: list[SignedRows], tables: dict[str, Table], cache: DimensionCache
               ) -> pa.Table:
    """The aggregation's input rows (``__g<j>``, ``__a<i>``, ``__sign``) of every signed term, joined."""
    shape = join.shape
    used = {lk.alias: {c for a, c in join.columns.values() if a == lk.alias} for lk in shape.lookups}
    needed = {lk.alias: list(dict.fromkeys([lk.column, *sorted(used[lk.alias])])) for lk in shape.lookups}
    parts = []
    for term in inputs:
        rows = term.rows
        current = {f"{shape.source_alias}.{c}": rows.column(c) for c in rows.column_names if c != SIGN_COLUMN}
        current[SIGN_COLUMN] = rows.column(SIGN_COLUMN)
        joined = pa.table(current)
        for lk in shape.lookups:
            dim = cache.get(tables[lk.name], term.versions[lk.name], needed[lk.alias])
            dim = dim.rename_columns([f"{lk.alias}.{c}" for c in dim.column_names])
            if lk.column in used[lk.alias]:   # the join column is also an input: keep a copy past the join
                dim = dim.append_column(f"{lk.alias}.{lk.column}#", dim.column(f"{lk.alias}.{lk.column}"))
            joined = joined.join(dim, keys=f"{shape.source_alias}.{lk.source_column}",
                                 right_keys=f"{lk.alias}.{lk.column}",
                                 join_type="left outer" if lk.outer else "inner", use_threads=False)
        parts.append(pa.table({**{name: _column(joined, alias, column, shape) for name, (alias, column)
                                  in join.columns.items()}, SIGN_COLUMN: joined.column(SIGN_COLUMN)}))
    return pa.concat_tables(parts) if parts else pa.table({})


def _column(joined: pa.Table, alias: str, column: str, shape: JoinShape) -> pa.ChunkedArray:
    if alias == shape.source_alias:
        return joined.column(f"{alias}.{column}")
    lk = next(lk for lk in shape.lookups if lk.alias == alias)
    if column == lk.column:   # the join drops the right key: its copy
        return joined.column(f"{alias}.{column}#")
    return joined.column(f"{alias}.{column}")
