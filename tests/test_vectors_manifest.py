"""fixtures/vectors: the manifest matches the files, and the vectors kwire decodes today give the
values their sources assert (kafka-python's parser test, sarama's response tests, kafka-go's
TestMessageFixtures); the client profiles of kwire_cli/negotiation/clients load and agree with what
the recorded clients really asked for.

The KIP-511 fallback answers and the vectors that break the spec are decoded in tests/test_lenient.py.
"""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from cli_run import kwire
from kwire_cli.codec import decode_body, decode_request, decode_response
from kwire_cli.negotiation import load_broker_file, load_client_file, parse_broker_input

ROOT = Path(__file__).resolve().parents[1]
VEC = ROOT / "fixtures" / "vectors"
MANIFEST = json.loads((VEC / "manifest.json").read_text())
FILES = MANIFEST["files"]
CLIENTS = ROOT / "kwire_cli" / "negotiation" / "clients"

# Vectors that break the spec or follow another layout (KIP-511 answers, nulls where none is allowed, a
# missing tag byte): tests/test_lenient.py decodes them with their notes and named violations.
NOT_YET = {"sarama/describelogdirs-v2-empty-null-results-response.body.hex",
           "sarama/describelogdirs-v4-empty-null-results-response.body.hex"}  # null Results: test_lenient.py


def data(name: str) -> bytes:
    return bytes.fromhex((VEC / name).read_text().strip())


def by(kind=None, prefix="", framing=None):
    return sorted(k for k, v in FILES.items()
                  if (kind is None or v["kind"] == kind) and k.startswith(prefix)
                  and (framing is None or v.get("framing") == framing))


# ------------------------------------------------------------------------------------------------
# the manifest


def test_every_file_is_listed_and_every_listed_file_exists():
    # a sub-folder with its own manifest.json (internal/: issue 19's internal-topic records) has its own test
    own = {p.parent for p in VEC.glob("*/manifest.json")}
    on_disk = {str(p.relative_to(VEC)) for p in VEC.rglob("*")
               if p.is_file() and not any(d in p.parents for d in own)}
    on_disk -= {"README.md", "manifest.json"}
    assert on_disk == set(FILES)
    readme = (VEC / "README.md").read_text()
    for name in FILES:
        assert f"`{name}`" in readme, f"{name} missing from the README table"


@pytest.mark.parametrize("name", sorted(FILES))
def test_entry_is_complete_and_sizes_match(name):
    e = FILES[name]
    assert e["kind"] in {"request", "response", "records", "dump", "text"}
    src = e["source"]
    assert "/" in src["repo"] and (src.get("commit") or src.get("url")), src
    if src.get("commit"):
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    if e["kind"] == "text":
        assert (VEC / name).read_text(encoding="utf-8").strip()
        assert isinstance(e["truncated"], bool) and e["shows"]
        assert (".partial." in name) == e["truncated"]
        return
    text = (VEC / name).read_text()
    assert re.fullmatch(r"[0-9a-f]+\n", text), f"{name}: not one line of lower-case hex"
    raw = bytes.fromhex(text)
    assert len(raw) == e["size"]
    assert e["framing"] in {"size-prefix+header", "body"}
    assert name.endswith(".body.hex") == (e["framing"] == "body")
    if e["framing"] == "size-prefix+header":
        (size,) = struct.unpack_from(">i", raw)
        assert size == len(raw) - 4, f"{name}: size prefix {size}, {len(raw) - 4} bytes follow"
    for link in ("answers", "pairs_with"):
        if link in e:
            other = FILES[e[link]]
            assert other["api_key"] == e["api_key"] and other["api_version"] == e["api_version"]
            assert {other["kind"], e["kind"]} == {"request", "response"}


# ------------------------------------------------------------------------------------------------
# kafka-python's recorded conversation (test/protocol/old/test_old_parser.py)


