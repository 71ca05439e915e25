"""KIP-35 negotiation: parsing broker answers in every text form, intersection, features."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwire_cli.errors import KwireError
from kwire_cli.negotiation import (
    BrokerAnswer,
    NegotiationError,
    common_range,
    detect_form,
    kwire_api_names,
    kwire_client_ranges,
    load_broker_file,
    load_client_file,
    load_requirements,
    negotiate,
    parse_broker_input,
    parse_kafka_broker_api_versions,
    parse_librdkafka_log,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "negotiate"


def _api(result, key):
    return next(a for a in result["apis"] if a["api_key"] == key)


def _feature(result, name):
    return next(f for f in result["features"] if f["name"] == name)


# ------------------------------------------------------------------------------------------
# KIP-35's worked example


def kip_brokers():
    return (load_broker_file(FIX / "kip35-brokers-b1.yaml")
            + load_broker_file(FIX / "kip35-brokers-b2.yaml"))


def test_kip35_common_ranges_are_the_kips_version_state():
    result = negotiate(kwire_client_ranges(), kip_brokers(), None, kwire_api_names())
    # "Versions state built by client": (0, 1, 2) and (1, 2, 3)
    assert _api(result, 0)["brokers"] == {"B1": [0, 3], "B2": [1, 2]}
    assert _api(result, 0)["common"] == [1, 2]
    assert _api(result, 1)["common"] == [2, 3]
    # ApiKey 2 only on B2: no common range, and the reason names the broker lacking it
    api2 = _api(result, 2)
    assert api2["brokers"] == {"B1": None, "B2": [0, 0]}
    assert api2["common"] is None and api2["chosen"] is None
    assert api2["reason"] == "not supported by broker B1"


def test_kip35_features_feature1_unusable_feature2_usable():
    reqs = load_requirements(FIX / "kip35-features.yaml", kwire_api_names())
    assert reqs == {"Feature1": [(0, 3, 3), (1, 2, 3)], "Feature2": [(0, 0, 1), (1, 2, 3)]}
    result = negotiate(kwire_client_ranges(), kip_brokers(), reqs, kwire_api_names())
    f1, f2 = _feature(result, "Feature1"), _feature(result, "Feature2")
    assert f1["usable"] is False
    # the reason: ApiKey 0 version 3 is outside the brokers' common range 1-2 (B2 stops at 2)
    assert f1["reason"] == "Produce(0) needs v3, the brokers' common range is v1-2"
    assert [a["chosen"] for a in f1["apis"]] == [None, 3]
    assert f2["usable"] is True and f2["reason"] is None
    # Feature2 runs Produce at v1 (its 0-1 within the common 1-2) and Fetch at v3
    assert [(a["api_key"], a["chosen"]) for a in f2["apis"]] == [(0, 1), (1, 3)]


def test_kip35_with_a_client_that_only_speaks_produce_v0_makes_feature2_unusable():
    reqs = load_requirements(FIX / "kip35-features.yaml")
    result = negotiate({0: (0, 0), 1: (0, 3)}, kip_brokers(), reqs)
    f2 = _feature(result, "Feature2")
    assert f2["usable"] is False
    assert f2["reason"] == ("UNKNOWN(0) needs v0-1 within the brokers' common v1-2, "
                            "the client supports v0")
    assert _api(result, 0)["reason"] == ("client range v0 and brokers' common range v1-2 do not "
                                         "overlap (client too old)")


def test_common_range_is_max_of_mins_min_of_maxes():
    assert common_range([(0, 3), (1, 2)]) == (1, 2)
    assert common_range([(0, 9), (3, 12), (2, 10)]) == (3, 9)
    assert common_range([(0, 2), (3, 5)]) is None
    assert common_range([]) is None


def test_disjoint_brokers_and_json_shape():
    a = BrokerAnswer("a:1", {0: (0, 2)})
    b = BrokerAnswer("b:1", {0: (3, 5)})
    result = negotiate({0: (0, 9), 7: (0, 1)}, [a, b], {}, {0: "Produce"})
    e = _api(result, 0)
    assert set(e) == {"api_key", "api_name", "client", "brokers", "common", "chosen", "reason"}
    assert e["common"] is None and e["chosen"] is None
    assert e["reason"] == "the brokers share no version: a:1 v0-2, b:1 v3-5"
    e7 = _api(result, 7)
    assert e7["reason"] == "not supported by brokers a:1, b:1"
    json.dumps(result)  # JSON-ready


# ------------------------------------------------------------------------------------------
# kafka-broker-api-versions.sh text


def test_kafka_broker_api_versions_sample():
    answers = load_broker_file(FIX / "kafka-broker-api-versions-sample.txt")
    assert [a.address for a in answers] == ["kafka-2.example:9092", "kafka-1.example:9092",
                                            "kafka-3.example:9092"]
    k2, k1, k3 = answers
    assert (k2.node_id, k2.rack, k1.node_id, k1.rack) == (2, "rack-b", 1, "rack-a")
    assert k2.form == "kafka-broker-api-versions"
    assert k2.ranges[0] == (0, 10) and k1.ranges[0] == (0, 9)
    assert k2.ranges[45] == (0, 0)            # "AlterPartitionReassignments(45): 0 [usable: 0]"
    assert k2.ranges[99] == (0, 2)            # "UNKNOWN(99): 0 to 2" is the broker's range
    assert 4 not in k2.ranges                 # "LeaderAndIsr(4): UNSUPPORTED"
    assert 68 not in k1.ranges and k2.ranges[68] == (0, 0)
    assert k1.ranges[47] == (0, 0)            # "[unusable: node too old]" keeps MIN/MAX
    assert k1.ranges[55] == (3, 4)            # "[unusable: node too new]"
    assert k2.names[45] == "AlterPartitionReassignments" and 99 not in k2.names
    assert k1.complete and k2.complete
    assert not k3.complete and k3.ranges == {}
    assert k3.error.startswith("ERROR: org.apache.kafka.common.errors.DisconnectException")
    assert k2.notes == [] and k1.notes == []   # the log lines around the blocks are skipped


def test_kafka_broker_api_versions_negotiation():
    answers = load_broker_file(FIX / "kafka-broker-api-versions-sample.txt")
    result = negotiate(kwire_client_ranges(), answers, None, kwire_api_names())
    produce = _api(result, 0)
    # the ERROR broker lists nothing: it is left out rather than making every API "missing"
    assert produce["brokers"] == {"kafka-2.example:9092": [0, 10], "kafka-1.example:9092": [0, 9]}
    assert produce["common"] == [0, 9] and produce["chosen"] == 9
    cgh = _api(result, 68)
    assert cgh["reason"] == "not supported by broker kafka-1.example:9092"
    unknown = _api(result, 99)
    assert unknown["client"] is None
    assert unknown["reason"].startswith("the client does not support this API")
    brokers = {b["address"]: b for b in result["brokers"]}
    assert brokers["kafka-3.example:9092"]["complete"] is False


def test_kafka_broker_api_versions_bad_entry_names_the_line():
    text = ("noise\n"
            "h:9092 (id: 1 rack: null) -> (\n"
            "\tProduce(0): 0 to 9 [usable: 9],\n"
            "\tFetch(1): zero to 12 [usable: 12],\n"
            ")\n")
    with pytest.raises(NegotiationError) as ei:
        parse_kafka_broker_api_versions(text, "pasted.txt")
    assert str(ei.value) == ("pasted.txt:4: cannot read API entry 'Fetch(1): zero to 12 [usable: 12],' "
                             "in the block of broker h:9092 (expected e.g. "
                             "'Produce(0): 0 to 9 [usable: 9],')")
    assert isinstance(ei.value, KwireError)


def test_kafka_broker_api_versions_unclosed_block():
    # cut off at the end of the input (a truncated paste, issue 14): read, and marked incomplete; it
    # used to be refused ("broker block of h:9092 is not closed")
    text = "h:9092 (id: 1 rack: null) -> (\n\tProduce(0): 0 to 9 [usable: 9]\n"
    (a,) = parse_kafka_broker_api_versions(text, "x.txt")
    assert a.ranges == {0: (0, 9)} and not a.complete
    assert a.error == ("the list opened at x.txt:1 is cut off after Produce(0): 0 to 9 [usable: 9] (no closing "
                       "parenthesis before the end of the input): the APIs after it are unknown")
    with pytest.raises(NegotiationError, match=r"^x.txt:1: broker block of h:9092 is not closed with '\)' and "
                                               r"lists no API before the end of the input$"):
        parse_kafka_broker_api_versions("h:9092 (id: 1 rack: null) -> (\n", "x.txt")
    with pytest.raises(NegotiationError, match=r"^x.txt:3: broker block of h:9092 opened at line 1 has no "
                                               r"closing '\)' before the next broker$"):
        parse_kafka_broker_api_versions(text + "g:9092 (id: 2 rack: null) -> (\n)\n", "x.txt")


def test_kafka_broker_api_versions_fenced_and_single_line_error_form():
    text = ("b:9093 (id: 5 rack: null isFenced: true) -> (\n\tApiVersions(18): 0 to 3 [usable: 3]\n)\n"
            "c:9094 (id: 6 rack: r1) -> ERROR: boom\n")
    a, c = parse_kafka_broker_api_versions(text)
    assert a.notes == ["the broker is fenced (isFenced: true)"] and a.rack is None
    assert c.node_id == 6 and c.error == "ERROR: boom"


# ------------------------------------------------------------------------------------------
# librdkafka debug=feature

# Lines as librdkafka 2.16 logs them (debug=feature) for a broker it first reached through the
# bootstrap address and later under its node id.
RDK_LOG = """\
%7|1795237429.086|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/bootstrap]: 127.0.0.1:47555/bootstrap: Broker API support:
%7|1795237429.086|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/bootstrap]: 127.0.0.1:47555/bootstrap:   ApiKey Produce (0) Versions 0..11
%7|1795237429.086|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/bootstrap]: 127.0.0.1:47555/bootstrap:   ApiKey Unknown-75? (75) Versions 0..0
%7|1795237429.086|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/bootstrap]: 127.0.0.1:47555/bootstrap:  Feature MsgVer1: Produce (2..32767) supported by broker
%7|1795237429.136|CONNECTED|rdkafka#producer-1| [thrd:127.0.0.1:47555/111]: 127.0.0.1:47555/111: Connected (#1)
%7|1795237429.137|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/111]: 127.0.0.1:47555/111: Broker API support:
%7|1795237429.137|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/111]: 127.0.0.1:47555/111:   ApiKey Produce (0) Versions 0..11
%7|1795237429.137|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/111]: 127.0.0.1:47555/111:   ApiKey Fetch (1) Versions 0..17
%7|1795237429.137|APIVERSION|rdkafka#producer-1| [thrd:127.0.0.1:47555/111]: 127.0.0.1:47555/111:   ApiKey ApiVersion (18) Versions 0..4
%7|1795237430.000|APIVERSION|rdkafka#producer-1| [thrd:10.1.1.2:9092/2]: 10.1.1.2:9092/2: Broker API support:
%7|1795237430.000|APIVERSION|rdkafka#producer-1| [thrd:10.1.1.2:9092/2]: 10.1.1.2:9092/2:   ApiKey Produce (0) Versions 3..9
"""


def test_librdkafka_log_one_broker_per_source():
    assert detect_form(RDK_LOG)[0] == "librdkafka"
    answers = parse_librdkafka_log(RDK_LOG, "rdk.log")
    assert [a.address for a in answers] == ["127.0.0.1:47555", "10.1.1.2:9092"]
    a, b = answers
    # the bootstrap connection and node 111 are the same broker: the last answer wins
    assert a.ranges == {0: (0, 11), 1: (0, 17), 18: (0, 4)} and a.node_id == 111
    assert a.notes == ["2 ApiVersions answers were logged for this broker; the last one is used"]
    assert b.ranges == {0: (3, 9)} and b.node_id == 2
    result = negotiate({0: (0, 11)}, answers)
    assert _api(result, 0)["common"] == [3, 9] and _api(result, 0)["chosen"] == 9


def test_librdkafka_bad_apikey_line_names_the_line():
    bad = RDK_LOG.replace("ApiKey Fetch (1) Versions 0..17", "ApiKey Fetch (1) Versions 0-17")
    with pytest.raises(NegotiationError, match=r"^rdk.log:8: cannot read librdkafka ApiKey line"):
        parse_librdkafka_log(bad, "rdk.log")


@pytest.mark.skipif(not (FIX / "librdkafka-feature.log").exists(),
                    reason="fixtures/negotiate/librdkafka-feature.log not recorded yet")
def test_librdkafka_recorded_fixture():
    answers = load_broker_file(FIX / "librdkafka-feature.log")
    assert answers and all(a.form == "librdkafka" for a in answers)
    for a in answers:
        assert 18 in a.ranges  # every broker advertises ApiVersions
        lo, hi = a.ranges[18]
        assert 0 <= lo <= hi
    # librdkafka talked to a tansu 0.6.0 broker: what it logged is what tansu's ApiVersionsResponse
    # bytes (recorded separately, decoded by kwire's codec) say
    (tansu,) = load_broker_file(FIX / "tansu-apiversions-v0.hex")
    assert any(a.ranges == tansu.ranges for a in answers)


# ------------------------------------------------------------------------------------------
# YAML / JSON


def test_kwire_decode_json_shape_is_accepted(tmp_path):
    doc = {"api_key": 18, "api_name": "ApiVersions", "api_version": 3, "kind": "response",
           "header": {"CorrelationId": 1},
           "body": {"ErrorCode": 0,
                    "ApiKeys": [{"ApiKey": 0, "MinVersion": 0, "MaxVersion": 11},
                                {"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4}],
                    "ThrottleTimeMs": 0,
                    "SupportedFeatures": [{"Name": "metadata.version", "MinVersion": 1,
                                           "MaxVersion": 21}],
                    "FinalizedFeaturesEpoch": 42,
                    "FinalizedFeatures": [{"Name": "metadata.version", "MaxVersionLevel": 21,
                                           "MinVersionLevel": 21}]},
           "size": 80}
    p = tmp_path / "b.json"
    p.write_text(json.dumps(doc))
    (a,) = load_broker_file(p)
    assert a.form == "json" and a.address == "b.json" and a.api_version == 3
    assert a.ranges == {0: (0, 11), 18: (0, 4)}
    assert a.supported_features == {"metadata.version": (1, 21)}
    assert a.finalized_features == {"metadata.version": (21, 21)} and a.finalized_epoch == 42
    result = negotiate({0: (0, 11)}, [a])
    assert result["brokers"][0]["supported_features"] == {"metadata.version": [1, 21]}
    assert result["brokers"][0]["finalized_features_epoch"] == 42


def test_yaml_that_is_another_message_says_what_it_is(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("api_key: 3\napi_name: Metadata\napi_version: 12\nkind: response\nbody: {Brokers: []}\n")
    with pytest.raises(NegotiationError) as ei:
        load_broker_file(p)
    assert str(ei.value) == f"{p}: this is a response: Metadata v12 (api key 3), not an ApiVersionsResponse"


def test_yaml_entry_missing_field(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("ApiKeys:\n  - {ApiKey: 0, MinVersion: 0}\n")
    with pytest.raises(NegotiationError, match=r"x.yaml: ApiKeys\[0\]: missing MaxVersion$"):
        load_broker_file(p)


def test_unrecognised_text_names_the_line(tmp_path):
    p = tmp_path / "junk.txt"
    p.write_text("hello: [\n  what\n")
    with pytest.raises(NegotiationError, match=r"junk.txt:\d+: not a recognised broker answer"):
        load_broker_file(p)


def test_unsupported_version_answer_in_yaml_is_explained():
    (a,) = parse_broker_input("ErrorCode: 35\nApiKeys: [{ApiKey: 18, MinVersion: 0, MaxVersion: 3}]\n",
                              "old-broker.yaml")
    assert a.error == "UNSUPPORTED_VERSION (35)" and not a.complete
    assert "KIP-511" in a.notes[0] and "(v0-v3)" in a.notes[0] and "retries with v3" in a.notes[0]
    full = BrokerAnswer("new:9092", {0: (0, 11), 18: (0, 4)})
    result = negotiate({0: (0, 11), 18: (0, 4)}, [a, full])
    # the partial answer counts only for the API it lists
    assert _api(result, 0)["brokers"] == {"new:9092": [0, 11]}
    assert _api(result, 0)["chosen"] == 11
    assert _api(result, 18)["common"] == [0, 3] and _api(result, 18)["chosen"] == 3


# ------------------------------------------------------------------------------------------
# client and requirement files


def test_client_file_must_hold_one_answer():
    with pytest.raises(NegotiationError, match="holds 3 answers"):
        load_client_file(FIX / "kafka-broker-api-versions-sample.txt")
    assert load_client_file(FIX / "kip35-brokers-b1.yaml") == {0: (0, 3), 1: (2, 3)}


def test_requirements_by_api_name(tmp_path):
    p = tmp_path / "req.yaml"
    p.write_text("Transactions:\n  - {api: InitProducerId, min: 3, max: 4}\n  - [EndTxn, 0, 3]\n")
    assert load_requirements(p, kwire_api_names()) == {"Transactions": [(22, 3, 4), (26, 0, 3)]}
    p.write_text("X:\n  - [NoSuchApi, 0, 1]\n")
    with pytest.raises(NegotiationError, match=r"X\[0\]: unknown API 'NoSuchApi'"):
        load_requirements(p, kwire_api_names())


def test_kwire_client_ranges_come_from_the_specs():
    ranges = kwire_client_ranges()
    assert ranges[18][0] == 0 and ranges[18][1] >= 3   # ApiVersions
    assert ranges[0][1] >= 9                            # Produce
    assert kwire_api_names()[18] == "ApiVersions"


def test_pasted_text_that_lost_its_tabs_still_reads():
    text = ("h:9092 (id: 1 rack: null) -> (\n"
            "Produce(0): 0 to 9 [usable: 9],\n"
            "[2024-05-02 10:15:01,456] INFO something logged in the middle (x.y.Z)\n"
            "Fetch(1): 4 to 12 [usable: 12]\n"
            ")\n")
    (a,) = parse_kafka_broker_api_versions(text, "p.txt")
    assert a.ranges == {0: (0, 9), 1: (4, 12)}
    noise = "[2024-05-02 10:15:01,456] INFO something logged in the middle (x.y.Z)"
    assert a.notes == [f"p.txt:3: skipped a line that is not an API entry: {noise[:60]!r}"]


def test_hex_with_comment_lines():
    form, payload = detect_form("# answer of broker 1\n00 00 00 06\n00000000 0000\n")
    assert form == "hex"
    assert payload.replace(" ", "").replace("\n", "") == "00000006000000000000"


def test_librdkafka_lines_mentioning_apikey_without_versions_are_not_errors():
    extra = ("%3|1795237431.000|ERROR|rdkafka#producer-1| [thrd:main]: 10.1.1.2:9092/2: "
             "ApiKey Fetch rejected by broker\n")
    answers = parse_librdkafka_log(RDK_LOG + extra, "rdk.log")
    assert [a.address for a in answers] == ["127.0.0.1:47555", "10.1.1.2:9092"]
