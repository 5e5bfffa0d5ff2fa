"""The upstream joined with tables read by name, maintained from the changes of both sides (SPEC T13, issue 34).

A transform ``... FROM source o [LEFT] JOIN dim d ON o.x = d.y ...`` (each table of ``source.tables`` joined to
``source`` directly, by an equality of columns) changes between two steps by A_new⋈B_new − A_old⋈B_old, which is

- for the upstream's changed keys: their before-images joined with the dimension at its old version, retracted,
  and their after-images joined with it at its new version, added;
- for the unchanged upstream rows: only those whose join value is among the dimension's changed values (its net
  change's before- and after-images, ``changed_values``) can join differently — read from the upstream at the
  consumed version with a filter on the join column, they are retracted through the old version and added
  through the new one. Rows with other values meet the same dimension rows at both versions, whether the join is
  inner or left (a left join's NULL-joined row depends only on the dimension rows with its value).

This is the textbook (A_new − A_old)⋈B_new + A_old⋈(B_new − B_old) with the upstream split by key, so that no
joined row is both retracted and added: a min/max state cannot cancel such a pair (a value retracted and added
again into a new group would stay its extreme). Several dimensions: the rows with a changed value in any of them,
once, through all old versions and all new ones. Everything is two :class:`SignedRows` — upstream rows signed
-1 (retract) or +1 (add), and the dimension versions they join with — that the state query (Spark) or the Arrow
join (arrow_join.py) turns into per-group state.

What is not maintained this way (a change of such a dimension refreshes from the snapshots, ``JoinShape.reason``):
a table not joined to ``source`` by an equality (a cross join, a join of two dimensions, a table read in a
subquery); a RIGHT or FULL join also cannot follow the upstream's changes (its unmatched dimension rows are in no
increment), so such a transform is ``refresh: full`` only (``JoinShape.wrong``).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from tidelake.spark.increment import NetChange, net_change
from tidelake.spark.transform_plan import SIGN_COLUMN, SOURCE
from tidelake.table import Table


@dataclass(frozen=True)
class Lookup:
    """One table read by name, joined to ``source`` by ``source.<source_column> = <alias>.<column>``."""
    name: str  # its name in the transform (a key of source.tables), lower case
    alias: str
    outer: bool  # LEFT JOIN (else inner)
    source_column: str
    column: str
    only_equality: bool  # the ON clause is that one equality


@dataclass(frozen=True)
class JoinShape:
    source_alias: str
    lookups: tuple[Lookup, ...] = ()
    reason: str = ""  # why a change of a table read by name refreshes from the snapshots ("": maintained)
    wrong: str = ""  # why even the upstream's changes cannot be maintained ("": they can)

    @property
    def maintained(self) -> bool:
        return not self.reason and not self.wrong


def _column_of(node: exp.Expression, alias: str) -> str | None:
    return node.name if isinstance(node, exp.Column) and node.table.lower() == alias else None


def _lookup(join: exp.Join, source_alias: str, tables: tuple[str, ...]) -> Lookup | str:
    """The join as a :class:`Lookup`, or why it is not one."""
    table = join.this
    if not isinstance(table, exp.Table):
        return f"{join.sql(dialect='spark')} joins a subquery"
    name, alias = table.name.lower(), table.alias_or_name.lower()
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind in ("CROSS", "SEMI", "ANTI") or (side and side != "LEFT") or name not in tables:
        return f"JOIN {table.sql(dialect='spark')}: only an inner or left join of a table read by name is maintained"
    on = join.args.get("on")
    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on] if on is not None else []
    for c in conjuncts:
        if isinstance(c, exp.EQ):
            for mine, theirs in ((c.left, c.right), (c.right, c.left)):
                s, d = _column_of(mine, source_alias), _column_of(theirs, alias)
                if s is not None and d is not None:
                    return Lookup(name, alias, side == "LEFT", s, d, len(conjuncts) == 1)
    return (f"JOIN {table.sql(dialect='spark')}: its ON clause has no equality of a {source_alias}.column and a "
            f"{alias}.column")


def join_shape(sql: str, tables: tuple[str, ...]) -> JoinShape:
    """How the transform ``sql`` (a rows or aggregate plan reading ``tables`` by name) joins them."""
    tree = sqlglot.parse_one(sql, read="spark")
    source = tree.args["from_"].this if tree.args.get("from_") else None
    joins = tree.args.get("joins") or []
    if not isinstance(source, exp.Table) or source.name.lower() != SOURCE:
        wrong = "" if not joins else "the upstream is not the first table of the FROM clause (a right-hand side)"
        return JoinShape(SOURCE, (), "source is not the first table of the FROM clause", wrong)
    alias = source.alias_or_name.lower()
    lookups, reasons, wrong = [], [], ""
    for join in joins:
        side = (join.side or "").upper()
        if side in ("RIGHT", "FULL") and not wrong:
            wrong = (f"a {side} join keeps the rows of {join.this.sql(dialect='spark')} that match no upstream row, "
                     f"which no increment of the upstream holds")
        found = _lookup(join, alias, tables)
        (lookups if isinstance(found, Lookup) else reasons).append(found)
    joined = {lk.name for lk in lookups}
    reasons += [f"{t} is read but not joined to source" for t in tables if t not in joined]
    if len(joined) != len(lookups):
        reasons.append("a table is joined twice")
    return JoinShape(alias, tuple(lookups), "; ".join(reasons), wrong)


@dataclass(frozen=True)
class SignedRows:
    """Upstream rows to retract (-1) or add (+1) through the join, and the version of each table read by name they
    join with."""
    rows: pa.Table  # the upstream's columns and SIGN_COLUMN
    versions: dict[str, int]


def signed(rows: pa.Table, sign: int) -> pa.Table:
    return rows.append_column(SIGN_COLUMN, pa.array([sign] * rows.num_rows, pa.int8()))


def changed_values(table: Table, column: str, start: int, end: int) -> tuple[pa.Array, int]:
    """The distinct non-null values of ``column`` among the rows of ``table`` changed in (start, end] (before and
    after images), and the change rows read."""
    net = net_change(table, start, end)
    values = pa.concat_arrays([net.before.column(column).combine_chunks(), net.after.column(column).combine_chunks()])
    return pc.unique(values.drop_null()), net.changes


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (read at an older version) in ``schema``: a column added since is null."""
    return pa.table([rows.column(f.name).cast(f.type) if f.name in rows.column_names
                     else pa.nulls(rows.num_rows, f.type) for f in schema], schema=schema)