def py_value(v):
    """The source's expected value as kwire shows it: bytes fields are hex."""
    if isinstance(v, dict) and set(v) == {"hex"}:
        return v["hex"]
    if isinstance(v, list):
        return [py_value(x) for x in v]
    return v


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def flatten(tree):
    """kwire's value tree with snake_case keys and lists of dicts as lists of tuples (kafka-python's form)."""
    if isinstance(tree, dict):
        return {snake(k): flatten(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tuple(flatten(x).values()) if isinstance(x, dict) else flatten(x) for x in tree]
    return tree


@pytest.mark.parametrize("name", [n for n in by("request", "kafka-python/")])
def test_kafka_python_requests_decode_to_what_it_encoded(name):
    e = FILES[name]
    msg = decode_request(data(name))
    assert (msg.api_key, msg.api_version) == (e["api_key"], e["api_version"])
    assert msg.header["ClientId"] == e["asserts"]["client_id"]
    body = flatten(msg.body)
    for field, want in e["asserts"]["fields"].items():
        want = py_value(want)
        got = body[field]
        if field == "topics" and want is None:
            assert got is None
        elif isinstance(want, list):
            assert len(got) == len(want)
        else:
            assert got == want, (field, got, want)


@pytest.mark.parametrize("name", [n for n in by("response", "kafka-python/") if n not in NOT_YET])
def test_kafka_python_responses_decode_to_the_values_it_asserts(name):
    e = FILES[name]
    a = e["asserts"]
    msg = decode_response(data(name), e["api_key"], e["api_version"])
    assert msg.header["CorrelationId"] == a["correlation_id"]
    body = flatten(msg.body)
    for field, want in a["fields"].items():
        want = py_value(want)
        assert field in body or field == "authorized_operations", (name, field, sorted(body))
        got = body.get(field)
        if field == "authorized_operations":
            # kafka-python shows Metadata's INT32_MIN "not requested" marker as None
            assert want is None and body["cluster_authorized_operations"] == -2**31
        elif field == "api_keys":
            assert [list(t[:3]) for t in got] == want
        elif field == "brokers":
            assert [list(t[:4]) for t in got] == [list(w) for w in want]
        elif field == "members":
            assert [(t[0], t[1], t[2]) for t in got] == [tuple(w) for w in want]
        elif field == "topics" and e["api_name"] == "OffsetFetch":
            assert [(t[0], [list(p[:5]) for p in t[1]]) for t in got] == \
                [(w[0], [list(p) for p in w[1]]) for w in want]
        elif field == "topics" and e["api_name"] == "OffsetCommit":
            assert [(t[0], [list(p[:2]) for p in t[1]]) for t in got] == [(w[0], [list(p) for p in w[1]]) for w in want]
        elif field == "topics":
            assert got == want or (got == [] and want == [])
        elif field == "error_message" and want == "":
            # kafka-python shows a null string as ''; the wire holds null (-1)
            assert got in (None, "")
        else:
            assert got == want, (field, got, want)


def test_kafka_python_kip511_answer_is_the_v0_layout():
    """The bytes themselves: error 35, an int32 array of one entry (18, 0, 3), nothing after."""
    raw = data("kafka-python/api-versions-1.0.apiversions-v4-response.hex")
    size, corr, err, n = struct.unpack_from(">iihi", raw)
    assert (size, corr, err, n) == (16, 1, 35, 1)
    assert struct.unpack_from(">hhh", raw, 14) == (18, 0, 3) and len(raw) == 20
    # the v0 body layout reads it whole, as kafka-python does
    body = decode_body(raw[8:], "ApiVersions", 0, "response").body
    assert body == {"ErrorCode": 35, "ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 3}]}


# ------------------------------------------------------------------------------------------------
# sarama's bodies


def test_sarama_apiversions_controls():
    b = decode_body(data("sarama/apiversions-v0-response.body.hex"), 18, 0, "response").body
    assert b["ErrorCode"] == 0
    assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in b["ApiKeys"]] == \
        FILES["sarama/apiversions-v0-response.body.hex"]["asserts"]["api_keys"]
    e = FILES["sarama/apiversions-v1-v2-response.body.hex"]["asserts"]
    for v in e["versions"]:
        b = decode_body(data("sarama/apiversions-v1-v2-response.body.hex"), 18, v, "response").body
        assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in b["ApiKeys"]] == e["api_keys"]
        assert b["ThrottleTimeMs"] == e["throttle_time_ms"] == 64
    e = FILES["sarama/apiversions-v3-response.body.hex"]["asserts"]
    b = decode_body(data("sarama/apiversions-v3-response.body.hex"), 18, 3, "response").body
    assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in b["ApiKeys"]] == e["api_keys"]
    assert b["ThrottleTimeMs"] == 128 and b.get("FinalizedFeaturesEpoch", -1) == -1
    assert not b.get("SupportedFeatures") and not b.get("FinalizedFeatures")
    e = FILES["sarama/apiversions-v3-features-response.body.hex"]["asserts"]
    for v in e["versions"]:
        b = decode_body(data("sarama/apiversions-v3-features-response.body.hex"), 18, v, "response").body
        assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in b["ApiKeys"]] == e["api_keys"]
        assert [[f["Name"], f["MinVersion"], f["MaxVersion"]] for f in b["SupportedFeatures"]] == \
            e["supported_features"]
        assert b["FinalizedFeaturesEpoch"] == e["finalized_features_epoch"] == 39
        assert [[f["Name"], f["MaxVersionLevel"], f["MinVersionLevel"]] for f in b["FinalizedFeatures"]] == \
            e["finalized_features"]


