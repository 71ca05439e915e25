"""The union of Kafka 4.3.0's and the October 2024 specs decodes every recorded capture exactly as
the October 2024 specs alone do (the versions both define lay out the same; the union only adds):
every row of every fixture capture, byte for byte in JSON lines. Skips without the older folder."""
import pytest

from cli_run import kwire
from conftest import FIXTURES, REFERENCE_SPECS

CAPTURES = sorted((FIXTURES / "captures").glob("*.pcap"))


@pytest.mark.skipif(not REFERENCE_SPECS.is_dir(), reason="the October 2024 specs are not beside the checkout")
@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_recorded_traffic_decodes_as_with_the_older_specs_alone(capture):
    union = kwire("pcap", str(capture), "--format", "jsonl")
    older = kwire("--specs", str(REFERENCE_SPECS), "pcap", str(capture), "--format", "jsonl")
    assert union.code == older.code == 0
    assert union.out.count("\n") >= 4
    assert union.out == older.out
