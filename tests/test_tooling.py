"""The project's own checks: the markers' test list, scripts/check_imports.py and the import contracts.

Each check is run on a small package written here with the faults it must find (and code it must
let pass), so that a checker that finds nothing cannot pass these tests.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import SERIAL_FILES, SLOW_TESTS

ROOT = Path(__file__).resolve().parents[1]
# `lint-imports` run by this interpreter (its script may not be on PATH, e.g. in a venv that uses
# the system's site-packages)
LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command(prog_name='lint-imports')"


def load_check_imports():
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / "scripts" / "check_imports.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_slow_test_named_in_conftest_exists():
    for file, names in SLOW_TESTS.items():
        tree = ast.parse((ROOT / "tests" / file).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert names <= defined, f"tests/conftest.py SLOW_TESTS names tests that {file} no longer has"


def test_every_serial_file_named_in_conftest_exists():
    missing = {f for f in SERIAL_FILES if not (ROOT / "tests" / f).is_file()}
    assert not missing, f"tests/conftest.py SERIAL_FILES names files that do not exist: {sorted(missing)}"


LAYERS_TOML = """\
[tool.importlinter]
root_package = "kwire_cli"

[[tool.importlinter.contracts]]
id = "layers"
name = "layers"
type = "layers"
containers = ["kwire_cli"]
layers = ["cli", "capture | (tls)", "codec", "records", "errors"]
"""


def write_package(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text(LAYERS_TOML)
    for name, src in files.items():
        p = root / "kwire_cli" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src))
    for d in [root / "kwire_cli", *(root / "kwire_cli").rglob("*")]:
        if d.is_dir() and d.name != "__pycache__" and not (d / "__init__.py").exists():
            (d / "__init__.py").write_text("")


# each package of the sample: the names it defines, and what it does to other packages' names
SAMPLE = {
    "errors.py": "class KwireError(Exception):\n    pass\n",
    "records/compression.py": """\
        import contextvars
        _frame = contextvars.ContextVar("f", default=None)
        _limits = (1, 2)
        LIMITS = _limits
        """,
    "records/decode.py": """\
        from kwire_cli.records import compression
        from kwire_cli.records.compression import _frame          # own package: fine
        def budget():
            return compression._limits                             # own package: fine
        """,
    "codec/_speedups.py": "def run(): pass\n",
    "codec/compiler.py": """\
        from kwire_cli.codec import _speedups                      # own package: fine
        from kwire_cli.records import compression
        from kwire_cli.records.compression import _limits           # KW001
        import kwire_cli.records.compression as C
        def ns():
            return {"get": compression._frame.get,                  # KW003
                    "lim": getattr(C, "_limits"),                   # KW003
                    "ok": compression.LIMITS}
        """,
    "capture/session.py": """\
        from typing import NamedTuple
        class Frame(NamedTuple):
            conn: str
        class Conversation:
            def __init__(self):
                self._open = {}
            def _remember(self, conn):
                self._open[conn] = 1
            def remember(self, conn):
                self._remember(conn)                                # own object: fine
        """,
    "capture/rows.py": """\
        import kwire_cli.codec._speedups                             # KW002
        def fields(frame):
            return frame._fields, frame._replace(conn="x")          # namedtuple API: fine
        def reach(compiler):
            from kwire_cli.codec.compiler import ns                 # below: fine
            return ns()
        """,
    "cli/run.py": """\
        import importlib
        from kwire_cli.capture.session import Conversation
        def go(conv):
            conv._remember("c")                                     # KW004
            return importlib.import_module("kwire_cli.capture.rows")  # down: fine
        """,
    "records/late.py": """\
        import importlib
        def up():
            return importlib.import_module("kwire_cli.codec.compiler")   # KW005
        def up_in_function():
            from kwire_cli.cli import run                                 # import-linter's
            return run
        """,
}


def test_check_imports_finds_each_kind_of_reach_in(tmp_path):
    ci = load_check_imports()
    write_package(tmp_path, SAMPLE)
    found = sorted((f.path, f.code) for f in ci.check("package", tmp_path))
    assert found == sorted([
        ("kwire_cli/codec/compiler.py", "KW001"),
        ("kwire_cli/codec/compiler.py", "KW003"),
        ("kwire_cli/codec/compiler.py", "KW003"),
        ("kwire_cli/capture/rows.py", "KW002"),
        ("kwire_cli/cli/run.py", "KW004"),
        ("kwire_cli/records/late.py", "KW005"),
    ]), found


def test_check_imports_module_scope_also_flags_reach_ins_inside_a_package(tmp_path):
    ci = load_check_imports()
    write_package(tmp_path, SAMPLE)
    inside = sorted((f.path, f.line) for f in ci.check("module", tmp_path) if f.path == "kwire_cli/records/decode.py")
    assert inside == [("kwire_cli/records/decode.py", 2), ("kwire_cli/records/decode.py", 4)]


def test_check_imports_finds_an_import_cycle_hidden_inside_a_function(tmp_path):
    ci = load_check_imports()
    write_package(tmp_path, {
        "render/console.py": "from kwire_cli.render.plaintree import width\n",
        "render/plaintree.py": "width = 1\ndef show():\n    from kwire_cli.render.console import x\n    return x\n",
        "render/page.py": "from kwire_cli.render import console\n",   # one way only: no cycle
        "inputs/forms/__init__.py": "from kwire_cli.inputs.forms import hexa\n",  # own submodule: no cycle
        "inputs/forms/hexa.py": "from kwire_cli.inputs.forms import __name__ as n\n",
    })
    found = [(f.path, f.code, f.message) for f in ci.check("package", tmp_path)]
    assert found == [("kwire_cli/render/console.py", "KW006",
                      "import cycle: kwire_cli.render.console <-> kwire_cli.render.plaintree")], found


def test_check_imports_passes_on_kwire_itself_or_names_each_finding():
    """The script's own exit status and output agree (the findings on kwire are counted by check.sh)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_imports.py")], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == (1 if lines else 0), r
    assert all(" KW00" in line and line.startswith("kwire_cli/") for line in lines), lines