def rows_with_values(upstream: Table, version: int, column: str, values: pa.Array, schema: pa.Schema) -> pa.Table:
    """The upstream's rows at ``version`` whose ``column`` is one of ``values`` (in ``schema``)."""
    if len(values) == 0:
        return schema.empty_table()
    return conform(upstream.scan(version=version, filter=[(column, "in", values.to_pylist())]), schema)


@dataclass(frozen=True)
class JoinDelta:
    inputs: list[SignedRows]
    changes: int  # change rows read: the upstream's and the dimensions'
    rejoined: int  # upstream rows read because their join value changed in a table read by name


def _each_key_once(rows: pa.Table, key: list[str]) -> pa.Table:
    numbered = rows.append_column("__n", pa.array(range(rows.num_rows), pa.int64()))
    return rows.take(numbered.group_by(key, use_threads=False).aggregate([("__n", "min")]).column("__n_min"))


def _rejoined(shape: JoinShape, upstream: Table, version: int, lookups: dict[str, Table], old: dict[str, int],
              new: dict[str, int], schema: pa.Schema) -> tuple[pa.Table, int]:
    """The upstream rows at ``version`` whose join value changed in some table read by name (each key once), and
    the change rows of those tables read."""
    parts, changes = [], 0
    for lk in shape.lookups:
        if old[lk.name] == new[lk.name]:
            continue
        values, read = changed_values(lookups[lk.name], lk.column, old[lk.name], new[lk.name])
        changes += read
        parts.append(rows_with_values(upstream, version, lk.source_column, values, schema))
    rows = pa.concat_tables(parts) if parts else schema.empty_table()
    return (_each_key_once(rows, upstream.primary_key) if len(parts) > 1 else rows), changes


def join_delta(shape: JoinShape, upstream: Table, net: NetChange, lookups: dict[str, Table], old: dict[str, int],
               new: dict[str, int]) -> JoinDelta:
    """A_new⋈B_new − A_old⋈B_old as two signed terms: the changed keys' before-images and the unchanged rows whose
    join value changed, retracted through every table at its ``old`` version; the after-images and the same
    unchanged rows added through the ``new`` versions. (Not (A_new − A_old)⋈B_new + A_old⋈ΔB: its terms retract
    and add the same joined row where both sides changed, and a min/max cannot cancel such a pair.)"""
    key = upstream.primary_key
    rows, changes = _rejoined(shape, upstream, net.start, lookups, old, new, net.after.schema)
    if rows.num_rows and net.keys.num_rows:
        rows = conform(rows.join(net.keys, keys=key, join_type="left anti", use_threads=False), net.after.schema)
    retract = pa.concat_tables([net.before, rows])
    add = pa.concat_tables([net.after, rows])
    inputs = [SignedRows(signed(retract, -1), dict(old)), SignedRows(signed(add, +1), dict(new))]
    return JoinDelta([s for s in inputs if s.rows.num_rows], net.changes + changes, rows.num_rows)


def rows_to_rejoin(shape: JoinShape, upstream: Table, net: NetChange, lookups: dict[str, Table],
                   old: dict[str, int], new: dict[str, int]) -> JoinDelta:
    """A row-wise transform: the upstream rows at ``net.end`` to run it over again — the changed keys' after-images
    and the rows whose join value changed in a table read by name (each key once) — as one term of signed +1."""
    rows, changes = _rejoined(shape, upstream, net.end, lookups, old, new, net.after.schema)
    rejoined = rows.num_rows
    if rows.num_rows:
        rows = _each_key_once(pa.concat_tables([net.after, rows]), upstream.primary_key)
    else:
        rows = net.after
    return JoinDelta([SignedRows(rows, dict(new))], net.changes + changes, rejoined)