@pytest.mark.parametrize("name", [n for n in by("response", "sarama/describelogdirs") if n not in NOT_YET])
def test_sarama_describelogdirs_counts(name):
    e = FILES[name]
    b = decode_body(data(name), 35, e["api_version"], "response").body
    a = e["asserts"]
    assert len(b["Results"]) == a["log_dirs"]
    if a["log_dirs"]:
        r = b["Results"][0]
        assert len(r["Topics"]) == a["topics_in_log_dir_0"]
        assert len(r["Topics"][0]["Partitions"]) == a["partitions_in_topic_0"]
        c = a["commented_values"]
        assert (r["ErrorCode"], r["LogDir"], r["Topics"][0]["Name"]) == (c["error_code"], c["path"], c["topic"])
        assert [[p["PartitionIndex"], p["PartitionSize"], p["OffsetLag"], p["IsFutureKey"]]
                for p in r["Topics"][0]["Partitions"]] == c["partitions"]
        if "total_bytes" in a:
            assert (r["TotalBytes"], r["UsableBytes"]) == (a["total_bytes"], a["usable_bytes"])


def test_sarama_null_topics_request_is_allowed():
    b = decode_body(data("sarama/describelogdirs-v2-null-topics-request.body.hex"), 35, 2, "request").body
    assert b["Topics"] is None


@pytest.mark.parametrize("name", ["sarama/metadata-v9-truncated-int32-array-response.body.hex",
                                  "sarama/metadata-v9-overlong-varint-response.body.hex"])