def test_import_linter_sees_imports_inside_functions(tmp_path):
    pytest.importorskip("importlinter")
    write_package(tmp_path, SAMPLE)
    r = subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--config", str(tmp_path / "pyproject.toml"), "--no-cache"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})  # the sample kwire_cli, not the real one
    assert r.returncode == 1, r
    assert "kwire_cli.records is not allowed to import kwire_cli.cli" in r.stdout, r.stdout
    assert "kwire_cli.records.late -> kwire_cli.cli.run (l.5)" in r.stdout, r.stdout  # inside up_in_function
    # the import inside capture/rows.py's function goes down: not reported
    assert "kwire_cli.capture is not allowed" not in r.stdout, r.stdout


# The files exempt from ruff's function-size rules (C901 complexity over 10, PLR0913 more than 8
# parameters) when the rules came in, computed with ruff's own findings. pyproject.toml's list may
# only shrink: a file leaves it when its functions are split, and no file may join it.
COMPLEXITY_EXEMPT_BASELINE: dict[str, set[str]] = {
    "bench/bench_codec.py": {"C901"},
    "bench/bench_pcap.py": {"C901"},
    "bench/bench_proxy.py": {"C901"},
    "bench/bench_spark.py": {"C901"},
    "bench/make_spark_captures.py": {"C901"},
    "bench/make_tls_capture.py": {"C901"},
    "fuzz/fuzz_peers.py": {"C901"},
    "fuzz/fuzzlib.py": {"C901"},
    "kwire_cli/analysis/expert.py": {"C901"},
    "kwire_cli/analysis/groups.py": {"C901"},
    "kwire_cli/analysis/producers.py": {"C901"},
    "kwire_cli/analysis/series.py": {"C901"},
    "kwire_cli/analysis/state.py": {"C901"},
    "kwire_cli/analysis/traffic.py": {"C901"},
    "kwire_cli/capture/__init__.py": {"PLR0913"},
    "kwire_cli/capture/auth.py": {"C901"},
    "kwire_cli/capture/bodyfields.py": {"C901"},
    "kwire_cli/capture/filter.py": {"C901"},
    "kwire_cli/capture/formats.py": {"C901"},
    "kwire_cli/capture/framing.py": {"C901"},
    "kwire_cli/capture/headerscan.py": {"C901"},
    "kwire_cli/capture/hunt.py": {"C901"},
    "kwire_cli/capture/linklayer.py": {"C901"},
    "kwire_cli/capture/live.py": {"C901", "PLR0913"},
    "kwire_cli/capture/merge.py": {"C901"},
    "kwire_cli/capture/pairing.py": {"C901"},
    "kwire_cli/capture/reader.py": {"C901"},
    "kwire_cli/capture/session.py": {"C901"},
    "kwire_cli/capture/stream.py": {"C901", "PLR0913"},
    "kwire_cli/capture/summary.py": {"C901"},
    "kwire_cli/capture/tcp.py": {"C901"},
    "kwire_cli/capture/tiling.py": {"C901"},
    "kwire_cli/cli/__init__.py": {"C901"},
    "kwire_cli/cli/decode.py": {"C901", "PLR0913"},
    "kwire_cli/cli/diff.py": {"C901"},
    "kwire_cli/cli/dump_log.py": {"C901", "PLR0913"},
    "kwire_cli/cli/negotiate.py": {"C901", "PLR0913"},
    "kwire_cli/cli/pcap.py": {"PLR0913"},
    "kwire_cli/cli/proxy.py": {"C901", "PLR0913"},
    "kwire_cli/cli/spark_decode.py": {"PLR0913"},
    "kwire_cli/cli/target.py": {"C901"},
    "kwire_cli/codec/emit_read.py": {"C901"},  # read_value, moved from compiler.py
    "kwire_cli/codec/embedded.py": {"C901"},
    "kwire_cli/codec/internal.py": {"C901"},
    "kwire_cli/codec/message.py": {"C901", "PLR0913"},
    "kwire_cli/codec/partial.py": {"C901", "PLR0913"},
    "kwire_cli/codec/sasl.py": {"C901"},
    "kwire_cli/inputs/decoding.py": {"C901"},
    "kwire_cli/inputs/forms/base64text.py": {"C901"},
    "kwire_cli/inputs/forms/escaped.py": {"C901"},
    "kwire_cli/inputs/forms/follow.py": {"C901"},
    "kwire_cli/inputs/forms/od.py": {"C901"},
    "kwire_cli/inputs/forms/offsetdump.py": {"C901"},
    "kwire_cli/inputs/frames.py": {"C901"},
    "kwire_cli/inputs/messages.py": {"C901"},
    "kwire_cli/inputs/paths.py": {"C901"},
    "kwire_cli/logs/files.py": {"C901"},
    "kwire_cli/logs/segment.py": {"C901"},
    "kwire_cli/negotiation/apiversions.py": {"C901"},
    "kwire_cli/negotiation/client.py": {"C901"},
    "kwire_cli/negotiation/forms.py": {"C901"},
    "kwire_cli/negotiation/kafka_broker_api_versions.py": {"C901"},
    "kwire_cli/negotiation/render.py": {"C901"},
    "kwire_cli/negotiation/yaml_answers.py": {"C901"},
    "kwire_cli/output/forms.py": {"C901"},
    "kwire_cli/output/records.py": {"C901"},
    "kwire_cli/proxy/relay.py": {"C901"},
    "kwire_cli/proxy/rewrite.py": {"C901"},
    "kwire_cli/proxy/server.py": {"C901"},
    "kwire_cli/records/compression.py": {"C901"},
    "kwire_cli/records/decode.py": {"C901"},
    "kwire_cli/records/encode.py": {"C901"},
    "kwire_cli/records/legacy.py": {"C901"},
    "kwire_cli/records/stats.py": {"C901"},
    "kwire_cli/records/v2.py": {"C901", "PLR0913"},
    "kwire_cli/records/v2fast.py": {"C901"},  # the fast path, moved out of v2.py with its exemption
    "kwire_cli/render/analysis.py": {"C901"},
    "kwire_cli/render/damage.py": {"C901"},
    "kwire_cli/render/json.py": {"C901"},
    "kwire_cli/render/jsonlines.py": {"C901"},
    "kwire_cli/render/summary.py": {"C901"},
    "kwire_cli/render/tree.py": {"C901", "PLR0913"},
    "kwire_cli/spark/job.py": {"C901", "PLR0913"},
    "kwire_cli/spark/session.py": {"C901"},
    "kwire_cli/spark/split.py": {"C901", "PLR0913"},
    "kwire_cli/spark/stages.py": {"C901", "PLR0913"},
    "kwire_cli/spec/model.py": {"C901"},
    "kwire_cli/spec/records.py": {"C901"},
    "kwire_cli/tls/connection.py": {"C901"},
    "kwire_cli/tls/handshake.py": {"C901"},
    "kwire_cli/tls/keylog.py": {"C901"},
    "kwire_cli/values/decoder.py": {"C901"},
    "kwire_cli/values/fields.py": {"C901"},
    "kwire_cli/whatif.py": {"C901"},
    "scripts/check_imports.py": {"C901"},
    "scripts/record/proxy.py": {"C901"},
    "scripts/record/sasl_gateway.py": {"C901"},
    "scripts/record/secure_scenarios.py": {"C901"},
    "scripts/record_fixtures.py": {"C901"},
    "scripts/record_secure_fixtures.py": {"C901"},
    "scripts/record_values.py": {"PLR0913"},
    "scripts/spec_union.py": {"C901"},
    "tests/capture_util.py": {"PLR0913"},
    "tests/test_capture_real.py": {"C901"},
    "tests/test_hostile_capture.py": {"C901"},
    "tests/test_internal_records.py": {"C901"},
    "tests/test_internal_vectors_manifest.py": {"C901"},
    "tests/test_records_fixtures.py": {"C901"},
    "tests/test_tls_hostile.py": {"C901"},
    "tests/test_tls_secrets.py": {"C901"},
    "tests/tls_gen.py": {"C901", "PLR0913"},
}
SIZE_RULES = {"C901", "PLR0913"}


