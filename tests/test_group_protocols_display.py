"""Share groups (KIP-932) and streams groups (KIP-1071), and KIP-848's heartbeat epochs, read
readably in kwire decode's tree: what a MemberEpoch or an acknowledge type means, acquired records
and acknowledgements as offset ranges, streams tasks as Kafka Streams names them (subtopology_partition),
endpoints as host:port. The values themselves are unchanged (JSON keeps the integers). Frames are
built by tests/ref_encoder.py from the bundled specs, not by kwire's codec."""
from __future__ import annotations

import json

from capture_util import Conversation, write_pcap
from cli_run import ROOT, kwire
from ref_encoder import Sample, request_frame, response_frame


def _spec(name):
    return json.loads((ROOT / "specs" / f"{name}.json").read_text())


def _frame(name, version, **changes):
    spec = _spec(name)
    body = Sample(spec, version).message()
    for path, value in changes.items():
        node = body
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        node[keys[-1]] = value
    if name.endswith("Request"):
        return request_frame(spec, version, body, 7, "streams-app"), body
    return response_frame(spec, version, body, 7), body


def test_streams_group_heartbeat_reads_as_tasks_endpoints_and_epochs():
    frame, body = _frame("StreamsGroupHeartbeatRequest", 0, MemberEpoch=0, GroupId="app",
                         ActiveTasks=[{"SubtopologyId": "0", "Partitions": [0, 1]}],
                         UserEndpoint={"Host": "streams-1", "Port": 8080})
    r = kwire("decode", frame.hex())
    assert r.code == 0, r
    assert "MemberEpoch: 0 join" in r.out
    assert "[0]  tasks 0_0, 0_1" in r.out
    assert "UserEndpoint: streams-1:8080" in r.out
    j = kwire("decode", frame.hex(), "--format", "json").json()
    assert j["body"]["MemberEpoch"] == 0 and j["body"]["ActiveTasks"] == body["ActiveTasks"]


def test_share_acknowledgements_and_acquired_records_read_as_offset_ranges():
    frame, _ = _frame("ShareAcknowledgeRequest", 2, Topics__0__Partitions__0__AcknowledgementBatches=[
        {"FirstOffset": 10, "LastOffset": 19, "AcknowledgeTypes": [1]},
        {"FirstOffset": 20, "LastOffset": 22, "AcknowledgeTypes": [2, 0, 3]}])
    out = kwire("decode", frame.hex()).out
    assert "[0]  offsets 10-19: accept" in out and "AcknowledgeTypes: [1 accept]" in out
    assert "[1]  offsets 20-22: release, gap, reject" in out
    frame, _ = _frame("ShareFetchResponse", 2, Responses__0__Partitions__0__AcquiredRecords=[
        {"FirstOffset": 100, "LastOffset": 149, "DeliveryCount": 2}])
    out = kwire("decode", frame.hex(), "--api", "ShareFetch", "--version", "2").out
    assert "[0]  offsets 100-149 (50 records), delivery 2" in out


def test_a_kip_848_assignment_reads_as_topics_and_partitions():
    frame, _ = _frame("ConsumerGroupHeartbeatResponse", 1, MemberEpoch=5, Assignment={"TopicPartitions": [
        {"TopicId": "b3JkZXJzLXRvcGljLWlkMQ", "Partitions": [0, 2]}]})
    out = kwire("decode", frame.hex(), "--api", "ConsumerGroupHeartbeat", "--version", "1").out
    assert "[0]  b3JkZXJzLXRvcGljLWlkMQ: partitions 0, 2" in out
    assert "MemberEpoch: 5  int32" in out  # an answer's epoch is the member's new epoch: no reading


def test_heartbeat_epochs_read_as_join_and_leave():
    frame, _ = _frame("ShareGroupHeartbeatRequest", 1, MemberEpoch=-1)
    assert "MemberEpoch: -1 leave" in kwire("decode", frame.hex()).out
    frame, _ = _frame("ConsumerGroupHeartbeatRequest", 1, MemberEpoch=-2)
    assert "MemberEpoch: -2 leave, the static member will rejoin" in kwire("decode", frame.hex()).out
    # another API's MemberEpoch is not a heartbeat's: no reading
    frame, _ = _frame("OffsetCommitRequest", 10, GenerationIdOrMemberEpoch=-1)
    assert "GenerationIdOrMemberEpoch: -1  int32" in kwire("decode", frame.hex()).out


def test_pcap_filters_share_and_streams_groups_by_group_and_member(tmp_path):
    c = Conversation()
    segs = c.handshake()
    req, _ = _frame("StreamsGroupHeartbeatRequest", 0, GroupId="app", MemberId="m-1")
    resp, _ = _frame("StreamsGroupHeartbeatResponse", 0, MemberId="m-1")
    share, _ = _frame("ShareGroupHeartbeatRequest", 1, GroupId="queue", MemberId="m-2")
    req = req[:8] + (7).to_bytes(4, "big") + req[12:]
    share = share[:8] + (8).to_bytes(4, "big") + share[12:]
    for side, data in ((0, req), (1, resp), (0, share)):
        segs += c.send(side, data)
    p = tmp_path / "groups.pcap"
    p.write_bytes(write_pcap(segs))
    rows = kwire("pcap", str(p), "--format", "jsonl", "--filter", "group=app").out.splitlines()
    assert [(json.loads(x)["api_name"], json.loads(x)["kind"]) for x in rows] == [("StreamsGroupHeartbeat", "request")]
    rows = kwire("pcap", str(p), "--format", "jsonl", "--filter", "member=m-2").out.splitlines()
    assert [json.loads(x)["api_name"] for x in rows] == ["ShareGroupHeartbeat"]
