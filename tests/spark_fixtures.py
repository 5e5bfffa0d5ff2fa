"""One local SparkSession for the whole test run (Spark takes seconds to start on 2 shared cores).

Import the ``spark`` fixture into a test module with ``from spark_fixtures import spark``. The session is
created once per process (however many modules import the fixture) and stopped at interpreter exit.
"""
from __future__ import annotations

import atexit
import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

_session = None


def get_spark():
    global _session
    if _session is None:
        from pyspark.sql import SparkSession

        import tidelake.spark
        _session = (SparkSession.builder.master("local[2]").appName("tidelake-tests")
                    .config("spark.ui.enabled", "false")
                    .config("spark.sql.shuffle.partitions", "2")
                    .config("spark.sql.session.timeZone", "UTC")
                    .config("spark.driver.memory", "1g")
                    # collect()'s local socket waits 15 s by default: too short for a loaded CI machine
                    .config("spark.python.authenticate.socketTimeout", "120s")
                    .getOrCreate())
        _session.sparkContext.setLogLevel("ERROR")
        tidelake.spark.register(_session)
        atexit.register(_session.stop)
    return _session


@pytest.fixture(scope="session")
def spark():
    return get_spark()
