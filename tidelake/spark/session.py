"""The Spark session a pipeline runs on (one per process: ``pipeline serve`` shares it between its pipelines)."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from tidelake.spark.pipeline_config import SparkConfig
from tidelake.spark.ship import package_zip

log = logging.getLogger("tidelake.pipeline")

# Spark's logging for a session a pipeline starts, unless asked for the task failure logs (--debug): Spark's
# defaults without the Executor/TaskSetManager stacks of a failed task
QUIET_LOG4J = Path(__file__).with_name("log4j2.properties")


def spark_session(spark_config: SparkConfig, app_name: str, *, task_failure_logs: bool = False):
    """``spark: {master: ..., conf: {...}}`` of a pipeline YAML -> a running session (getOrCreate), with the
    tidelake data sources registered; on a master other than local, tidelake is shipped to the executors.
    ``task_failure_logs``: keep Spark's logs of a failed task (``--debug``)."""
    from pyspark.sql import SparkSession

    import tidelake.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = spark_config.master
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no outward interface needed
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               # the driver fetches collect()'s result over a local socket the JVM keeps open this long; 15 s
               # (Spark's default) is not enough when a loaded machine delays the Python side
               .config("spark.python.authenticate.socketTimeout", "120s"))
    if not task_failure_logs:
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J}")
    for k, v in spark_config.conf.items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tidelake.spark.register(spark)
    if not master.startswith("local"):   # executors elsewhere run the driver's tidelake (ship.py)
        shipped = package_zip()
        spark.sparkContext.addPyFile(shipped)
        log.info("pipeline on %s: tidelake shipped to the executors as %s", master, os.path.basename(shipped))
    return spark
