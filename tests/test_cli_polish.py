"""Issue 14, items 5 and 6: usage errors are one line with exit 2 everywhere, field names in YAML
match without regard to case, multi-file tables name their files, times count from the capture."""
from __future__ import annotations

import json

from cli_run import ROOT, kwire

CAPS = ROOT / "fixtures" / "captures"


def test_click_usage_errors_are_one_line_with_where_to_look():
    for args, line in (
        (["pcap", str(CAPS / "kafkajs-produce.pcap"), "--port", "0"],
         "kwire: error: Invalid value for '--port': 0 is not in the range 1<=x<=65535. (see kwire pcap --help)"),
        (["encode", "-o", "/tmp", "x.yaml"],
         "kwire: error: Invalid value for '-o' / '--output': File '/tmp' is a directory. (see kwire encode --help)"),
        (["bogus"], "kwire: error: No such command 'bogus'. (see kwire --help)"),
    ):
        r = kwire(*args)
        assert (r.code, r.out, r.err) == (2, "", line + "\n"), r


def test_a_capture_file_that_does_not_exist_is_a_usage_error_before_any_output():
    r = kwire("pcap", str(CAPS / "nope.pcap"), str(CAPS / "kafkajs-produce.pcap"))
    assert (r.code, r.out) == (2, "")
    assert r.err == f"kwire: error: FILES: no such file: {CAPS / 'nope.pcap'}\n"


def test_a_bad_spark_master_is_one_line_before_the_jvm_starts(tmp_path):
    r = kwire("spark-decode", str(CAPS / "kafkajs-produce.pcap"), "--out", str(tmp_path / "o"), "--master", "bogus://x")
    assert (r.code, r.out) == (2, "") and len(r.err.splitlines()) == 1
    assert r.err.startswith("kwire: error: --master: 'bogus://x' is not a Spark master URL (local, local[N]")


def test_yaml_field_names_match_without_case_and_unknown_ones_say_the_closest():
    spelled = "api: CreateTopics\nversion: 7\nbody:\n  Topics:\n    - Name: t\n      NumPartitions: 1\n" \
              "      ReplicationFactor: 1\n  timeoutMs: 5000\n"
    loose = "api: CreateTopics\nversion: 7\nbody:\n  topics:\n    - name: t\n      numpartitions: 1\n" \
            "      REPLICATIONFACTOR: 1\n  TimeoutMS: 5000\n"
    a, b = kwire("encode", "-", input=spelled), kwire("encode", "-", input=loose)
    assert a.code == b.code == 0 and a.out == b.out
    r = kwire("encode", "-", input="api: CreateTopics\nversion: 7\nbody:\n  topics: []\n  timeoutMillis: 5\n")
    assert r.code == 1
    assert r.err == ("kwire: error: CreateTopics v7 request has no field timeoutMillis in any version "
                     "(did you mean timeoutMs?)\n")


def test_a_table_of_several_files_names_each_rows_file():
    r = kwire("pcap", str(CAPS / "rotated"))
    lines = r.out.splitlines()
    assert lines[0].split()[:6] == ["file", "frame", "(in", "its", "file)", "time"]
    files = {ln.split("  ", 1)[0] for ln in lines[1:]}
    assert len(files) > 1 and all(f.startswith("rotated-") and f.endswith(".pcap") for f in files)
    one = kwire("pcap", str(CAPS / "kafkajs-produce.pcap"))
    assert one.out.splitlines()[0].split()[:2] == ["frame", "time"]


def test_times_count_from_the_captures_first_frame_whatever_the_filter_shows():
    cap = str(CAPS / "kafkajs-produce.pcap")
    rows = [json.loads(x) for x in kwire("pcap", cap, "--format", "jsonl").out.splitlines()]
    t0 = rows[0]["ts"]
    produce = next(x for x in rows if x["api_name"] == "Produce")
    shown = kwire("pcap", cap, "--filter", "api=Produce").out.splitlines()[1].split()
    assert shown[0] == str(produce["frame"]) and float(shown[1]) == round(produce["ts"] - t0, 6) > 0
