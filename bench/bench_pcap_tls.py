"""`kwire pcap --tls-keylog` against kwire on the same flow in plaintext and against tshark with the
same key log, in one run (the goals: >= 0.85x kwire's own plaintext speed, >= 4x tshark).

    python bench/make_tls_capture.py bench/data/bulk-kafkajs.pcap bench/data/tls   # once
    python bench/bench_pcap_tls.py bench/data/tls [--repeat 5]

The directory holds plain.pcap, tls.pcap and tls.keylog as make_tls_capture.py writes them: the
same Kafka frames with the same TCP segmentation, once in the clear (port 9092) and once inside
TLS 1.3 records made by OpenSSL (port 9093). The three commands, each a subprocess to /dev/null:

    plain   python -m kwire_cli pcap plain.pcap --format jsonl
    tls     python -m kwire_cli pcap tls.pcap --port 9093 --tls-keylog tls.keylog --format jsonl
    tshark  tshark -r tls.pcap -o tls.keylog_file:tls.keylog -d tcp.port==9093,tls
            -d tls.port==9093,kafka -T json -O kafka

The three commands run in turn, --repeat rounds; each figure is the median of its runs (wall and
CPU seconds, peak RSS). Ratios, of the medians, by wall and by CPU time: plain / tls (goal >= 0.85)
and tshark / tls (goal >= 4).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pcap import byte_compile, run_once


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    d = a.dir
    plain, tls, keys = d / "plain.pcap", d / "tls.pcap", d / "tls.keylog"
    kwire = [sys.executable, "-m", "kwire_cli", "pcap"]
    cmds = {
        "kwire plaintext": kwire + [str(plain), "--format", "jsonl"],
        "kwire --tls-keylog": kwire + [str(tls), "--port", "9093", "--tls-keylog", str(keys), "--format", "jsonl"],
    }
    tshark = shutil.which("tshark")
    if tshark:
        cmds["tshark -o tls.keylog_file"] = [tshark, "-r", str(tls), "-o", f"tls.keylog_file:{keys}",
                                             "-o", "gui.max_tree_items:100000000", "-d", "tcp.port==9093,tls",
                                             "-d", "tls.port==9093,kafka", "-T", "json", "-O", "kafka"]
    byte_compile()
    runs: dict[str, list[dict]] = {name: [] for name in cmds}
    for _ in range(a.repeat):
        for name, cmd in cmds.items():
            runs[name].append(run_once(cmd))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_kib")}
           for name, rs in runs.items()}
    mb = tls.stat().st_size / 1e6
    print(f"{tls} ({mb:.1f} MB), medians of {a.repeat} runs each, the commands in turn")
    print(f"{'command':28} {'wall s':>8} {'cpu s':>8} {'MB/s':>8} {'peak MiB':>9}")
    for name, r in med.items():
        print(f"{name:28} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {mb / r['wall_s']:8.1f} {r['peak_rss_kib'] / 1024:9.0f}")
    t = med["kwire --tls-keylog"]
    for peer, goal in (("kwire plaintext", 0.85), ("tshark -o tls.keylog_file", 4)):
        if peer in med:
            print(f"kwire TLS speed / {peer} speed: {med[peer]['wall_s'] / t['wall_s']:.2f}x wall, "
                  f"{med[peer]['cpu_s'] / t['cpu_s']:.2f}x CPU (goal >= {goal})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