def test_sarama_corrupt_metadata_is_refused(name):
    """sarama asserts these bodies do not decode; kwire says where, in one line, exit 1."""
    assert FILES[name]["asserts"] == {"decode_error": True}
    r = kwire("decode", data(name).hex(), "--no-header", "--api", "Metadata", "--version", "9")
    assert r.code == 1 and r.out == ""
    assert r.err.startswith("kwire: error: Metadata v9 response: Topics[0].Partitions[0].ReplicaNodes")
    assert len(r.err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------
# kafka-go's legacy message sets


def keys_values(batches):
    out = []
    for b in batches:
        if b.get("Magic") == 2:
            out += [(r["Key"]["text"], r["Value"]["text"]) for r in b["Records"]]
        elif b.get("Messages") is not None:
            out += keys_values(b["Messages"])
        else:
            out.append((b["Key"]["text"], b["Value"]["text"]))
    return out


@pytest.mark.parametrize("name", by("response", "kafka-go/"))
def test_kafka_go_fetch_responses_hold_the_messages_it_asserts(name):
    e = FILES[name]
    msg = decode_response(data(name), "Fetch", 10)
    assert msg.header["CorrelationId"] == e["correlation_id"] == 10
    (topic,) = msg.body["Responses"]
    (part,) = topic["Partitions"]
    recs = part["Records"]
    assert recs["partial_trailing_batch"] is None
    want = [(m["key"], m["value"]) for m in e["asserts"]["messages"]]
    assert keys_values(recs["batches"]) == want
    magics = {b["Magic"] for b in recs["batches"]}
    assert magics == ({1} if "v2" not in name.split(".")[0] else magics)
    assert all(b["CrcValid"] for b in recs["batches"])


# ------------------------------------------------------------------------------------------------
# text samples kwire negotiate reads today

NAME_KEYS = {"Produce": 0, "Fetch": 1, "ListOffsets": 2, "Offset": 2, "Metadata": 3, "LeaderAndIsr": 4,
             "StopReplica": 5, "UpdateMetadata": 6, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
             "DescribeGroups": 15, "ListGroups": 16, "SaslHandshake": 17, "ApiVersion": 18,
             "CreateTopics": 19, "DeleteTopics": 20, "DeleteRecords": 21}


@pytest.mark.parametrize("name", ["kyeoungchan-note/kafka-3.9-broker-api-versions-masked-host-elided.txt",
                                  "confluent-kafka-python/issue1644-librdkafka-apiversion-ssl.partial.log",
                                  "librdkafka/issue3090-success-prefixed-log.partial.log",
                                  "librdkafka/issue3158-log-7-prefix.partial.log"])
def test_negotiate_reads_these_texts_as_they_show(name):
    shows = FILES[name]["shows"]
    (ans,) = load_broker_file(VEC / name)
    ranges = shows["brokers"][0]["ranges"] if "brokers" in shows else shows["ranges"]
    assert ans.ranges == {NAME_KEYS[n]: tuple(r) for n, r in ranges.items()}


# ------------------------------------------------------------------------------------------------
# client profiles (kwire_cli/negotiation/clients, shipped with the package)


def test_every_profile_loads_and_cites_its_source():
    files = sorted(CLIENTS.glob("*.yaml"))
    assert len(files) >= 7
    readme = (CLIENTS / "README.md").read_text()
    for f in files:
        head = f.read_text().split("ApiKeys:")[0]
        assert "Source:" in head and re.search(r"commit [0-9a-f]{40}|PyPI|release \d+\.\d+\.\d+", head), f.name
        ranges = load_client_file(f)
        assert ranges and all(0 <= lo <= hi for lo, hi in ranges.values()), f.name
        assert 18 in ranges and 0 in ranges and 1 in ranges, f.name
        assert f"`clients/{f.name}`" in readme


def recorded_choices(client: str) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """(api key -> version the client sent, broker ranges) from the recorded captures of one client."""
    sent: dict[int, set] = {}
    broker = None
    for cap in sorted((ROOT / "fixtures" / "captures").glob(f"{client}-*.pcap")):
        r = kwire("pcap", str(cap), "--format", "jsonl")
        assert r.code == 0, r
        for line in r.out.splitlines():
            row = json.loads(line)
            if row["kind"] == "request":
                sent.setdefault(row["api_key"], set()).add(row["api_version"])
            elif row["api_key"] == 18 and row["body"].get("ErrorCode") == 0 and broker is None:
                broker = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in row["body"]["ApiKeys"]}
    assert broker
    return {k: max(v) for k, v in sent.items()}, broker


@pytest.mark.parametrize("client, profile", [("kafka-python", "kafka-python-3.0.12.yaml"),
                                             ("confluent-kafka", "librdkafka-2.15.yaml"),
                                             ("kafkajs", "kafkajs-2.2.4.yaml")])
def test_recorded_clients_pick_min_of_profile_and_broker(client, profile):
    """Each API the recorded client used went at min(profile max, the broker's max)."""
    sent, broker = recorded_choices(client)
    ranges = load_client_file(CLIENTS / profile)
    assert len(sent) >= 10
    for key, version in sent.items():
        assert key in ranges, (client, key)
        assert version == min(ranges[key][1], broker[key][1]), (client, key, version, ranges[key], broker[key])


# ------------------------------------------------------------------------------------------------
# fixtures/hex/dumps: the dump forms made by scripts/make_dump_fixtures.sh

DUMPS = ROOT / "fixtures" / "hex" / "dumps"


