"""A sans-io TLS decoder for one TCP connection.

``TlsConnection(keys)``; then ``feed(direction, data)`` with each direction's in-order TCP bytes,
both directions interleaved in capture order; ``gap(direction, n)`` when n bytes of a direction
were lost; ``finish()`` at the end. Each returns a list of ``Plaintext`` (decrypted application
data, per record) and ``TlsEvent`` items in stream order. ``direction`` is the caller's label, 0 or
1 (``C2S``/``S2C`` by convention); the side whose first record is a ClientHello is the client
(``client_direction``), whatever its label.

Records (RFC 8446 5.1, RFC 5246 6.2) are parsed as they complete: a record may span any number of
feeds; handshake messages may span records. At most one record (2^14 + 2048 bytes + header) per
direction is buffered, plus one handshake message up to ``MAX_HANDSHAKE`` (256 KiB; a longer one
is reported and skipped).

TLS 1.2: the hellos are read in the clear; at each side's change_cipher_spec its keys come from the
master secret (``CLIENT_RANDOM`` line; else a session the same key log learnt from an earlier
connection, by session id or ticket; else a pre-master from ``PMS_CLIENT_RANDOM`` or ``RSA`` lines,
with the extended master secret's session hash when it was negotiated). TLS 1.3: after the
ServerHello, each side's records are decrypted with its handshake traffic secret, after its
Finished with its application traffic secret, after each KeyUpdate with the next secret, derived
here (RFC 8446 7.2). The content type is read from inside the record, padding stripped. If only
the application secrets were logged, the first record that decrypts with them ends the handshake.

Without keys, nothing is handed back for the encrypted records: they are counted and one
``no-key`` event at ``finish()`` says how many bytes were not decrypted. A record that does not
authenticate is a ``decrypt-failed`` event (the first of a run; the rest are counted), never an
exception and never plaintext. After a gap or bytes that are no record header, the decoder looks
for the next plausible record header and, with keys, accepts it only when the record decrypts,
trying the next sequence numbers (and, in TLS 1.3, the next KeyUpdate's keys); the ``resync`` event
says what was lost.
"""
from __future__ import annotations

import dataclasses
import hashlib

from .events import (
    ALERT,
    BAD_RECORD,
    DECRYPT_FAILED,
    GAP,
    HANDSHAKE,
    HANDSHAKE_ERROR,
    KEY_UPDATE,
    NO_KEY,
    NOT_DECRYPTED,
    RESYNC,
    TRUNCATED,
    UNSUPPORTED,
    HandshakeInfo,
    Plaintext,
    SideCounters,
    TlsEvent,
)
from .hello import (
    ClientHello,
    HelloError,
    ServerHello,
    parse_client_hello,
    parse_encrypted_extensions_alpn,
    parse_new_session_ticket12,
    parse_server_hello,
)
from .keylog import KeyLog, Secret
from .keys import (
    Cbc12,
    DecryptFailed,
    KeyBlock12,
    RecordCipher,
    cipher12,
    cipher13,
    master_from_premaster,
    next_traffic_secret,
)
from .suites import ALERT as CT_ALERT
from .suites import (
    ALERT_LEVELS,
    ALERT_NAMES,
    APPLICATION_DATA,
    CBC,
    CHANGE_CIPHER_SPEC,
    CLIENT_HELLO,
    CLIENT_KEY_EXCHANGE,
    CONTENT_TYPES,
    ENCRYPTED_EXTENSIONS,
    FINISHED,
    HANDSHAKE_NAMES,
    HEARTBEAT,
    NEW_SESSION_TICKET,
    SERVER_HELLO,
    SUITES,
    TLS12,
    TLS13,
    Suite,
    suite_name,
    version_name,
)
from .suites import HANDSHAKE as CT_HANDSHAKE
from .suites import KEY_UPDATE as HS_KEY_UPDATE

MAX_RECORD = (1 << 14) + 2048     # longest record body any TLS version allows (RFC 5246 6.2.3)
MAX_HANDSHAKE = 256 * 1024        # longest handshake message kept (certificate chains are ~2-20 KB)
SEQ_WINDOW = 64                   # sequence numbers tried at least after a gap (a quarter after a failed record)
MAX_TRIALS = 4096                 # ... and at most, for small records
TRIAL_BYTES = 4 << 20             # bytes of trial decryption per record candidate after a gap
FAILS_BEFORE_QUIET = 4            # failed records after which no window is searched on failure
RESYNC_CANDIDATES = 32            # plausible headers tried before a direction gives up decrypting

_PLAIN, _ENC, _NOKEY, _FAILED = 0, 1, 2, 3
_TYPES = frozenset((CHANGE_CIPHER_SPEC, CT_ALERT, CT_HANDSHAKE, APPLICATION_DATA, HEARTBEAT))

Item = Plaintext | TlsEvent


def looks_like_client_hello(data: bytes | bytearray | memoryview) -> bool | None:
    """True when ``data`` starts with a TLS record holding a ClientHello; False when it cannot;
    None when fewer than 6 bytes say neither (give more)."""
    n = len(data)
    if n >= 1 and data[0] != CT_HANDSHAKE:
        return False
    if n >= 2 and data[1] != 3:
        return False
    if n >= 3 and data[2] > 4:
        return False
    if n >= 5 and (data[3] << 8 | data[4]) > MAX_RECORD:
        return False
    if n >= 6:
        return data[5] == CLIENT_HELLO
    return None


