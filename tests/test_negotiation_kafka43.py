"""Negotiation against a Kafka 4.3.0 broker's ApiVersions answer (fixtures/negotiate/
kafka-4.3-apiversions-v4.hex, built from Kafka 4.3.0's specs by scripts/make_kafka43_apiversions.py):
kwire's own side reaches the broker's newest version of every API, the Java 4.3 profile reaches
what a 4.3 client sends, and the finalized features are explained."""
import subprocess
import sys

import pytest

from cli_run import kwire
from conftest import REFERENCE_SPECS_43, ROOT

FIX = ROOT / "fixtures" / "negotiate" / "kafka-4.3-apiversions-v4.hex"


def _apis(*args):
    r = kwire("negotiate", str(FIX), "--format", "json", *args)
    assert r.code == 0, r
    return r.json()


def test_kwire_reaches_the_newest_version_of_every_api_a_4_3_broker_advertises():
    out = _apis()
    listed = [a for a in out["apis"] if any(a["brokers"].values())]
    assert len(listed) == 77
    for a in listed:
        (broker,) = a["brokers"].values()
        assert a["chosen"] == broker[1], a
    by_name = {a["api_name"]: a["chosen"] for a in listed}
    assert (by_name["Produce"], by_name["Fetch"], by_name["Metadata"], by_name["OffsetCommit"]) == (13, 18, 13, 10)
    assert by_name["StreamsGroupHeartbeat"] == 0 and by_name["ListConfigResources"] == 1
    assert by_name["DeleteShareGroupOffsets"] == 0 and by_name["ShareFetch"] == 2


def test_the_java_4_3_profile_gets_every_client_api_at_the_broker_maximum():
    out = _apis("--client", "java-4.3")
    by_name = {a["api_name"]: a for a in out["apis"] if any(a["brokers"].values())}
    unused = sorted(n for n, a in by_name.items() if a["chosen"] is None)
    assert unused == ["WriteTxnMarkers"]  # inter-broker
    assert by_name["Produce"]["chosen"] == 13 and by_name["InitProducerId"]["chosen"] == 5
    assert kwire("negotiate", str(FIX), "--client", "java", "--format", "json").json() == out  # the newest java


def test_finalized_features_are_explained():
    out = _apis()
    meaning = {f["feature"]: f for f in out["finalized_features"]}
    assert set(meaning) == {"metadata.version", "kraft.version", "group.version", "transaction.version",
                            "share.version", "streams.version", "eligible.leader.replicas.version"}
    assert meaning["metadata.version"]["level"] == 30 and "4.3-IV0" in meaning["metadata.version"]["meaning"]
    assert "KIP-848" in meaning["group.version"]["meaning"]
    assert "ShareFetch" in meaning["share.version"]["meaning"]
    assert "StreamsGroupHeartbeat" in meaning["streams.version"]["meaning"]
    text = kwire("negotiate", str(FIX))
    assert text.code == 0
    assert "Finalized features" in text.out and "transaction.version 2" in text.out


@pytest.mark.skipif(not REFERENCE_SPECS_43.is_dir(), reason="Kafka 4.3.0's specs are not beside the checkout")
def test_the_fixture_is_what_its_script_makes(tmp_path):
    out = tmp_path / "a.hex"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kafka43_apiversions.py"), str(REFERENCE_SPECS_43),
                    str(out)], check=True, capture_output=True, env={"PYTHONPATH": str(ROOT)})
    assert out.read_text() == FIX.read_text()
