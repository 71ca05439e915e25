"""The values that flow out of the capture pipeline: packets, Kafka frames, damage, statistics.

``Packet``, ``KafkaFrame`` and ``Damage`` are ``NamedTuple``s (cheap to build, picklable, so a Spark
job can ship them to executors). A packet's number (``Packet.packet``, ``KafkaFrame.packet``,
``Damage.packet``) is its place in its capture file, 1-based as Wireshark counts. ``CaptureStats``
counts everything and can show that every payload byte is accounted for (``reconcile()``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

# TCP flag bits (as in the TCP header's flags byte).
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10


class Packet(NamedTuple):
    """One TCP segment as read from a capture.

    ``packet`` is the packet number in its file, 1-based as Wireshark counts (every packet of the
    file counts, TCP or not). ``payload`` is the captured TCP payload (``bytes``); ``wire_len`` is
    the payload length the IP header claims: when the snap length cut the packet,
    ``wire_len > len(payload)`` and the reassembler knows those bytes are lost.
    """

    file: str
    packet: int
    ts: float
    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    wire_len: int


def conn_key(pkt: Packet) -> tuple[Any, ...]:
    """The direction-free key of a packet's connection: ``(ip_a, port_a, ip_b, port_b)`` sorted.

    Group packets by this key (e.g. across rotated files in Spark) and feed each group, ordered by
    ``ts``, to one ``StreamAssembler``.
    """
    a = (pkt.src_ip, pkt.src_port)
    b = (pkt.dst_ip, pkt.dst_port)
    return a + b if a <= b else b + a


def endpoint(ip: str, port: int) -> str:
    """``ip:port``, IPv6 addresses in brackets (``[::1]:9092``)."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class KafkaFrame(NamedTuple):
    """One complete Kafka request or response as it crossed the wire (a NamedTuple: cheap, picklable).

    ``data`` is the frame without its 4-byte size prefix (``size == len(data)``), or, for a frame a
    gap cut after its header (a snap length, lost packets: ``cut``), the bytes of it captured from
    its start (``size > len(data)``, ``size`` from its size prefix). ``packet`` is the
    number of the packet that completed it (a cut frame: the packet where it was cut),
    ``start_packet`` of the one that carried its first byte;
    ``ts`` is the completing packet's time. For responses ``api_key``/``api_version``/``correlation_id``
    come from the paired request (``None`` when unpaired; ``correlation_id`` is still read from the
    response), ``request_ts``/``request_packet`` tell when that request completed, and ``latency``
    is ``ts - request_ts``.
    """

    file: str
    packet: int
    ts: float
    src: str
    dst: str
    conn: str
    kind: str  # "request" | "response"
    data: bytes
    size: int
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    request_ts: float | None = None
    request_packet: int | None = None
    start_packet: int | None = None
    acks: int | None = None  # Produce requests only: the acks value (0 means no response comes)

    @property
    def cut(self) -> bool:
        """A gap cut the frame: ``data`` holds its first ``len(data)`` bytes only."""
        return self.size > len(self.data)

    @property
    def latency(self) -> float | None:
        if self.request_ts is None:
            return None
        return self.ts - self.request_ts


# Damage kinds (Damage.kind). Byte-bearing kinds are counted in CaptureStats.damage_bytes.
GAP = "gap"                         # bytes never captured (dropped packets / snaplen cut)
RESYNC_SKIP = "resync-skip"         # delivered bytes skipped while looking for a frame start
PARTIAL_FRAME = "partial-frame"     # delivered bytes of a frame a gap cut short (or the stream end)
OVERSIZE_FRAME = "oversize-frame"   # a size prefix beyond the cap (or not positive): stream lost sync
TRUNCATED_RECORD = "truncated-record"   # packet record longer than the bytes left: reading stops
OVERSIZE_RECORD = "oversize-record"     # packet record longer than the format's limit: packet skipped
OVER_SNAPLEN = "over-snaplen"           # (a Note) records longer than the snap length, read whole
CORRUPT_BLOCK = "corrupt-block"         # pcapng block whose lengths (or whose options' lengths) do not add up
UNSUPPORTED_LINK = "unsupported-link"   # link type this reader does not know (once per interface)
UNPAIRED_RESPONSE = "unpaired-response"  # a response whose correlation id matches no open request
UNPARSEABLE = "unparseable"         # a frame too short for its header (request < 8, response < 4 bytes)
UNANSWERED_REQUEST = "unanswered-request"  # requests still open when their connection ended (or expired)
NON_KAFKA = "non-kafka"             # connection skipped because it is not Kafka (strict mode)
AFTER_CLOSE = "after-close"         # payload after FIN/RST or beyond the FIN sequence: ignored
# TLS (kwire_cli.tls): a connection's records that gave no plaintext, kind "tls-" + the TLS event's
TLS_NO_KEY = "tls-no-key"           # a Note: a TLS connection whose secrets are not in the key log (not damage)
TLS_PREFIX = "tls-"                 # tls-decrypt-failed, tls-bad-record, tls-resync, tls-truncated, ...
# packet-level skips (counted in CaptureStats.skipped; events only with report_skipped=True)
NON_IP = "non-ip"
NON_TCP = "non-tcp"
IP_FRAGMENT = "ip-fragment"
TRUNCATED_HEADER = "truncated-header"


class Damage(NamedTuple):
    """Something in the capture that could not be turned into frames, with the bytes it cost.

    ``packet`` is the number of the packet where it was noticed (for a gap: the first packet after
    it; ``detail`` names the packets on both sides; None: no one packet, e.g. at the end).
    ``bytes`` is the number of stream bytes concerned (0 where no bytes are involved, e.g. an
    unpaired response). ``corrs``: for ``unanswered-request``, the correlation ids of the requests
    given up (what pairing state above the assembler may forget: ``session.Conversation``).
    """

    file: str
    packet: int | None
    conn: str | None
    kind: str
    bytes: int
    detail: str
    ts: float | None = None
    corrs: tuple[Any, ...] | None = None


