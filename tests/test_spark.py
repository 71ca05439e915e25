"""`kwire spark-decode` on a real local Spark session (local[2], one session for the whole module).

The reference is always `kwire pcap` itself (run through the real CLI entry point): the rows the
job writes must be the lines `kwire pcap --format jsonl` prints for the same files, and its summary
the `kwire pcap --summary` of the same input.
"""
from __future__ import annotations

import collections
import glob
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java: Spark cannot start", allow_module_level=True)

from capture_util import PcapngWriter
from cli_run import kwire
from kwire_cli.capture import iter_capture
from kwire_cli.capture.formats import packet_at
from kwire_cli.capture.rows import json_ordered
from kwire_cli.capture.session import Conversation
from kwire_cli.render.jsonlines import line_encoder
from kwire_cli.spark import reading
from kwire_cli.spark.job import SparkJobError, get_session, run

ROOT = Path(__file__).resolve().parents[1]
CAPS = ROOT / "fixtures" / "captures"
FILES = sorted(str(p.relative_to(ROOT)) for p in CAPS.glob("*.pcap"))
ROTATED = sorted(str(p.relative_to(ROOT)) for p in (CAPS / "rotated").glob("*.pcap"))


# every connection heavy, every frame a chunk of its own: the split path (``spark.split``) at its
# most cut up, each response in another chunk than its request
SPLIT = {"spark.kwire.heavyConnectionBytes": "0", "spark.kwire.heavyChunkBytes": "1"}


@pytest.fixture(scope="module")
def session():
    s, created = get_session("local[2]", [("spark.sql.shuffle.partitions", "2"), ("spark.ui.enabled", "false"),
                                          ("spark.default.parallelism", "2"), ("spark.driver.memory", "1g")],
                             progress=False)
    yield s
    if created:
        s.stop()


@pytest.fixture(scope="module", params=["as-is", "split"])
def spark(session, request):
    """The module's session, its tests run twice: the job as it judges connections (none of the
    fixtures' is heavy), and with every connection through the split path (``SPLIT``)."""
    conf = SPLIT if request.param == "split" else {}
    for k, v in conf.items():
        session.conf.set(k, v)
    yield session
    for k in conf:
        session.conf.unset(k)


def split_mode(spark) -> bool:
    return spark.conf.get("spark.kwire.heavyConnectionBytes", None) == "0"


def test_the_worker_pipe_buffer_is_set_unless_given(spark):
    from kwire_cli.spark.session import WORKER_PIPE_BUFFER
    assert spark.sparkContext.getConf().get("spark.buffer.size") == str(WORKER_PIPE_BUFFER)


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(ROOT)  # file labels are the paths as given, relative to the repository


def pcap_lines(*files: str, opts: tuple = ()) -> collections.Counter:
    """`kwire pcap FILE --format jsonl [OPTS]`, once per file, all lines."""
    lines: list[str] = []
    for f in files:
        r = kwire("pcap", f, "--format", "jsonl", *opts)
        assert r.code == 0, r
        lines += r.out.splitlines()
    return collections.Counter(lines)


def pcap_summary(*files: str, opts: tuple = ()) -> dict:
    """`kwire pcap FILES --summary --format json` (a real process: the in-process runner can lose
    the text stream's buffered output when a warning follows it)."""
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", *files, "--summary", "--format", "json", *opts],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    return json.loads(r.stdout)


def spark_lines(out: str) -> collections.Counter:
    lines: list[str] = []
    for p in glob.glob(os.path.join(out, "api_name=*", "part-*")):
        with open(p, encoding="utf-8") as f:
            lines += f.read().splitlines()
    return collections.Counter(lines)


def normal(x):
    return json.loads(json.dumps(x))


@pytest.fixture(scope="module")
def fixtures_jsonl(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("spark") / "jsonl")
    os.chdir(ROOT)
    res = run(FILES, out, fmt="jsonl", spark=spark, partitions=3)
    return out, res, spark


def test_rows_equal_kwire_pcap_over_each_file(fixtures_jsonl):
    out, res, _ = fixtures_jsonl
    got, want = spark_lines(out), pcap_lines(*FILES)
    assert sum(want.values()) > 400
    assert got == want
    assert res.rows == sum(want.values()) == res.frames
    assert res.failures == []
    assert (res.connections_split > 0) == split_mode(fixtures_jsonl[2])
    # partitioned by API name, every part under the directory of its own API
    for p in glob.glob(os.path.join(out, "api_name=*", "part-*")):
        api = Path(p).parent.name.split("=", 1)[1]
        for line in open(p, encoding="utf-8"):
            assert (json.loads(line)["api_name"] or "__HIVE_DEFAULT_PARTITION__") == api


def test_summary_equals_kwire_pcap_summary(fixtures_jsonl):
    out, res, _ = fixtures_jsonl
    want = pcap_summary(*FILES)
    assert normal(res.summary) == want
    with open(os.path.join(out, "_kwire_summary.json")) as f:
        assert json.load(f) == want
    with open(os.path.join(out, "_kwire_result.json")) as f:
        r = json.load(f)
    assert (r["files"], r["packets"], r["frames"], r["rows"]) == (len(FILES), want["capture"]["packets"],
                                                                  want["frames"], want["frames"])


def test_files_cut_into_byte_ranges_give_the_same_rows(spark, tmp_path):
    """Every file is cut into ~1.5 KB ranges at record boundaries: same rows, packet numbers,
    damage and counters as reading each file whole."""
    plans = [reading.plan_file(f, f, 1500) for f in FILES]
    assert all(p.kind == "pcap" for p in plans)
    out = str(tmp_path / "o")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    res = run(FILES, out, fmt="jsonl", spark=spark, split_size=1500, partitions=2)
    assert spark_lines(out) == pcap_lines(*FILES)
    assert normal(res.summary) == pcap_summary(*FILES)
    # the index job (probing the ranges' boundaries) and the pre-pass (scanning the read tasks'
    # headers) run in two Spark tasks per task slot, each over a run of ranges, not one each
    jobs = sorted(set(tracker.getJobIdsForGroup(None)) - before)
    tasks = [sum(tracker.getStageInfo(s).numTasks for s in tracker.getJobInfo(j).stageIds) for j in jobs]
    assert sum(len(reading.nominal_ranges(p, 1500)) - 1 for p in plans) > 4 * len(FILES)
    assert tasks[:2] == [4, 4], tasks


