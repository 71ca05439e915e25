"""The Python workers' daemon of a local spark-decode job (``spark.python.daemon.module``).

PySpark's daemon forks one Python worker per task slot; each worker imports PySpark's worker
module and, at its first task, kwire's capture, codec and spec registry (about 0.6 s). This daemon
imports those once, then runs PySpark's own daemon, so its workers are forked with them already
imported: the Python workers' CPU 2.73 s -> 2.39 s on two small files in local[2] (medians of 4
paired runs). pyarrow and pandas are not imported here: importing pyarrow starts
threads (jemalloc's background thread), and a process should not fork with threads running
(PySpark imports them after the fork for that reason).

Spark puts ``python/lib/pyspark.zip`` (and py4j's source zip) first on the workers' path. When
those are the copies a pip-installed PySpark carries inside its own package, the daemon imports
PySpark from the package instead (``prefer_installed``): the same files, with the byte code Python
cached at install, where a zip without byte code is compiled again by every daemon (``import
pyspark.worker``: 0.50 s -> 0.07 s of CPU, before the job's first Python task can start).

The workers keep the memory they free for reuse (kwire_cli.memory: object arenas, and glibc's
large blocks and heap top), set here so that every forked worker has it: a task builds and drops
the trees of its connections' frames, and memory given back and mapped again is a page fault per
page (on this 2-core VM, each worker 216k page faults -> 47k over 8 files of 29 MB).

Only for local masters: on a cluster the executors' Python may not have kwire installed (the job
ships it as a zip that only workers see).
"""
from __future__ import annotations

import os
import sys


def prefer_installed(path: list[str]) -> list[str]:
    """``path`` without the zips of ``SPARK_HOME/python/lib`` that a pip-installed PySpark carries
    in its own package (``.../site-packages/pyspark/python/lib/*.zip``) when that package's
    directory (``.../site-packages``) is on ``path`` too: the modules are then imported from the
    package, the same version by construction. A Spark home of its own keeps its zips."""
    keep: list[str] = []
    dirs = {os.path.abspath(p) for p in path if p and not p.endswith(".zip")}
    for p in path:
        if p.endswith(".zip"):
            lib = os.path.dirname(os.path.abspath(p))
            package = os.path.dirname(os.path.dirname(lib))  # .../site-packages/pyspark
            if (os.path.basename(package) == "pyspark" and lib == os.path.join(package, "python", "lib")
                    and os.path.dirname(package) in dirs
                    and os.path.isfile(os.path.join(package, "__init__.py"))):
                continue
        keep.append(p)
    return keep


def preload() -> None:
    """Import what every decode task needs that is safe to import before a fork (no threads)."""
    import pyspark.worker  # noqa: F401 - imported for the forked workers

    from kwire_cli.capture.session import Conversation  # noqa: F401
    from kwire_cli.render.jsonlines import line_encoder  # noqa: F401
    from kwire_cli.spark import rows, stages  # noqa: F401
    from kwire_cli.spec.registry import registry
    registry()  # the bundled specs, loaded once


def keep_freed_memory() -> None:
    """The workers forked from here keep the memory they free (see the module's doc)."""
    from kwire_cli.memory import keep_arenas, keep_malloc
    keep_arenas()
    keep_malloc()


def tune_collector() -> None:
    """The workers forked from here keep the garbage collector tuned for decoding between their
    tasks (``render.jsonlines.tune_gc``), what was imported here frozen before the fork."""
    from kwire_cli.render.jsonlines import tune_gc
    tune_gc()


if __name__ == "__main__":
    sys.path[:] = prefer_installed(sys.path)
    preload()
    keep_freed_memory()
    tune_collector()
    from pyspark.daemon import manager
    manager()
