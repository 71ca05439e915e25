"""`kwire report`: the page embeds exactly the summary `kwire pcap --summary --format json` prints,
holds text from the capture safely, opens offline (no URL to load), and reads spark-decode's
summary too. (The page drawn in a real browser: tests/test_report_browser.py.)"""
import json
import re
import subprocess
import sys

from conftest import FIXTURES, ROOT
from kwire_cli.report import SECTIONS, render

GROUP = FIXTURES / "analysis" / "analysis-group.pcap"
CAPS = sorted(str(p) for p in (FIXTURES / "captures").glob("*.pcap"))


def kwire(*args, check=True):
    return subprocess.run([sys.executable, "-m", "kwire_cli", *args], capture_output=True, text=True, cwd=ROOT,
                          check=check)


def embedded(html):
    m = re.search(r'<script type="application/json" id="kwire-data">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_the_page_embeds_the_summary_of_kwire_pcap_and_every_section(tmp_path):
    out = tmp_path / "r.html"
    kwire("report", str(GROUP), *CAPS[:2], "-o", str(out))
    html = out.read_text()
    want = json.loads(kwire("pcap", str(GROUP), *CAPS[:2], "--summary", "--format", "json").stdout)
    data = embedded(html)
    assert data["summary"] == want
    assert data["sources"] == [str(GROUP), *CAPS[:2]]
    assert want["series"]["latency"] and want["groups"][0]["generations"]
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in html
    # offline: the markup names nothing to load (the browser test blocks the network and sees no request)
    markup = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert markup.count("<section") == 8 and not re.search(r"\b(src|href)=(?![\"']?#)", markup)
    assert "Content-Security-Policy" in html
    assert len(html.encode()) < 3_000_000


def test_text_from_the_capture_cannot_end_the_data_or_become_markup():
    evil = "</script><img src=x onerror=alert(1)>\x1b[31m\u2028\u202e&amp;<!--\udcff"
    summary = {"frames": 1, "clients": {evil: {"requests": 1, "versions": {}}}, "latency": [], "series": {}}
    html = render(summary, [evil], title=evil)
    assert html.lower().count("</script") == 3  # the data's, ECharts', the page script's
    data = re.search(r'id="kwire-data">(.*?)</script>', html, re.S).group(1)
    markup = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert data.isascii() and not set("<>&") & set(data)
    assert "<img" not in markup and "\x1b" not in html and "\u2028" not in html
    assert embedded(html)["summary"]["clients"] == {evil: {"requests": 1, "versions": {}}}
    assert embedded(html)["sources"] == [evil]


def test_from_reads_spark_decodes_summary_and_bad_inputs_are_one_line_errors(tmp_path):
    summary = json.loads(kwire("pcap", str(GROUP), "--summary", "--format", "json").stdout)
    (tmp_path / "_kwire_summary.json").write_text(json.dumps(summary))
    out = tmp_path / "r.html"
    kwire("report", "--from", str(tmp_path), "-o", str(out))
    assert embedded(out.read_text())["summary"] == summary
    for args, code, words in [
        (["--from", str(tmp_path / "nope"), "-o", str(out)], 2, "does not exist"),
        ([str(GROUP), "--from", str(tmp_path), "-o", str(out)], 2, "give no captures"),
        ([str(tmp_path / "missing.pcap"), "-o", str(out)], 2, "missing.pcap"),
        ([str(GROUP), "--filter", "api=", "-o", str(out)], 2, "filter"),
        ([str(GROUP)], 2, "-o"),
    ]:
        p = kwire("report", *args, check=False)
        assert p.returncode == code, (args, p.stderr)
        assert words in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "_kwire_summary.json").write_text("[1]")
    p = kwire("report", "--from", str(tmp_path), "-o", str(out), check=False)
    assert p.returncode == 1 and "not kwire's summary" in p.stderr


def test_a_filter_analyses_only_the_frames_it_matches(tmp_path):
    out = tmp_path / "r.html"
    kwire("report", str(GROUP), "--filter", "api=Heartbeat", "-o", str(out))
    s = embedded(out.read_text())["summary"]
    assert {a["api_name"] for a in s["latency"]} == {"Heartbeat"} and s["shown"] == s["frames"] > 0