def merged_rotated_lines() -> collections.Counter:
    """The rotated files read as one capture by the capture library (merged by timestamp)."""
    enc = line_encoder()
    lines = []
    for rec in Conversation().rows(iter_capture(ROTATED)):
        lines.append(enc(json_ordered(rec)).decode())
    return collections.Counter(lines)


def _concat_pcap(parts: list[str], dest: Path) -> None:
    with open(dest, "wb") as out:
        for i, p in enumerate(parts):
            data = Path(p).read_bytes()
            out.write(data if i == 0 else data[24:])


def test_connection_split_across_rotated_files_is_reassembled(spark, tmp_path):
    out = str(tmp_path / "rot")
    res = run([str(CAPS.relative_to(ROOT) / "rotated")], out, fmt="jsonl", spark=spark, partitions=2)
    got = spark_lines(out)
    assert got == merged_rotated_lines()
    # the 120 000-byte record whose Produce request spans both files is there, decoded
    big = [json.loads(line) for line in got if '"k-big"' in line and '"kind":"request"' in line]
    assert len(big) == 1 and big[0]["error"] is None
    rec = big[0]["body"]["TopicData"][0]["PartitionData"][0]["Records"]["batches"][0]["Records"][0]
    assert rec["Value"] == {"text": "B" * 120000}
    assert res.summary["damage"] == {}
    # kwire pcap over each file separately loses that frame; over the unsplit capture it agrees
    per_file = pcap_summary(ROTATED[0]), pcap_summary(ROTATED[1])
    assert sum(s["frames"] for s in per_file) < res.frames
    assert any(s["damage"] for s in per_file)
    whole = tmp_path / "whole.pcap"
    _concat_pcap(ROTATED, whole)
    want = pcap_summary(str(whole))
    mine = normal(res.summary)
    for k in ("frames", "decoded", "undecodable", "apis", "error_codes", "clients", "negotiation_audit",
              "advertised_by", "damage"):
        assert mine[k] == want[k], k
    cap_m, cap_w = dict(mine["capture"]), dict(want["capture"])
    assert (cap_m.pop("files"), cap_w.pop("files")) == (2, 1)
    assert cap_m == cap_w


def pcap_dir_lines(path: str) -> collections.Counter:
    """`kwire pcap DIR --format jsonl`: the files of DIR as one capture, in rotation order."""
    r = kwire("pcap", path, "--format", "jsonl")
    assert r.code == 0, r
    return collections.Counter(r.out.splitlines())


def test_task_local_connections_skip_the_shuffle(spark, tmp_path):
    """rotated-0 holds one connection wholly (decoded in its read task, no shuffle) and the start
    of one that goes on in rotated-1 (its packets of both files meet in the shuffle): one job, both
    paths, and the rows and summary of kwire pcap over the directory."""
    rot = str(CAPS.relative_to(ROOT) / "rotated")
    out = str(tmp_path / "o")
    res = run([rot], out, fmt="jsonl", spark=spark, partitions=2)
    if split_mode(spark):  # both connections split: no read task decodes or shuffles a connection
        assert (res.connections_local, res.connections_shuffled, res.connections_split) == (0, 0, 2)
        assert (res.tasks_local, res.tasks_shuffled) == (0, 0)
    else:
        assert (res.connections_local, res.connections_shuffled) == (1, 1)
        assert (res.tasks_local, res.tasks_shuffled) == (1, 2)  # rotated-0 both ways, rotated-1 only shuffled
    want = pcap_dir_lines(rot)
    got = spark_lines(out)
    assert got == want and res.rows == sum(want.values())
    local = [json.loads(line) for line in got if "47504" in line]
    cut = [json.loads(line) for line in got if "47514" in line]
    assert local and cut and {r["file"] for r in cut} == set(ROTATED)
    assert normal(res.summary) == pcap_summary(rot)
    # every connection of its own file: no shuffle at all
    out2 = str(tmp_path / "o2")
    res2 = run(FILES[:3], out2, fmt="jsonl", spark=spark, partitions=2)
    assert res2.connections_shuffled == res2.tasks_shuffled == 0 and res2.tasks_local == (0 if split_mode(spark) else 3)
    assert spark_lines(out2) == pcap_lines(*FILES[:3])
    assert normal(res2.summary) == pcap_summary(*FILES[:3])


def _pcap_records(data: bytes) -> list[bytes]:
    out, p = [], 24
    while p < len(data):
        n = struct.unpack_from("<I", data, p + 8)[0]
        out.append(data[p:p + 16 + n])
        p += 16 + n
    return out


def test_topic_ids_answered_in_another_read_task(spark, tmp_path):
    """The Metadata answer in one file, the Fetch by topic id in the next (two connections, each
    decoded in its own read task): the first pass cannot name the ids, the driver sees an earlier
    answer, and the second pass names them as kwire pcap does over both files."""
    md, fetch = _consume_frames()
    whole = tmp_path / "whole.pcap"
    _exchange_capture(whole, md, fetch)
    data = whole.read_bytes()
    recs = _pcap_records(data)
    port = struct.pack(">H", 41002)  # the second connection's client port, in its TCP header
    cut = next(i for i, r in enumerate(recs) if port in (r[16 + 34:16 + 36], r[16 + 36:16 + 38]))
    d = tmp_path / "parts"
    d.mkdir()
    (d / "cap0.pcap").write_bytes(data[:24] + b"".join(recs[:cut]))
    (d / "cap1.pcap").write_bytes(data[:24] + b"".join(recs[cut:]))
    want = pcap_dir_lines(str(d))
    fetch_rows = [json.loads(line) for line in want if '"api_name":"Fetch"' in line]
    assert len(fetch_rows) == 4 and all(v is not None for r in fetch_rows for v in r["topic_names"].values())
    out = str(tmp_path / "o")
    res = run([str(d)], out, fmt="jsonl", spark=spark, partitions=2)
    assert res.tasks_local == (0 if split_mode(spark) else 2) and res.connections_shuffled == 0
    assert res.decode_passes == 2
    assert spark_lines(out) == want


