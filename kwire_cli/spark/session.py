"""Starting (or joining) the Spark session spark-decode runs in."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from kwire_cli.errors import SparkJobError

DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def get_session(master: str | None = None, conf: Iterable[tuple[str, str]] = (), progress: bool = True):
    """The active SparkSession (spark-submit, tests), or a new one: ``master`` or ``local[*]``.

    Returns (session, created).
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName("kwire spark-decode")
    if master:
        b = b.master(master)
    elif not SparkConf().contains("spark.master"):
        b = b.master("local[*]")
    given = {k for k, _ in conf}
    if "spark.driver.memory" not in given and not os.environ.get("SPARK_DRIVER_MEMORY"):
        b = b.config("spark.driver.memory", "2g")  # local mode runs the executors in the driver JVM
    if "spark.driver.extraJavaOptions" not in given:
        # the JVM kwire starts does little Java work per byte (the decoding is in Python): its
        # just-in-time compiler's optimising tier and the parallel collector cost more CPU than they
        # win (measured on 577 MB: the JVM's CPU 30 s -> 20 s, Spark's start 10.7 s -> 6.0 s)
        b = b.config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
    b = b.config("spark.ui.showConsoleProgress", "true" if progress else "false") \
         .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false") \
         .config("spark.python.worker.reuse", "true") \
         .config("spark.python.worker.memory", "1g")
    for k, v in conf:
        b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # Java missing, master unreachable...: one line
        raise SparkJobError(f"cannot start Spark ({master or 'local[*]'}): {first_line(e)}") from None
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (Java's are long)."""
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
