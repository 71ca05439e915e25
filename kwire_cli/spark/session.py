"""Starting (or joining) the Spark session spark-decode runs in.

The driver JVM kwire starts (local mode, or the client of a cluster) loads some 10,000 classes
from Spark's jars each time: most of its fixed cost. It is given a **class data archive**
(HotSpot's class-data sharing, JDK 13+): the first run writes the classes it loaded, as the JVM
parsed and verified them, into ``$XDG_CACHE_HOME/kwire/spark-*.jsa`` when it exits
(``-XX:ArchiveClassesAtExit``, ~160 MB, a few seconds of CPU once); later runs map that file
instead of loading the classes again (``-XX:SharedArchiveFile``). Measured on a 54-frame capture:
the JVM's CPU 8.3 s -> 3.9 s, Spark's start 4.2 s -> 1.9 s, the job 4.3 s -> 2.6 s.

The archive's name is made from what it depends on (the java binary, Spark's jars, the JVM
options, the class path settings): anything else, another name. The JVM checks the archive
itself too and runs without it when it does not match (its warnings turned off). It is read only
from a directory the user owns that nobody else can write, from a file the user owns; it is
written under a temporary name and taken into use once complete (HotSpot writes its header, magic
number included, last). At most ``MAX_ARCHIVES`` are kept. ``KWIRE_SPARK_CDS=0`` turns it off;
so does giving ``spark.driver.extraJavaOptions`` (kwire then adds nothing to the JVM's options).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from kwire_cli.errors import SparkJobError
from kwire_cli.spec.cache import cache_dir, key_digest, private_dir

DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:MetaspaceSize=256m"
DRIVER_MEMORY = "2g"  # local mode runs the executors in the driver JVM
# a cluster's executor JVMs do the same little Java work per byte (Arrow batches in, files out):
# the optimising tier of the just-in-time compiler costs them more than it wins (standalone cluster,
# executors confined to their cores, 577 MB: 1 core 17.2 -> 11.3 s of the executor's JVM CPU, 2 cores
# 19.8 -> 12.7 s; 2.3 GB, 2 cores: 48.7 -> 40.8 s, two runs each)
EXECUTOR_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
EXECUTOR_OPTIONS_CONF = "spark.executor.extraJavaOptions"
#: the driver's logging: errors only (log4j2.properties beside this module)
_LOG_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
LOG_OPTION = f'-Dlog4j2.configurationFile="{_LOG_CONFIG}"' if " " in _LOG_CONFIG else \
    f"-Dlog4j2.configurationFile={_LOG_CONFIG}"
PROPERTY_KEY = re.compile(r"\s*([^\s=:#!]+)")  # a Java properties file's key (spark-defaults.conf)
WORKER_PIPE_BUFFER = 1 << 20  # spark.buffer.size: Python workers <-> JVM
DYNAMIC_ARCHIVE_MAGIC = (0xF00BABA8).to_bytes(4, sys.byteorder)  # HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC
MAX_ARCHIVES = 2         # archives kept (each ~160 MB); older ones are removed
STALE_WRITE_S = 600      # an unfinished archive this old was left by a JVM that died while writing it
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"
CLASS_PATH_CONF = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages", "spark.jars.repositories",
                   "spark.jars.ivy")


def spark_home() -> str | None:
    """Where Spark's jars are: SPARK_HOME, or the pyspark package's directory; None without pyspark."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    try:
        import pyspark
    except ImportError:
        return None
    return os.path.dirname(pyspark.__file__)


def java() -> str | None:
    """The java binary Spark will start (JAVA_HOME's, or the PATH's), its real path."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def _archive_key(conf: dict[str, str], options: str) -> str | None:
    """What the driver JVM's loaded classes depend on, as one string."""
    java_bin = java()
    if java_bin is None:
        return None
    try:
        import pyspark
        jars = os.path.join(spark_home() or "", "jars")
        parts = [java_bin, str(os.stat(java_bin).st_mtime_ns), os.path.realpath(jars), str(os.stat(jars).st_mtime_ns),
                 pyspark.__version__, options]
    except (ImportError, OSError):
        return None
    parts += [f"{k}={conf.get(k, '')}" for k in CLASS_PATH_CONF]
    parts.append(os.environ.get("SPARK_CLASSPATH", ""))
    return "\0".join(parts)