def test_parquet_typed_columns(spark, tmp_path):
    f = "fixtures/captures/kafka-python-consume.pcap"
    out = str(tmp_path / "pq")
    res = run([f], out, fmt="parquet", spark=spark, partitions=2)
    df = spark.read.parquet(out)
    types = dict(df.dtypes)
    assert types["frame"] == "bigint" and types["api_key"] == "int" and types["latency_ms"] == "double"
    assert types["header"] == "string" and types["body"] == "string" and types["error_codes"] == "array<string>"
    assert {Path(p).name for p in glob.glob(os.path.join(out, "api_name=*"))} >= {"api_name=Fetch",
                                                                                  "api_name=ApiVersions"}
    want = {(r["frame"], r["kind"]): r for r in map(json.loads, pcap_lines(f))}
    rows = df.collect()
    assert len(rows) == len(want) == res.rows
    for row in rows:
        w = want[(row["frame"], row["kind"])]
        for k in ("file", "ts", "src", "dst", "api_key", "api_name", "api_version", "correlation_id",
                  "client_id", "size", "latency_ms", "error", "error_codes"):
            assert row[k] == w[k], k
        assert json.loads(row["header"]) == w["header"]
        assert (json.loads(row["body"]) if row["body"] is not None else None) == w["body"]
        assert (json.loads(row["topic_names"]) if row["topic_names"] else None) == w.get("topic_names")
    assert normal(res.summary) == pcap_summary(f)
    # compressed with zstd unless the user chose (spark.sql.parquet.compression.codec)
    import pyarrow.parquet as pq

    def codecs(d: str) -> set[str]:
        parts = glob.glob(os.path.join(d, "api_name=*", "part-*.parquet"))
        groups = [pq.ParquetFile(p).metadata.row_group(0) for p in parts]
        return {g.column(i).compression for g in groups for i in range(g.num_columns)}
    assert codecs(out) == {"ZSTD"}
    spark.conf.set("spark.sql.parquet.compression.codec", "gzip")
    try:
        run([f], out + "-gzip", fmt="parquet", spark=spark, partitions=2)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert codecs(out + "-gzip") == {"GZIP"}

    # the body column without a dictionary (parquet.enable.dictionary#body), unless the user says
    def body_dictionary(d: str) -> set[bool]:
        parts = glob.glob(os.path.join(d, "api_name=*", "part-*.parquet"))
        groups = [pq.ParquetFile(p).metadata.row_group(0) for p in parts]
        return {any("DICTIONARY" in e for e in g.column(i).encodings)
                for g in groups for i in range(g.num_columns) if g.column(i).path_in_schema == "body"}
    assert body_dictionary(out) == {False}
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("parquet.enable.dictionary#body", "true")
    try:
        run([f], out + "-dict", fmt="parquet", spark=spark, partitions=2)
    finally:
        hadoop.unset("parquet.enable.dictionary#body")
    assert True in body_dictionary(out + "-dict")  # (where it would not be smaller, Parquet writes plain)


def _pcap_to_pcapng(src: Path, dest: Path, second_interface_at: int | None = None) -> None:
    """Rewrite a pcap as pcapng (enhanced packet blocks), independently of kwire's reader; with
    ``second_interface_at``, an interface description block comes after that many packets and the
    rest of the packets are on that new interface."""
    data = src.read_bytes()
    snaplen, linktype = struct.unpack_from("<II", data, 16)
    with open(dest, "wb") as f:
        w = PcapngWriter(f)
        ifid = w.interface(linktype, snaplen)
        w.name_resolution()
        pos, k = 24, 0
        while pos < len(data):
            if k == second_interface_at:
                ifid = w.interface(linktype, snaplen, tsresol=9)
            sec, usec, incl, _orig = struct.unpack_from("<IIII", data, pos)
            w.epb(ifid, sec + usec / 1e6, data[pos + 16:pos + 16 + incl])
            pos += 16 + incl
            k += 1


def _ranges(path: str, split: int) -> tuple[str, list]:
    plan = reading.plan_file(path, path, split)
    cuts = reading.nominal_ranges(plan, split)
    ranges = reading.stitch(plan, cuts, [reading.index_range(plan, i, cuts) for i in range(len(cuts) - 1)])
    return plan.kind, ranges


def test_pcapng_cut_into_ranges(spark, tmp_path):
    d = tmp_path / "ng"
    d.mkdir()
    ng, ng2 = d / "consume.pcapng", d / "two-interfaces.pcapng"
    _pcap_to_pcapng(CAPS / "confluent-kafka-consume.pcap", ng)
    _pcap_to_pcapng(CAPS / "kafka-python-consume.pcap", ng2, second_interface_at=40)
    plan = reading.plan_file(str(ng), str(ng), 4096)
    assert plan.kind == "pcapng" and plan.prefix[:4] == b"\x0a\x0d\x0d\x0a"
    kind, ranges = _ranges(str(ng), 4096)
    assert kind == "pcapng" and len(ranges) > 5
    # an interface described after the first packet: that file is read whole, not in ranges
    assert _ranges(str(ng2), 4096)[0] == "whole"
    out = str(tmp_path / "out")
    res = run([str(d)], out, fmt="jsonl", spark=spark, split_size=4096, partitions=2)
    assert spark_lines(out) == pcap_lines(str(ng), str(ng2))
    assert normal(res.summary) == pcap_summary(str(ng), str(ng2))


