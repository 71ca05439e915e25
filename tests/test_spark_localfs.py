"""The local file system a local session writes through (kwire_cli/spark/localfs.py): no chmod
process per output file and directory, the same modes, no .crc files, the same rows as Hadoop's own
file system; compiled once into the cache, never from a directory others can write; not for a
cluster, nor when the user gives the settings or turns it off.

The job cases are real `kwire spark-decode` processes, with a `chmod` first on their PATH that logs
each call and then runs the real one."""
from __future__ import annotations

import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java: Spark cannot start", allow_module_level=True)

from kwire_cli.spark import localfs
from kwire_cli.spark.session import java

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = str(ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap")
CHMOD = shutil.which("chmod")
HAS_JAVAC = java() is not None and localfs._javac(java() or "") is not None


def spark_decode(tmp: Path, out: Path, *conf: str, env: dict | None = None) -> tuple[dict, list[str], list[str]]:
    """Run the job; its _kwire_result.json, the chmod commands it ran, and its rows (sorted lines)."""
    shim = tmp / "bin"
    shim.mkdir(exist_ok=True)
    log = tmp / "chmod.log"
    (shim / "chmod").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {CHMOD} "$@"\n')
    (shim / "chmod").chmod(0o755)
    cmd = [sys.executable, "-m", "kwire_cli", "spark-decode", CAPTURE, "--out", str(out), "--overwrite",
           "--master", "local[1]", "--format", "jsonl", "--summary-format", "none",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", "spark.kwire.jsonlWriter=spark"]  # the lines through Spark's writer: its file system
    for c in conf:
        cmd += ["--conf", c]
    e = {k: v for k, v in os.environ.items() if k != "KWIRE_SPARK_LOCAL_FS"}
    e.update(XDG_CACHE_HOME=str(tmp / "cache"), KWIRE_SPARK_CDS="0", PATH=f"{shim}{os.pathsep}{e['PATH']}",
             **(env or {}))
    if log.exists():
        log.unlink()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=e, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = sorted(line for p in glob.glob(str(out / "api_name=*" / "*.jsonl"))
                  for line in Path(p).read_text().splitlines())
    calls = log.read_text().splitlines() if log.exists() else []
    return json.loads((out / "_kwire_result.json").read_text()), calls, rows


def modes(out: Path) -> dict[str, int]:
    """Permission bits of every file and directory under ``out`` the writer made (not kwire's own files)."""
    found = {}
    for p in [out, *out.rglob("*")]:
        if not p.name.startswith("_kwire_"):
            found[str(p.relative_to(out))] = stat.S_IMODE(p.stat().st_mode)
    return found


@pytest.mark.skipif(not HAS_JAVAC, reason="no javac beside java or on the PATH: Hadoop's own file system is used")
def test_a_local_session_writes_without_chmod_processes_with_the_same_modes_and_rows(tmp_path):
    res, calls, rows = spark_decode(tmp_path, tmp_path / "out")
    assert res["local_file_system"] == "kwire"
    assert calls == []
    assert rows and len(rows) == res["rows"]
    assert not list((tmp_path / "out").rglob("*.crc"))  # the raw file system writes no checksum files
    jars = list((tmp_path / "cache" / "kwire").glob("localfs-*.jar"))
    assert len(jars) == 1
    with zipfile.ZipFile(jars[0]) as z:
        assert "kwire/spark/NioLocalFileSystem.class" in z.namelist()

    # the control: Hadoop's own file system runs chmod for each file and directory it creates
    old, hcalls, hrows = spark_decode(tmp_path, tmp_path / "hadoop", env={"KWIRE_SPARK_LOCAL_FS": "0"})
    assert old["local_file_system"] == "hadoop"
    parts = glob.glob(str(tmp_path / "hadoop" / "api_name=*" / "part-*"))
    assert parts and len(hcalls) >= 2 * len(parts)  # each part file and its .crc, and the directories
    assert all(c.split()[0] in ("0644", "0755") for c in hcalls)
    # its checksum files are renamed with the part files they check
    assert sorted(glob.glob(str(tmp_path / "hadoop" / "api_name=*" / ".part-*.crc"))) == sorted(
        os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.crc") for p in parts)
    assert hrows == rows
    kw = modes(tmp_path / "out")
    hd = {k: v for k, v in modes(tmp_path / "hadoop").items() if not Path(k).name.startswith(".")}  # .crc files
    # same directories and files with the same modes (the part files' names hold a job id)
    assert sorted(kw.values()) == sorted(hd.values())
    assert set(kw.values()) <= {0o644, 0o755}

    # the second run finds the compiled class in the cache
    again, calls2, rows2 = spark_decode(tmp_path, tmp_path / "out")
    assert again["local_file_system"] == "kwire" and calls2 == [] and rows2 == rows
    # and the user's own settings are theirs: Hadoop's file system, kwire's class not loaded
    mine, calls3, rows3 = spark_decode(tmp_path, tmp_path / "mine", "spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem")
    assert mine["local_file_system"] == "hadoop" and calls3 and rows3 == rows
    assert list((tmp_path / "cache" / "kwire").glob("localfs-*.jar")) == jars


def test_given_settings_a_cluster_or_turning_it_off_leave_hadoops_file_system(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KWIRE_SPARK_LOCAL_FS", raising=False)
    j = java()
    buffer = ((localfs.BUFFER_CONF, str(localfs.WRITE_BUFFER)),)
    # a cluster's executors write through Hadoop's own streams: the larger buffer, not the class
    assert localfs.local_fs_conf("spark://127.0.0.1:7077", (), j) == buffer
    assert localfs.local_fs_conf("yarn", (), j) == buffer
    assert localfs.local_fs_conf("yarn", ((localfs.BUFFER_CONF, "65536"),), j) == ()
    assert localfs.local_fs_conf("local[2]", (("spark.driver.extraClassPath", "/opt/x.jar"),), j) == buffer
    assert localfs.local_fs_conf("local[2]", (("spark.hadoop.fs.file.impl", "x.Y"),), j) == buffer
    mine = (("spark.hadoop.fs.file.impl", "x.Y"), (localfs.BUFFER_CONF, "4096"))
    assert localfs.local_fs_conf("local[2]", mine, j) == ()
    monkeypatch.setenv("KWIRE_SPARK_LOCAL_FS", "0")
    assert localfs.local_fs_conf("local[*]", (), j) == buffer
    assert not list(tmp_path.rglob("*.jar"))


def test_no_compiler_or_a_cache_others_can_write_gives_no_jar(tmp_path, monkeypatch):
    # a JRE: no javac beside java, none on the PATH
    jre = tmp_path / "jre" / "bin"
    jre.mkdir(parents=True)
    (jre / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(jre))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c1"))
    assert localfs.local_fs_jar(str(jre / "java")) is None
    monkeypatch.undo()
    if not HAS_JAVAC:
        return
    shared = tmp_path / "shared"
    (shared / "kwire").mkdir(parents=True)
    (shared / "kwire").chmod(0o777)  # others could plant a jar of their own there
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert localfs.local_fs_jar(java()) is None
    assert not list(shared.rglob("*.jar"))


@pytest.mark.skipif(not HAS_JAVAC, reason="no javac")
def test_a_source_that_does_not_compile_gives_no_jar(tmp_path, monkeypatch):
    bad = tmp_path / "NioLocalFileSystem.java"
    bad.write_text("package kwire.spark; public class NioLocalFileSystem extends Missing {}\n")
    monkeypatch.setattr(localfs, "SOURCE", bad)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert localfs.local_fs_jar(java()) is None
    assert not list((tmp_path / "c").rglob("*.jar"))


def test_under_spark_submit_its_master_and_jvm_are_kept(tmp_path):
    """spark-submit starts the driver JVM before Python: kwire keeps the master it was given (it
    used to start a local[*] session in its place) and adds nothing to that JVM's class path."""
    import pyspark
    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    submit = subprocess.run([sys.executable, "-m", "kwire_cli.cli.spark_submit", "--path"], capture_output=True,
                            text=True, check=True).stdout.strip()
    out = tmp_path / "out"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([os.path.join(home, "bin", "spark-submit"), "--master", "local[1]",
                        "--conf", "spark.ui.enabled=false", submit, CAPTURE, "--out", str(out),
                        "--format", "jsonl", "--summary-format", "none"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    res = json.loads((out / "_kwire_result.json").read_text())
    assert res["master"] == "local[1]"
    assert res["local_file_system"] == "hadoop"
    rows = sorted(line for p in glob.glob(str(out / "api_name=*" / "*.jsonl")) for line in Path(p).read_text().splitlines())
    pcap = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", CAPTURE, "--format", "jsonl"],
                          capture_output=True, text=True, cwd=ROOT, check=True).stdout.splitlines()
    assert rows == sorted(pcap) and rows