def _complete(p: Path) -> bool:
    """A class data archive the JVM finished writing, owned by this user."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return os.fstat(fd).st_uid == os.getuid() and os.read(fd, 4) == DYNAMIC_ARCHIVE_MAGIC
    finally:
        os.close(fd)


def class_data_options(conf: dict[str, str], options: str = DRIVER_JAVA_OPTIONS) -> str:
    """The JVM options that map the class data archive, or have this run write it, for a JVM started
    with ``options``; "" for none."""
    if os.environ.get("KWIRE_SPARK_CDS", "") in ("0", "off", "no", "false"):
        return ""
    d = cache_dir()
    key = _archive_key(conf, options)
    if d is None or key is None:
        return ""
    name = f"spark-{key_digest(key)}.jsa"
    path = d / name
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not private_dir(d):
            return ""
        writing = False
        for tmp in d.glob(f"{name}.*.tmp"):  # archives written by earlier runs' JVMs at their exit
            if _complete(tmp):
                os.replace(tmp, path)
            elif time.time() - tmp.stat().st_mtime > STALE_WRITE_S:
                tmp.unlink()
            else:
                writing = True  # another run's JVM is writing it now
        if _complete(path):
            os.utime(path)
            old = sorted(d.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime)
            for p in old[:-MAX_ARCHIVES]:
                p.unlink()
            return f"-XX:SharedArchiveFile={path} {QUIET}"
        if writing:
            return ""
        return f"-XX:ArchiveClassesAtExit={d / f'{name}.{os.getpid()}-{time.monotonic_ns()}.tmp'} {QUIET}"
    except OSError:  # no archive is no error: the JVM loads its classes as usual
        return ""


def class_data_status(spark) -> str:
    """How this session's driver JVM used the class data archive: "used" (mapped), "refused" (the
    JVM did not map it), "writing" (written when the JVM exits), "off"."""
    opts = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "") or ""
    if "-XX:ArchiveClassesAtExit=" in opts:
        return "writing"
    m = re.search(r"-XX:SharedArchiveFile=(\S+)", opts)
    if m is None:
        return "off"
    pid = getattr(getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None), "pid", None)
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "used" if m.group(1) in f.read() else "refused"
    except OSError:
        return "used"  # the JVM is not a process of ours to look at; it was given the archive


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
    started = jvm_started()
    if master:
        b = b.master(master)
    elif not started and not SparkConf().contains("spark.master"):
        b = b.master("local[*]")  # (spark-submit's JVM has the master it was given)
    conf = list(conf)
    given = {k for k, _ in conf}
    options = DRIVER_JAVA_OPTIONS
    if started:
        pass  # the driver JVM's memory and options were spark-submit's to set
    elif "spark.driver.memory" not in given and not os.environ.get("SPARK_DRIVER_MEMORY"):
        b = b.config("spark.driver.memory", DRIVER_MEMORY)
        # the whole heap from the start: growing it from 1/64 of the machine's memory cost full
        # collections while the rows flowed (577 MB, jsonl, 3 paired runs: the JVM's CPU 0.88x)
        options += f" -Xms{DRIVER_MEMORY}"
    if "spark.driver.extraJavaOptions" not in given and not started:
        # the JVM kwire starts does little Java work per byte (the decoding is in Python): its
        # just-in-time compiler's optimising tier and the parallel collector cost more CPU than they
        # win (measured on 577 MB: the JVM's CPU 30 s -> 20 s, Spark's start 10.7 s -> 6.0 s); a
        # metaspace that starts large enough for Spark's classes saves four full collections at start
        cds = class_data_options(dict(conf), options)
        b = b.config("spark.driver.extraJavaOptions", f"{options} {cds} {LOG_OPTION}".strip())
    if "spark.buffer.size" not in given:
        # the pipe between each Python worker and the JVM: the rows cross it in 1 MiB pieces, not
        # 64 KiB (20 files, 3 paired runs at load 4-6: whole command's CPU 0.84, 0.99, 0.95)
        b = b.config("spark.buffer.size", str(WORKER_PIPE_BUFFER))
    b = b.config("spark.ui.showConsoleProgress", "true" if progress else "false") \
         .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false") \
         .config("spark.python.worker.reuse", "true") \
         .config("spark.python.worker.memory", "1g")
    for k, v in conf:
        b = b.config(k, v)
    early = threading.Thread(target=import_udf_modules, name="kwire: imports", daemon=True)
    early.start()
    try:
        spark = b.getOrCreate()
    except Exception as e:  # Java missing, master unreachable...: one line
        raise SparkJobError(f"cannot start Spark ({master or 'local[*]'}): {first_line(e)}") from None
    finally:
        early.join()
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def import_udf_modules() -> None:
    """Import what the job's first ``mapInArrow`` imports (PySpark's pandas UDF module, which imports
    pandas and pyarrow to check their versions: 0.3-0.45 s), in a thread while the driver JVM
    starts: the driver's Python only waits for the JVM then, and the job no longer does it first."""
    try:
        import pyspark.sql.pandas.functions  # noqa: F401
        from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version
        require_minimum_pandas_version()
        require_minimum_pyarrow_version()
    except Exception:  # the job's own call says what is missing, where it is needed
        pass