def test_bad_files_are_reported_and_the_rest_completes(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    good = d / "a-good.pcap"
    shutil.copy(CAPS / "kafkajs-admin.pcap", good)
    (d / "b-notes.txt").write_text("not a capture\n")
    (d / "c-empty.pcap").write_bytes(b"")
    data = (CAPS / "kafka-python-consume.pcap").read_bytes()
    (d / "d-truncated.pcap").write_bytes(data[:len(data) - 700])  # cut inside a record
    import gzip
    (d / "e-zipped.pcap.gz").write_bytes(gzip.compress((CAPS / "kafkajs-consume.pcap").read_bytes()))
    files = sorted(str(p) for p in d.iterdir())
    out = str(tmp_path / "o")
    res = run(files, out, fmt="jsonl", spark=spark, split_size=3000, partitions=2)  # named: each is read
    assert len(res.failures) == 2
    assert any(m.startswith(str(d / "b-notes.txt") + ": not a pcap or pcapng file") for m in res.failures)
    assert any(m.startswith(str(d / "c-empty.pcap") + ": not a capture file: only 0 bytes")
               for m in res.failures)
    readable = [str(good), str(d / "d-truncated.pcap"), str(d / "e-zipped.pcap.gz")]
    assert spark_lines(out) == pcap_lines(*readable)
    want = pcap_summary(*files)  # kwire pcap reports the same two files and counts every file it opened
    assert normal(res.summary) == want
    assert "truncated-record" in res.summary["damage"]
    assert res.files == 5


def test_cli_local_session(spark, tmp_path):
    out = str(tmp_path / "cli")
    r = kwire("spark-decode", "fixtures/captures/kafkajs-produce.pcap", "fixtures/captures/kafkajs-admin.pcap",
              "--out", out, "--format", "jsonl", "--summary-format", "json", "--partitions", "2",
              "--ship-code", "always")  # the code and specs shipping of a cluster, on the local session
    assert r.code == 0, r
    summary = json.loads(r.out)
    want = pcap_summary("fixtures/captures/kafkajs-admin.pcap", "fixtures/captures/kafkajs-produce.pcap")
    assert summary == want
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"kwire spark-decode: files 2, packets {want['capture']['packets']}, "
                           f"frames {want['frames']}, decoded {want['decoded']}, undecodable 0, "
                           f"rows written {want['frames']}, failed files 0, elapsed ")
    # an output directory that is not empty is refused unless --overwrite
    r2 = kwire("spark-decode", "fixtures/captures/kafkajs-produce.pcap", "--out", out)
    assert r2.code == 1 and "exists and is not empty" in r2.err and "--overwrite" in r2.err
    r3 = kwire("spark-decode", "fixtures/captures", "--out", out, "--overwrite",
               "--summary-format", "none", "--partitions", "2")
    assert r3.code == 0  # manifest.json is not a capture: skipped with a note, not a failed file
    assert ("kwire: note: skipped 1 file that is not a capture: fixtures/captures/manifest.json "
            "(not a pcap or pcapng file)") in r3.err
    assert "failed files 0" in r3.err
    # the job still ran and wrote (parquet by default) everything it could read
    assert glob.glob(os.path.join(out, "api_name=Produce", "part-*.parquet"))
    assert not glob.glob(os.path.join(out, "api_name=*", "part-*.txt"))
    with open(os.path.join(out, "_kwire_result.json")) as f:
        assert json.load(f)["failures"] == [m.split("kwire: error: ", 1)[1] for m in r3.err.splitlines()
                                            if m.startswith("kwire: error: ")]


def test_the_quick_start_runs_twice_without_a_warning(tmp_path):
    """README's quick start, as written (its own --out), twice in a row in a fresh process each: exit 0,
    the summary, and on stderr none of Spark's start-up chatter (log4j's profile, WARN lines about
    the host name or native libraries, the default log level) nor a kwire warning: only the JVM's
    own line about an incubator module, and kwire's last line."""
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "kwire spark-decode fixtures/captures/" in x)
    args = shlex.split(line.split("&&", 1)[1].strip().replace("/tmp/kwire-out", str(tmp_path / "kwire-out")))
    assert args[0] == "kwire" and "--overwrite" in args
    files = glob.glob(str(ROOT / "fixtures" / "captures" / "*.pcap"))
    argv = [sys.executable, "-m", "kwire_cli", *[a for a in args[1:] if "*" not in a]]
    argv[4:4] = files
    for _ in range(2):
        r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600,
                           env=dict(os.environ, KWIRE_NO_PROGRESS="1"))
        assert r.returncode == 0, r.stderr[-2000:]
        err = [x for x in r.stderr.splitlines() if not x.startswith("WARNING: Using incubator modules")]
        assert len(err) == 1 and err[0].startswith("kwire spark-decode: files 11,"), r.stderr
        assert "frames 447" in err[0] and "failed files 0" in err[0]


def test_missing_input_is_one_line_error(spark, tmp_path):
    from kwire_cli.inputs import SourceError
    with pytest.raises(SourceError, match="no such file"):
        run(["fixtures/captures/nope-*.pcap"], str(tmp_path / "x"), spark=spark)


