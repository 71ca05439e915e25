"""Make a directory of captures for bench_spark.py from real client traffic.

Every Kafka connection of the given real captures (e.g. the kafkajs fixtures) is replayed, its
frames byte for byte, as its own TCP connection (1448-byte segments, an ACK per burst), ``--times``
times per file; each file's clients have addresses of their own (10.F.x.y), so no connection spans
two files, and each file's packets come after the previous file's in time:

    python scripts/record_fixtures.py --bulk 110000 --bulk-client kafkajs --bulk-out /tmp/bulk-kafkajs.pcap
    python bench/make_spark_captures.py fixtures/captures/kafkajs-consume.pcap \
        fixtures/captures/kafkajs-produce.pcap /tmp/kwire-spark --once /tmp/bulk-kafkajs.pcap \
        --files 20 --times 150                                     # 577 MB, 197,040 frames
    python bench/make_spark_captures.py ... /tmp/kwire-spark-one --files 1 --merge 20   # the same, one file

``--once`` captures are replayed once per file (a bulk recording: large Produce and Fetch frames), the
others ``--times`` times (the fixtures' small conversations: many small frames). ``--merge N`` writes
N such files' worth as one file.

writes OUT/cap-00.pcap, OUT/cap-01.pcap, ...
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from capture_util import Conversation, PcapWriter, ethernet_frame  # noqa: E402
from make_tls_capture import conversations, emit  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", metavar="CAPTURE")
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--times", type=int, default=1100, help="replay each connection this many times per file")
    ap.add_argument("--once", action="append", default=[], metavar="CAPTURE",
                    help="a capture replayed once per file (repeatable)")
    ap.add_argument("--merge", type=int, default=1, help="write this many files' worth into each file")
    ap.add_argument("--port", type=int, default=9092)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    convs: list[list[tuple[int, bytes]]] = []
    for path in a.once:
        convs += list(conversations(path, a.port).values())
    small: list[list[tuple[int, bytes]]] = []
    for path in a.captures:
        small += list(conversations(path, a.port).values())
    convs += small * a.times
    convs = convs * a.merge
    ts = 1_700_000_000.0
    total = 0
    for fno in range(a.files):
        path = out / f"cap-{fno:02d}.pcap"
        with open(path, "wb") as f:
            w = PcapWriter(f)
            for n, frames in enumerate(convs):
                client = ("10.%d.%d.%d" % (fno % 250, n // 250 % 250, n % 250 + 1), 20000 + n % 40000)
                c = Conversation(client=client, server=("10.250.0.1", a.port))
                for seg in c.handshake():
                    w.write(ts, ethernet_frame(seg))
                for side, data in frames:
                    ts = emit(c, w, side, data, ts)
                for side in (0, 1):
                    w.write(ts, ethernet_frame(c.fin(side)))
                    w.write(ts, ethernet_frame(c.ack(1 - side)))
        total += os.path.getsize(path)
        print(f"{path}: {os.path.getsize(path)} bytes", flush=True)
    print(f"{a.files} files, {total} bytes")


if __name__ == "__main__":
    main()
