"""What a table pipeline's ``transform:`` is, and how it can be maintained from an increment (SPEC T13).

The SQL is parsed with sqlglot's Spark dialect (Spark itself then analyzes the rewritten queries). A transform reads
``source`` (the upstream's snapshot), or ``changes`` (its increment), plus other tables by name (their snapshots):

- ``changes``: the query runs over each increment's rows; its output is upserted (an ``_op`` column = 'delete'
  deletes);
- ``rows``: a row-wise query over ``source`` (filters, projections, lookups in other tables) whose output keeps the
  upstream's primary key: re-run over the changed keys' after-images, keys that left the output deleted;
- ``aggregate``: ``SELECT keys, sum/count/avg/min/max(...) FROM source ... GROUP BY keys``: kept as per-group state
  (row count, sums, non-null counts, min/max's kept extreme values with their counts: aggregate_state.py) in
  hidden ``__*`` columns of the sink, after-images added, before-images retracted;
- anything else is ``full`` only (re-run over the snapshot, the sink overwritten), allowed with ``refresh: full``;
  ``reason`` says why it cannot be incremental.

No pyspark imports.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import sqlglot
from sqlglot import exp

SOURCE = "source"
CHANGES = "changes"
AGGREGATES = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
SIGN_COLUMN = "__sign"  # an increment's rows for an aggregate: -1 a before-image (retract), +1 an after-image (add)
ROWS_COLUMN = "__rows"  # the hidden per-group row count of an aggregate sink (a group at 0 rows is deleted)


class TransformError(ValueError):
    """A transform that is not valid SQL or reads no upstream."""


def sum_column(i: int) -> str:
    return f"__s{i}"


def count_column(i: int) -> str:
    return f"__n{i}"


def extremes_column(i: int) -> str:
    """min/max ``i``'s kept values: ``list<struct<value, count>>`` (aggregate_state.py)."""
    return f"__m{i}"


def kept_type(value: pa.DataType) -> pa.DataType:
    return pa.list_(pa.struct([("value", value), ("count", pa.int64())]))


@dataclass(frozen=True)
class Aggregate:
    """One aggregate output: its position in the select list, function and argument (None for count(*))."""
    position: int
    function: str  # sum | count | avg | min | max
    argument: str | None  # Spark SQL of the argument expression
    column: str | None = None  # the argument's column name when it is a bare column of ``source``


@dataclass(frozen=True)
class TransformPlan:
    sql: str
    kind: str  # changes | rows | aggregate | full
    reason: str = ""  # why it is not incremental (kind == full)
    tables: tuple[str, ...] = ()  # other tables the query reads by name (lookups)
    group_positions: tuple[int, ...] = ()  # aggregate: select positions of the group keys
    group_sql: tuple[str, ...] = ()  # aggregate: the group key expressions
    aggregates: tuple[Aggregate, ...] = ()
    key_columns: tuple[str, ...] = ()  # rows: the upstream key columns the output passes through
    # aggregate over ``source`` alone, no WHERE, every group key and argument a bare column: these columns' names
    # (the state needs no SQL engine: arrow_state.py); () otherwise
    group_columns: tuple[str, ...] = ()
    _select: exp.Select | None = field(default=None, compare=False, repr=False)

    @property
    def incremental(self) -> bool:
        return self.kind != "full"

    def bound(self, views: dict[str, str]) -> str:
        """The user's query with table names replaced by view names (``{"source": "__v1", ...}``)."""
        return _rename(sqlglot.parse_one(self.sql, read="spark"), views).sql(dialect="spark")

    def input_sql(self, views: dict[str, str], signed: bool = False) -> str:
        """aggregate: the rows the aggregation reads, as ``__g0.., __a0..``, same FROM/WHERE; ``signed``: and
        ``source``'s ``SIGN_COLUMN`` (-1 retract, +1 add) as ``__sign``."""
        select = _rename(self._select.copy(), views)
        items = [sqlglot.parse_one(g, read="spark").as_(f"__g{j}") for j, g in enumerate(self.group_sql)]
        items += [sqlglot.parse_one(a.argument, read="spark").as_(f"__a{i}") for i, a in enumerate(self.aggregates)
                  if a.argument is not None]
        if signed:
            source = next(t for t in select.find_all(exp.Table) if t.name == views[SOURCE])
            items.append(exp.column(SIGN_COLUMN, table=source.alias_or_name).as_("__sign"))
        select.set("expressions", items)
        select.set("group", None)
        return select.sql(dialect="spark")

    def state_sql(self, input_sql: str, by_sign: bool = False, kept: int | None = None) -> str:
        """aggregate: per group (and ``__sign``) the row count and each aggregate's sum / non-null count over
        ``input_sql``'s rows, and each min/max's distinct values with their counts (``__m<i>``, a list of
        ``struct(value, count)``, any order): the ``kept`` lowest (min) / highest (max), or all (None)."""
        keys = [f"__g{j}" for j in range(len(self.group_sql))] + (["__sign"] if by_sign else [])
        items = list(keys) + [f"count(*) AS {ROWS_COLUMN}"]
        lists = []
        for i, a in enumerate(self.aggregates):
            if a.argument is None:
                continue
            items.append(f"count(__a{i}) AS {count_column(i)}")
            if a.function in ("sum", "avg"):
                items.append(f"sum(__a{i}) AS {sum_column(i)}")
            if a.function in ("min", "max"):
                lists.append((i, "DESC" if a.function == "max" else "ASC"))
        base = f"SELECT {', '.join(items)} FROM __input GROUP BY {', '.join(keys)}"
        if not lists:
            return f"WITH __input AS ({input_sql}) {base}"
        by = ", ".join(keys)
        joins, picked = [], []
        for i, order in lists:
            counted = (f"SELECT {by}, __a{i} AS value, count(*) AS count FROM __input WHERE __a{i} IS NOT NULL "
                       f"GROUP BY {by}, __a{i}")
            if kept is not None:
                counted = (f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY {by} ORDER BY value {order}) "
                           f"AS __rank FROM ({counted})) WHERE __rank <= {int(kept)}")
            on = " AND ".join(f"b.{k} <=> m{i}.{k}" for k in keys)
            joins.append(f"LEFT JOIN (SELECT {by}, collect_list(struct(value, count)) AS {extremes_column(i)} "
                         f"FROM ({counted}) GROUP BY {by}) AS m{i} ON {on}")
            picked.append(f"m{i}.{extremes_column(i)}")
        return (f"WITH __input AS ({input_sql}) SELECT b.*, {', '.join(picked)} FROM ({base}) AS b "
                + " ".join(joins))