# ------------------------------------------------------------------ reading (no Spark needed)
def test_boundary_scan_skips_fake_record_headers(tmp_path):
    """A payload holding a fake pcap record header does not fool the scan: a chain must follow."""
    data = bytearray((CAPS / "kafka-python-produce.pcap").read_bytes())
    p = tmp_path / "x.pcap"
    p.write_bytes(data)
    plan = reading.plan_file(str(p), str(p), 1000)
    # walk the true record starts
    starts, pos = [], 24
    while pos < len(data):
        starts.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    import mmap
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for nominal in range(24, len(data), 997):
            b = reading.find_boundary(mm, nominal, len(data), plan)
            assert b == min((s for s in starts if s >= nominal), default=None)
    # a record-header look-alike inside a payload, right at a nominal cut
    big = max(range(len(starts) - 1), key=lambda i: starts[i + 1] - starts[i])
    at = starts[big] + 16 + 60
    sec = struct.unpack_from("<I", data, starts[big])[0]
    data[at:at + 16] = struct.pack("<IIII", sec, 5, 40, 40)
    p.write_bytes(data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert packet_at(mm, at, plan.layout, None, plan.first_ts) is not None  # alone, it looks like a record
        assert reading.find_boundary(mm, at, len(data), plan) == starts[big + 1]


def test_stitch_recovers_from_a_wrong_boundary(tmp_path):
    p = CAPS / "kafka-python-consume.pcap"
    plan = reading.plan_file(str(p), str(p), 2000)
    cuts = reading.nominal_ranges(plan, 2000)
    results = [reading.index_range(plan, i, cuts) for i in range(len(cuts) - 1)]
    good = reading.stitch(plan, cuts, results)
    assert good[0][:1] == (24,) and good[-1][1] == plan.size
    assert all(a[1] == b[0] for a, b in zip(good, good[1:]))  # contiguous, no gap, no overlap
    # a false boundary in range 2 (scanned 8 bytes too late): the driver re-walks from the agreed point
    i, b, end, n, hdr = results[2]
    results[2] = (i, b + 8, end, n - 1, hdr)
    assert reading.stitch(plan, cuts, results) == good
    # the packet numbers: each range starts where the records before it end
    total = 0
    for start, end, first in good:
        assert first == total
        pos = start
        while pos < end:
            pos += 16 + struct.unpack_from("<I", p.read_bytes(), pos + 8)[0]
            total += 1
        assert pos == end


def test_plan_file_failures_use_the_readers_messages(tmp_path):
    e = tmp_path / "e.pcap"
    e.write_bytes(b"")
    t = tmp_path / "t.pcap"
    t.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
    assert reading.plan_file(str(e)).failure == f"{e}: not a capture file: only 0 bytes"
    assert reading.plan_file(str(t)).failure == f"{t}: pcap file header cut short: 6 of 24 bytes"
    assert reading.plan_file(str(tmp_path / "none")).failure.endswith("No such file or directory")
    assert not reading.plan_file(str(tmp_path / "none")).counted


def _consume_frames():
    """Real frames of librdkafka's consumer (confluent-kafka-consume.pcap): a Metadata v12 exchange
    from its bootstrap connection and the Fetch v16 exchanges (topic ids) of its broker connection."""
    frames = [f for f in iter_capture(str(CAPS / "confluent-kafka-consume.pcap")) if hasattr(f, "api_key")]
    first_conn = frames[0].conn
    md = [f for f in frames if f.api_key == 3 and f.conn == first_conn][:2]
    fetch_conn = next(f.conn for f in frames if f.api_key == 1 and f.api_version >= 13)
    fetch = [f for f in frames if f.api_key == 1 and f.conn == fetch_conn][:4]
    assert [f.kind for f in md] == ["request", "response"] and len(fetch) == 4
    return md, fetch


def _exchange_capture(path: Path, first: list, second: list, ports: tuple = (41001, 41002)) -> None:
    """Two connections (client ports ``ports``) to one broker: ``first``'s frames on the first, then
    ``second``'s on the second, each frame in one segment."""
    from capture_util import Conversation as TcpConv
    from capture_util import write_pcap
    segs = []
    for port, frames in zip(ports, (first, second), strict=True):
        c = TcpConv(client=("10.0.0.1", port), server=("10.0.0.2", 9092))
        segs += c.handshake()
        for f in frames:
            segs += c.send(0 if f.kind == "request" else 1, struct.pack(">i", len(f.data)) + f.data)
    path.write_bytes(write_pcap(segs))


def test_topic_ids_are_named_from_answers_on_other_connections(spark, tmp_path):
    """A consumer learns topic ids from a Metadata answer on one connection and fetches by id on
    another (every multi-broker cluster): spark-decode names them as kwire pcap does, and only
    from answers seen before the frame."""
    md, fetch = _consume_frames()
    after, before = tmp_path / "after.pcap", tmp_path / "before.pcap"
    _exchange_capture(after, md, fetch)     # Metadata first: the Fetch rows get names
    _exchange_capture(before, fetch, md)    # Fetch first: its ids are not known yet
    for cap, named in ((after, True), (before, False)):
        want = pcap_lines(str(cap))
        fetch_rows = [json.loads(line) for line in want if '"api_name":"Fetch"' in line]
        assert len(fetch_rows) == 4 and all(r["topic_names"] for r in fetch_rows)
        assert all(all(v is not None for v in r["topic_names"].values()) == named for r in fetch_rows)
        out = str(tmp_path / ("out-" + cap.stem))
        res = run([str(cap)], out, fmt="jsonl", spark=spark, partitions=3)
        assert spark_lines(out) == want and res.decode_passes in (1, 2)


def test_topic_ids_answered_again_in_each_file_are_named_in_one_pass(spark, tmp_path):
    """Each file has a Metadata answer of its own before its Fetches by topic id (a client's metadata
    refreshes, one per rotated file): the second file's rows are named from its own answer, later
    than the first file's but giving the same name, so one pass gives kwire pcap's rows. (Split,
    each connection is framed in a task of its own, its chunks told only its own answers: the
    Fetches find no name, and the second pass names them from the earliest answer, which the
    task that saw both answers must report, whichever connection it decoded first.)"""
    md, fetch = _consume_frames()
    d = tmp_path / "files"
    d.mkdir()
    _exchange_capture(d / "a.pcap", md, fetch)
    _exchange_capture(d / "b.pcap", md, fetch, ports=(41003, 41004))
    want = pcap_dir_lines(str(d))
    rows = [json.loads(line) for line in want if '"api_name":"Fetch"' in line]
    assert len(rows) == 8 and all(v is not None for r in rows for v in r["topic_names"].values())
    out = str(tmp_path / "o")
    res = run([str(d)], out, fmt="jsonl", spark=spark, partitions=2)
    assert spark_lines(out) == want
    assert res.decode_passes == (2 if split_mode(spark) else 1)


def test_topic_names_agree_only_when_no_earlier_answer_was_missed():
    """The decode tasks name ids from their own connections' answers; the driver decides whether
    every row got the name all the job's answers give (else the stage runs again with them)."""
    from kwire_cli.spark.stages import topics_agree
    learned = {"t1": ((0, 5, 0, 1), "orders")}
    assert topics_agree(learned, {})                       # every row named (by any answer: one name each)
    assert topics_agree(learned, {"t1": (0, 4, 1, 1)})     # no name, before any answer
    assert topics_agree(learned, {"t2": (0, 9, 1, 1)})     # an id nobody answered
    assert not topics_agree(learned, {"t1": (0, 9, 1, 1)})  # no name, after an answer
    assert not topics_agree(learned, {}, {"t1"})           # answers gave an id two names


def test_totals_note_ids_that_answers_name_differently():
    """The driver learns the earliest answer of each id, and which ids answers gave two names (a row
    named from a later answer then may differ from kwire pcap's)."""
    from kwire_cli.spark.totals import Totals
    a, b, c = Totals(), Totals(), Totals()
    a.learn("t1", ((0, 9, 0, 1), "orders"))
    a.learn("t1", ((0, 5, 0, 1), "orders"))
    b.learn("t1", ((1, 2, 1, 1), "orders"))
    b.learn("t2", ((1, 3, 1, 1), "payments"))
    c.learn("t2", ((0, 1, 2, 1), "payments-v2"))
    assert not a.renamed and not b.renamed
    merged = Totals().merge(a).merge(b)
    assert merged.learned == {"t1": ((0, 5, 0, 1), "orders"), "t2": ((1, 3, 1, 1), "payments")}
    assert not merged.renamed
    merged.merge(c)
    assert merged.learned["t2"] == ((0, 1, 2, 1), "payments-v2") and merged.renamed == {"t2"}


def test_the_accumulator_merges_task_parts_pairwise_into_the_whole():
    """The tasks' Totals gathered as the accumulator does (a task's own, then each task's
    accumulator, pickled, into the driver's, in any order) and merged pairwise: the summary of all
    the rows, as one part counting them all gives it."""
    import pickle
    import random

    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.spark.totals import Totals, TotalsParts, totals_param
    rows = [r for f in FILES for r in Conversation().rows(iter_capture(f))]
    whole = AnalysedSummary()
    for pos, r in enumerate(rows):
        whole.add(r, pos)
    rnd = random.Random(7)
    conns = sorted({(r["file"], *sorted((r["src"], r["dst"]))) for r in rows})
    deal = {c: rnd.randrange(11) for c in conns}
    parts = [Totals() for _ in range(11)]
    for pos, r in enumerate(rows):
        t = parts[deal[(r["file"], *sorted((r["src"], r["dst"])))]]
        t.summary.add(r, pos)
        t.rows += 1
    rnd.shuffle(parts)
    param = totals_param()
    driver = param.zero(None)
    for t in parts:
        task = param.addInPlace(param.zero(None), t)  # the task's accumulator, sent to the driver
        driver = param.addInPlace(driver, pickle.loads(pickle.dumps(task, pickle.HIGHEST_PROTOCOL)))
    assert isinstance(driver, TotalsParts) and len(driver.stack) == 3  # 11 = 8 + 2 + 1
    total = driver.total()
    assert total.rows == len(rows)
    assert normal(total.summary.to_dict()) == normal(whole.to_dict())


def test_decoding_limits_apply_on_the_executors(spark, tmp_path):
    """--max-frame-size / --max-decompressed / --max-records reach the executors: with each set just
    below a real frame's value, the rows and the summary are kwire pcap's with the same option."""
    cases = [("fixtures/captures/confluent-kafka-consume.pcap", ("--max-frame-size", "2032"), (2032, None, None),
              "is over the frame cap of 2032 bytes (--max-frame-size"),
             ("fixtures/captures/kafka-python-consume.pcap", ("--max-decompressed", "1433"), (None, 1433, None),
              "--max-decompressed raises it"),
             ("fixtures/captures/kafka-python-consume.pcap", ("--max-records", "64"), (None, None, 64),
              "records and headers")]
    for i, (f, opts, limits, mark) in enumerate(cases):
        want = pcap_lines(f, opts=opts)
        summary = pcap_summary(f, opts=opts)
        assert want != pcap_lines(f)  # the option bites on this capture
        assert any(mark in line for line in want) or mark in json.dumps(summary["damage_events"])
        out = str(tmp_path / f"lim{i}")
        res = run([f], out, fmt="jsonl", spark=spark, partitions=2, limits=limits)
        assert spark_lines(out) == want
        assert normal(res.summary) == summary
    # and the next job on the same (reused) Python workers is back to the defaults
    f = cases[0][0]
    out = str(tmp_path / "back")
    run([f], out, fmt="jsonl", spark=spark, partitions=2)
    assert spark_lines(out) == pcap_lines(f)


def test_default_partitions_grow_with_the_input():
    from kwire_cli.spark.job import default_partitions
    from kwire_cli.spark.reading import FilePlan
    mib = 1 << 20
    pcap = lambda n: FilePlan("p", "p", size=n * mib, kind="pcap", prefix=b"\xd4\xc3\xb2\xa1")
    gz = lambda n: FilePlan("g", "g", size=n * mib, kind="whole")
    assert default_partitions(2, [pcap(1)]) == 4                 # small: twice the parallelism
    assert default_partitions(2, [pcap(567)]) == 4
    assert default_partitions(2, [pcap(4096)]) == 16              # 4 GiB: one per 256 MiB
    assert default_partitions(2, [gz(512)]) == 10                 # gzip counted five-fold
    assert default_partitions(64, [pcap(4096)]) == 128


def test_filter_writes_the_rows_kwire_pcap_shows(spark, tmp_path):
    """--filter (issue 14): the rows written are the lines `kwire pcap --filter` prints; the summary
    counts every frame, and says how many rows were shown, as kwire pcap's does."""
    expr = "topic~gzip and (partition=0 or kind=request)"
    files = [f for f in FILES if "kafkajs" in f]
    out = str(tmp_path / "filtered")
    res = run(files, out, fmt="jsonl", spark=spark, partitions=2, filter_expr=expr)
    want = pcap_lines(*files, opts=("--filter", expr))
    assert 0 < sum(want.values()) < res.frames
    assert spark_lines(out) == want and res.rows == sum(want.values())
    assert normal(res.summary) == pcap_summary(*files, opts=("--filter", expr))
    assert res.summary["shown"] == res.rows
    r = kwire("spark-decode", files[0], "--out", str(tmp_path / "bad"), "--filter", "api=Nope")
    assert r.code == 2 and r.err.startswith("kwire: error: filter: unknown API 'Nope'")
    assert not (tmp_path / "bad").exists()


def test_jsonl_files_are_named_jsonl(fixtures_jsonl):
    out, _, _ = fixtures_jsonl
    parts = glob.glob(os.path.join(out, "api_name=*", "part-*"))
    assert parts and all(p.endswith(".jsonl") for p in parts)


def test_the_workers_write_the_files_sparks_writer_would(fixtures_jsonl, tmp_path):
    """The lines are written by the Python workers themselves (``spark.direct``): the same lines in
    the same partition directories as Spark's own text writer gives them (``spark.kwire.jsonlWriter=spark``),
    ``_SUCCESS``, no temporary directory left; a bad setting is a one-line error."""
    out, _, spark = fixtures_jsonl
    theirs = str(tmp_path / "spark")
    spark.conf.set("spark.kwire.jsonlWriter", "spark")
    try:
        run(FILES, theirs, fmt="jsonl", spark=spark, partitions=3)
        spark.conf.set("spark.kwire.jsonlWriter", "jvm")
        with pytest.raises(SparkJobError, match=r"spark.kwire.jsonlWriter: 'jvm' is not one of workers, spark"):
            run(FILES, str(tmp_path / "bad"), fmt="jsonl", spark=spark, partitions=3)
    finally:
        spark.conf.unset("spark.kwire.jsonlWriter")
    assert spark_lines(out) == spark_lines(theirs)

    def names(d):
        return sorted(n for n in os.listdir(d) if not n.startswith("."))
    assert names(out) == names(theirs) and "_SUCCESS" in names(out) and "_temporary" not in names(out)
    for api in names(out):
        if api.startswith("api_name="):
            assert names(os.path.join(out, api)) and all(
                n.startswith("part-") and n.endswith(".c000.jsonl") for n in names(os.path.join(out, api)))


def test_without_the_summary_the_rows_and_counts_are_the_same(spark, tmp_path):
    """summary=False (--no-summary): the same rows; the run's counts (frames, decoded, undecodable,
    record batches) as kwire pcap's summary gives them; no _kwire_summary.json, no analysis counted."""
    out = str(tmp_path / "out")
    res = run(FILES, out, fmt="jsonl", spark=spark, partitions=3, summary=False)
    assert spark_lines(out) == pcap_lines(*FILES)
    want = pcap_summary(*FILES)
    for k in ("frames", "decoded", "undecodable", "undecodable_by_reason", "record_batches"):
        assert normal(res.summary[k]) == want[k], k
    assert res.frames == res.rows == want["frames"]
    assert not os.path.exists(os.path.join(out, "_kwire_summary.json"))
    assert os.path.exists(os.path.join(out, "_kwire_result.json"))
    assert want["connections"] and not res.summary["connections"] and not res.summary["apis"]


def test_partition_directories_and_the_commit(tmp_path):
    from kwire_cli.spark import direct
    assert direct.partition_dir("Produce") == "api_name=Produce"
    assert direct.partition_dir("UNKNOWN(9999)") == "api_name=UNKNOWN(9999)"
    assert direct.partition_dir(None) == "api_name=__HIVE_DEFAULT_PARTITION__"
    assert direct.partition_dir("a/b:c=d%") == "api_name=a%2Fb%3Ac%3Dd%25"
    # a task attempt whose result the driver did not receive (failed, retried) is not committed
    out = tmp_path / "out"
    src = Path(direct.pass_dir(str(out), "j", 1))
    for rel in ("api_name=Fetch/part-00000-a.c000.jsonl", "api_name=Fetch/part-00000-b.c000.jsonl"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel + "\n")
    direct.commit(str(out), "j", 1, ["api_name=Fetch/part-00000-b.c000.jsonl"])
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "_SUCCESS", "api_name=Fetch", "api_name=Fetch/part-00000-b.c000.jsonl"]


