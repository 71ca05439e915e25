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

``--rotate MB`` writes the same packets as one capture cut into files of about MB each, at packet
boundaries, as ``tcpdump -C`` rotates: the connections at each cut run through two files. With a
client that fetches by topic id (librdkafka), topic ids are then answered in one file and used in
the next (spark-decode's topic names across tasks, docs/spark.md):

    python bench/make_spark_captures.py fixtures/captures/confluent-kafka-consume.pcap \
        fixtures/captures/confluent-kafka-produce.pcap /tmp/kwire-topic-ids --files 1 --times 8000 \
        --rotate 24                                                # 508 MB, 21 files, 1,272,000 frames

``--once`` captures are replayed once per file (a bulk recording: large Produce and Fetch frames), the
others ``--times`` times (the fixtures' small conversations: many small frames). ``--merge N`` writes
N such files' worth as one file.

writes OUT/cap-00.pcap, OUT/cap-01.pcap, ...

``--heavy N``: one connection that carries most of the bytes (issue 18's heavy connection): the
busiest connection of the ``--once`` captures (the bulk recording's producer: 224 frames, 12.1 MB)
replayed N times over as one long TCP connection, after the other captures' connections replayed
``--times`` times each; written as one file, or with ``--rotate MB`` as files of about that size, cut at packet
boundaries as ``tcpdump -C`` rotates (the connection then runs through all of them):

    python bench/make_spark_captures.py fixtures/captures/kafkajs-consume.pcap \
        fixtures/captures/kafkajs-produce.pcap /tmp/kwire-heavy --once /tmp/bulk-kafkajs.pcap \
        --heavy 36 --times 20                                      # one file, 449 MB, 96% one connection
    python bench/make_spark_captures.py ... /tmp/kwire-heavy-rot ... --heavy 36 --times 20 --rotate 64
"""
from __future__ import annotations

import argparse
import contextlib
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
    ap.add_argument("--heavy", type=int, default=0, metavar="N",
                    help="the --once captures' busiest connection, replayed N times as one connection")
    ap.add_argument("--rotate", type=int, default=0, metavar="MB",
                    help="write everything as one capture cut into files of about MB each, as tcpdump -C rotates")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.heavy:
        heavy(a, out)
        return
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
    rotating = Rotating(out, a.rotate << 20) if a.rotate else None
    for fno in range(a.files):
        path = out / f"cap-{fno:02d}.pcap"
        with open(path, "wb") if rotating is None else contextlib.nullcontext() as f:
            w = PcapWriter(f) if rotating is None else rotating
            for n, frames in enumerate(convs):
                client = ("10.%d.%d.%d" % (fno % 250, n // 250 % 250, n % 250 + 1), 20000 + n % 40000)
                ts = replay(Conversation(client=client, server=("10.250.0.1", a.port)), w, frames, ts)
        if rotating is None:
            total += os.path.getsize(path)
            print(f"{path}: {os.path.getsize(path)} bytes", flush=True)
    if rotating is not None:
        rotating.close()
        total = sum(os.path.getsize(p) for p in rotating.paths)
        print(f"{len(rotating.paths)} files of about {a.rotate} MB (rotated)", flush=True)
    print(f"{a.files} files' worth, {total} bytes")


def replay(c: Conversation, w, frames: list[tuple[int, bytes]], ts: float) -> float:
    """One whole connection: handshake, ``frames`` (side, bytes) and both FINs; the last time."""
    for seg in c.handshake():
        w.write(ts, ethernet_frame(seg))
    for side, data in frames:
        ts = emit(c, w, side, data, ts)
    for side in (0, 1):
        w.write(ts, ethernet_frame(c.fin(side)))
        w.write(ts, ethernet_frame(c.ack(1 - side)))
    return ts


class Rotating:
    """A pcap writer that starts a new file (OUT/cap-NN.pcap) past ``limit`` bytes, at a packet."""

    def __init__(self, out: Path, limit: int) -> None:
        self.out, self.limit, self.n, self.f, self.paths = out, limit, 0, None, []
        self._open()

    def _open(self) -> None:
        if self.f is not None:
            self.f.close()
        path = self.out / f"cap-{self.n:02d}.pcap"
        self.paths.append(path)
        self.n += 1
        self.f = open(path, "wb")  # noqa: SIM115 - closed by _open or close
        self.w = PcapWriter(self.f)

    def write(self, ts: float, frame: bytes) -> None:
        if self.limit and self.f.tell() >= self.limit:
            self._open()
        self.w.write(ts, frame)

    def close(self) -> None:
        self.f.close()


def heavy(a, out: Path) -> None:
    """``--heavy N``: the busiest ``--once`` connection N times over as one connection (module doc)."""
    busiest: list[tuple[int, bytes]] = []
    for path in a.once:
        for frames in conversations(path, a.port).values():
            if sum(len(d) for _, d in frames) > sum(len(d) for _, d in busiest):
                busiest = frames
    small: list[list[tuple[int, bytes]]] = []
    for path in a.captures:
        small += list(conversations(path, a.port).values())
    w = Rotating(out, a.rotate << 20)
    ts = 1_700_000_000.0
    heavy_bytes = 0
    for n, frames in enumerate(small * a.times):
        c = Conversation(client=("10.1.%d.%d" % (n // 250 % 250, n % 250 + 1), 20000 + n % 40000),
                         server=("10.250.0.1", a.port))
        ts = replay(c, w, frames, ts)
    hc = Conversation(client=("10.2.0.1", 40000), server=("10.250.0.1", a.port))
    for seg in hc.handshake():
        w.write(ts, ethernet_frame(seg))
    for _ in range(a.heavy):
        for side, data in busiest:
            ts = emit(hc, w, side, data, ts)
            heavy_bytes += len(data)
    for side in (0, 1):
        w.write(ts, ethernet_frame(hc.fin(side)))
        w.write(ts, ethernet_frame(hc.ack(1 - side)))
    w.close()
    total = sum(os.path.getsize(p) for p in w.paths)
    for p in w.paths:
        print(f"{p}: {os.path.getsize(p)} bytes")
    print(f"{len(w.paths)} files, {total} bytes; the heavy connection's frames: {heavy_bytes} bytes "
          f"({len(busiest) * a.heavy} frames)")


if __name__ == "__main__":
    main()