def _rename(tree: exp.Expression, views: dict[str, str]) -> exp.Expression:
    for table in tree.find_all(exp.Table):
        if table.name.lower() in views:
            alias = table.alias_or_name
            table.set("this", exp.to_identifier(views[table.name.lower()]))
            table.set("db", None)
            table.set("catalog", None)
            if not table.alias:   # columns may still say source.x
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return tree


def _full(sql: str, reason: str, tables: tuple[str, ...]) -> TransformPlan:
    return TransformPlan(sql, "full", reason, tables)


def plan_transform(sql: str, source_key: list[str]) -> TransformPlan:
    """Classify ``sql``; ``source_key``: the upstream table's primary key (for row-wise transforms)."""
    try:
        statements = sqlglot.parse(sql, read="spark")
    except sqlglot.errors.ParseError as e:
        raise TransformError(f"transform is not valid SQL: {str(e).splitlines()[0]}") from None
    if len(statements) != 1 or statements[0] is None:
        raise TransformError("transform must be one SELECT statement")
    tree = statements[0]
    names = [t.name.lower() for t in tree.find_all(exp.Table)]
    reads_source, reads_changes = SOURCE in names, CHANGES in names
    if not reads_source and not reads_changes:
        raise TransformError("transform must read the upstream: FROM source (its snapshot) or FROM changes "
                             "(its increment)")
    tables = tuple(sorted({n for n in names if n not in (SOURCE, CHANGES)}))
    if reads_source and reads_changes:
        return _full(sql, "it reads both source and changes", tables)
    if names.count(SOURCE) > 1 or names.count(CHANGES) > 1:
        return _full(sql, "it reads the upstream twice (a self-join): an increment meets rows it does not hold",
                     tables)
    if not isinstance(tree, exp.Select):
        return _full(sql, "a set operation (UNION/INTERSECT/EXCEPT) is not maintained incrementally", tables)
    if tree.find(exp.Window):
        return _full(sql, "window functions (OVER ...) depend on other rows of their partition, which an increment "
                          "does not hold", tables)
    if any(isinstance(node, exp.Select) and node is not tree for node in tree.walk()) or tree.args.get("with_"):
        return _full(sql, "subqueries and WITH are not maintained incrementally", tables)
    if tree.args.get("order") or tree.args.get("limit"):
        return _full(sql, "ORDER BY / LIMIT (a top-N): a row leaving it brings in one the increment does not hold",
                     tables)
    if tree.args.get("distinct"):
        return _full(sql, "SELECT DISTINCT over non-key columns cannot retract: a before-image does not say "
                          "whether another row still holds the value", tables)
    if tree.args.get("having"):
        return _full(sql, "HAVING hides groups, whose state would be lost", tables)
    aggregate_calls = list(tree.find_all(exp.AggFunc))
    if reads_changes:
        if aggregate_calls or tree.args.get("group"):
            return _full(sql, "an aggregate over changes aggregates each increment alone; aggregate FROM source "
                              "to maintain it", tables)
        return TransformPlan(sql, "changes", tables=tables, _select=tree)
    if not aggregate_calls and not tree.args.get("group"):
        return _rows_plan(sql, tree, source_key, tables)
    return _aggregate_plan(sql, tree, tables)


