"""spark-decode's own files (issue 15, item 5): the code zip shipped to executors is built in a
fresh private directory (never one found at a predictable path), --out may not be a symbolic link,
and the summary files in --out are written without following a link planted there. None of this
needs a Spark session: the checks come before one starts, and ship_code only talks to the
context's addPyFile/addArchive."""
from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from pathlib import Path

import pytest

import kwire_cli
from kwire_cli.errors import SparkJobError
from kwire_cli.spark import job, shipping

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = str(ROOT / "fixtures" / "captures" / "kafka-python-produce.pcap")


class Context:
    """What ship_code asks of a SparkContext: where it ships files."""

    master = "spark://cluster:7077"

    def __init__(self, app: str) -> None:
        self.applicationId = app
        self.py_files: list[str] = []
        self.archives: list[str] = []

    def addPyFile(self, path: str) -> None:
        self.py_files.append(path)

    def addArchive(self, path: str) -> None:
        self.archives.append(path)


def test_the_code_zip_is_built_fresh_in_a_private_directory():
    old = Path(tempfile.gettempdir()) / f"kwire-spark-{os.getpid()}"
    old.mkdir(exist_ok=True)
    planted = old / "kwire_cli-planted.zip"
    with zipfile.ZipFile(planted, "w") as z:
        z.writestr("kwire_cli/__init__.py", "raise SystemExit('planted')\n")
    try:
        sc = Context("app-files-1")
        shipping.ship_code(sc, ship=True)
        (zpath,), (spath,) = sc.py_files, sc.archives
        d = Path(zpath).parent
        assert d != old and d == Path(spath).parent
        assert stat.S_IMODE(d.stat().st_mode) == 0o700 and d.stat().st_uid == os.getuid()
        init = Path(kwire_cli.__file__).read_bytes()
        with zipfile.ZipFile(zpath) as z:
            assert z.read("kwire_cli/__init__.py") == init
        # another application gets another directory, built again
        sc2 = Context("app-files-2")
        shipping.ship_code(sc2, ship=True)
        assert Path(sc2.py_files[0]).parent != d
    finally:
        planted.unlink()
        old.rmdir()


def test_out_that_is_a_symbolic_link_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    link = tmp_path / "out"
    link.symlink_to(target)
    with pytest.raises(SparkJobError, match="symbolic link"):
        job.run([CAPTURE], str(link), overwrite=True)
    assert (target / "keep.txt").read_text() == "mine"


def test_summary_files_are_not_written_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    out = tmp_path / "out"
    out.mkdir()
    (out / "_kwire_summary.json").symlink_to(victim)
    with pytest.raises(SparkJobError, match="symbolic link is not followed"), \
            job.create_nofollow(str(out / "_kwire_summary.json")) as f:
        f.write("{}")
    assert victim.read_text() == "untouched"
    with job.create_nofollow(str(out / "_kwire_result.json")) as f:
        f.write("{}\n")
    assert (out / "_kwire_result.json").read_text() == "{}\n"


def test_a_clusters_executors_get_kwires_jvm_options_unless_someone_gave_theirs(tmp_path, monkeypatch):
    """On a cluster the executors' JVMs get EXECUTOR_JAVA_OPTIONS, except where that would replace
    options the user (--conf, PYSPARK_SUBMIT_ARGS) or the cluster's spark-defaults.conf gives."""
    from kwire_cli.spark import session
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    mine = (("spark.executor.extraJavaOptions", "-Xss4m"),)
    ours = ((session.EXECUTOR_OPTIONS_CONF, session.EXECUTOR_JAVA_OPTIONS),)
    assert session.executor_conf("local[*]") == () and session.executor_conf("local[2]") == ()
    assert session.executor_conf("spark://10.0.0.5:7077") == ours
    assert session.executor_conf("yarn", (("spark.executor.memory", "4g"),)) == ours
    assert session.executor_conf("yarn", mine) == ()
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("# spark.executor.extraJavaOptions -Xss2m\nspark.executor.memory 4g\n")
    assert session.executor_conf("yarn") == ours  # a comment sets nothing
    for line in ("spark.executor.extraJavaOptions  -XX:+UseG1GC", "spark.executor.extraJavaOptions=-Xss2m",
                 "  spark.executor.extraJavaOptions:-Xss2m"):
        defaults.write_text(f"spark.master yarn\n{line}\n")
        assert session.executor_conf("yarn") == (), line
    defaults.unlink()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.executor.extraJavaOptions=-Xss2m pyspark-shell")
    assert session.executor_conf("yarn") == ()