def _ruff_lint_config():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]


def _size_exemptions(lint):
    return {path: set(codes) & SIZE_RULES for path, codes in lint["per-file-ignores"].items()
            if set(codes) & SIZE_RULES}


def test_function_size_rules_on_with_their_limits():
    """The rules stay selected at the limits the baseline was computed with (a higher limit would
    let the list shrink while the functions grow)."""
    lint = _ruff_lint_config()
    assert set(lint["select"]) >= SIZE_RULES
    assert lint["mccabe"]["max-complexity"] == 10
    assert lint["pylint"]["max-args"] == 8


def test_function_size_exemptions_only_shrink():
    exempt = _size_exemptions(_ruff_lint_config())
    grown = {path: codes - COMPLEXITY_EXEMPT_BASELINE.get(path, set()) for path, codes in exempt.items()}
    grown = {path: sorted(codes) for path, codes in grown.items() if codes}
    assert not grown, (f"files newly exempt from {sorted(SIZE_RULES)} in pyproject.toml: {grown}; split the "
                       "functions instead (`ruff check --select C901,PLR0913 FILE` names them)")
    assert not any("*" in path for path in exempt), "exemptions name files, not globs"


def test_function_size_exemptions_are_still_needed():
    """An exemption a file no longer needs is dropped from pyproject.toml (and from the baseline),
    so that the list shrinks as functions are split."""
    pytest.importorskip("ruff")
    exempt = _size_exemptions(_ruff_lint_config())
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", ",".join(sorted(SIZE_RULES)),
                        "--config", "lint.per-file-ignores = {}", "--output-format", "concise", "-q",
                        *sorted(exempt)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    found: dict[str, set[str]] = {}
    for line in r.stdout.splitlines():
        path, _, rest = line.partition(":")
        code = rest.split(" ", 2)[1] if rest.count(" ") >= 1 else ""
        if code in SIZE_RULES:
            found.setdefault(path, set()).add(code)
    assert found, r  # the run found something: it checked the exempt files without their exemptions
    stale = {path: sorted(codes - found.get(path, set())) for path, codes in exempt.items()}
    stale = {path: codes for path, codes in stale.items() if codes}
    assert not stale, f"exemptions no longer needed (drop them from pyproject.toml): {stale}"
