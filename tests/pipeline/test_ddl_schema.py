"""``sink.schema`` parsed without a JVM (spark/ddl_schema.py) accepts what Spark's DDL parser and pyspark's Arrow
conversion accept, with the same Arrow schema, and refuses the rest naming the column and the bad type."""
from __future__ import annotations

import pytest
from spark_fixtures import spark  # noqa: F401  (the module's one Spark session)

from tidelake.spark.ddl_schema import VALID_TYPES, DdlError, parse_ddl_schema

ACCEPTED = [
    "x boolean", "x tinyint", "x byte", "x smallint", "x short", "x int", "x Integer", "x BIGINT", "x long",
    "x float", "x real", "x double", "x string", "x binary", "x date", "x timestamp", "x timestamp_ltz",
    "x timestamp_ntz", "x decimal", "x decimal(38,0)", "x decimal(1)", "x dec(5,2)", "x numeric(5)",
    "x decimal( 5 , 2 )", "x decimal(00005,2)", "x decimal(5,5)",
    "x array<int>", "x map<int,string>", "x map<string, array<long>>", "x struct<>", "x struct<a:int>",
    "x struct<a: int, b string>", "x struct<`a b`:int>", "x struct<a int not null comment 'x'>",
    "x array<array<map<string,struct<x:decimal(3,1)>>>>",
    "id long, amount long", "id: long, amount: long", "`id` long", "select long", "x  int ,  y string",
    "x int not null comment 'a'", "x int NOT NULL", "x string comment 'it\\'s' ",
]
# Spark refuses these (parser or Arrow conversion)
REFUSED_BY_SPARK = [
    "x strng", "x bool", "x text", "x char", "x varchar", "x decimal(39,0)", "x decimal(5,6)", "x decimal(0,0)",
    "x decimal(10,2,3)", "x decimal(-1,0)", "x decimal(5,-1)", "x array", "x array<>", "x map<int>",
    "x struct<a:int,>", "x int(3)", "x long(2)", "x bytes", "x int64", "x uuid", "x json", "x number",
    "x double precision", "x timestamp with time zone", "x binary(3)", "x char(3)", "x varchar(5)",
    "x interval year", "x interval month to year", "id long,", "id long amount long", "a b c",
    "x int default 3", "x int comment 'a' not null",
]
# Spark accepts these but a table has no column for them (or two columns of one name): refused on purpose
REFUSED_FOR_THE_TABLE = ["x void", "x variant", "x time", "x interval day to second", "x geometry(4326)",
                         "x string collate UTF8_LCASE", "id long, id long", "id long, ID string"]


def _spark_arrow(ddl: str):
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string
    struct = _parse_datatype_string(ddl)
    assert isinstance(struct, StructType)
    return to_arrow_schema(struct, timezone="UTC")


def test_what_spark_accepts_is_accepted_with_its_arrow_schema(spark):  # noqa: F811
    for ddl in ACCEPTED:
        assert parse_ddl_schema(ddl) == _spark_arrow(ddl), ddl


def test_what_spark_refuses_is_refused(spark):  # noqa: F811
    for ddl in REFUSED_BY_SPARK:
        with pytest.raises(Exception):
            _spark_arrow(ddl)
        with pytest.raises(DdlError):
            parse_ddl_schema(ddl)


def test_types_spark_has_but_a_table_does_not_are_refused(spark):  # noqa: F811
    for ddl in REFUSED_FOR_THE_TABLE:
        _spark_arrow(ddl)   # Spark takes it
        with pytest.raises(DdlError):
            parse_ddl_schema(ddl)


def test_the_error_names_the_column_the_type_and_the_valid_ones():
    with pytest.raises(DdlError) as e:
        parse_ddl_schema("id long, region strng")
    assert str(e.value) == f"column region: unknown type 'strng' (valid types: {VALID_TYPES})"
    with pytest.raises(DdlError, match=r"column x: decimal\(40, 2\): precision must be 1 to 38"):
        parse_ddl_schema("x decimal(40, 2)")
    with pytest.raises(DdlError, match=r"column x: column y in struct<...>: unknown type 'nt'"):
        parse_ddl_schema("x struct<y: nt>")