def test_local_sessions_fork_workers_from_kwires_daemon():
    """A local session's Python workers are forked from kwire_cli.spark.daemon (kwire imported
    once); not when kwire's code is shipped, on a cluster, or when the setting is given."""
    daemon = (("spark.python.daemon.module", "kwire_cli.spark.daemon"),)
    assert job.daemon_conf("local[2]") == daemon
    assert job.daemon_conf("local[*]", (("spark.executor.memory", "1g"),), None) == daemon
    assert job.daemon_conf("local[2]", ship=True) == ()
    assert job.daemon_conf("spark://10.0.0.5:7077") == ()
    assert job.daemon_conf("yarn") == ()
    assert job.daemon_conf("local[2]", (("spark.python.daemon.module", "pyspark.daemon"),)) == ()


def test_daemon_preloads_without_threads():
    """The daemon forks its workers after its imports: those must start no thread (pyarrow's
    import starts jemalloc's) and leave pyarrow and pandas to the workers."""
    pytest.importorskip("pyspark")
    import subprocess
    import sys
    code = ("import os, sys; from kwire_cli.spark.daemon import preload; preload(); "
            "print(len(os.listdir('/proc/self/task')), 'pyarrow' in sys.modules, 'pandas' in sys.modules, "
            "'kwire_cli.capture.session' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "False", "False", "True"]


FORKED_WORKER = """
import os
from kwire_cli.spark.daemon import keep_freed_memory
from kwire_cli.memory import _arenas
keep_freed_memory()
pid = os.fork()
if pid == 0:  # a worker: a task's trees built and dropped, then the next task's
    for _ in range(10):
        t = [{"Offset": i, "Value": "x" * 100, "Headers": []} for i in range(20000)]
        del t
    kept, reused, mapped = _arenas.stats()
    os._exit(0 if kept > 0 and reused >= 9 * 3 else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_daemon_workers_keep_the_memory_they_free():
    """The daemon sets kwire_cli.memory's keeping before it forks: a forked worker's trees take the
    arenas of the trees before them, not fresh ones."""
    import subprocess
    import sys
    env = dict(os.environ, KWIRE_NO_SPEEDUPS="0")
    r = subprocess.run([sys.executable, "-c", "import kwire_cli.memory._arenas"], capture_output=True, env=env)
    if r.returncode != 0:
        pytest.skip("kwire_cli/memory/_arenas.c is not built")
    r = subprocess.run([sys.executable, "-c", FORKED_WORKER], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]


TUNED_WORKER = """
import gc, os
from kwire_cli.render.jsonlines import GC_TUNED, gc_tuned
from kwire_cli.spark.daemon import preload, tune_collector
preload()
tune_collector()
frozen = gc.get_freeze_count()
pid = os.fork()
if pid == 0:  # a worker: two tasks, each in gc_tuned, as the stages run them
    ok = frozen > 10000
    for _ in range(2):
        with gc_tuned():
            ok = ok and gc.get_threshold() == GC_TUNED
        ok = ok and gc.get_threshold() == GC_TUNED and gc.get_freeze_count() > frozen // 2  # (not unfrozen)
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_daemon_workers_keep_the_collector_tuned_between_tasks():
    """The daemon freezes what it imported and tunes the collector before it forks: a worker's
    tasks (each in gc_tuned) leave it tuned and frozen, not unfrozen for a full collection at
    each task's end."""
    pytest.importorskip("pyspark")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", TUNED_WORKER], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]


def test_gc_tuned_restores_the_collector():
    """gc_tuned outside a tuned process sets the thresholds and freezes for its block, and restores
    both after; inside another gc_tuned it changes nothing."""
    import gc

    from kwire_cli.render.jsonlines import GC_TUNED, gc_tuned
    before = gc.get_threshold()
    assert before != GC_TUNED
    with gc_tuned():
        assert gc.get_threshold() == GC_TUNED
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gc_tuned():
            assert gc.get_threshold() == GC_TUNED
        # neither unfrozen (0) nor frozen again (more): a frozen object freed meanwhile, by this
        # thread or another of the test process, lowers the count by one
        assert 0 < gc.get_freeze_count() <= frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_daemon_imports_pyspark_from_the_installed_package_not_its_zip(tmp_path):
    """Spark puts python/lib/pyspark.zip first on the workers' path: the daemon takes PySpark from
    the pip-installed package that zip belongs to (byte code cached, the zip's compiled again by
    every daemon); a Spark home of its own keeps its zip."""
    pytest.importorskip("pyspark")
    import subprocess
    import sys

    import pyspark

    from kwire_cli.spark.daemon import prefer_installed
    site = os.path.dirname(os.path.dirname(pyspark.__file__))
    lib = os.path.join(site, "pyspark", "python", "lib")
    zips = sorted(os.path.join(lib, z) for z in os.listdir(lib) if z.endswith(".zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    assert prefer_installed([*zips, str(ROOT), site]) == [str(ROOT), site]
    assert prefer_installed(zips) == zips  # the package is not on the path: nothing to import instead
    home = tmp_path / "spark" / "python" / "lib"
    home.mkdir(parents=True)
    (home / "pyspark.zip").write_bytes(Path(zips[-1]).read_bytes())
    assert prefer_installed([str(home / "pyspark.zip"), site]) == [str(home / "pyspark.zip"), site]
    # the daemon's preload with Spark's path for the workers: PySpark from the package
    code = ("import sys; from kwire_cli.spark.daemon import prefer_installed, preload; "
            "sys.path[:] = prefer_installed(sys.path); preload(); import pyspark.worker; print(pyspark.worker.__file__)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*zips, str(ROOT)]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(site, "pyspark", "worker.py")


# ---------------------------------------------------------------- --out and --overwrite: nothing lost
def _inputs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "captures"
    d.mkdir()
    (d / "a.pcap").write_bytes(Path(CAPTURE).read_bytes())
    (d / "notes.txt").write_text("mine")
    return d


def test_overwrite_into_the_input_directory_is_refused_and_nothing_deleted(tmp_path):
    """--out equal to the input directory: Spark's overwrite mode would delete the captures (and the
    directory's other files) before reading them, write nothing and exit 0."""
    from cli_run import kwire
    d = _inputs_dir(tmp_path)
    before = sorted(os.listdir(d))
    r = kwire("spark-decode", str(d), "--out", str(d), "--overwrite")
    assert r.code == 2, r
    assert r.err.count("\n") == 1 and "holds the input" in r.err and "Traceback" not in r.err
    assert sorted(os.listdir(d)) == before and (d / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("how", ["parent", "file", "dot", "glob"])
def test_out_holding_an_input_is_refused(tmp_path, how):
    d = _inputs_dir(tmp_path)
    given = {"parent": str(d), "file": str(d / "a.pcap"), "dot": str(d / "." / "a.pcap"),
             "glob": str(d / "*.pcap")}[how]
    with pytest.raises(job.UnsafeOutput, match="holds the input"):
        job.run([given], str(tmp_path), overwrite=True)
    with pytest.raises(job.UnsafeOutput, match="holds the input"):  # without --overwrite too
        job.run([given], str(tmp_path) + "/")
    assert (d / "a.pcap").read_bytes() == Path(CAPTURE).read_bytes() and (d / "notes.txt").exists()


def test_overwrite_replaces_only_a_previous_output(tmp_path):
    out = tmp_path / "out"
    (out / "api_name=Produce").mkdir(parents=True)
    (out / "api_name=Produce" / "part-00000-x.c000.jsonl").write_text("{}\n")
    (out / "api_name=Produce" / ".part-00000-x.c000.jsonl.crc").write_bytes(b"crc")
    for name in ("_SUCCESS", "._SUCCESS.crc", "_kwire_summary.json", "_kwire_result.json"):
        (out / name).write_text("")
    job.check_out(str(out), [CAPTURE], [CAPTURE], overwrite=True)  # a previous run's output: replaced
    (out / "mine.csv").write_text("keep")
    with pytest.raises(job.UnsafeOutput, match=r"mine\.csv, which spark-decode did not write"):
        job.run([CAPTURE], str(out), overwrite=True)
    (out / "mine.csv").unlink()
    (out / "api_name=Produce" / "mine.csv").write_text("keep")
    with pytest.raises(job.UnsafeOutput, match="did not write"):
        job.run([CAPTURE], str(out), overwrite=True)
    assert (out / "api_name=Produce" / "mine.csv").read_text() == "keep"


def test_out_link_with_a_trailing_slash_is_refused(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    link = tmp_path / "out"
    link.symlink_to(target)
    for given in (f"{link}/", f"{link}//", f"{link}/."):
        with pytest.raises(SparkJobError, match="symbolic link"):
            job.run([CAPTURE], given, overwrite=True)
    assert link.is_symlink() and (target / "keep.txt").read_text() == "mine"