def test_every_dump_is_in_its_readme_and_the_inputs_match_their_hex():
    readme = (DUMPS / "README.md").read_text()
    for p in sorted(DUMPS.iterdir()):
        if p.name == "README.md":
            continue
        # listed by name, or as `stem.{sll,sll2,...}.rest`
        stem, variant, rest = (p.name.split(".", 2) + ["", ""])[:3]
        braced = re.findall(r"`" + re.escape(stem) + r"\.\{([a-z0-9,]+)\}\.(\S+?)`", readme)
        assert f"`{p.name}`" in readme or any(variant in v.split(",") and r == rest for v, r in braced), p.name
    for stem in ("metadata-request-v12", "saslauthenticate-request-v2", "produce-request-v9"):
        assert (DUMPS / f"{stem}.bin").read_bytes() == \
            bytes.fromhex((ROOT / "fixtures" / "hex" / f"{stem}.hex").read_text().strip())


@pytest.mark.parametrize("kind, linktype", [("sll", 113), ("sll2", 276), ("rawip", 101), ("null", 0)])
def test_relinked_captures_decode_as_the_ethernet_original(kind, linktype):
    relinked = DUMPS / f"kafkajs-produce.{kind}.pcap"
    raw = relinked.read_bytes()
    assert struct.unpack_from("<I", raw, 20)[0] == linktype
    rows = {}
    for path in (ROOT / "fixtures" / "captures" / "kafkajs-produce.pcap", relinked):
        r = kwire("pcap", str(path), "--format", "jsonl")
        assert r.code == 0, r
        rows[path] = [{k: v for k, v in json.loads(line).items() if k != "file"} for line in r.out.splitlines()]
    original, other = rows.values()
    assert len(original) == 10 and other == original


# ------------------------------------------------------------------------------------------------
# issue 14.2: the text samples kwire negotiate refused before; each now reads as the source shows


@pytest.mark.parametrize("name, form, address", [
    ("apache-kafka/pr20598-kafka-cluster-api-versions.partial.txt", "kafka-broker-api-versions", "172.20.10.3:19091"),
    ("apache-kafka/pr2184-broker-version-command-one-line.txt", "kafka-broker-api-versions", "localhost:9092"),
    ("librdkafka/issue4203-redacted-host-unsupported.partial.txt", "kafka-broker-api-versions", "node 5"),
    ("pinterest-doctork/issue90-java-debug-recorded-api-versions.partial.txt", "java-client-log", "node -1"),
    ("confluent-kafka-dotnet/issue1308-librdkafka-logger-form.partial.log", "librdkafka", "kafkabk4.something.com:9092"),
])
def test_negotiate_reads_the_texts_it_refused(name, form, address):
    e = FILES[name]
    shows = e["shows"]
    (ans,) = load_broker_file(VEC / name)
    assert (ans.form, ans.address) == (form, address)
    shown = shows["brokers"][0] if "brokers" in shows else shows
    names = {**NAME_KEYS, "ApiVersions": 18, "ControlledShutdown": 7, "OffsetCommit": 8, "OffsetFetch": 9,
             "FindCoordinator": 10, "JoinGroup": 11, "Offsets": 2}
    for api, r in shown["ranges"].items():
        assert ans.ranges[names[api]] == tuple(r), api
    for api in shown.get("unsupported", []):
        assert names[api] not in ans.ranges and names[api] in ans.names
    if "id" in shown:
        assert ans.node_id == shown["id"]
    if "entries" in shown:
        assert len(ans.names) == shown["entries"]
    # a sample cut off by the index is read as far as it goes and marked incomplete
    assert ans.complete is (not e["truncated"] or form == "librdkafka")
    if not ans.complete:
        assert "cut off after" in ans.error


def test_negotiate_reads_quoted_and_indented_blocks():
    text = (VEC / "kyeoungchan-note/kafka-3.9-broker-api-versions-masked-host-elided.txt").read_text()
    (plain,) = parse_broker_input(text, "note")
    quoted = "".join(f"> {line}\n" for line in text.splitlines())
    indented = "".join(f"    {line}\n" for line in text.splitlines())
    for variant in (quoted, indented, "".join(f"> {line}\n" for line in indented.splitlines())):
        (a,) = parse_broker_input(variant, "note")
        assert (a.address, a.ranges, a.node_id, a.form) == (plain.address, plain.ranges, 2, "kafka-broker-api-versions")
    assert plain.error.startswith("the list is elided ('...' at note:8)")
