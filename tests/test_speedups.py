"""The one rule that loads kwire's optional C extensions (kwire_cli/speedups)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kwire_cli import speedups

ROOT = Path(__file__).resolve().parent.parent
BUILT = list((ROOT / "kwire_cli" / "codec").glob("_speedups*.so"))


def test_a_missing_extension_is_none() -> None:
    assert speedups.load("kwire_cli.codec._no_such_extension") is None


@pytest.mark.skipif(not BUILT or speedups.turned_off(), reason="the codec's extension is not built here")
def test_a_built_extension_loads_and_an_incomplete_build_is_refused() -> None:
    ext = speedups.load("kwire_cli.codec._speedups")
    assert ext is not None and callable(ext.set_max_items)
    assert speedups.load("kwire_cli.codec._speedups", lambda m: hasattr(m, "no_such_call")) is None


@pytest.mark.parametrize(("value", "off"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_kwire_no_speedups_turns_every_extension_off(value: str, off: bool) -> None:
    code = ("from kwire_cli import speedups; from kwire_cli.codec import native as c;"
            " from kwire_cli.records import native as r; from kwire_cli.capture import headerscan as h;"
            " import kwire_cli.memory as m; from kwire_cli.tls import keys as k;"
            " from kwire_cli.proxy import pcapout as p;"
            " print(speedups.turned_off(), c.extension is None, r.extension is None,"
            " h.native_tcp_connections is None, k.native_opener is None, p._sum is p._py_sum, m.keep_arenas())")
    env = dict(os.environ, KWIRE_NO_SPEEDUPS=value, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    turned_off, *absent, kept = out.split()
    assert turned_off == str(off)
    if off:
        assert absent == ["True"] * 5 and kept == "False"
    elif BUILT:  # the opener needs libcrypto.so.3 besides its build
        assert absent[:3] + absent[4:] == ["False"] * 4 and kept == "True"
