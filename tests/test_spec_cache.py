"""The cache of parsed spec folders (kwire_cli/spec/cache.py): used when it is the user's own and
current, never when a spec file changed, and never read from a place others can write."""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cache: Path, specs: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=str(ROOT))
    e.pop("KWIRE_NO_SPEC_CACHE", None)
    e.update(env or {})
    pre = ["--specs", str(specs)] if specs else []
    return subprocess.run([sys.executable, "-m", "kwire_cli", *pre, *args], capture_output=True, text=True,
                          env=e, cwd=ROOT, timeout=60)


def test_a_run_writes_the_cache_and_the_next_reads_it(tmp_path):
    cache = tmp_path / "cache"
    first = run("describe", "Heartbeat", "4", cache=cache)
    (f,) = (cache / "kwire").glob("specs-*.pickle")
    assert oct((cache / "kwire").stat().st_mode & 0o777) == "0o700"
    assert oct(f.stat().st_mode & 0o777) == "0o600"
    key, value = pickle.loads(f.read_bytes())
    assert str(ROOT / "specs") in key and type(value).__name__ == "RegistryImage"
    mtime = f.stat().st_mtime_ns
    second = run("describe", "Heartbeat", "4", cache=cache)
    assert second.stdout == first.stdout and f.stat().st_mtime_ns == mtime  # read, not written again


def test_a_changed_spec_file_is_never_read_from_a_stale_cache(tmp_path):
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "specs", specs)
    cache = tmp_path / "cache"
    assert "GroupId" in run("describe", "Heartbeat", "4", "--kind", "request", cache=cache, specs=specs).stdout
    hb = specs / "HeartbeatRequest.json"
    hb.write_text(hb.read_text().replace('"GroupId"', '"TheGroup"'))
    out = run("describe", "Heartbeat", "4", "--kind", "request", cache=cache, specs=specs).stdout
    assert "TheGroup" in out and "GroupId" not in out
    assert len(list((cache / "kwire").glob("specs-*.pickle"))) == 2


@pytest.mark.parametrize("how", ["group-writable", "not-mine"])
def test_a_cache_others_can_write_is_not_read(tmp_path, how):
    if how == "not-mine" and os.getuid() != 0:
        pytest.skip("needs root to give a file to another user")
    cache = tmp_path / "cache"
    run("list", cache=cache)
    (f,) = (cache / "kwire").glob("specs-*.pickle")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    key, _ = pickle.loads(f.read_bytes())
    f.write_bytes(pickle.dumps((key, Evil())))
    if how == "group-writable":
        os.chmod(cache / "kwire", 0o777)
    else:
        os.chown(f, 65534, 65534)
    r = run("list", cache=cache)
    assert r.returncode == 0 and "Metadata" in r.stdout
    assert not marker.exists()


def test_a_damaged_cache_file_is_ignored_and_the_cache_can_be_turned_off(tmp_path):
    cache = tmp_path / "cache"
    run("list", cache=cache)
    (f,) = (cache / "kwire").glob("specs-*.pickle")
    f.write_bytes(b"not a pickle")
    r = run("list", cache=cache)
    assert r.returncode == 0 and "Metadata" in r.stdout and r.stderr == ""
    off = tmp_path / "off"
    r = run("list", cache=off, env={"KWIRE_NO_SPEC_CACHE": "1"})
    assert r.returncode == 0 and not (off / "kwire").exists()


def test_a_cached_registry_loads_only_the_specs_a_message_needs():
    """The cache keeps each spec pickled on its own; decoding one ApiVersions request unpickles
    its request spec and the request header, not the other two hundred."""
    import importlib

    from kwire_cli.codec.message import decode_request
    registry_module = importlib.import_module("kwire_cli.spec.registry")

    full = registry_module.load_folder(ROOT / "specs")
    image = registry_module.RegistryImage.of(pickle.loads(pickle.dumps(full)))
    lazy = image.registry()
    assert sorted(lazy.apis) == sorted(full.apis) and len(lazy.by_name) == len(full.by_name) > 150
    registry_module.use_specs(None)
    registry_module._current = lazy
    try:
        m = decode_request(bytes.fromhex("0000001d001200030000000100056b7769726500066b7769726506302e312e3000"))
    finally:
        registry_module.registry.cache_clear()
    assert m.api_name == "ApiVersions" and m.body["ClientSoftwareName"] == "kwire"
    loaded = set(lazy.by_name._specs)  # type: ignore[attr-defined]
    assert "ApiVersionsRequest" in loaded and "RequestHeader" in loaded and len(loaded) <= 4, loaded
    assert lazy.api("Fetch").request == full.api("Fetch").request  # the rest loads when asked for
