"""`kwire spark-decode --master spark://...` on a real standalone cluster: one master and one worker
from the pyspark wheel, on 127.0.0.1 only, started and stopped by this test.

Part of the default test run (about 40 s; ``KWIRE_SPARK_CLUSTER=0`` turns it off). The executors'
Python cannot import kwire from the repository (a sitecustomize on their
PYTHONPATH removes the checkout from sys.path), so the rows only come out right if the job ships
its code (the kwire_cli zip) and its message specs to the executors itself.
"""
from __future__ import annotations

import collections
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if os.environ.get("KWIRE_SPARK_CLUSTER") == "0":
    pytest.skip("KWIRE_SPARK_CLUSTER=0: the standalone-cluster test is turned off", allow_module_level=True)
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java: Spark cannot start", allow_module_level=True)

from test_spark import merged_rotated_lines, pcap_lines

ROOT = Path(__file__).resolve().parents[1]
FILES = ["fixtures/captures/kafka-python-consume.pcap", "fixtures/captures/confluent-kafka-admin.pcap",
         "fixtures/captures/rotated"]
LOOPBACK = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home
    return _find_spark_home()


def _wait(pred, what: str, timeout: float, logs: list[Path]) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n" + p.read_text(errors="replace")[-3000:] for p in logs if p.exists())
    raise AssertionError(f"{what} did not happen within {timeout} s\n{tails}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    home = _spark_home()
    cls = os.path.join(home, "bin", "spark-class")
    port, ui, wui = _free_port(), _free_port(), _free_port()
    mlog, wlog = tmp / "master.log", tmp / "worker.log"
    procs = []
    try:
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], stdout=open(mlog, "wb"), stderr=subprocess.STDOUT, env=LOOPBACK,
            start_new_session=True))
        _wait(lambda: _port_open(port), "master start", 60, [mlog])
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", "--cores", "2", "--memory", "2g", "--host",
             "127.0.0.1", "--webui-port", str(wui), "--work-dir", str(tmp / "work"), f"spark://127.0.0.1:{port}"],
            stdout=open(wlog, "wb"), stderr=subprocess.STDOUT, env=LOOPBACK, start_new_session=True))
        _wait(lambda: _alive_workers(ui) == 1, "worker registration", 60, [mlog, wlog])
        yield f"spark://127.0.0.1:{port}", tmp
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _executor_commands(tmp: Path, before: set[str]) -> list[str]:
    """The command lines the worker started the executors of the applications run since ``before``
    (the worker writes each into the executor's stderr in its work directory)."""
    cmds = []
    for app in sorted(set(glob.glob(str(tmp / "work" / "app-*"))) - before):
        for err in glob.glob(os.path.join(app, "*", "stderr")):
            cmds += [line for line in Path(err).read_text(errors="replace").splitlines()
                     if line.startswith("Spark Executor Command:")]
    return cmds


def _apps(tmp: Path) -> set[str]:
    return set(glob.glob(str(tmp / "work" / "app-*")))


def _lines(out: Path) -> collections.Counter:
    lines = []
    for p in glob.glob(str(out / "api_name=*" / "part-*")):
        lines += Path(p).read_text(encoding="utf-8").splitlines()
    return collections.Counter(lines)


def test_standalone_cluster_rows_equal_local(cluster, monkeypatch):
    master, tmp = cluster
    monkeypatch.chdir(ROOT)
    # executors' Python: no kwire checkout on sys.path (it must come from the shipped zip)
    strip = tmp / "strip"
    strip.mkdir()
    (strip / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(ROOT)!r}]\n"
        "sys.meta_path[:] = [f for f in sys.meta_path\n"
        "                    if 'kwire' not in (getattr(f, '__module__', '') or type(f).__module__)]\n")
    probe = subprocess.run([sys.executable, "-c", "import kwire_cli.capture"], cwd=tmp, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(strip)})
    assert probe.returncode != 0 and "No module named 'kwire_cli" in probe.stderr  # really not importable
    out = tmp / "out"
    env = {**LOOPBACK, "PYSPARK_PYTHON": sys.executable, "KWIRE_NO_PROGRESS": "1"}
    apps = _apps(tmp)
    r = subprocess.run(
        [sys.executable, "-m", "kwire_cli", "spark-decode", *FILES, "--out", str(out), "--master", master,
         "--format", "jsonl", "--summary-format", "json", "--partitions", "3",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", f"spark.executorEnv.PYTHONPATH={strip}", "--conf", "spark.executor.memory=1g",
         "--conf", "spark.ui.enabled=false"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    cluster_summary = json.loads(r.stdout)
    with open(out / "_kwire_result.json") as f:
        result = json.load(f)
    assert result["master"] == master and result["local_file_system"] == "hadoop"
    # the executors ran kwire from the zip the job shipped, not from this checkout
    assert result["executor_code"], result
    assert all(p.endswith(".zip") and "kwire_cli-" in p for p in result["executor_code"]), result["executor_code"]
    # the executors' JVMs ran with kwire's options (EXECUTOR_JAVA_OPTIONS: nobody gave theirs)
    cmds = _executor_commands(tmp, apps)
    assert cmds and all('"-XX:TieredStopAtLevel=1"' in c for c in cmds), cmds

    # the same rows as the local job gives: kwire pcap's lines for each file (test_spark.py shows the
    # local job writes exactly those) and the capture library's reading of the rotated pair as one
    want = pcap_lines(*FILES[:2]) + merged_rotated_lines()
    got = _lines(out)
    assert got == want
    assert sum(got.values()) == cluster_summary["frames"] == result["rows"] > 100
    assert cluster_summary["damage"] == {} and result["failures"] == []


def test_spark_submit_on_the_cluster(cluster, monkeypatch, tmp_path):
    """The same job through spark-submit (kwire_cli/cli/spark_submit.py as the application)."""
    master, tmp = cluster
    monkeypatch.chdir(ROOT)
    apps = _apps(tmp)
    submit = subprocess.run([sys.executable, "-m", "kwire_cli.cli.spark_submit", "--path"], capture_output=True,
                            text=True, check=True).stdout.strip()
    out = tmp_path / "sub"
    f = "fixtures/captures/confluent-kafka-produce.pcap"
    env = {**LOOPBACK, "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run(
        [os.path.join(_spark_home(), "bin", "spark-submit"), "--master", master,
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.executor.memory=1g", "--conf", "spark.executor.extraJavaOptions=-Dkwire.test=submit",
         submit, f, "--out", str(out), "--format", "jsonl",
         "--summary-format", "none", "--partitions", "2"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "kwire spark-decode: files 1," in r.stdout + r.stderr  # spark-submit sends Python's stderr to stdout
    assert _lines(out) == pcap_lines(f)
    with open(out / "_kwire_result.json") as fh:
        assert json.load(fh)["master"] == master  # spark-submit's master, not a local session
    # the executors' JVM options given to spark-submit are theirs: kwire's do not replace them
    cmds = _executor_commands(tmp, apps)
    assert cmds and all('"-Dkwire.test=submit"' in c and "TieredStopAtLevel" not in c for c in cmds), cmds
