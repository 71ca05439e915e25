"""The record layer's fast paths for AEAD records (``connection.TlsConnection`` inherits them):
TLS 1.3 runs of records under one key opened in one native call where there is one
(``keys.native_opener``: the loops of ``_records13.c`` over OpenSSL's libcrypto), and the common
record of any version, application data that decrypts under the expected sequence number. Each
reads records exactly as the general path (``TlsConnection._record``) would and stops, handing
back where, at the first one it does not complete; tests/test_tls_native.py holds the native and
Python paths to the same results.
"""
from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidTag

from .events import Plaintext
from .handshake import Handshake
from .keys import Aead13, DecryptFailed
from .side import ENC, MAX_RECORD, Item, Side
from .suites import APPLICATION_DATA
from .suites import HANDSHAKE as CT_HANDSHAKE

_tnew = tuple.__new__


class FastRecords:
    """The fast paths (a mixin of ``TlsConnection``: ``_hs`` is its handshake, ``_content`` how
    it reads a decrypted record's plaintext)."""

    __slots__ = ()
    _hs: Handshake
    direct: list[Any]

    def _content(self, s: Side, ctype: int, pt: bytes, start: int, end: int, out: list[Item]) -> None:
        raise NotImplementedError

    def _app13(self, s: Side, data: bytes | memoryview, p: int, out: list[Item]) -> int:
        """TLS 1.3 application data records wholly inside ``data`` from ``p``, under ``s``'s
        application keys (an ``Aead13``), with no intermediate object: the AEAD called on slices
        of ``data`` (the record header as it came is the additional data), counters kept in
        locals. Stops at the first record it does not complete (another type, cut short, not
        authenticating, or no plain application data inside): where that record starts, for
        the general path; or after a record whose content changed the state. With the native
        opener (``keys.native_opener``: the same loop in C over OpenSSL's libcrypto) the loop is
        one call; tests/test_tls_native.py holds the two to the same results."""
        cipher: Aead13 = s.cipher     # type: ignore[assignment]  # (the caller checked its class)
        if s.rec_version is None:
            return p        # the general path notes the record version first
        seq0 = s.seq
        pos0 = s.pos
        native = cipher.native
        if native is not None:
            # the same loop in one native call (keys.native_opener): it stops where this one does
            p, seq, pos, plain, pt = native.records(data, p, seq0, pos0, s.d, out, Plaintext)
            if pt is None:
                if seq != seq0:         # as _app13_done, inline (the usual case: whole records)
                    c = s.c
                    k = seq - seq0
                    s.seq = seq
                    c.records += k
                    c.decrypted += pos - pos0
                    s.enc_records += k
                    s.fails = 0
                    if plain:
                        s.broken = False
                        c.plaintext += plain
                    s.pos = pos
                return p
            total = len(pt) + 21       # header, inner plaintext and the 16-byte tag
            self._app13_done(s, seq, seq0, pos + total - pos0, plain)
            return self._app13_stop(s, pos, total, pt, p, out)
        return self._app13_python(s, cipher, data, p, out)

    def _app13_python(self, s: Side, cipher: Aead13, data: bytes | memoryview, p: int, out: list[Item]) -> int:
        """``_app13`` without a native opener: the loop over ``cryptography``'s AEAD."""
        aead, iv = cipher.open, cipher.iv
        n = len(data)
        seq = seq0 = s.seq
        pos = pos0 = s.pos
        d = s.d
        plain = 0
        while n - p >= 5 and data[p] == APPLICATION_DATA and data[p + 1] == 3 and data[p + 2] <= 4:
            end = p + 5 + (data[p + 3] << 8 | data[p + 4])
            if end > n or end - p > MAX_RECORD + 5:
                break
            try:
                pt = aead((iv ^ seq).to_bytes(12, "big"), data[p + 5:end], data[p:p + 5])
            except InvalidTag:
                break
            seq += 1
            total = end - p
            p = end
            if pt and pt[-1] == APPLICATION_DATA:
                if len(pt) > 1:
                    plain += len(pt) - 1
                    out.append(_tnew(Plaintext, (d, pt[:-1], pos, pos + total)))
                pos += total
                continue
            self._app13_done(s, seq, seq0, pos + total - pos0, plain)
            return self._app13_stop(s, pos, total, pt, p, out)
        self._app13_done(s, seq, seq0, pos - pos0, plain)
        s.pos = pos
        return p

    def _hs13(self, s: Side, data: bytes | memoryview, p: int, out: list[Item]) -> int:
        """TLS 1.3 records under ``s``'s handshake keys (an ``Aead13`` with a native opener)
        wholly inside ``data`` from ``p``: the run that authenticates opened in one native call
        (``opens``), then each read as ``_fast`` reads it; stops after a record that changed the
        keys or the state (the records after it, if any, are read again by the general path), or
        where the run stopped: where the next record starts."""
        cipher: Aead13 = s.cipher     # type: ignore[assignment]  # (the caller checked its class)
        native = cipher.native
        if native is None or s.rec_version is None:
            return p
        pts = native.opens(data, p, s.seq)[2]
        c = s.c
        start = s.pos
        for pt in pts:
            total = len(pt) + 21        # header, inner plaintext and the 16-byte tag
            s.seq += 1
            c.records += 1
            c.decrypted += total
            s.enc_records += 1
            s.fails = 0
            if pt and pt[-1] == APPLICATION_DATA:
                pt = pt[:-1]
                if pt:
                    s.broken = False
                    c.plaintext += len(pt)
                    out.append(_tnew(Plaintext, (s.d, pt, start, start + total)))
            else:
                if pt and pt[-1] == CT_HANDSHAKE:
                    self._hs.data(s, pt[:-1], start, out)     # as _content reads it: no padding
                else:
                    self._content(s, APPLICATION_DATA, pt, start, start + total, out)
                if s.pending:
                    self._hs.key_change(s, out)
            start += total
            s.pos = start
            p += total
            if s.cipher is not cipher or s.mode != ENC or s.scanning or s.skip or s.tls13_phase != "hs":
                break
        return p

    def _app13_stop(self, s: Side, pos: int, total: int, pt: bytes, p: int, out: list[Item]) -> int:
        """``_app13`` stopped after a record (at ``pos``, ``total`` bytes, ending at ``p`` in
        its data; the counters counted it) whose inner plaintext ``pt`` is padded, or a handshake
        message or an alert: the general path reads it."""
        s.pos = pos
        if pt and pt[-1] == CT_HANDSHAKE:
            self._hs.data(s, pt[:-1], pos, out)     # as _content reads it: no padding (the usual case)
        else:
            self._content(s, APPLICATION_DATA, pt, pos, pos + total, out)
        if s.pending:
            self._hs.key_change(s, out)
        s.pos = pos + total
        return p

    def _attach(self, s: Side) -> None:
        """After the general path: ``s`` reads TLS 1.3 application data under a key with a native
        opener, no record, handshake message or search under way: the opener holds its record
        state from here (``direct``; it also reads the records of whole NewSessionTicket
        messages, which change nothing here)."""
        cipher = s.cipher
        if s.mode == ENC and cipher.__class__ is Aead13 and not s.scanning and not s.skip and not s.pending \
                and s.rec_version is not None and not s.hs and not s.hs_skip:
            native = cipher.native      # (an Aead13)
            if native is not None:
                native.attach(s.seq, s.pos, s.d)
                self.direct[s.d] = native

    def _detach(self, s: Side) -> None:
        """The general path reads ``s`` from here: its record state and counters back from the
        native opener that held them (as ``_app13_done`` counts)."""
        seq, pos, k, nbytes, plain, fed = self.direct[s.d].detach()
        self.direct[s.d] = None
        s.c.fed += fed
        s.pos = pos
        self._app13_done(s, seq, seq - k, nbytes, plain)

    @staticmethod
    def _app13_done(s: Side, seq: int, seq0: int, nbytes: int, plain: int) -> None:
        """Bring ``s``'s counters up to date after ``_app13``'s records: ``seq - seq0`` records
        of ``nbytes`` bytes, ``plain`` bytes of plaintext handed back."""
        k = seq - seq0
        if k:
            c = s.c
            s.seq = seq
            c.records += k
            c.decrypted += nbytes
            s.enc_records += k
            s.fails = 0
            if plain:
                s.broken = False
                c.plaintext += plain

    def _fast(self, s: Side, version: int, body: memoryview, start: int, out: list[Item]) -> bool:
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
                    self._hs.key_change(s, out)
                return True
        if pt:
            s.broken = False
            c.plaintext += len(pt)
            out.append(Plaintext(s.d, pt, start, start + total))
        return True