def looks_like_tls_record(data: bytes | bytearray | memoryview) -> bool | None:
    """True when ``data`` starts with a plausible TLS record header (content type 20-24, version
    3.0-3.4, length within 2^14+2048) -- a connection caught after its handshake; False when it
    cannot; None when fewer than 5 bytes say neither. (A Kafka frame whose size starts with byte
    20-24 would be over 335 MB.)"""
    n = len(data)
    if n >= 1 and data[0] not in _TYPES:
        return False
    if n >= 2 and data[1] != 3:
        return False
    if n >= 3 and data[2] > 4:
        return False
    if n >= 5:
        return (data[3] << 8 | data[4]) <= MAX_RECORD
    return None


def _names(d: int, client: int | None) -> str:
    if client is None:
        return "direction %d" % d
    return "client to server" if d == client else "server to client"


class _Side:
    """The state of one direction."""

    __slots__ = ("d", "pos", "buf", "skip", "mode", "cipher", "seq", "hs", "hs_skip", "pending",
                 "secret", "app_secret", "tls13_phase", "rec_version", "scanning", "scan_from",
                 "scan_lost", "scan_seq", "scan_first_seq", "scan_tries", "broken", "hole_from", "hole_bytes", "fails",
                 "failed_records", "failed_bytes", "c", "nokey_reason", "enc_records")

    def __init__(self, d: int):
        self.d = d
        self.pos = 0                 # stream offset of the next byte not yet consumed (buf[0] if any)
        self.buf = bytearray()       # an incomplete record (or, when scanning, bytes being searched)
        self.skip = 0                # bytes of a gap-damaged record still to drop
        self.mode = _PLAIN
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