def test_internal_topic_records_decode_as_kwire_pcap_decodes_them(spark, tmp_path):
    """Issue 19: records of internal topics in Produce and Fetch (a topic id named by an earlier
    Metadata answer on another connection's position) decode in the rows as kwire pcap's do."""
    from test_internal_in_captures import capture
    cap = capture(tmp_path)
    out = str(tmp_path / "internal")
    res = run([str(cap)], out, fmt="jsonl", spark=spark, partitions=2)
    got, want = spark_lines(out), pcap_lines(str(cap))
    assert got == want and res.rows == sum(want.values())
    assert sum('"Internal":' in line for line in got) == 2


# ------------------------------------------------------------------ heavy connections (spark.split)
def _one_connection_capture(path: Path, frames: list, port: int = 41001) -> None:
    """``frames`` (KafkaFrames, or (kind, data) pairs) on one connection, each in one segment."""
    from capture_util import Conversation as TcpConv
    from capture_util import write_pcap
    c = TcpConv(client=("10.0.0.1", port), server=("10.0.0.2", 9092))
    segs = c.handshake()
    for f in frames:
        kind, data = (f.kind, f.data) if hasattr(f, "kind") else f
        segs += c.send(0 if kind == "request" else 1, struct.pack(">i", len(data)) + data)
    path.write_bytes(write_pcap(segs))


