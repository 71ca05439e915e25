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

from typing import Any

from .events import (
    BAD_RECORD,
    DECRYPT_FAILED,
    HANDSHAKE_ERROR,
    NOT_DECRYPTED,
    RESYNC,
    TRUNCATED,
    HandshakeInfo,
    Plaintext,
    SideCounters,
    TlsEvent,
)
from .fast import FastRecords
from .handshake import MAX_HANDSHAKE, Handshake
from .keylog import KeyLog
from .keys import Aead13, DecryptFailed
from .recovery import Recovery
from .side import ENC, FAILED, MAX_RECORD, PLAIN, TYPES, Item, Side, hole
from .suites import ALERT as CT_ALERT
from .suites import APPLICATION_DATA, CHANGE_CIPHER_SPEC, CLIENT_HELLO, TLS12
from .suites import HANDSHAKE as CT_HANDSHAKE

_tnew = tuple.__new__

__all__ = ["MAX_HANDSHAKE", "MAX_RECORD", "TlsConnection", "looks_like_client_hello", "looks_like_tls_record"]


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
    if n >= 1 and data[0] not in TYPES:
        return False
    if n >= 2 and data[1] != 3:
        return False
    if n >= 3 and data[2] > 4:
        return False
    if n >= 5:
        return (data[3] << 8 | data[4]) <= MAX_RECORD
    return None