class Note(NamedTuple):
    """Something worth knowing about a connection that is not damage: a TLS connection's handshake
    (``kind`` "tls": version and cipher suite in ``detail``), a TLS alert or key update."""

    file: str
    packet: int | None
    conn: str | None
    kind: str
    detail: str
    ts: float | None = None


@dataclass
class CaptureStats:
    """Counters that reconcile: every captured TCP payload byte ends up in exactly one bucket.

    ``payload_bytes == delivered_bytes + duplicate_bytes + after_close_bytes + non_kafka_bytes``
    ``+ pending_bytes`` and ``delivered_bytes == frame_bytes + sum(damage_bytes of RESYNC_SKIP,``
    ``PARTIAL_FRAME, OVERSIZE_FRAME) + buffered_bytes`` (``pending``/``buffered`` are 0 once a
    capture has been read to its end). Gap bytes were never captured, so they are counted apart
    (``damage_bytes["gap"]``). On TLS connections the delivered bytes are TLS records: the
    plaintext decrypted from them (``tls_plaintext``) is what the framer gets, so the second
    equation counts ``tls_bytes - tls_plaintext`` (record headers, tags, handshakes, records not
    decrypted) as TLS's own.
    """

    files: int = 0
    capture_drops: int = 0      # packets the capturing interface says it dropped (pcapng isb_ifdrop)
    packets: int = 0            # packets read (each gets a packet number, TCP or not)
    tcp_packets: int = 0
    payload_bytes: int = 0      # captured TCP payload bytes fed to the StreamAssembler
    skipped: dict[str, int] = field(default_factory=dict)       # reason -> packet count (non-tcp etc.)
    delivered_bytes: int = 0    # in-order stream bytes handed to the framer
    duplicate_bytes: int = 0    # retransmitted / overlapping bytes dropped (first copy wins)
    after_close_bytes: int = 0
    non_kafka_bytes: int = 0
    pending_bytes: int = 0      # out-of-order bytes still buffered (0 after the end)
    buffered_bytes: int = 0     # delivered bytes not yet framed (0 after the end)
    frames: int = 0
    requests: int = 0
    responses: int = 0
    frame_bytes: int = 0        # size prefixes included
    cut_frames: int = 0         # frames a gap cut after their header, shown with their first bytes
    cut_bytes: int = 0          # delivered bytes of those frames (size prefixes included)
    paired: int = 0
    acks0_requests: int = 0
    acks0_answered: int = 0     # acks=0 Produce requests a broker answered anyway (paired)
    expired_requests: int = 0   # requests unanswered for the request timeout (live captures), dropped
    connections: int = 0
    damage_count: dict[str, int] = field(default_factory=dict)  # kind -> events
    tls_connections: int = 0    # connections recognised as TLS
    tls_decrypted: int = 0      # ... whose records were decrypted (the key log had their secrets)
    tls_bytes: int = 0          # delivered bytes that were TLS records (given to kwire_cli.tls)
    tls_plaintext: int = 0      # application data decrypted from them (given to the framer)
    tls_sessions: dict[str, int] = field(default_factory=dict)  # "TLSv1.3 TLS_AES_128_GCM_SHA256" -> connections
    tls_not_decrypted: dict[str, int] = field(default_factory=dict)  # "TLS 1.2 on HOST:PORT" -> connections (no keys)
    damage_bytes: dict[str, int] = field(default_factory=dict)  # kind -> bytes

    def add_damage(self, kind: str, nbytes: int) -> None:
        self.damage_count[kind] = self.damage_count.get(kind, 0) + 1
        self.damage_bytes[kind] = self.damage_bytes.get(kind, 0) + nbytes

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    @property
    def lost_bytes(self) -> int:
        """Stream bytes that never became part of a frame: gaps plus skipped delivered bytes."""
        return sum(self.damage_bytes.get(k, 0) for k in (GAP, RESYNC_SKIP, PARTIAL_FRAME, OVERSIZE_FRAME))

    def reconcile(self) -> dict[str, Any]:
        """Both balance equations; ``ok`` is True when every byte is accounted for."""
        payload_side = (self.delivered_bytes + self.duplicate_bytes + self.after_close_bytes
                        + self.non_kafka_bytes + self.pending_bytes)
        skipped = sum(self.damage_bytes.get(k, 0) for k in (RESYNC_SKIP, PARTIAL_FRAME, OVERSIZE_FRAME))
        delivered_side = (self.frame_bytes + self.cut_bytes + skipped + self.buffered_bytes + self.tls_bytes
                          - self.tls_plaintext)
        return {
            "payload_bytes": self.payload_bytes,
            "payload_accounted": payload_side,
            "delivered_bytes": self.delivered_bytes,
            "delivered_accounted": delivered_side,
            "ok": payload_side == self.payload_bytes and delivered_side == self.delivered_bytes,
        }

    def merge(self, other: CaptureStats) -> CaptureStats:
        """Add another stats object into this one (e.g. per-executor stats in Spark)."""
        for name in self.__dataclass_fields__:
            a, b = getattr(self, name), getattr(other, name)
            if isinstance(a, dict):
                for k, v in b.items():
                    a[k] = a.get(k, 0) + v
            else:
                setattr(self, name, a + b)
        return self

    def to_dict(self) -> dict[str, Any]:
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["lost_bytes"] = self.lost_bytes
        d["reconcile"] = self.reconcile()
        return d