def test_spark_hash_partitioning_sends_each_key_to_its_partition(session):
    """``split.partition_keys``: the value Spark's hash partitioning (Murmur3, seed 42, modulo the
    partitions) sends to each partition, checked against Spark's own ``hash``."""
    from kwire_cli.spark.split import partition_keys, spark_int_hash
    for n in (1, 2, 3, 4, 7, 16, 40):
        keys = partition_keys(n)
        assert len(keys) == n
        got = [r[0] for r in session.createDataFrame([(k,) for k in keys], "v int")
               .selectExpr(f"pmod(hash(v), {n})").collect()]
        assert got == list(range(n))
    vals = [0, 1, -1, 42, 2**31 - 1, -2**31, 123456789]
    want = [r[0] for r in session.createDataFrame([(v,) for v in vals], "v int").selectExpr("hash(v)").collect()]
    assert [spark_int_hash(v) for v in vals] == want


def test_topic_ids_named_across_chunks_of_one_connection(spark, tmp_path):
    """The Metadata answer and the Fetches by topic id on one connection: split into chunks of one
    frame, each chunk is told the names the connection's answers gave before it, so the first pass
    names them (no second pass), as kwire pcap does; and, Fetches first, leaves them unnamed."""
    md, fetch = _consume_frames()
    for order, named in (((*md, *fetch), True), ((*fetch, *md), False)):
        cap = tmp_path / f"one-{named}.pcap"
        _one_connection_capture(cap, list(order))
        want = pcap_lines(str(cap))
        rows = [json.loads(line) for line in want if '"api_name":"Fetch"' in line]
        assert len(rows) == 4 and all(all(v is not None for v in r["topic_names"].values()) == named for r in rows)
        out = str(tmp_path / f"out-{named}")
        res = run([str(cap)], out, fmt="jsonl", spark=spark, partitions=3)
        assert spark_lines(out) == want
        assert res.decode_passes == 1
        assert res.connections_split == (1 if split_mode(spark) else 0)
        assert normal(res.summary) == pcap_summary(str(cap))