def executor_conf(master: str, conf: Iterable[tuple[str, str]] = ()) -> tuple:
    """The executors' JVM options on a cluster (``EXECUTOR_JAVA_OPTIONS``), unless the user, the
    cluster's ``spark-defaults.conf`` or spark-submit gives them (kwire's setting would replace
    theirs, not add to it); () for a local master (its executors are the driver JVM)."""
    if master.startswith("local") or any(k == EXECUTOR_OPTIONS_CONF for k, _ in conf):
        return ()
    if jvm_started():
        from pyspark import SparkConf, SparkContext
        SparkContext._ensure_initialized()  # (without the gateway SparkConf reads nothing of the JVM's)
        if SparkConf().contains(EXECUTOR_OPTIONS_CONF):  # spark-submit's --conf or its defaults file
            return ()
    elif EXECUTOR_OPTIONS_CONF in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or _in_defaults_file(EXECUTOR_OPTIONS_CONF):
        return ()
    return ((EXECUTOR_OPTIONS_CONF, EXECUTOR_JAVA_OPTIONS),)


def _in_defaults_file(key: str) -> bool:
    """``key`` is set in the spark-defaults.conf the JVM kwire starts will read (SPARK_CONF_DIR's,
    or Spark's home's conf/); an unreadable file counts as setting it."""
    d = os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home() or "", "conf")
    try:
        with open(os.path.join(d, "spark-defaults.conf"), encoding="utf-8", errors="replace") as f:
            return any(m is not None and m[1] == key for m in map(PROPERTY_KEY.match, f))
    except FileNotFoundError:
        return False
    except OSError:
        return True


def jvm_started() -> bool:
    """Python runs inside spark-submit, which started the driver JVM first (and gave it its master,
    memory and options): nothing kwire sets can change that JVM's options or class path."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def session_master(master: str | None) -> str:
    """The master a new session will have: ``master``, or spark-submit's (read from its JVM), or
    ``local[*]``."""
    if master:
        return master
    from pyspark import SparkConf, SparkContext
    if jvm_started():
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose conf has the master
    return SparkConf().get("spark.master", "local[*]") or "local[*]"


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (Java's are long)."""
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
