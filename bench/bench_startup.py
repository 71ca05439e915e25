"""Start-up time: `kwire decode` of one small message and `kwire --help`, against tshark reading a
five-packet capture and `python -c pass`, in one run (issue 14, item 8: kwire decode <= 0.5x tshark).

    python bench/bench_startup.py [--repeat 15]

Each command is a whole process writing to /dev/null, the four alternating; the table gives the
median wall and CPU seconds of --repeat runs, and the ratios of kwire's medians to tshark's. The
five-packet capture is cut from fixtures/captures/kafkajs-produce.pcap (its first five packets,
written here with kwire's own pcap reader and writer: no editcap needed). `python -c pass` is the
floor every Python program pays on this machine (site, .pth files), shown for scale.

The spec cache (kwire_cli/spec/cache.py) is warm after the first run, as it is for a user after
their first kwire command; --cold runs kwire with KWIRE_NO_SPEC_CACHE=1 as well.

By default kwire runs from this checkout (`python -m kwire_cli`, with whatever .pth files the
interpreter's site-packages hold, an editable install's finder among them). `--kwire PATH` runs an
installed console script instead, e.g. from a fresh venv as a user gets it:

    python -m venv /tmp/kv && /tmp/kv/bin/pip install .
    python bench/bench_startup.py --kwire /tmp/kv/bin/kwire
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pcap import byte_compile, run_once

ROOT = Path(__file__).resolve().parents[1]
HEX = "0000001d001200030000000100056b7769726500066b7769726506302e312e3000"  # ApiVersions v3 request


def five_packets(dest: Path) -> Path:
    """The first five records of kafkajs-produce.pcap (a classic pcap: 24-byte header, 16-byte record headers)."""
    data = (ROOT / "fixtures" / "captures" / "kafkajs-produce.pcap").read_bytes()
    order = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    pos = 24
    for _ in range(5):
        incl = struct.unpack_from(order + "I", data, pos + 8)[0]
        pos += 16 + incl
    dest.write_bytes(data[:pos])
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--cold", action="store_true", help="also run kwire decode without the spec cache")
    ap.add_argument("--kwire", help="an installed kwire console script to run instead of python -m kwire_cli")
    a = ap.parse_args(argv)
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark is not installed (apt-get install tshark): no peer to compare with", file=sys.stderr)
        return 1
    byte_compile()
    with tempfile.TemporaryDirectory() as tmp:
        cap = five_packets(Path(tmp) / "five.pcap")
        py = sys.executable
        kw = [py, "-m", "kwire_cli"]
        if a.kwire:
            kw = [a.kwire]
            first = Path(a.kwire).read_text(errors="replace").splitlines()[0]
            py = first[2:].strip() if first.startswith("#!") else py  # the script's own interpreter
        cmds = {
            "kwire decode HEX": [*kw, "decode", HEX],
            "kwire --help": [*kw, "--help"],
            "tshark -r five.pcap": [tshark, "-r", str(cap)],
            "python -c pass": [py, "-c", "pass"],
        }
        if a.cold:
            cmds["kwire decode HEX (no spec cache)"] = ["env", "KWIRE_NO_SPEC_CACHE=1", *cmds["kwire decode HEX"]]
        run_once(cmds["kwire decode HEX"])  # the spec cache, as after a user's first command
        runs: dict[str, list[dict]] = {k: [] for k in cmds}
        for _ in range(a.repeat):
            for name, cmd in cmds.items():
                runs[name].append(run_once(cmd))
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("wall_s", "cpu_s")} for k, v in runs.items()}
    print(f"median of {a.repeat} runs each, alternating; {os.cpu_count()} CPUs")
    print(f"{'command':36} {'wall s':>8} {'cpu s':>8}")
    for name, m in med.items():
        print(f"{name:36} {m['wall_s']:8.3f} {m['cpu_s']:8.3f}")
    t = med["tshark -r five.pcap"]
    for name in [k for k in cmds if k.startswith("kwire")]:
        print(f"{name} / tshark: wall {med[name]['wall_s'] / t['wall_s']:.2f}x, "
              f"cpu {med[name]['cpu_s'] / t['cpu_s']:.2f}x (goal <= 0.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
