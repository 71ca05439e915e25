"""The local file system a local session writes its output through.

Without Hadoop's native library (pyspark ships none), Hadoop's local file system sets the
permission of every file and directory it creates by running a ``chmod`` process. spark-decode's
writer creates one file per task and API (and a ``.crc`` checksum file beside each, and their
directories): about 750 processes for the 20 files of the benchmark (3 paired runs without and
with this class: the driver JVM's CPU 12.59 s -> 11.66 s, its spawning and reaping of them; the
chmod processes themselves used 0.2-0.3 s). A local session
(``local``, ``local[N]``, ``local[*]``) writes instead through ``kwire.spark.NioLocalFileSystem``
(``java/NioLocalFileSystem.java``): Hadoop's raw local file system whose ``setPermission`` is
chmod(2) through java.nio: the same modes, no processes, and no ``.crc`` files.

The class is compiled from its source by the ``javac`` of the JDK the ``java`` binary belongs to
(or on the PATH), once, into ``$XDG_CACHE_HOME/kwire/localfs-*.jar`` (the spec cache's private
directory rule); its name is a checksum of the source, the compiler and Hadoop's jars. Without a
compiler (a JRE), or when it fails, the session uses Hadoop's own file system as before. Not for a
cluster: its executors' JVMs would not have the class. ``KWIRE_SPARK_LOCAL_FS=0`` turns it off,
and so does giving ``spark.hadoop.fs.file.impl`` or ``spark.driver.extraClassPath``.

Output streams also get a larger buffer (``WRITE_BUFFER``, unless
``spark.hadoop.io.file.buffer.size`` is given), on any master: the executors of a cluster write
through the same Hadoop output streams (its local file system, HDFS's client).
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from kwire_cli.spark.session import spark_home
from kwire_cli.spec.cache import cache_dir, key_digest, private_dir

FS_CLASS = "kwire.spark.NioLocalFileSystem"
SOURCE = Path(__file__).parent / "java" / "NioLocalFileSystem.java"
JAVA_RELEASE = "17"        # Spark 4 runs on Java 17 and later
COMPILE_TIMEOUT_S = 120
USER_CONF = ("spark.hadoop.fs.file.impl", "spark.driver.extraClassPath")
# Hadoop's output streams buffer io.file.buffer.size bytes, 4 KiB by default: smaller than a row of
# JSON text (7.5 KB on average in the benchmark), so every row was a write(2) of its own, and its
# newline another. 128 KiB a stream: ~11,000 writes for 1.47 GB instead of ~400,000 (measured at
# 1 MiB, 2 paired runs: the JVM's CPU 0.86x, 0.89x); a task of 64 open writers holds 8 MiB.
BUFFER_CONF = "spark.hadoop.io.file.buffer.size"
WRITE_BUFFER = 128 << 10

def _hadoop_jars() -> list[str]:
    home = spark_home()
    return sorted(glob.glob(os.path.join(glob.escape(home), "jars", "hadoop-client-api-*.jar"))) if home else []


def _javac(java: str) -> str | None:
    near = os.path.join(os.path.dirname(java), "javac")
    found = near if os.path.exists(near) else shutil.which("javac")
    return os.path.realpath(found) if found else None


def local_fs_jar(java: str | None) -> Path | None:
    """The jar holding ``FS_CLASS``, compiled now if this is the first time; None when it cannot be."""
    d = cache_dir()
    jars = _hadoop_jars()
    javac = _javac(java) if java else None
    if d is None or not jars or javac is None:
        return None
    try:
        source = SOURCE.read_bytes()
        parts = [source, javac.encode(), str(os.stat(javac).st_mtime_ns).encode()]
        parts += [f"{j}:{os.stat(j).st_mtime_ns}".encode("utf-8", "surrogateescape") for j in jars]
        key = b"\0".join(parts)
        path = d / f"localfs-{key_digest(key)}.jar"
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not private_dir(d):
            return None
        if path.is_file() and not path.is_symlink() and path.stat().st_uid == os.getuid():
            return path
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            classes = os.path.join(tmp, "classes")
            done = subprocess.run([javac, "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8",
                                   "-cp", os.pathsep.join(jars), "-d", classes, str(SOURCE)],
                                  capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
            if done.returncode != 0:
                return None
            part = os.path.join(tmp, "localfs.jar")
            with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
                for root, _, files in sorted(os.walk(classes)):
                    for f in sorted(files):
                        full = os.path.join(root, f)
                        z.write(full, os.path.relpath(full, classes))
            os.replace(part, path)
        return path
    except (OSError, subprocess.SubprocessError):  # no jar is no error: Hadoop's own file system
        return None


def local_fs_conf(master: str, conf: tuple, java: str | None, jvm_started: bool = False) -> tuple:
    """The settings of a local session's file writing: ``WRITE_BUFFER`` (unless given), and
    ``FS_CLASS`` unless turned off or given otherwise, the driver JVM already started (spark-submit:
    its class path is set), or the class cannot be compiled; on a cluster, ``WRITE_BUFFER`` only."""
    given = {k for k, _ in conf}
    settings: tuple = ()
    if BUFFER_CONF not in given:
        settings += ((BUFFER_CONF, str(WRITE_BUFFER)),)
    if (not master.startswith("local") or jvm_started or given & set(USER_CONF)
            or os.environ.get("KWIRE_SPARK_LOCAL_FS", "") in ("0", "off", "no", "false")):
        return settings
    jar = local_fs_jar(java)
    if jar is None:
        return settings
    return settings + (("spark.driver.extraClassPath", str(jar)), ("spark.hadoop.fs.file.impl", FS_CLASS))


def local_fs_status(spark) -> str:
    """"kwire" when the session writes local files through ``FS_CLASS``, else "hadoop"."""
    return "kwire" if spark.sparkContext.getConf().get("spark.hadoop.fs.file.impl", "") == FS_CLASS else "hadoop"
