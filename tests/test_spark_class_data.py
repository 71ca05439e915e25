"""The driver JVM's class data archive (kwire_cli/spark/session.py): written by the first run when
its JVM exits, mapped by the next ones, refused quietly when it does not match, never taken from a
directory others can write, off with KWIRE_SPARK_CDS=0 -- and the rows the same every time.

Each case is a real `kwire spark-decode` process with its own $XDG_CACHE_HOME (about 10 s each)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java: Spark cannot start", allow_module_level=True)

from kwire_cli.spark.session import DYNAMIC_ARCHIVE_MAGIC

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = str(ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap")


def spark_decode(cache: Path, out: Path, *conf: str, env: dict | None = None) -> tuple[dict, str, list[str]]:
    """Run the job; its _kwire_result.json, its stderr and its rows (sorted lines)."""
    cmd = [sys.executable, "-m", "kwire_cli", "spark-decode", CAPTURE, "--out", str(out), "--overwrite",
           "--master", "local[1]", "--format", "jsonl", "--summary-format", "none",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false"]
    for c in conf:
        cmd += ["--conf", c]
    e = {k: v for k, v in os.environ.items() if k != "KWIRE_SPARK_CDS"}  # on unless the case turns it off
    e.update(XDG_CACHE_HOME=str(cache), **(env or {}))
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=e, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = sorted(line for p in glob.glob(str(out / "api_name=*" / "*.jsonl"))
                  for line in Path(p).read_text().splitlines())
    return json.loads((out / "_kwire_result.json").read_text()), r.stderr, rows


def head(p: Path) -> bytes:
    with open(p, "rb") as f:
        return f.read(4)


def complete_archives(d: Path, pattern: str, wait_s: float = 90) -> list[Path]:
    """The archives matching ``pattern`` in ``d`` once one is complete (the JVM writes it as it
    exits, which can be after the kwire process ended)."""
    end = time.monotonic() + wait_s
    while True:
        done = [p for p in d.glob(pattern) if head(p) == DYNAMIC_ARCHIVE_MAGIC]
        if done or time.monotonic() > end:
            return done
        time.sleep(0.5)


def test_written_once_then_mapped_and_the_rows_unchanged(tmp_path):
    cache = tmp_path / "cache"
    first, _, rows = spark_decode(cache, tmp_path / "o1")
    assert first["jvm_class_data"] == "writing"
    assert rows and len(rows) == first["rows"]
    d = cache / "kwire"
    assert (d.stat().st_mode & 0o777) == 0o700
    (tmp,) = complete_archives(d, "spark-*.jsa.*.tmp")
    assert not list(d.glob("spark-*.jsa"))  # taken into use by the next run, not before
    second, err, rows2 = spark_decode(cache, tmp_path / "o2")
    assert second["jvm_class_data"] == "used"  # mapped: seen in the JVM's /proc/PID/maps
    assert not tmp.exists() and len(list(d.glob("spark-*.jsa"))) == 1
    assert rows2 == rows
    assert "[cds" not in err

    # an archive that does not match this JVM's class path: the JVM refuses it, quietly, and the job runs
    (archive,) = d.glob("spark-*.jsa")
    jar = tmp_path / "extra.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    other_cp = (f"spark.driver.extraClassPath={jar}",)
    probe, _, _ = spark_decode(cache, tmp_path / "o4", *other_cp)
    assert probe["jvm_class_data"] == "writing"  # another class path: another name, its own archive
    (written,) = complete_archives(d, "spark-*.jsa.*.tmp")
    name = written.name.split(".jsa.")[0] + ".jsa"
    written.unlink()
    shutil.copyfile(archive, d / name)  # the first class path's archive under the second's name
    os.chmod(d / name, 0o400)
    refused, err, rows5 = spark_decode(cache, tmp_path / "o5", *other_cp)
    assert refused["jvm_class_data"] == "refused"
    assert rows5 == rows
    assert "[cds" not in err and "shared archive" not in err  # HotSpot's "[warning][cds,dynamic] Unable to use..."


def test_off_when_asked_or_when_others_can_write_the_cache(tmp_path):
    cache = tmp_path / "cache"
    res, _, rows = spark_decode(cache, tmp_path / "o1", env={"KWIRE_SPARK_CDS": "0"})
    assert res["jvm_class_data"] == "off" and rows
    assert not glob.glob(str(cache / "kwire" / "spark-*"))
    (cache / "kwire").mkdir(parents=True, exist_ok=True)
    os.chmod(cache / "kwire", 0o777)  # anyone could plant an archive here: none is read or written
    res, _, rows2 = spark_decode(cache, tmp_path / "o2")
    assert res["jvm_class_data"] == "off" and rows2 == rows
    assert not glob.glob(str(cache / "kwire" / "spark-*"))
    # the user's own JVM options: kwire adds nothing
    res, _, _ = spark_decode(tmp_path / "c2", tmp_path / "o3", "spark.driver.extraJavaOptions=-XX:+UseSerialGC")
    assert res["jvm_class_data"] == "off"
