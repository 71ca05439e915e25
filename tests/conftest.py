import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
REFERENCE_SPECS = ROOT.parent / "shared" / "kafka-message-specs"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # test helpers (spec_strategies, ...)


@pytest.fixture(autouse=True)
def _default_specs(monkeypatch):
    """Tests use the bundled specs unless they say otherwise."""
    monkeypatch.delenv("KWIRE_SPECS", raising=False)
    reg = importlib.import_module("kwire_cli.spec.registry")
    if reg._override is not None:
        reg.use_specs(None)
    yield
