"""Make the TLS twin of a real plaintext capture, for bench_pcap_tls.py.

Every connection of the input capture (e.g. /work/bench-data's bulk kafkajs capture, or any real
one) is replayed through a real TLS session made in memory by the system OpenSSL (Python's ``ssl``
with memory BIOs; the server certificate of fixtures/secure/pki): the client writes its Kafka
frames, the server answers with its frames, in the order the capture shows them. Both the TLS
records and the same frames in the clear are written as pcaps with the same TCP segmentation
(1448-byte segments, an ACK per burst), with OpenSSL's own key log beside the TLS one:

    python bench/make_tls_capture.py IN.pcap OUT_DIR [--port 9092] [--version 1.3|1.2] [--ciphers ...]
    python bench/make_tls_capture.py fixtures/captures/*-consume.pcap OUT_DIR --times 300   # small frames

writes OUT_DIR/plain.pcap, OUT_DIR/tls.pcap and OUT_DIR/tls.keylog (the TLS one on port 9093).
"""
from __future__ import annotations

import argparse
import os
import ssl
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from capture_util import Conversation, PcapWriter, ethernet_frame  # noqa: E402
from kwire_cli.capture import KafkaFrame, iter_capture  # noqa: E402

PKI = ROOT / "fixtures" / "secure" / "pki"
MSS = 1448


def conversations(path: str, port: int) -> dict[str, list[tuple[int, bytes]]]:
    """Per connection, its Kafka frames in capture order: (0 client / 1 broker, framed bytes)."""
    out: dict[str, list[tuple[int, bytes]]] = {}
    for ev in iter_capture(path, broker_ports=[port]):
        if isinstance(ev, KafkaFrame):
            out.setdefault(ev.conn, []).append((0 if ev.kind == "request" else 1,
                                                struct.pack(">i", len(ev.data)) + bytes(ev.data)))
    return out


def emit(conv: Conversation, writer: PcapWriter, side: int, data: bytes, ts: float) -> float:
    """``data`` sent by ``side`` as 1448-byte segments and the peer's ACK; the time after them."""
    for seg in conv.send(side, data, MSS):
        ts += 1e-5
        writer.write(ts, ethernet_frame(seg))
    ts += 1e-5
    writer.write(ts, ethernet_frame(conv.ack(1 - side)))
    return ts


def pump(pipes: tuple, conv: Conversation, writer: PcapWriter, ts: float) -> float:
    """Move what each TLS peer wrote to the other, writing it to the capture as it goes."""
    moved = True
    while moved:
        moved = False
        for src, dst, side in pipes:
            data = src.read()
            if data:
                ts = emit(conv, writer, side, data, ts)
                dst.write(data)
                moved = True
    return ts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", metavar="CAPTURE")
    ap.add_argument("out")
    ap.add_argument("--times", type=int, default=1, help="replay each connection this many times")
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument("--version", choices=("1.2", "1.3"), default="1.3")
    ap.add_argument("--ciphers", help="TLS 1.2 cipher list (OpenSSL names)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    keylog = out / "tls.keylog"
    if keylog.exists():
        keylog.unlink()
    vers = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[a.version]
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(str(PKI / "ca.pem"))
    cctx.keylog_filename = str(keylog)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(str(PKI / "server.pem"), str(PKI / "server.key"))
    for ctx in (cctx, sctx):
        ctx.minimum_version = ctx.maximum_version = vers
        if a.ciphers:
            ctx.set_ciphers(a.ciphers)
    convs: list[list[tuple[int, bytes]]] = []
    for path in a.captures:
        convs += list(conversations(path, a.port).values()) * a.times
    ts = 1_700_000_000.0
    with open(out / "plain.pcap", "wb") as pf, open(out / "tls.pcap", "wb") as tf:
        plain, tls = PcapWriter(pf), PcapWriter(tf)
        for n, frames in enumerate(convs):
            client = ("10.0.%d.%d" % (n // 250, n % 250 + 1), 40000 + n % 20000)
            pc = Conversation(client=client, server=("10.9.0.1", 9092))
            tc = Conversation(client=client, server=("10.9.0.1", 9093))

            for seg in pc.handshake():
                plain.write(ts, ethernet_frame(seg))
            for seg in tc.handshake():
                tls.write(ts, ethernet_frame(seg))
            cin, cout, sin, sout = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
            c = cctx.wrap_bio(cin, cout, server_hostname="localhost")
            s = sctx.wrap_bio(sin, sout, server_side=True)

            pipes = ((cout, sin, 0), (sout, cin, 1))
            done = [False, False]
            while not all(done):
                for i, obj in enumerate((c, s)):
                    if not done[i]:
                        try:
                            obj.do_handshake()
                            done[i] = True
                        except ssl.SSLWantReadError:
                            pass
                ts = pump(pipes, tc, tls, ts)
            for side, data in frames:
                ts = emit(pc, plain, side, data, ts)
                w, r = (c, s) if side == 0 else (s, c)
                w.write(data)
                ts = pump(pipes, tc, tls, ts)
                got = 0
                while got < len(data):
                    got += len(r.read(len(data) - got))
                    ts = pump(pipes, tc, tls, ts)
            for conv, writer in ((pc, plain), (tc, tls)):
                for side in (0, 1):
                    writer.write(ts, ethernet_frame(conv.fin(side)))
                    writer.write(ts, ethernet_frame(conv.ack(1 - side)))
    print(f"{len(convs)} connections; wrote {out / 'plain.pcap'} ({os.path.getsize(out / 'plain.pcap')} bytes), "
          f"{out / 'tls.pcap'} ({os.path.getsize(out / 'tls.pcap')} bytes), {keylog}")


if __name__ == "__main__":
    main()