class TlsConnection:
    """Decrypts one TCP connection's TLS records with the secrets of ``keys`` (a ``KeyLog``).

    ``handshake``: a ``HandshakeInfo`` once the ServerHello was read (also in the ``handshake``
    event); ``client_direction``: the label whose first record was a ClientHello; ``counters``:
    a ``SideCounters`` per direction label; ``no_key``: True once the connection is known to have
    no secrets in ``keys``; ``label``: how messages name the connection (default none).
    """

    def __init__(self, keys: KeyLog, label: str = ""):
        self.keys = keys
        self.label = label
        self._sides = (_Side(0), _Side(1))
        self.client_direction: int | None = None
        self.handshake: HandshakeInfo | None = None
        self.no_key = False
        self._ch: ClientHello | None = None
        self._sh: ServerHello | None = None
        self._suite: Suite | None = None
        self._version = 0
        self._hello_retry = False
        self._transcript: dict[str, hashlib._Hash] | None = None
        self._session_hash: bytes | None = None
        self._enc_pms: bytes | None = None
        self._ticket12: bytes | None = None
        self._master: Secret | None = None
        self._master_tried = False
        self._kb: KeyBlock12 | None = None
        self._unsupported = ""
        self._finished = False

    def __repr__(self) -> str:
        hs = self.handshake.describe() if self.handshake else "no handshake yet"
        return "<TlsConnection %s%s>" % (self.label + " " if self.label else "", hs)

    @property
    def counters(self) -> tuple[SideCounters, SideCounters]:
        return (self._sides[0].c, self._sides[1].c)

    def buffered(self) -> tuple[int, int]:
        """Bytes held per direction (an incomplete record, a handshake message being assembled)."""
        return (len(self._sides[0].buf) + len(self._sides[0].hs), len(self._sides[1].buf) + len(self._sides[1].hs))

    # -- the caller's three calls ------------------------------------------------------------------

    def feed(self, direction: int, data: bytes | bytearray | memoryview) -> list[Item]:
        """Give the next in-order bytes of one direction; get plaintext and events back."""
        if (direction != 0 and direction != 1) or self._finished:
            self._side(direction)   # raises
        s = self._sides[direction]
        out: list[Item] = []
        n = len(data)
        if n:
            s.c.fed += n
            buf = s.buf
            if len(buf) >= 5 and n < 5 + (buf[3] << 8 | buf[4]) - len(buf) and not s.scanning:
                buf += data       # one more piece of a record that is still incomplete
                return out
            self._consume(s, data if data.__class__ is bytes else memoryview(data).cast("B"), out)
        return out

    def gap(self, direction: int, nbytes: int) -> list[Item]:
        """Say that ``nbytes`` of a direction's stream were lost (after what was fed so far)."""
        s = self._side(direction)
        out: list[Item] = []
        if nbytes <= 0:
            return out
        s.c.lost += nbytes
        where = self._where(s)
        at = s.pos + len(s.buf)
        first_seq = s.seq          # the first record the gap touches has this sequence number
        rec_start = s.pos
        if s.skip:
            # already dropping the rest of a damaged record: the gap eats into that first
            k = min(s.skip, nbytes)
            s.skip -= k
            s.pos += k
            nbytes -= k
            if not nbytes:
                self._hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, k, at), at, k, out)
                return out
        if s.scanning:
            self._hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, nbytes, at), at, nbytes, out)
            # bytes buffered before the gap cannot start a record that continues after it
            s.c.skipped += len(s.buf)
            s.pos += len(s.buf) + nbytes
            s.buf = bytearray()
            s.scan_lost += nbytes
            return out
        buf = s.buf
        if len(buf) >= 5:
            total = 5 + (buf[3] << 8 | buf[4])
            rest = total - len(buf)
            self._hole(s, GAP, "%s: %d bytes lost at offset %d, inside the %s record at offset %d"
                       % (where, nbytes, at, CONTENT_TYPES.get(buf[0], "?"), s.pos), at, nbytes, out)
            if nbytes <= rest:
                # the record is damaged, the next one starts right after it: drop what is left
                s.c.skipped += len(buf)
                s.skip = rest - nbytes
                s.pos += total - s.skip
                s.buf = bytearray()
                self._lost_record(s)
                return out
            s.c.skipped += len(buf)
            s.pos += total
            s.buf = bytearray()
            self._lost_record(s)
            nbytes -= rest
        else:
            self._hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, nbytes, at), at, nbytes, out)
            s.c.skipped += len(buf)
            s.pos += len(buf)
            s.buf = bytearray()
        # records of unknown number and size were lost: look for the next header
        s.pos += nbytes
        self._start_scan(s, nbytes, first_seq)
        s.scan_from = rec_start
        return out

    def finish(self) -> list[Item]:
        """The stream ended: report a record cut short, bytes not decrypted and missing keys."""
        out: list[Item] = []
        if self._finished:
            return out
        self._finished = True
        for s in self._sides:
            where = self._where(s)
            if s.scanning and (s.buf or s.scan_lost):
                n = len(s.buf)
                s.c.skipped += n
                out.append(TlsEvent(RESYNC, "%s: no record found again after offset %d; %d bytes skipped to the end"
                                    % (where, s.scan_from, s.pos + n - s.scan_from), s.d, s.scan_from, n, False))
                s.buf = bytearray()
            elif s.buf:
                n = len(s.buf)
                want = 5 + (s.buf[3] << 8 | s.buf[4]) if n >= 5 else 5
                s.c.truncated += n
                out.append(TlsEvent(TRUNCATED, "%s: the stream ends inside a record at offset %d (%d of %d bytes)"
                                    % (where, s.pos, n, want), s.d, s.pos, n, True))
                s.buf = bytearray()
            if s.hs:
                out.append(TlsEvent(HANDSHAKE_ERROR, "%s: the stream ends inside a handshake message (%d bytes of it)"
                                    % (where, len(s.hs)), s.d, None, len(s.hs)))
                s.hs = bytearray()
            if s.failed_records:
                out.append(TlsEvent(NOT_DECRYPTED, "%s: %d records (%d bytes) did not decrypt"
                                    % (where, s.failed_records, s.failed_bytes), s.d, None, s.failed_bytes))
        nokey = sum(s.c.undecrypted for s in self._sides if s.mode == _NOKEY and not s.failed_records)
        if self.no_key or nokey:
            ver = self.handshake.version.replace("v", " ") if self.handshake else "TLS"
            cr = self._ch.random.hex()[:16] + "..." if self._ch else "(no ClientHello seen)"
            reason = next((s.nokey_reason for s in self._sides if s.nokey_reason), "")
            if reason == "unsupported":
                msg = "%s, %s: not decrypted (%s); %d bytes not decrypted" % (ver, cr, self._unsupported, nokey)
            elif reason == "no-client-hello":
                msg = "%s, no ClientHello seen, so no client random to find keys; %d bytes not decrypted" % (
                    ver, nokey)
            elif reason == "no-server-hello":
                msg = "%s, no ServerHello seen for client random %s; %d bytes not decrypted" % (ver, cr, nokey)
            else:
                msg = "%s, no key for client random %s; %d bytes not decrypted" % (ver, cr, nokey)
            out.append(TlsEvent(NO_KEY, self._prefix() + msg, None, None, nokey, False, self.handshake))
        return out

    # -- records -----------------------------------------------------------------------------------

    def _side(self, direction: int) -> _Side:
        if direction not in (0, 1):
            raise ValueError("direction must be 0 or 1, not %r" % (direction,))
        if self._finished:
            raise ValueError("feed or gap after finish")
        return self._sides[direction]

    def _prefix(self) -> str:
        return self.label + ": " if self.label else ""

    def _where(self, s: _Side) -> str:
        return self._prefix() + _names(s.d, self.client_direction)

    def _consume(self, s: _Side, data: bytes | memoryview, out: list[Item]) -> None:
        n = len(data)
        p = 0
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if s.skip:
            k = min(s.skip, n)
            s.skip -= k
            s.c.skipped += k
            s.pos += k
            p = k
            if p == n:
                return
        if s.scanning:
            self._scan(s, mv[p:], out)
            return
        buf = s.buf
        if buf:
            # complete the buffered record first
            if len(buf) < 5:
                k = min(5 - len(buf), n - p)
                buf += mv[p:p + k]
                p += k
                if len(buf) < 5:
                    return
                bad = self._bad_header(s, buf[0], buf[1], buf[2], buf[3] << 8 | buf[4])
                if bad:
                    rest = bytes(buf) + bytes(mv[p:])
                    s.buf = bytearray()
                    self._bad(s, bad, out)
                    self._scan(s, rest, out)
                    return
            total = 5 + (buf[3] << 8 | buf[4])
            k = min(total - len(buf), n - p)
            buf += mv[p:p + k]
            p += k
            if len(buf) < total:
                return
            s.buf = bytearray()      # the complete record is ours now: no copy
            self._record(s, buf[0], buf[1] << 8 | buf[2], memoryview(buf)[5:], s.pos, out)
            s.pos += total
            if s.scanning or s.skip:   # the record changed the state (not expected, but be safe)
                self._consume(s, mv[p:], out)
                return
        # records wholly inside ``data``: no copy
        record = self._record
        while n - p >= 5:
            ctype = data[p]
            ln = data[p + 3] << 8 | data[p + 4]
            if ctype not in _TYPES or data[p + 1] != 3 or data[p + 2] > 4 or ln > MAX_RECORD:
                bad = self._bad_header(s, ctype, data[p + 1], data[p + 2], ln)
                if bad:
                    self._bad(s, bad, out)
                    self._scan(s, mv[p:], out)
                    return
            end = p + 5 + ln
            if end > n:
                break
            version = data[p + 1] << 8 | data[p + 2]
            if ctype != APPLICATION_DATA or s.mode != _ENC or not self._fast(s, version, mv[p + 5:end], s.pos, out):
                record(s, ctype, version, mv[p + 5:end], s.pos, out)
            s.pos += end - p
            p = end
            if s.scanning or s.skip:
                self._consume(s, mv[p:], out)
                return
        if p < n:
            s.buf = bytearray(mv[p:])

    def _fast(self, s: _Side, version: int, body: memoryview, start: int, out: list[Item]) -> bool:
        """The common record: application data that decrypts under the expected sequence number.
        False (nothing done) for anything else, which ``_record`` then handles."""
        cipher = s.cipher
        if cipher is None:
            return False
        try:
            pt = cipher.decrypt(s.seq, APPLICATION_DATA, version, body)
        except DecryptFailed:
            return False
        if s.rec_version is None:
            s.rec_version = version
        s.seq += 1
        c = s.c
        total = 5 + len(body)
        c.records += 1
        c.decrypted += total
        s.enc_records += 1
        s.fails = 0
        if s.tls13_phase:
            if pt and pt[-1] == APPLICATION_DATA:
                pt = pt[:-1]          # no padding: the usual case
            else:
                self._content(s, APPLICATION_DATA, pt, start, start + total, out)
                if s.pending:
                    self._key_change(s, out)
                return True
        if pt:
            s.broken = False
            c.plaintext += len(pt)
            out.append(Plaintext(s.d, pt, start, start + total))
        return True

    def _bad_header(self, s: _Side, ctype: int, major: int, minor: int, ln: int) -> str:
        if ctype not in _TYPES:
            return "content type %d is not TLS's" % ctype
        if major != 3 or minor > 4:
            return "record version 0x%02x%02x is not TLS's" % (major, minor)
        if ln > MAX_RECORD:
            return "record length %d is over 2^14+2048" % ln
        del s
        return ""

    def _bad(self, s: _Side, reason: str, out: list[Item]) -> None:
        self._hole(s, BAD_RECORD, "%s: no TLS record at offset %d: %s" % (self._where(s), s.pos, reason),
                   s.pos, 0, out)
        self._start_scan(s, 0)

    def _record(self, s: _Side, ctype: int, version: int, body: memoryview, start: int, out: list[Item]) -> None:
        c = s.c
        c.records += 1
        total = 5 + len(body)
        mode = s.mode
        if mode == _ENC:
            if ctype == CHANGE_CIPHER_SPEC and s.tls13_phase:
                c.plain += total       # TLS 1.3 middlebox compatibility: never encrypted, no meaning
                return
            if ctype == CT_ALERT and s.tls13_phase and len(body) == 2:
                c.plain += total       # an alert sent in the clear before the peer switched keys
                self._alert(s, bytes(body), start, False, out)
                return
            cipher = s.cipher
            assert cipher is not None
            try:
                pt = cipher.decrypt(s.seq, ctype, version, body)
            except DecryptFailed as e:
                found = self._retry(s, ctype, version, body)
                if found is None:
                    self._failed(s, str(e), start, total, out)
                    return
                pt = found
            else:
                s.seq += 1
            c.decrypted += total
            s.enc_records += 1
            s.fails = 0
            if s.rec_version is None:
                s.rec_version = version
            self._content(s, ctype, pt, start, start + total, out)
            if s.pending:
                self._key_change(s, out)
            return
        if mode == _PLAIN:
            if ctype == CT_HANDSHAKE:
                c.plain += total
                self._handshake(s, bytes(body), start, out)
            elif ctype == CHANGE_CIPHER_SPEC:
                c.plain += total
                self._change_cipher_spec(s, start, out)
                return
            elif ctype == CT_ALERT:
                c.plain += total
                self._alert(s, bytes(body), start, False, out)
            elif ctype == APPLICATION_DATA:
                if self._sh is not None and self._version == TLS12 and not s.nokey_reason:
                    # its change_cipher_spec was lost (a gap): the keys start here
                    self._change_cipher_spec(s, start, out)
                    if s.mode == _ENC:
                        c.records -= 1
                        self._record(s, ctype, version, body, start, out)
                    else:
                        c.undecrypted += total
                    return
                self._early_application_data(s, start, total, out)
            else:
                c.plain += total
            if s.pending:
                self._key_change(s, out)
            return
        # no key, or given up
        if ctype == CHANGE_CIPHER_SPEC and s.tls13_phase:
            c.plain += total
        else:
            c.undecrypted += total
            if mode == _FAILED:
                s.failed_records += 1
                s.failed_bytes += total

    def _early_application_data(self, s: _Side, start: int, total: int, out: list[Item]) -> None:
        """Application data before this side has keys: a capture that began after the hellos, a
        lost ServerHello, or TLS 1.3 early data (0-RTT, not decrypted)."""
        ch = self._ch
        if ch is not None and self._sh is None and s.d == self.client_direction and ch.offers_early_data:
            s.c.undecrypted += total
            s.failed_records += 1
            s.failed_bytes += total
            self._hole(s, UNSUPPORTED, "%s: TLS 1.3 early data (0-RTT) at offset %d is not decrypted"
                       % (self._where(s), start), start, total, out)
            return
        s.c.undecrypted += total
        s.mode = _NOKEY
        self.no_key = True
        s.nokey_reason = "no-client-hello" if ch is None else "no-server-hello"

    def _content(self, s: _Side, ctype: int, pt: bytes, start: int, end: int, out: list[Item]) -> None:
        """The plaintext of a decrypted record (TLS 1.3: the inner plaintext)."""
        if s.tls13_phase:
            inner = pt.rstrip(b"\x00")
            if not inner:
                self._hole(s, DECRYPT_FAILED, "%s: record at offset %d decrypted to padding only, no content type"
                           % (self._where(s), start), start, end - start, out)
                return
            ctype = inner[-1]
            pt = inner[:-1]
        if ctype == APPLICATION_DATA:
            if pt:
                if s.broken:
                    s.broken = False
                s.c.plaintext += len(pt)
                out.append(Plaintext(s.d, pt, start, end))
        elif ctype == CT_HANDSHAKE:
            self._handshake(s, pt, start, out)
        elif ctype == CT_ALERT:
            self._alert(s, pt, start, True, out)
        elif ctype == CHANGE_CIPHER_SPEC:
            self._change_cipher_spec(s, start, out)

    # -- failures, gaps and finding records again ------------------------------------------------

    def _hole(self, s: _Side, kind: str, message: str, offset: int, nbytes: int, out: list[Item]) -> None:
        """The plaintext of ``s`` breaks here: one event per run of breaks (the rest are counted)."""
        if not s.broken:
            s.broken = True
            s.hole_from = offset
            s.hole_bytes = 0
            out.append(TlsEvent(kind, message, s.d, offset, nbytes, True))
        s.hole_bytes += nbytes

    def _failed(self, s: _Side, reason: str, start: int, total: int, out: list[Item]) -> None:
        s.c.undecrypted += total
        s.failed_records += 1
        s.failed_bytes += total
        s.fails += 1
        ch = self._ch
        early = (s.tls13_phase == "hs" and ch is not None and ch.offers_early_data
                 and s.d == self.client_direction)
        if s.cipher is not None and not early:
            s.seq += 1      # the record used a sequence number even if it did not authenticate
        self._hole(s, DECRYPT_FAILED, "%s: record at offset %d (%d bytes) not decrypted: %s"
                   % (self._where(s), start, total, reason), start, total, out)

    def _lost_record(self, s: _Side) -> None:
        """A record of known position was lost in a gap: it had a sequence number."""
        if s.mode == _ENC:
            s.seq += 1

    def _start_scan(self, s: _Side, lost: int, first_seq: int | None = None) -> None:
        if not s.scanning:
            s.scanning = True
            s.scan_from = s.pos - lost
            s.scan_lost = lost
            s.scan_seq = s.seq
            s.scan_first_seq = s.seq if first_seq is None else first_seq
            s.scan_tries = 0
        else:
            s.scan_lost += lost

    def _plausible(self, s: _Side, b: bytes | bytearray, i: int) -> bool:
        ctype = b[i]
        if ctype not in _TYPES or b[i + 1] != 3:
            return False
        ver = b[i + 1] << 8 | b[i + 2]
        ln = b[i + 3] << 8 | b[i + 4]
        if ln > MAX_RECORD:
            return False
        if s.rec_version is not None:
            if ver != s.rec_version:
                return False
        elif b[i + 2] > 4:
            return False
        if s.mode == _ENC and s.cipher is not None:
            if ln < s.cipher.overhead:
                return False
            if s.tls13_phase and ctype not in (APPLICATION_DATA, CHANGE_CIPHER_SPEC, CT_ALERT):
                return False
        return True

    def _find_header(self, s: _Side, buf: bytearray) -> int:
        """The first plausible record header in ``buf`` (-1: none), found with ``bytearray.find``
        on the type and version bytes, checked by ``_plausible``."""
        n = len(buf)
        v = s.rec_version
        pats = [bytes((t, 3, v & 0xFF)) if v is not None else bytes((t, 3)) for t in _TYPES]
        i = 0
        while i + 5 <= n:
            best = -1
            for pat in pats:
                j = buf.find(pat, i, n)
                if j >= 0 and (best < 0 or j < best):
                    best = j
            if best < 0 or best + 5 > n:
                return -1
            if self._plausible(s, buf, best):
                return best
            i = best + 1
        return -1

    def _scan(self, s: _Side, data: bytes | memoryview, out: list[Item]) -> None:
        """Look for the next record in ``s.buf + data``; hand the rest to ``_consume`` once found."""
        buf = s.buf
        if data:
            buf += data
        while True:
            n = len(buf)
            found = self._find_header(s, buf)
            if found < 0:
                keep = min(n, 4)
                s.c.skipped += n - keep
                s.pos += n - keep
                s.hole_bytes += n - keep
                del buf[:n - keep]
                return
            if found:
                s.c.skipped += found
                s.pos += found
                s.hole_bytes += found
                del buf[:found]
                n = len(buf)
            total = 5 + (buf[3] << 8 | buf[4])
            if n < total:
                return         # wait for the whole candidate record (at most one record buffered)
            ok = self._try_candidate(s, buf, total)
            if ok is None:     # cannot tell yet (need the next header): wait
                return
            if not ok:
                s.c.skipped += 1
                s.pos += 1
                s.hole_bytes += 1
                del buf[:1]
                continue
            # found: hand the candidate and everything after it back to the record parser
            s.scanning = False
            rest = bytes(buf)
            s.buf = bytearray()
            skipped = s.pos - s.scan_from
            msg = "%s: records found again at offset %d after %d bytes skipped from offset %d" % (
                self._where(s), s.pos, skipped, s.scan_from)
            if s.mode == _ENC and s.cipher is not None:
                lost = s.seq - s.scan_first_seq
                if lost:
                    msg += " (%d records lost, sequence numbers %d-%d)" % (lost, s.scan_first_seq, s.seq - 1)
            out.append(TlsEvent(RESYNC, msg, s.d, s.pos, skipped, False))
            self._consume(s, rest, out)
            return

    def _try_candidate(self, s: _Side, buf: bytearray, total: int) -> bool | None:
        """Is the record at buf[0:total] a real one? With keys: it decrypts (the sequence number
        and keys are updated); without: the next header (if any) is plausible too."""
        if s.mode == _ENC and s.cipher is not None:
            body = bytes(buf[5:total])
            ctype = buf[0]
            version = buf[1] << 8 | buf[2]
            if s.tls13_phase and ctype != APPLICATION_DATA:
                return self._chain_ok(s, buf, total)
            found = self._search(s, ctype, version, body, self._seq_candidates(s, len(body)))
            if found is not None:
                s.seq = found[0]
                return True
            s.scan_tries += 1
            if s.scan_tries >= RESYNC_CANDIDATES:
                # plausible records that do not decrypt under any nearby sequence number: give up
                # decrypting this direction, keep walking its records to count them
                s.mode = _FAILED
                return self._chain_ok(s, buf, total)
            return False
        return self._chain_ok(s, buf, total)

    def _chain_ok(self, s: _Side, buf: bytearray, total: int) -> bool | None:
        n = len(buf)
        if n >= total + 5:
            return self._plausible(s, buf, total)
        if n == total:
            return True        # a record that ends where the bytes end (as records end segments)
        return None

    def _seq_candidates(self, s: _Side, body_len: int) -> list[int]:
        """Sequence numbers the record found after a gap may have, likeliest first.

        ``scan_lost`` bytes were lost (and ``pos - scan_from`` bytes skipped in all): at least
        one record per 2^14+2048+5 lost bytes, at most one per smallest record; the estimate is
        the bytes skipped over this direction's average record size so far, and the candidates
        go outwards from it, as many as ``TRIAL_BYTES`` of trial decryption allow."""
        base = s.scan_seq
        skipped = s.pos - s.scan_from
        lo = base
        if s.scan_lost:
            lo += max(1, -(-s.scan_lost // (MAX_RECORD + 5)))
        overhead = s.cipher.overhead if s.cipher is not None else 16
        hi = max(lo, base + skipped // (5 + overhead) + 1)
        avg = s.c.decrypted / s.enc_records if s.enc_records else (MAX_RECORD + 5) / 2
        est = min(max(base + round(skipped / avg), lo), hi)
        limit = max(SEQ_WINDOW, min(MAX_TRIALS, TRIAL_BYTES // max(1, body_len)))
        out = [est]
        k = 1
        while len(out) < limit and (est - k >= lo or est + k <= hi):
            if est + k <= hi:
                out.append(est + k)
            if est - k >= lo:
                out.append(est - k)
            k += 1
        return out[:limit]

    def _search(self, s: _Side, ctype: int, version: int, body: bytes, seqs: list[int]
                ) -> tuple[int, bytes] | None:
        """Try to decrypt a record under each sequence number of ``seqs`` in turn (and, in TLS 1.3,
        under the next KeyUpdate's keys): (seq, plaintext) with the side's cipher updated, or None."""
        cipher = s.cipher
        assert cipher is not None
        if isinstance(cipher, Cbc12):
            try:
                return cipher.decrypt_any(ctype, version, body, tuple(seqs))
            except DecryptFailed:
                return None
        order = seqs
        guess = cipher.explicit_seq(body)
        if guess is not None and seqs and min(seqs) <= guess <= max(seqs) + 4 * SEQ_WINDOW:
            order = [guess, *(q for q in seqs if q != guess)]
        for seq in order:
            try:
                return seq, cipher.decrypt(seq, ctype, version, body)
            except DecryptFailed:
                pass
        if s.tls13_phase == "app" and s.secret is not None and self._suite is not None:
            nxt = next_traffic_secret(self._suite.prf, s.secret)
            c2 = cipher13(self._suite, nxt)
            for seq in range(SEQ_WINDOW):
                try:
                    pt = c2.decrypt(seq, ctype, version, body)
                except DecryptFailed:
                    continue
                s.cipher = c2
                s.secret = nxt
                s.c.key_updates += 1
                return seq, pt
        return None

    def _retry(self, s: _Side, ctype: int, version: int, body: memoryview) -> bytes | None:
        """A record failed under the expected sequence number: try the next few (a record lost
        without a gap being reported), or, in the TLS 1.3 handshake, the application keys."""
        if s.tls13_phase == "hs" and s.app_secret is not None and self._suite is not None:
            c2 = cipher13(self._suite, s.app_secret.reveal())
            for seq in range(4):
                try:
                    pt = c2.decrypt(seq, ctype, version, body)
                except DecryptFailed:
                    continue
                # the handshake's end was not readable (no handshake secrets): application keys now
                s.cipher = c2
                s.secret = s.app_secret.reveal()
                s.tls13_phase = "app"
                s.seq = seq + 1
                return pt
        if s.fails >= FAILS_BEFORE_QUIET:
            return None
        # records that failed just before may have been bytes that only looked like records
        # (they took no sequence number): look back over them, and ahead a little
        seqs = [q for q in range(max(0, s.seq - s.fails), s.seq + 1 + SEQ_WINDOW // 4) if q != s.seq]
        found = self._search(s, ctype, version, bytes(body), seqs)
        if found is None:
            return None
        s.seq = found[0] + 1
        return found[1]

    # -- handshake -------------------------------------------------------------------------------

    def _handshake(self, s: _Side, data: bytes, start: int, out: list[Item]) -> None:
        if s.hs_skip:
            k = min(s.hs_skip, len(data))
            s.hs_skip -= k
            data = data[k:]
            if not data:
                return
        if s.hs:
            s.hs += data
            data = bytes(s.hs)
            s.hs = bytearray()
        p = 0
        n = len(data)
        while n - p >= 4:
            mtype = data[p]
            ln = data[p + 1] << 16 | data[p + 2] << 8 | data[p + 3]
            if ln > MAX_HANDSHAKE:
                out.append(TlsEvent(HANDSHAKE_ERROR, "%s: %s message of %d bytes at offset %d is over the %d KiB "
                                    "cap; skipped" % (self._where(s), HANDSHAKE_NAMES.get(mtype, "handshake type %d"
                                                                                           % mtype),
                                                      ln, start, MAX_HANDSHAKE // 1024), s.d, start, ln))
                have = n - p - 4
                s.hs_skip = ln - have if have < ln else 0
                p = n if have < ln else p + 4 + ln
                continue
            if n - p - 4 < ln:
                break
            self._message(s, mtype, data[p:p + 4 + ln], start, out)
            p += 4 + ln
        if p < n:
            s.hs = bytearray(data[p:])

    def _message(self, s: _Side, mtype: int, msg: bytes, start: int, out: list[Item]) -> None:
        body = msg[4:]
        if self._transcript is not None and self._session_hash is None and mtype != 0:
            for h in self._transcript.values():
                h.update(msg)
        try:
            if mtype == CLIENT_HELLO:
                self._client_hello(s, body, start, out)
            elif mtype == SERVER_HELLO:
                self._server_hello(s, body, start, out)
            elif mtype == CLIENT_KEY_EXCHANGE:
                self._client_key_exchange(body)
            elif mtype == NEW_SESSION_TICKET:
                if self._version != TLS13:
                    self._ticket12 = parse_new_session_ticket12(body)
                    if self._ticket12 and self._master is not None:
                        self.keys.remember_session(b"ticket:" + self._ticket12, self._master)
            elif mtype == ENCRYPTED_EXTENSIONS:
                alpn = parse_encrypted_extensions_alpn(body)
                if alpn and self.handshake is not None:
                    self.handshake = dataclasses.replace(self.handshake, alpn=tuple(alpn))
            elif mtype == FINISHED:
                if s.tls13_phase == "hs":
                    s.pending = "app"
            elif mtype == HS_KEY_UPDATE and s.tls13_phase == "app":
                s.pending = "update"
                req = body[0] if body else -1
                what = {0: "update_not_requested", 1: "update_requested"}.get(req, "request_update %d" % req)
                s.c.key_updates += 1
                out.append(TlsEvent(KEY_UPDATE, "%s: KeyUpdate (%s) at offset %d"
                                    % (self._where(s), what, start), s.d, start))
        except HelloError as e:
            out.append(TlsEvent(HANDSHAKE_ERROR, "%s: %s at offset %d" % (self._where(s), e, start), s.d, start))

    def _client_hello(self, s: _Side, body: bytes, start: int, out: list[Item]) -> None:
        del out, start
        ch = parse_client_hello(body)
        if self.client_direction is None:
            self.client_direction = s.d
        if self._ch is not None and self._sh is not None and self._version == TLS12:
            # renegotiation: a new handshake with its own randoms and master secret
            self._sh = None
            self._master = None
            self._master_tried = False
            self._kb = None
            self._session_hash = None
            self._enc_pms = None
        self._ch = ch
        self._transcript = None
        if not self._hello_retry and self.keys.get("CLIENT_RANDOM", ch.random) is None:
            # no master secret logged: a pre-master (RSA, PMS_CLIENT_RANDOM lines) may need the
            # extended master secret's session hash, the hash of the handshake up to the
            # ClientKeyExchange (RFC 7627 3)
            self._transcript = {"sha256": hashlib.sha256(), "sha384": hashlib.sha384()}
            for h in self._transcript.values():
                h.update(b"\x01" + len(body).to_bytes(3, "big") + body)

    def _server_hello(self, s: _Side, body: bytes, start: int, out: list[Item]) -> None:
        sh = parse_server_hello(body)
        ch = self._ch
        if sh.hello_retry:
            self._hello_retry = True
            return
        self._sh = sh
        version = sh.version
        self._version = version
        suite = SUITES.get(sh.cipher_suite)
        self._suite = suite
        client = s.d ^ 1 if self.client_direction is None else self.client_direction
        if self.client_direction is None:
            self.client_direction = client
        cr = ch.random if ch is not None else b""
        if version == TLS13:
            resumed = sh.psk_accepted
            kx = ("PSK+(EC)DHE" if sh.key_share else "PSK") if resumed else "(EC)DHE"
            ems = etm = False
        else:
            resumed = bool(ch is not None and ch.session_id and ch.session_id == sh.session_id)
            kx = suite.key_exchange if suite is not None else "?"
            ems = bool(ch is not None and ch.extended_master_secret and sh.extended_master_secret)
            etm = bool(ch is not None and ch.encrypt_then_mac and sh.encrypt_then_mac
                       and suite is not None and suite.cipher == CBC)
        decryptable = suite is not None and version in (TLS12, TLS13) and suite.tls13 == (version == TLS13)
        info = HandshakeInfo(version_name(version), version, suite_name(sh.cipher_suite), sh.cipher_suite,
                             resumed, cr.hex(), kx, ch.sni if ch else None, tuple(sh.alpn),
                             ems, etm, self._hello_retry, decryptable)
        self.handshake = info
        out.append(TlsEvent(HANDSHAKE, "%s%s" % (self._prefix(), info.describe()), s.d, start, 0, False, info))
        if self._transcript is not None:
            if version == TLS12 and suite is not None:
                # only the PRF hash's transcript is needed from here (extended master secret)
                self._transcript = {suite.prf: self._transcript[suite.prf]}
            else:
                self._transcript = None
        if not decryptable:
            if version in (TLS12, TLS13):
                self._unsupported = "cipher suite %s" % suite_name(sh.cipher_suite)
            else:
                self._unsupported = "version %s" % version_name(version)
            out.append(TlsEvent(UNSUPPORTED, "%s%s with %s: kwire does not decrypt it" % (
                self._prefix(), version_name(version), suite_name(sh.cipher_suite)), None, start))
            for side in self._sides:
                side.nokey_reason = "unsupported"
                if version == TLS13:
                    side.tls13_phase = "hs"
                    side.mode = _NOKEY
            self.no_key = True
            return
        if version == TLS13:
            assert suite is not None
            self._setup13(self._sides[client], "CLIENT", cr, suite)
            self._setup13(self._sides[client ^ 1], "SERVER", cr, suite)

    def _setup13(self, s: _Side, who: str, cr: bytes, suite: Suite) -> None:
        """TLS 1.3 after the ServerHello: the side's records are encrypted from now on."""
        hs = self.keys.get(who + "_HANDSHAKE_TRAFFIC_SECRET", cr)
        app = self.keys.get(who + "_TRAFFIC_SECRET_0", cr)
        s.app_secret = app
        s.tls13_phase = "hs"
        s.rec_version = TLS12
        s.seq = 0
        if hs is None and app is None:
            s.mode = _NOKEY
            s.nokey_reason = "no-key"
            self.no_key = True
            return
        s.mode = _ENC
        if hs is not None:
            s.cipher = cipher13(suite, hs.reveal())
        else:
            # no handshake secret: the handshake records fail and are counted; _retry switches to
            # the application keys at the first record they open
            s.cipher = _NeverCipher()

    def _client_key_exchange(self, body: bytes) -> None:
        suite = self._suite
        if suite is not None and suite.key_exchange == "RSA" and len(body) >= 2:
            n = body[0] << 8 | body[1]
            if n == len(body) - 2:
                self._enc_pms = body[2:]
        if self._transcript is not None and suite is not None and suite.prf in self._transcript:
            self._session_hash = self._transcript[suite.prf].digest()
            self._transcript = None

    def _resolve_master(self) -> Secret | None:
        if self._master_tried:
            return self._master
        self._master_tried = True
        ch, sh, suite = self._ch, self._sh, self._suite
        if ch is None or sh is None or suite is None:
            return None
        keys = self.keys
        m = keys.get("CLIENT_RANDOM", ch.random)
        if m is None and ch.session_id and ch.session_id == sh.session_id:
            m = keys.session(b"id:" + ch.session_id)
        if m is None and ch.session_ticket:
            m = keys.session(b"ticket:" + ch.session_ticket)
        if m is None:
            pms = keys.get("PMS_CLIENT_RANDOM", ch.random)
            if pms is None and self._enc_pms is not None:
                pms = keys.rsa_premaster(self._enc_pms)
            if pms is not None:
                ems = ch.extended_master_secret and sh.extended_master_secret
                if ems and self._session_hash is None:
                    return None
                m = Secret(master_from_premaster(suite.prf, pms.reveal(), ch.random, sh.random,
                                                 self._session_hash if ems else None))
        self._master = m
        if m is not None:
            if sh.session_id:
                keys.remember_session(b"id:" + sh.session_id, m)
            if self._ticket12:
                keys.remember_session(b"ticket:" + self._ticket12, m)
        return m

    def _change_cipher_spec(self, s: _Side, start: int, out: list[Item]) -> None:
        del start, out
        if self._version == TLS13 or s.tls13_phase:
            return
        suite = self._suite
        if self._sh is None or self._ch is None:
            s.mode = _NOKEY
            s.nokey_reason = s.nokey_reason or "no-client-hello"
            self.no_key = True
            return
        if suite is None or suite.tls13 or self._version != TLS12:
            s.mode = _NOKEY
            s.nokey_reason = "unsupported"
            self.no_key = True
            return
        master = self._resolve_master()
        if master is None:
            s.mode = _NOKEY
            s.nokey_reason = "no-key"
            self.no_key = True
            return
        if self._kb is None:
            self._kb = KeyBlock12(suite, master.reveal(), self._ch.random, self._sh.random)
        client = s.d == self.client_direction
        etm = self.handshake.encrypt_then_mac if self.handshake else False
        s.cipher = cipher12(suite, self._kb, client, etm)
        s.seq = 0
        s.mode = _ENC
        s.rec_version = None

    def _key_change(self, s: _Side, out: list[Item]) -> None:
        what = s.pending
        s.pending = None
        suite = self._suite
        if suite is None:
            return
        if what == "app":
            if s.app_secret is None:
                s.mode = _NOKEY
                s.nokey_reason = "no-key"
                self.no_key = True
                s.cipher = None
                return
            s.secret = s.app_secret.reveal()
            s.cipher = cipher13(suite, s.secret)
            s.tls13_phase = "app"
            s.seq = 0
        elif what == "update" and s.secret is not None:
            s.secret = next_traffic_secret(suite.prf, s.secret)
            s.cipher = cipher13(suite, s.secret)
            s.seq = 0
        del out

    def _alert(self, s: _Side, body: bytes, start: int, encrypted: bool, out: list[Item]) -> None:
        if len(body) < 2:
            out.append(TlsEvent(ALERT, "%s: alert of %d bytes at offset %d" % (self._where(s), len(body), start),
                                s.d, start))
            return
        level = ALERT_LEVELS.get(body[0], "level %d" % body[0])
        name = ALERT_NAMES.get(body[1], "alert %d" % body[1])
        out.append(TlsEvent(ALERT, "%s: %s alert %s%s at offset %d" % (
            self._where(s), level, name, "" if encrypted else " (in the clear)", start), s.d, start))


class _NeverCipher(RecordCipher):
    """Stands for TLS 1.3 handshake keys that were not logged: every record fails, and
    ``_retry`` then tries the application keys."""

    __slots__ = ()
    tls13 = True

    def __init__(self) -> None:
        super().__init__()
        self.overhead = 17

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        del seq, ctype, version, body
        raise DecryptFailed("no handshake traffic secret logged")
