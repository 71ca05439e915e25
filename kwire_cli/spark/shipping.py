"""kwire's code and specs on the executors: shipped by the driver (``ship_code``), set up at every
task (``executor_setup``)."""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import zipfile

_shipped: dict = {}


def ship_code(sc, ship: bool | None = None) -> str | None:
    """Zip kwire_cli for the executors (addPyFile) and the specs folder the driver uses (addArchive);
    returns how executors find the specs (a SparkFiles name, or ``path:DIR``).

    ``ship=None``: ship unless the master is local (local executors run this very installation,
    native decoder included: a zip cannot carry compiled extensions, so code imported from it
    decodes in pure Python). ``ship=False`` on a cluster whose executors have kwire installed
    (the same version) keeps their native decoder.
    """
    import kwire_cli
    from kwire_cli.spec.registry import registry
    if ship is None:
        ship = not sc.master.startswith("local")
    if not ship:
        return "path:" + os.path.abspath(registry().folder)
    key = sc.applicationId
    if key in _shipped:
        return _shipped[key]
    pkg = os.path.dirname(os.path.abspath(kwire_cli.__file__))
    h = hashlib.sha1()
    files = []
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("_bundled"))
        for n in sorted(names):
            if n.endswith(".py"):
                p = os.path.join(root, n)
                files.append(p)
                with open(p, "rb") as f:
                    h.update(p.encode() + f.read())
    # a fresh private directory (mode 0700) for each application: never a predictable path that
    # another user could have filled first with a zip of their own to be shipped to the executors
    tmp = tempfile.mkdtemp(prefix="kwire-spark-")
    atexit.register(shutil.rmtree, tmp, True)
    zpath = os.path.join(tmp, f"kwire_cli-{h.hexdigest()[:12]}.zip")
    with zipfile.ZipFile(zpath, "x", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            z.write(p, os.path.join("kwire_cli", os.path.relpath(p, pkg)))
    sc.addPyFile(zpath)
    specs = os.path.abspath(registry().folder)
    sh = hashlib.sha1()
    names = sorted(n for n in os.listdir(specs) if n.endswith(".json"))
    for n in names:
        with open(os.path.join(specs, n), "rb") as f:
            sh.update(n.encode() + f.read())
    name = f"kwire-specs-{sh.hexdigest()[:12]}.zip"
    spath = os.path.join(tmp, name)
    with zipfile.ZipFile(spath, "x", zipfile.ZIP_DEFLATED) as z:
        for n in names:
            z.write(os.path.join(specs, n), n)
    sc.addArchive(spath)  # unpacked on every executor (SparkFiles.get(name) is the folder)
    _shipped[key] = name
    return name


_specs_in_use: list = [None]


def executor_setup(specs_name: str | None, limits: tuple = (None, None, None)) -> None:
    """Make the codec read the specs the driver uses: a folder on this machine (``path:DIR``, local
    mode) or the archive the driver shipped (an executor may not have kwire installed); and use
    the job's per-frame limits (``limits``: max frame, decompressed bytes, records and headers;
    None: the default; set at every task, as Python workers are reused across jobs)."""
    from kwire_cli.records.limits import DEFAULT_MAX_FRAME_DECOMPRESSED, DEFAULT_MAX_FRAME_ITEMS, set_frame_limits
    set_frame_limits(limits[1] or DEFAULT_MAX_FRAME_DECOMPRESSED, limits[2] or DEFAULT_MAX_FRAME_ITEMS)
    if not specs_name or _specs_in_use[0] == specs_name:
        return
    from kwire_cli.spec.registry import use_specs
    if specs_name.startswith("path:"):
        use_specs(specs_name[5:])
        _specs_in_use[0] = specs_name
        return
    from pyspark import SparkFiles
    path = SparkFiles.get(specs_name)
    if os.path.isfile(path):  # not unpacked: do it here, once per worker process
        dest = tempfile.mkdtemp(prefix=f"{specs_name}-")  # private and fresh, never one found there
        with zipfile.ZipFile(path) as z:
            z.extractall(dest)
        path = dest
    if os.path.isdir(path):
        use_specs(path)
    _specs_in_use[0] = specs_name


def code_location() -> str:
    """Where this process imports kwire from (the job reports every executor's)."""
    import kwire_cli
    return os.path.dirname(os.path.dirname(os.path.abspath(kwire_cli.__file__)))
