"""Everything in tidelake that imports pyspark: the Kafka source and the table source/sink.

``register(spark)`` makes ``format("tidelake-kafka")`` (kafka_source.py: Spark's Kafka source options,
batch and streaming) and ``format("tidelake")`` (table_source.py: reads, writes, streaming sink) available;
``write_table(df, path, mode)`` writes a DataFrame with one driver-side commit. ``runner.Pipeline`` is the
Kafka -> table pipeline with seed 001's offset modes. Offset planning (offset_range.py), the Kafka reader
(kafka_reader.py), change parsing (changes.py) and the offset modes (offset_modes.py) do not import pyspark.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: "SparkSession") -> None:
    """Register every tidelake data source with ``spark``."""
    from tidelake.spark.kafka_source import KafkaDataSource
    from tidelake.spark.table_source import TableDataSource
    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(TableDataSource)
    # The table reader implements pushFilters(); Spark refuses such a reader unless pushdown is on.
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def write_table(df, path: str, mode: str = "upsert", primary_key: list[str] | None = None,
                properties: dict[str, str] | None = None, storage_options: dict[str, str] | None = None) -> int:
    """Write a DataFrame into the tidelake table at ``path``; returns the new table version.

    ``mode``: ``upsert`` (by primary key), ``append`` (INSERT INTO), ``delete`` (rows with the
    DataFrame's keys), ``overwrite`` (the table's content becomes the DataFrame). Spark's executors
    write the Parquet files (staged, invisible); the driver publishes them in ONE atomic commit, so a
    failed task or job leaves nothing visible. A missing table is created from the DataFrame's schema
    with ``primary_key`` and ``properties``. ``path`` may be ``s3://bucket/prefix`` (``storage_options``: S3
    settings, else AWS's environment variables).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    from tidelake.spark.table_source import WRITE_OPERATIONS
    from tidelake.table import Table, TableNotFound

    if mode not in WRITE_OPERATIONS:
        raise ValueError(f"mode must be one of {sorted(WRITE_OPERATIONS)}, not {mode!r}")
    register(df.sparkSession)
    try:
        table = Table.open(path, storage_options=storage_options)
    except TableNotFound:
        if not primary_key:
            raise ValueError(f"no table at {path}: give primary_key (and properties) to create it") from None
        if mode == "delete":
            raise
        table = Table.create(path, to_arrow_schema(df.schema, timezone="UTC"), list(primary_key), properties,
                             storage_options=storage_options)
    read_version = table.version
    writer = (df.write.format("tidelake").mode("overwrite" if mode == "overwrite" else "append")
              .option("operation", mode).option("readVersion", str(read_version)))
    if storage_options:
        writer = writer.option("storageOptions", json.dumps(storage_options))
    writer.save(path)
    return Table.open(path, storage_options=storage_options).version