class TlsConnection(FastRecords):
    """Decrypts one TCP connection's TLS records with the secrets of ``keys`` (a ``KeyLog``): the
    record layer. The handshake and key schedule are a ``Handshake``; finding records again after
    a gap or bad bytes is ``Recovery``'s.

    ``handshake``: a ``HandshakeInfo`` once the ServerHello was read (also in the ``handshake``
    event); ``client_direction``: the label whose first record was a ClientHello; ``counters``:
    a ``SideCounters`` per direction label; ``no_key``: True once the connection is known to have
    no secrets in ``keys``; ``label``: how messages name the connection (default none).

    ``direct``: per direction label, the native opener (``keys.native_opener``) that holds the
    direction's record state while it reads whole TLS 1.3 application data records under a key
    with one (None otherwise): ``direct[d].feed(data, out)`` reads the records at the start of the
    next bytes ``data`` (a bytes object) as ``feed`` would, their plaintexts appended to ``out``
    as bytes, and returns where it stopped; the rest, if any, goes to ``feed``
    (``FastRecords._detach``).
    """

    __slots__ = ("keys", "direct", "_sides", "_hs", "_recovery", "_finished")

    def __init__(self, keys: KeyLog, label: str = ""):
        self.keys = keys
        self.direct: list[Any] = [None, None]
        self._sides = (Side(0), Side(1))
        self._hs = Handshake(keys, self._sides, label)
        self._recovery = Recovery(self._hs)
        self._finished = False

    @property
    def label(self) -> str:
        return self._hs.label

    @label.setter
    def label(self, value: str) -> None:
        self._hs.label = value

    @property
    def handshake(self) -> HandshakeInfo | None:
        return self._hs.info

    @property
    def client_direction(self) -> int | None:
        return self._hs.client_direction

    @property
    def no_key(self) -> bool:
        return self._hs.no_key

    def __repr__(self) -> str:
        hs = self.handshake.describe() if self.handshake else "no handshake yet"
        return "<TlsConnection %s%s>" % (self.label + " " if self.label else "", hs)

    @property
    def counters(self) -> tuple[SideCounters, SideCounters]:
        for s in self._sides:
            if self.direct[s.d] is not None:
                self._detach(s)
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
        f = self.direct[direction]
        if f is not None:
            # TLS 1.3 application data, the state held natively: whole records straight from
            # ``data``; the rest, if any, below
            if data.__class__ is bytes:
                p = f.feed(data, out, Plaintext)
                if p == len(data):
                    return out
                data = data[p:]
            self._detach(s)
        n = len(data)
        if n:
            s.c.fed += n
            buf = s.buf
            if buf:
                if len(buf) >= 5 and n < 5 + (buf[3] << 8 | buf[4]) - len(buf) and not s.scanning:
                    buf += data       # one more piece of a record that is still incomplete
                    return out
            elif s.tls13_phase == "app" and data.__class__ is bytes and s.mode == ENC and not s.scanning \
                    and not s.skip and s.cipher.__class__ is Aead13:
                # TLS 1.3 application data: whole records straight from ``data``, the rest below
                p = self._app13(s, data, 0, out)
                if p == n:
                    return out
                if p:
                    data = data[p:]
            self._consume(s, data if data.__class__ is bytes else memoryview(data).cast("B"), out)
            if s.tls13_phase == "app" and not s.buf:
                self._attach(s)
        return out

    def gap(self, direction: int, nbytes: int) -> list[Item]:
        """Say that ``nbytes`` of a direction's stream were lost (after what was fed so far)."""
        s = self._side(direction)
        out: list[Item] = []
        if self.direct[direction] is not None:
            self._detach(s)
        if nbytes > 0:
            self._candidate_ends(s, out)
            self._recovery.gap(s, nbytes, out)
        return out

    def _candidate_ends(self, s: Side, out: list[Item]) -> None:
        """The stream of ``s`` ends, or breaks at a gap, while the search after a gap waits for a
        candidate record (bytes that read as a header claiming more than is there): the bytes it
        waits for will not come after what is buffered, so it is none, and real records may start
        inside it: the search goes on there."""
        while s.scanning and s.scan_wait and s.buf and not s.skip:
            data = bytes(s.buf)
            s.buf = bytearray()
            s.scan_wait = 0
            mv = memoryview(data)
            p = self._recovery.scan(s, mv, 0, out, True)
            if p < len(data):
                self._walk(s, data, mv, p, out)
            if s.scan_wait and len(s.buf) >= len(data):
                break       # a candidate only the next header could confirm: as before

    def finish(self) -> list[Item]:
        """The stream ended: report a record cut short, bytes not decrypted and missing keys."""
        out: list[Item] = []
        if self._finished:
            return out
        self._finished = True
        for s in self._sides:
            if self.direct[s.d] is not None:
                self._detach(s)
            if s.scanning:
                self._candidate_ends(s, out)
            if s.scanning and (s.buf or s.scan_lost):
                n = len(s.buf)
                s.c.skipped += n
                out.append(TlsEvent(RESYNC, "%s: no record found again after offset %d; %d bytes skipped to the end"
                                    % (self._hs.where(s), s.scan_from, s.pos + n - s.scan_from),
                                    s.d, s.scan_from, n, False))
                s.buf = bytearray()
            elif s.buf:
                n = len(s.buf)
                want = 5 + (s.buf[3] << 8 | s.buf[4]) if n >= 5 else 5
                s.c.truncated += n
                out.append(TlsEvent(TRUNCATED, "%s: the stream ends inside a record at offset %d (%d of %d bytes)"
                                    % (self._hs.where(s), s.pos, n, want), s.d, s.pos, n, True))
                s.buf = bytearray()
            if s.hs:
                out.append(TlsEvent(HANDSHAKE_ERROR, "%s: the stream ends inside a handshake message (%d bytes of it)"
                                    % (self._hs.where(s), len(s.hs)), s.d, None, len(s.hs)))
                s.hs = bytearray()
            if s.failed_records:
                out.append(TlsEvent(NOT_DECRYPTED, "%s: %d records (%d bytes) did not decrypt"
                                    % (self._hs.where(s), s.failed_records, s.failed_bytes), s.d, None, s.failed_bytes))
        ev = self._hs.no_key_event()
        if ev is not None:
            out.append(ev)
        return out

    # -- records -----------------------------------------------------------------------------------

    def _side(self, direction: int) -> Side:
        if direction not in (0, 1):
            raise ValueError("direction must be 0 or 1, not %r" % (direction,))
        if self._finished:
            raise ValueError("feed or gap after finish")
        return self._sides[direction]

    def _consume(self, s: Side, data: bytes | memoryview, out: list[Item]) -> None:
        """The next bytes of ``s``: the usual case here (the rest of a buffered record, then whole
        records), anything else (bytes to skip, the search for a record header) in ``_walk``."""
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if s.scanning or s.skip:
            if s.scanning and s.scan_wait and len(s.buf) + len(data) < s.scan_wait and not s.skip:
                s.buf += data        # a candidate record found while scanning is still incomplete
                return
            self._walk(s, data, mv, 0, out)
            return
        n = len(data)
        p = 0
        if s.buf:
            p = self._complete(s, mv, 0, out)
            if p == n or s.buf or s.scanning or s.skip:
                if p < n:
                    self._walk(s, data, mv, p, out)
                return
        # records wholly inside ``data``: no copy (as ``_records``, inline: the common path)
        record = self._record
        while n - p >= 5:
            ctype = data[p]
            while ctype == APPLICATION_DATA and s.tls13_phase and s.mode == ENC and s.cipher.__class__ is Aead13:
                # TLS 1.3 records under an AEAD: runs of them in one native call each where it can
                q = self._app13(s, data, p, out) if s.tls13_phase == "app" else self._hs13(s, data, p, out)
                if s.scanning or s.skip:
                    self._walk(s, data, mv, q, out)
                    return
                if q == p or n - q < 5:
                    p = q
                    break
                p = q
                ctype = data[p]
            if n - p < 5:
                break
            ln = data[p + 3] << 8 | data[p + 4]
            if ctype not in TYPES or data[p + 1] != 3 or data[p + 2] > 4 or ln > MAX_RECORD:
                self._walk(s, data, mv, p, out)
                return
            end = p + 5 + ln
            if end > n:
                break
            version = data[p + 1] << 8 | data[p + 2]
            if ctype == CHANGE_CIPHER_SPEC and s.tls13_phase and s.mode == ENC:
                c = s.c             # as _record counts it, inline: TLS 1.3 middlebox compatibility
                c.records += 1
                c.plain += end - p
            elif ctype == CT_HANDSHAKE and s.mode == PLAIN:
                c = s.c             # as _record reads it, inline: the hellos
                c.records += 1
                c.plain += end - p
                self._hs.data(s, data[p + 5:end] if data.__class__ is bytes else bytes(mv[p + 5:end]), s.pos, out)
                if s.pending:
                    self._hs.key_change(s, out)
            elif ctype != APPLICATION_DATA or s.mode != ENC or not self._fast(s, version, mv[p + 5:end], s.pos, out):
                record(s, ctype, version, mv[p + 5:end], s.pos, out)
            s.pos += end - p
            p = end
            if s.scanning or s.skip:
                self._walk(s, data, mv, p, out)
                return
        if p < n:
            s.buf = bytearray(mv[p:])

    def _walk(self, s: Side, data: bytes | memoryview, mv: memoryview, p: int, out: list[Item]) -> None:
        """``data[p:]`` in any state: records, bytes to skip, and, while scanning, the search for
        a record header; one pass, the parts handing a position to each other."""
        n = len(data)
        while p < n:
            if s.skip:
                k = min(s.skip, n - p)
                s.skip -= k
                s.c.skipped += k
                s.pos += k
                p += k
            elif s.scanning:
                if s.buf:
                    # bytes kept from the last search (at most a record) go before the new ones
                    data = bytes(s.buf) + bytes(mv[p:])
                    s.buf = bytearray()
                    mv = memoryview(data)
                    n = len(data)
                    p = 0
                p = self._recovery.scan(s, mv, p, out)
            elif s.buf:
                p = self._complete(s, mv, p, out)
            else:
                p = self._records(s, data, mv, p, out)

    def _complete(self, s: Side, mv: memoryview, p: int, out: list[Item]) -> int:
        """Complete the record buffered in ``s.buf`` with ``mv[p:]``: where its bytes end."""
        buf = s.buf
        n = len(mv)
        if len(buf) < 5:
            k = min(5 - len(buf), n - p)
            buf += mv[p:p + k]
            p += k
            if len(buf) < 5:
                return p
            bad = self._bad_header(s, buf[0], buf[1], buf[2], buf[3] << 8 | buf[4])
            if bad:
                self._bad(s, bad, out)      # the search starts at buf[0]
                return p
        total = 5 + (buf[3] << 8 | buf[4])
        k = min(total - len(buf), n - p)
        buf += mv[p:p + k]
        p += k
        if len(buf) < total:
            return p
        s.buf = bytearray()      # the complete record is ours now: no copy
        self._record(s, buf[0], buf[1] << 8 | buf[2], memoryview(buf)[5:], s.pos, out)
        s.pos += total
        return p

    def _records(self, s: Side, data: bytes | memoryview, mv: memoryview, p: int, out: list[Item]) -> int:
        """Records wholly inside ``data`` from ``p``, without a copy (the last, incomplete one is
        buffered): where the walk stopped (a bad header, or a record that changed the state)."""
        n = len(data)
        record = self._record
        while n - p >= 5:
            ctype = data[p]
            ln = data[p + 3] << 8 | data[p + 4]
            if ctype not in TYPES or data[p + 1] != 3 or data[p + 2] > 4 or ln > MAX_RECORD:
                bad = self._bad_header(s, ctype, data[p + 1], data[p + 2], ln)
                if bad:
                    self._bad(s, bad, out)
                    return p
            end = p + 5 + ln
            if end > n:
                break
            version = data[p + 1] << 8 | data[p + 2]
            if ctype != APPLICATION_DATA or s.mode != ENC or not self._fast(s, version, mv[p + 5:end], s.pos, out):
                record(s, ctype, version, mv[p + 5:end], s.pos, out)
            s.pos += end - p
            p = end
            if s.scanning or s.skip:   # the record changed the state (not expected, but be safe)
                return p
        if p < n:
            s.buf = bytearray(mv[p:])
        return n

    def _bad_header(self, s: Side, ctype: int, major: int, minor: int, ln: int) -> str:
        if ctype not in TYPES:
            return "content type %d is not TLS's" % ctype
        if major != 3 or minor > 4:
            return "record version 0x%02x%02x is not TLS's" % (major, minor)
        if ln > MAX_RECORD:
            return "record length %d is over 2^14+2048" % ln
        del s
        return ""

    def _bad(self, s: Side, reason: str, out: list[Item]) -> None:
        hole(s, BAD_RECORD, "%s: no TLS record at offset %d: %s" % (self._hs.where(s), s.pos, reason),
             s.pos, 0, out)
        self._recovery.start(s, 0)

    def _record(self, s: Side, ctype: int, version: int, body: memoryview, start: int, out: list[Item]) -> None:
        c = s.c
        c.records += 1
        total = 5 + len(body)
        mode = s.mode
        if mode == ENC:
            if ctype == CHANGE_CIPHER_SPEC and s.tls13_phase:
                c.plain += total       # TLS 1.3 middlebox compatibility: never encrypted, no meaning
                return
            if ctype == CT_ALERT and s.tls13_phase and len(body) == 2:
                c.plain += total       # an alert sent in the clear before the peer switched keys
                self._hs.alert(s, bytes(body), start, False, out)
                return
            cipher = s.cipher
            assert cipher is not None
            try:
                pt = cipher.decrypt(s.seq, ctype, version, body)
            except DecryptFailed as e:
                found = self._recovery.retry(s, ctype, version, body)
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
                self._hs.key_change(s, out)
            return
        if mode == PLAIN:
            if ctype == CT_HANDSHAKE:
                c.plain += total
                self._hs.data(s, bytes(body), start, out)
            elif ctype == CHANGE_CIPHER_SPEC:
                c.plain += total
                self._hs.change_cipher_spec(s, start, out)
                return
            elif ctype == CT_ALERT:
                c.plain += total
                self._hs.alert(s, bytes(body), start, False, out)
            elif ctype == APPLICATION_DATA:
                if self._hs.sh is not None and self._hs.version == TLS12 and not s.nokey_reason:
                    # its change_cipher_spec was lost (a gap): the keys start here
                    self._hs.change_cipher_spec(s, start, out)
                    if s.mode == ENC:
                        c.records -= 1
                        self._record(s, ctype, version, body, start, out)
                    else:
                        c.undecrypted += total
                    return
                self._hs.early_application_data(s, start, total, out)
            else:
                c.plain += total
            if s.pending:
                self._hs.key_change(s, out)
            return
        # no key, or given up
        if ctype == CHANGE_CIPHER_SPEC and s.tls13_phase:
            c.plain += total
        else:
            c.undecrypted += total
            if mode == FAILED:
                s.failed_records += 1
                s.failed_bytes += total

    def _content(self, s: Side, ctype: int, pt: bytes, start: int, end: int, out: list[Item]) -> None:
        """The plaintext of a decrypted record (TLS 1.3: the inner plaintext)."""
        if s.tls13_phase:
            inner = pt.rstrip(b"\x00") if not pt or not pt[-1] else pt    # padding is zeros
            if not inner:
                hole(s, DECRYPT_FAILED, "%s: record at offset %d decrypted to padding only, no content type"
                     % (self._hs.where(s), start), start, end - start, out)
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
            self._hs.data(s, pt, start, out)
        elif ctype == CT_ALERT:
            self._hs.alert(s, pt, start, True, out)
        elif ctype == CHANGE_CIPHER_SPEC:
            self._hs.change_cipher_spec(s, start, out)

    # -- failures, gaps and finding records again ------------------------------------------------

    def _failed(self, s: Side, reason: str, start: int, total: int, out: list[Item]) -> None:
        s.c.undecrypted += total
        s.failed_records += 1
        s.failed_bytes += total
        s.fails += 1
        if s.cipher is not None and not self._hs.offers_early_data(s):
            s.seq += 1      # the record used a sequence number even if it did not authenticate
        hole(s, DECRYPT_FAILED, "%s: record at offset %d (%d bytes) not decrypted: %s"
             % (self._hs.where(s), start, total, reason), start, total, out)
