"""Throughput of the capture reader.

As a test: a small capture must read at a modest rate (guards against an accidental slow path).
As a script (``python tests/test_capture_bench.py [N_PACKETS]``): the full comparison against
dpkt and tshark on a generated Kafka capture.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from capture_util import Conversation, PcapWriter, ethernet_frame, kafka_request, kafka_response, produce_body
from kwire_cli.capture import CaptureStats, KafkaFrame, Packet, iter_capture, iter_packets


def make_capture(n_packets: int, conns: int = 50) -> bytes:
    """Kafka-like traffic: produce requests of ~600 bytes, fetch responses of ~3 KB cut at 1448,
    ACKs, spread over ``conns`` connections (IPv4 over Ethernet)."""
    f = io.BytesIO()
    w = PcapWriter(f)
    cs = [Conversation(client=("10.0.0.%d" % (1 + k % 200), 30000 + k)) for k in range(conns)]
    n = 0
    t = 1_700_000_000.0
    encoded: dict = {}
    for c in cs:
        for s in c.handshake():
            w.write(t, ethernet_frame(s))
            n += 1
    corr = 0
    while n < n_packets:
        for c in cs:
            corr += 1
            segs = []
            segs += c.send(0, kafka_request(0, 7, corr, "producer-1", produce_body(1, 7) + b"v" * 580), 1448)
            segs.append(c.ack(1))
            segs += c.send(1, kafka_response(corr, b"r" * 60))
            corr += 1
            segs += c.send(0, kafka_request(1, 12, corr, "consumer-1", b"f" * 100), 1448)
            segs += c.send(1, kafka_response(corr, b"d" * 3000), 1448)
            segs.append(c.ack(0))
            for s in segs:
                t += 0.00001
                w.write(t, ethernet_frame(s))
                n += 1
            if n >= n_packets:
                break
    del encoded
    return f.getvalue()


def test_reader_throughput_floor():
    data = make_capture(20000)
    t = time.perf_counter()
    n = sum(1 for p in iter_packets(io.BytesIO(data)) if isinstance(p, Packet))
    dt_packets = time.perf_counter() - t
    st = CaptureStats()
    t = time.perf_counter()
    frames = sum(1 for e in iter_capture(io.BytesIO(data), stats=st) if isinstance(e, KafkaFrame))
    dt_all = time.perf_counter() - t
    assert n == st.tcp_packets and frames == st.frames > 0 and st.reconcile()["ok"]
    # very conservative floors (a slow shared CI machine): ~10x below what this code does here
    assert n / dt_packets > 50000, n / dt_packets
    assert n / dt_all > 20000, n / dt_all


def _time(fn):
    """CPU seconds (this process and its children): less skewed than wall time on a busy machine."""
    import resource
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.process_time()
    r = fn()
    dt = time.process_time() - t
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    dt += (ch1.ru_utime - ch0.ru_utime) + (ch1.ru_stime - ch0.ru_stime)
    return dt, r


def main(n_packets: int = 300000) -> None:
    data = make_capture(n_packets)
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "bench.pcap")
    with open(path, "wb") as fh:
        fh.write(data)
    print(f"capture: {n_packets} packets, {len(data) / 1e6:.1f} MB (times are CPU seconds)")

    dt, n = _time(lambda: sum(1 for p in iter_packets(path) if isinstance(p, Packet)))
    print(f"kwire iter_packets:          {dt:6.2f} s  {n / dt / 1e3:7.0f} kpkt/s  {dt / n * 1e6:.2f} us/pkt")
    st = CaptureStats()
    dt_kw, nf = _time(lambda: sum(1 for e in iter_capture(path, stats=st) if isinstance(e, KafkaFrame)))
    print(f"kwire iter_capture (frames): {dt_kw:6.2f} s  {n / dt_kw / 1e3:7.0f} kpkt/s  {nf} frames, "
          f"reconciled={st.reconcile()['ok']}")
    try:
        import dpkt

        def dp():
            k = 0
            with open(path, "rb") as fh:
                for _ts, buf in dpkt.pcap.Reader(fh):
                    eth = dpkt.ethernet.Ethernet(buf)
                    ip = eth.data
                    if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP):
                        k += len(ip.data.data) >= 0
            return k

        dt, k = _time(dp)
        print(f"dpkt Reader+Ethernet parse:  {dt:6.2f} s  {k / dt / 1e3:7.0f} kpkt/s")
    except ImportError:
        print("dpkt not installed")
    if shutil.which("tshark"):
        for label, args in (("tshark -Y kafka fields", ["-Y", "kafka", "-T", "fields", "-e", "kafka.correlation_id"]),
                            ("tshark (summary lines)", [])):
            dt, r = _time(lambda: subprocess.run(["tshark", "-r", path] + args, capture_output=True))
            print(f"{label + ':':28} {dt:6.2f} s  {n / dt / 1e3:7.0f} kpkt/s  "
                  f"(kwire iter_capture is {dt / dt_kw:.1f}x faster)")
    os.remove(path)
    os.rmdir(tmp)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300000)
