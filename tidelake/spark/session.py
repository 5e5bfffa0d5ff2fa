"""The Spark session a pipeline runs on (one per process: ``pipeline serve`` shares it between its pipelines)."""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, Mapping

from tidelake.spark.ship import package_zip

log = logging.getLogger("tidelake.pipeline")


def spark_session(spark_config: Mapping[str, Any], app_name: str):
    """``spark: {master: local[2], conf: {...}}`` of a pipeline YAML -> a running session (getOrCreate), with the
    tidelake data sources registered; on a master other than local, tidelake is shipped to the executors."""
    from pyspark.sql import SparkSession

    import tidelake.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = spark_config.get("master", "local[2]")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no outward interface needed
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for k, v in (spark_config.get("conf") or {}).items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tidelake.spark.register(spark)
    if not master.startswith("local"):   # executors elsewhere run the driver's tidelake (ship.py)
        shipped = package_zip()
        spark.sparkContext.addPyFile(shipped)
        log.info("pipeline on %s: tidelake shipped to the executors as %s", master, os.path.basename(shipped))
    return spark
