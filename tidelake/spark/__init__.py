"""Everything in tidelake that imports pyspark: the Kafka source and the table source/sink.

``register(spark)`` makes ``format("tidelake-kafka")`` and ``format("tidelake")`` available.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: "SparkSession") -> None:
    """Register every tidelake data source with ``spark``."""
    from tidelake.spark.kafka_source import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
    try:
        from tidelake.spark.table_source import TableDataSource
    except ImportError:  # the table source is optional until tidelake.table lands
        return
    spark.dataSource.register(TableDataSource)