def test_a_request_that_does_not_decode_leaves_its_answer_without_a_client_id(spark, tmp_path):
    """kwire pcap remembers a request (its client id, for the answer) only once it decodes: a
    Produce request whose body is cut short, then its answer, in another chunk than the request,
    and a second request with the same correlation id that does decode, answered too."""
    frames = [f for f in iter_capture(str(CAPS / "kafka-python-produce.pcap")) if hasattr(f, "api_key")]
    conn = next(f.conn for f in frames if f.api_key == 0 and f.kind == "request")
    mine = [f for f in frames if f.conn == conn]
    i = next(i for i, f in enumerate(mine) if f.api_key == 0 and f.kind == "request")
    j = next(j for j in range(i + 1, len(mine)) if mine[j].kind == "response"
             and mine[j].correlation_id == mine[i].correlation_id)
    req, resp = mine[i], mine[j]
    bad = ("request", bytes(req.data[:len(req.data) // 2]))  # the header reads, the body does not
    seq = [*mine[:i], bad, resp, req, resp, *mine[i + 1:j], *mine[j + 1:]]
    cap = tmp_path / "bad-request.pcap"
    _one_connection_capture(cap, seq)
    want = pcap_lines(str(cap))
    answers = sorted((json.loads(line) for line in want if '"kind":"response"' in line
                      and '"api_name":"Produce"' in line and f'"correlation_id":{req.correlation_id},' in line),
                     key=lambda r: r["frame"])
    assert len(answers) == 2 and answers[0]["client_id"] is None and answers[1]["client_id"]
    out = str(tmp_path / "o")
    res = run([str(cap)], out, fmt="jsonl", spark=spark, partitions=3)
    assert spark_lines(out) == want
    assert normal(res.summary) == pcap_summary(str(cap))


def test_damaged_captures_split(spark, tmp_path):
    """A capture that starts mid-stream and loses packets on the way (gaps): the same rows, damage
    and counters as kwire pcap, whole and cut into byte ranges."""
    src = CAPS / "kafkajs-produce.pcap"
    data = src.read_bytes()
    recs = _pcap_records(data)
    big = [i for i, r in enumerate(recs) if len(r) > 16 + 200]  # records carrying payload
    drop = set(big[:3]) | set(big[10::9])  # the first bytes of the capture (mid-stream), then gaps
    keep = [r for i, r in enumerate(recs) if i not in drop]
    cap = tmp_path / "damaged.pcap"
    cap.write_bytes(data[:24] + b"".join(keep))
    want = pcap_lines(str(cap))
    summary = pcap_summary(str(cap))
    assert summary["damage"] and want
    for split in (64 << 20, 2000):
        out = str(tmp_path / f"o{split}")
        res = run([str(cap)], out, fmt="jsonl", spark=spark, partitions=2, split_size=split)
        assert spark_lines(out) == want
        assert normal(res.summary) == summary


def test_heavy_connections_are_judged_by_their_bytes(session, tmp_path):
    """With ``spark.kwire.heavyConnectionBytes`` set low, a connection is heavy when it carries at
    least a quarter of the job's bytes (2 x parallelism 2); the rows are kwire pcap's. A bad value
    is a one-line error."""
    from kwire_cli.capture.headerscan import tcp_connections
    f = "fixtures/captures/kafka-python-consume.pcap"  # three connections: 73%, 21% and 6% of the bytes
    data = (ROOT / f).read_bytes()
    counts: dict = {}
    for (addr, sport, dport), n in tcp_connections(data, 0, len(data)).items():
        h = len(addr) // 2
        name = tuple(sorted([(addr[:h], sport), (addr[h:], dport)]))  # either direction
        counts[name] = counts.get(name, 0) + n
    heavy = sum(1 for n in counts.values() if n >= sum(counts.values()) / 4)
    assert 1 <= heavy < len(counts)
    session.conf.set("spark.kwire.heavyConnectionBytes", "1k")
    try:
        out = str(tmp_path / "o")
        res = run([f], out, fmt="jsonl", spark=session, partitions=2, split_size=4000)  # several read tasks
        assert res.connections_split == heavy
        assert spark_lines(out) == pcap_lines(f)
        assert normal(res.summary) == pcap_summary(f)
        session.conf.set("spark.kwire.heavyConnectionBytes", "lots")
        with pytest.raises(SparkJobError, match=r"^spark.kwire.heavyConnectionBytes: 'lots' is not a size"):
            run([f], str(tmp_path / "o2"), fmt="jsonl", spark=session, partitions=2)
    finally:
        session.conf.unset("spark.kwire.heavyConnectionBytes")
    r = kwire("spark-decode", f, "--out", str(tmp_path / "o3"), "--conf", "spark.kwire.heavyChunkBytes=2x")
    assert r.code == 1 and r.err.strip() == ("kwire: error: spark.kwire.heavyChunkBytes: '2x' is not a size (bytes, "
                                             "or a number with k, m or g, as in 32m)")
    assert not (tmp_path / "o3").exists()  # refused before Spark starts


def test_the_answers_equal_kwire_pcaps_on_the_recorded_group_lag_and_producers(spark, tmp_path):
    """The analysis sections (groups with their generations and causes, lag, commits, producers,
    latency, connections, who, expert) of the job equal kwire pcap's over fixtures/analysis, as the
    tasks' partial states merge (cut into chunks too, in the split mode)."""
    from kwire_cli.analysis import SECTIONS
    files = sorted(str(p) for p in (ROOT / "fixtures" / "analysis").glob("*.pcap"))
    res = run(files, str(tmp_path / "out"), fmt="jsonl", spark=spark, partitions=3)
    want = pcap_summary(*files)
    got = normal(res.summary)
    for k in SECTIONS:
        assert got[k] == want[k], k
    (g,) = [g for g in got["groups"] if g["group_id"] == "an-group"]
    assert [c["kind"] for gen in g["generations"] for c in gen["causes"]] == [
        "first", "joined", "joined", "left", "timed_out"]
    assert got["lag"] and got["commits"] and len(got["producers"]) == 2
