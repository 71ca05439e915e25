"""The state of one direction of a TLS connection, shared by the record layer
(``connection``), record-boundary recovery (``recovery``) and the handshake (``handshake``)."""
from __future__ import annotations

from .events import Plaintext, SideCounters, TlsEvent
from .keylog import Secret
from .keys import RecordCipher
from .suites import ALERT as CT_ALERT
from .suites import APPLICATION_DATA, CHANGE_CIPHER_SPEC, HEARTBEAT
from .suites import HANDSHAKE as CT_HANDSHAKE

MAX_RECORD = (1 << 14) + 2048     # longest record body any TLS version allows (RFC 5246 6.2.3)
TYPES = frozenset((CHANGE_CIPHER_SPEC, CT_ALERT, CT_HANDSHAKE, APPLICATION_DATA, HEARTBEAT))

# a direction's mode: records in the clear, encrypted with keys, encrypted without keys, given up
PLAIN, ENC, NOKEY, FAILED = 0, 1, 2, 3

Item = Plaintext | TlsEvent


class Side:
    """The state of one direction."""

    __slots__ = ("d", "pos", "buf", "skip", "mode", "cipher", "seq", "hs", "hs_skip", "pending",
                 "secret", "app_secret", "tls13_phase", "rec_version", "scanning", "scan_from",
                 "scan_lost", "scan_seq", "scan_first_seq", "scan_tries", "scan_wait", "broken", "hole_from",
                 "hole_bytes", "fails",
                 "failed_records", "failed_bytes", "c", "nokey_reason", "enc_records")

    def __init__(self, d: int):
        self.d = d
        self.pos = 0                 # stream offset of the next byte not yet consumed (buf[0] if any)
        self.buf = bytearray()       # an incomplete record (or, when scanning, bytes being searched)
        self.skip = 0                # bytes of a gap-damaged record still to drop
        self.mode = PLAIN
        self.cipher: RecordCipher | None = None
        self.seq = 0
        self.hs = bytearray()        # handshake message reassembly
        self.hs_skip = 0             # bytes of an over-cap handshake message still to drop
        self.pending: str | None = None   # key change after this record: "app", "update"
        self.secret: bytes | None = None       # TLS 1.3 current application traffic secret
        self.app_secret: Secret | None = None  # TLS 1.3 application traffic secret 0 (handshake phase)
        self.tls13_phase = ""        # "", "hs", "app"
        self.rec_version: int | None = None
        self.scanning = False        # looking for a record header after a gap or bad bytes
        self.scan_from = 0
        self.scan_lost = 0           # bytes lost (gap) since the last good record, for the seq estimate
        self.scan_seq = 0            # the sequence number the next record had when the search began
        self.scan_first_seq = 0      # ... and of the first record lost (reported)
        self.scan_tries = 0
        self.scan_wait = 0           # bytes s.buf needs before a waiting candidate is tried again
        self.broken = False          # the plaintext has a hole that no Plaintext has followed yet
        self.hole_from = 0
        self.hole_bytes = 0
        self.fails = 0               # consecutive failed records
        self.failed_records = 0
        self.failed_bytes = 0
        self.nokey_reason = ""
        self.enc_records = 0         # records decrypted (for the average record size)
        self.c = SideCounters()

    def __repr__(self) -> str:
        return "<side %d at %d mode %d>" % (self.d, self.pos, self.mode)



def hole(s: Side, kind: str, message: str, offset: int, nbytes: int, out: list[Item]) -> None:
    """The plaintext of ``s`` breaks here: one event per run of breaks (the rest are counted)."""
    if not s.broken:
        s.broken = True
        s.hole_from = offset
        s.hole_bytes = 0
        out.append(TlsEvent(kind, message, s.d, offset, nbytes, True))
    s.hole_bytes += nbytes