def _rows_plan(sql: str, tree: exp.Select, source_key: list[str], tables: tuple[str, ...]) -> TransformPlan:
    source_alias = next(t.alias_or_name.lower() for t in tree.find_all(exp.Table) if t.name.lower() == SOURCE)
    passed = set()
    for item in tree.expressions:
        inner = item.unalias()
        if (isinstance(inner, exp.Column) and inner.name in source_key and item.alias_or_name == inner.name
                and (not inner.table or inner.table.lower() == source_alias)):
            passed.add(inner.name)
        if isinstance(inner, exp.Star):
            passed.update(source_key)
    missing = [k for k in source_key if k not in passed]
    if missing:
        return _full(sql, f"a row-wise transform keeps the upstream's key to be incremental; it does not select "
                          f"{', '.join(missing)} as is", tables)
    return TransformPlan(sql, "rows", tables=tables, key_columns=tuple(source_key), _select=tree)


def _aggregate_plan(sql: str, tree: exp.Select, tables: tuple[str, ...]) -> TransformPlan:
    group = tree.args.get("group")
    if group is None or not group.expressions:
        return _full(sql, "an aggregate without GROUP BY has no key for its sink", tables)
    group_exprs = []
    for g in group.expressions:
        if isinstance(g, exp.Literal) and g.is_int:   # GROUP BY 1
            position = int(g.this) - 1
            if not 0 <= position < len(tree.expressions):
                raise TransformError(f"GROUP BY {g.this}: the select list has {len(tree.expressions)} items")
            g = tree.expressions[position].unalias()
        group_exprs.append(g)
    group_positions: list[int | None] = [None] * len(group_exprs)
    aggregates = []
    for position, item in enumerate(tree.expressions):
        inner = item.unalias()
        matched = [j for j, g in enumerate(group_exprs) if inner == g
                   or (isinstance(inner, exp.Column) and isinstance(g, exp.Column) and inner.name == g.name
                       and (not inner.table or not g.table or inner.table == g.table))]
        if matched:
            group_positions[matched[0]] = position
            continue
        function = next((name for cls, name in AGGREGATES.items() if type(inner) is cls), None)
        if function is None:
            if inner.find(exp.AggFunc):
                fn = next(inner.find_all(exp.AggFunc))
                if type(fn) in AGGREGATES:
                    return _full(sql, f"{inner.sql(dialect='spark')} is an expression over aggregates: select the "
                                      f"aggregates and compute it in the next stage", tables)
                return _full(sql, f"{fn.sql(dialect='spark')} has no incremental form (sum, count, avg, min and max "
                                  f"do)", tables)
            return _full(sql, f"{inner.sql(dialect='spark')} is neither a GROUP BY key nor an aggregate", tables)
        argument = inner.this
        if isinstance(argument, exp.Distinct):
            return _full(sql, f"{inner.sql(dialect='spark')}: a distinct aggregate cannot retract (a before-image "
                              f"does not say whether another row still holds the value)", tables)
        if inner.args.get("expressions") or isinstance(inner.parent, exp.Filter):
            return _full(sql, f"{inner.sql(dialect='spark')}: only one-argument aggregates are maintained", tables)
        if function == "count" and (argument is None or isinstance(argument, exp.Star)):
            aggregates.append(Aggregate(position, "count", None))
        else:
            aggregates.append(Aggregate(position, function, argument.sql(dialect="spark"),
                                        _source_column(argument, tree)))
    missing = [g.sql(dialect="spark") for j, g in enumerate(group_exprs) if group_positions[j] is None]
    if missing:
        return _full(sql, f"the GROUP BY key {', '.join(missing)} is not selected: the sink's primary key is the "
                          f"group columns", tables)
    group_columns = [_source_column(g, tree) for g in group_exprs]
    plain = (not tables and not tree.args.get("where") and not tree.args.get("joins") and None not in group_columns
             and all(a.argument is None or a.column is not None for a in aggregates))
    return TransformPlan(sql, "aggregate", tables=tables, group_positions=tuple(group_positions),
                         group_sql=tuple(g.sql(dialect="spark") for g in group_exprs), aggregates=tuple(aggregates),
                         group_columns=tuple(group_columns) if plain else (), _select=tree)


def _source_column(node: exp.Expression, tree: exp.Select) -> str | None:
    """The column name if ``node`` is a bare column of the query's one table, ``source``; else None."""
    if not isinstance(node, exp.Column):
        return None
    sources = list(tree.find_all(exp.Table))
    if len(sources) != 1 or sources[0].name.lower() != SOURCE:
        return None
    if node.table and node.table.lower() != sources[0].alias_or_name.lower():
        return None
    return node.name
