"""The Python workers' daemon of a local spark-decode job (``spark.python.daemon.module``).

PySpark's daemon forks one Python worker per task slot; each worker imports PySpark's worker
module and, at its first task, kwire's capture, codec and spec registry (about 0.6 s). This daemon
imports those once, then runs PySpark's own daemon, so its workers are forked with them already
imported: the Python workers' CPU 2.73 s -> 2.39 s on two small files in local[2] (medians of 4
paired runs). pyarrow and pandas are not imported here: importing pyarrow starts
threads (jemalloc's background thread), and a process should not fork with threads running
(PySpark imports them after the fork for that reason).

Only for local masters: on a cluster the executors' Python may not have kwire installed (the job
ships it as a zip that only workers see).
"""
from __future__ import annotations


def preload() -> None:
    """Import what every decode task needs that is safe to import before a fork (no threads)."""
    import pyspark.worker  # noqa: F401 - imported for the forked workers

    from kwire_cli.capture.session import Conversation  # noqa: F401
    from kwire_cli.render.jsonlines import line_encoder  # noqa: F401
    from kwire_cli.spark import rows, stages  # noqa: F401
    from kwire_cli.spec.registry import registry
    registry()  # the bundled specs, loaded once


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager
    manager()
