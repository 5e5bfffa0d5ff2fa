"""A decoded batch made to the schema its reader asked for: fields matched by name at every level of nesting,
missing ones null, extra ones dropped, leaves cast to the asked type.

Decoders that produce their writer's schema (Avro, Protobuf) end here, so that what the change envelope
sees has the table's types whichever writer schema version a record was produced with. A cast that cannot
be done (a string where the table holds a number) is ``SchemaConflict``: the records of that writer schema
are bad records, and nothing of them reaches the table.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


class SchemaConflict(ValueError):
    """A decoded field whose type the reader's type cannot hold."""


def conform_array(array: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    """``array`` as ``target`` (structs field by field, recursively)."""
    if array.type.equals(target):
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        children = []
        for field in target:
            if field.name in names:
                children.append(conform_array(pc.struct_field(array, field.name), field.type,
                                              f"{where}.{field.name}"))
            else:
                children.append(pa.nulls(len(array), field.type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    try:
        return pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaConflict(f"field {where} is {array.type}, the table's column is {target}: "
                             f"{str(e).splitlines()[0]}") from None


def conform_to(table: pa.Table, read_schema: pa.Schema) -> pa.Table:
    """``table``'s columns as ``read_schema`` has them."""
    columns = []
    for field in read_schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            columns.append(conform_array(column, field.type, field.name))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=read_schema)
