"""`kwire report`'s page in a real browser: Debian's headless Chromium (driven by Playwright's
client, never its downloaded browsers) opens the page from a file:// URL with the network blocked;
every section's chart is drawn, the console has no errors, tables sort, the tables' figures are the
summary JSON's, the generations of the recorded rebalancing group appear, text from the capture
stays text. A screenshot of each page is kept under out/report-screenshots/ (its path printed).
Skips, saying why, without Chromium or Playwright (`sh scripts/setup.sh --test` installs both)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT
from kwire_cli.report import SECTIONS, render

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
GROUP = FIXTURES / "analysis" / "analysis-group.pcap"
CAPS = sorted(str(p) for p in (FIXTURES / "captures").glob("*.pcap"))
SHOTS = ROOT / "out" / "report-screenshots"

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's client is not installed "
                               "(sh scripts/setup.sh --test installs it)")
if not os.path.exists(CHROMIUM):
    pytest.skip("Chromium is not installed (sh scripts/setup.sh --test installs Debian's chromium as root)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium-profile")),
                                                   executable_path=CHROMIUM, args=FLAGS, headless=True,
                                                   viewport={"width": 1280, "height": 900})
        yield ctx
        ctx.close()


def summary_of(*files):
    out = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", *files, "--summary", "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return json.loads(out)


def open_page(browser, html_path):
    """The page loaded offline; (page, console errors, requests that were not for the file)."""
    page = browser.new_page()
    errors, outside = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()
    page.route("**/*", route)
    page.goto(html_path.as_uri())
    page.wait_for_selector("body[data-drawn=yes]", timeout=30_000)
    return page, errors, outside


def table_rows(page, section, caption_start):
    """The cells of a section's table (by its caption's start) as text, row by row, with its headers."""
    return page.evaluate("""([sid, cap]) => {
        const t = Array.from(document.querySelectorAll('#' + sid + ' table'))
            .find(t => t.caption.textContent.startsWith(cap));
        return {head: Array.from(t.tHead.rows[0].cells).map(c => c.textContent),
                rows: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))};
    }""", [section, caption_start])


def shown(v):
    return "" if v is None else str(v)


@pytest.mark.parametrize("name,files", [("bundled-captures", CAPS), ("rebalancing-group", [str(GROUP)])])
def test_the_page_draws_every_section_offline_with_the_summarys_figures(browser, tmp_path, name, files):
    html = tmp_path / f"{name}.html"
    subprocess.run([sys.executable, "-m", "kwire_cli", "report", *files, "-o", str(html)], cwd=ROOT, check=True)
    want = summary_of(*files)
    page, errors, outside = open_page(browser, html)
    assert errors == [] and outside == []
    for sid in SECTIONS:
        sizes = page.eval_on_selector(f"#{sid}", "s => Array.from(s.querySelectorAll('canvas, svg'))"
                                      ".map(c => { const r = c.getBoundingClientRect(); return [r.width, r.height]; })")
        assert sizes and all(w > 100 and h > 100 for w, h in sizes), (sid, sizes)
    # the figures: the latency table row for row, the connections' bytes, the series drawn
    lat = table_rows(page, "latency", "Latency by")
    keys = ["api_name", "api_version", "broker", "client_id", "count", "min_ms", "p50_ms", "p90_ms", "p99_ms",
            "max_ms", "errors", "throttled"]
    assert lat["rows"] == [[shown(e[k]) for k in keys] for e in want["latency"]] and lat["rows"]
    conns = table_rows(page, "connections", "Connections")
    assert [(r[8], r[9]) for r in conns["rows"]] == [
        (str(c["request_bytes"]), str(c["response_bytes"])) for c in want["connections"]]
    drawn = page.evaluate("""() => echarts.getInstanceByDom(document.querySelector('#latency .chart'))
        .getOption().series.map(s => [s.name, s.data.map(d => d[1])])""")
    assert drawn == [x for s in want["series"]["latency"] for x in (
        [s["api_name"] + " p50", [p["p50_ms"] for p in s["points"]]],
        [s["api_name"] + " p99", [p["p99_ms"] for p in s["points"]]])]
    # sorting: by count ascending, then descending (numbers as numbers)
    head = page.locator("#latency table th", has_text="count").first
    head.click()
    counts = [int(r[4]) for r in table_rows(page, "latency", "Latency by")["rows"]]
    assert counts == sorted(counts)
    head.click()
    counts = [int(r[4]) for r in table_rows(page, "latency", "Latency by")["rows"]]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    gens = table_rows(page, "groups", "Generations")
    assert [(r[0], r[2]) for r in gens["rows"]] == [
        (g["group_id"], str(gen["generation_id"])) for g in want["groups"] for gen in g["generations"]]
    if name == "rebalancing-group":
        assert [r[2] for r in gens["rows"]] == ["0", "1", "2", "3", "4"]
        bands = page.evaluate("""() => echarts.getInstanceByDom(document.querySelector('#groups .chart'))
            .getOption().series[0].data.map(d => d.name)""")
        assert bands == [f"generation {n}" for n in range(5)]
        assert "joined" in " ".join(r[8] for r in gens["rows"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot} (page {html.stat().st_size:,} bytes)")
    assert shot.stat().st_size > 10_000
    page.close()


def test_text_from_the_capture_is_shown_as_text_never_run(browser, tmp_path):
    evil = "</script><img src=x onerror=\"document.title='owned'\">\x1b[31m\u202e"
    summary = summary_of(str(GROUP))
    summary["clients"] = {evil: {"requests": 7, "versions": {"Fetch": [12]}}}
    summary["latency"][0]["client_id"] = evil
    summary["series"]["latency"][0]["api_name"] = evil  # a series name: in the legend and the tooltip
    summary["groups"][0]["generations"][0]["cause"] = evil  # in the timeline's own tooltip
    html = tmp_path / "evil.html"
    html.write_text(render(summary, [evil], title=evil))
    page, errors, outside = open_page(browser, html)
    assert errors == [] and outside == []
    tips = page.evaluate("""() => [['#latency .chart', 0], ['#groups .chart', 0]].map(([sel, i]) => {
        const box = document.querySelector(sel), c = echarts.getInstanceByDom(box);
        c.dispatchAction({type: 'showTip', seriesIndex: i, dataIndex: 0});
        return box.textContent; })""")
    assert all("<img" in t for t in tips), tips  # shown as text in the tooltips
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.title() != "owned"
    cells = table_rows(page, "clients", "Client ids")["rows"]
    assert cells[0][0] == "</script><img src=x onerror=\"document.title='owned'\">\\x1b[31m\\u202e"
    page.close()
