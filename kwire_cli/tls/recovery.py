"""Record-boundary recovery: finding a direction's records again after a gap or bytes that are
no record header, and the sequence number a record has when records were lost.

After a gap or bad bytes a direction is ``scanning``: the next plausible record header is looked
for and, with keys, accepted only when its record decrypts, under the sequence numbers around the
estimate of how many records were lost (and, in TLS 1.3, under the next KeyUpdate's keys); without
keys, when the header after it is plausible too. A record that fails under the expected sequence
number is tried under the next few (``retry``).
"""
from __future__ import annotations

import re
from functools import cache

from .events import GAP, RESYNC, TlsEvent
from .handshake import Handshake
from .keys import Cbc12, DecryptFailed
from .side import ENC, FAILED, MAX_RECORD, TYPES, Item, Side, hole
from .suites import ALERT as CT_ALERT
from .suites import APPLICATION_DATA, CHANGE_CIPHER_SPEC, CONTENT_TYPES

SEQ_WINDOW = 64                   # sequence numbers tried at least after a gap (a quarter after a failed record)
MAX_TRIALS = 4096                 # ... and at most, for small records
TRIAL_BYTES = 4 << 20             # bytes of trial decryption per record candidate after a gap
FAILS_BEFORE_QUIET = 4            # failed records after which no window is searched on failure
RESYNC_CANDIDATES = 32            # plausible headers tried before a direction gives up decrypting


assert frozenset(range(0x14, 0x19)) == TYPES


@cache
def _header_pattern(version: int | None) -> re.Pattern[bytes]:
    """A record header's type and version bytes: any of TLS's content types (20-24), then 3, then
    the direction's record version's minor byte once known."""
    tail = re.escape(bytes((version & 0xFF,))) if version is not None else b""
    return re.compile(rb"[\x14-\x18]\x03" + tail)



def _lost_record(s: Side) -> None:
    """A record of known position was lost in a gap: it had a sequence number."""
    if s.mode == ENC:
        s.seq += 1


class Recovery:
    """Finds records again for the sides of one connection (``hs``: its handshake, for the
    keys and for naming the connection)."""

    __slots__ = ("hs",)

    def __init__(self, hs: Handshake):
        self.hs = hs

    def gap(self, s: Side, nbytes: int, out: list[Item]) -> None:
        """``nbytes`` (> 0) of ``s``'s stream were lost after what was fed: the record they cut is
        dropped, and, unless the next record's start is known, the search for it begins."""
        s.c.lost += nbytes
        where = self.hs.where(s)
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
                hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, k, at), at, k, out)
                return
        if s.scanning:
            hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, nbytes, at), at, nbytes, out)
            # bytes buffered before the gap cannot start a record that continues after it
            s.c.skipped += len(s.buf)
            s.pos += len(s.buf) + nbytes
            s.buf = bytearray()
            s.scan_wait = 0
            s.scan_lost += nbytes
            return
        buf = s.buf
        if len(buf) >= 5:
            total = 5 + (buf[3] << 8 | buf[4])
            rest = total - len(buf)
            hole(s, GAP, "%s: %d bytes lost at offset %d, inside the %s record at offset %d"
                 % (where, nbytes, at, CONTENT_TYPES.get(buf[0], "?"), s.pos), at, nbytes, out)
            if nbytes <= rest:
                # the record is damaged, the next one starts right after it: drop what is left
                s.c.skipped += len(buf)
                s.skip = rest - nbytes
                s.pos += total - s.skip
                s.buf = bytearray()
                _lost_record(s)
                return
            s.c.skipped += len(buf)
            s.pos += total
            s.buf = bytearray()
            _lost_record(s)
            nbytes -= rest
        else:
            hole(s, GAP, "%s: %d bytes lost at offset %d" % (where, nbytes, at), at, nbytes, out)
            s.c.skipped += len(buf)
            s.pos += len(buf)
            s.buf = bytearray()
        # records of unknown number and size were lost: look for the next header
        s.pos += nbytes
        self.start(s, nbytes, first_seq)
        s.scan_from = rec_start

    def start(self, s: Side, lost: int, first_seq: int | None = None) -> None:
        if not s.scanning:
            s.scanning = True
            s.scan_from = s.pos - lost
            s.scan_lost = lost
            s.scan_seq = s.seq
            s.scan_first_seq = s.seq if first_seq is None else first_seq
            s.scan_tries = 0
            s.scan_wait = 0
        else:
            s.scan_lost += lost

    def _plausible(self, s: Side, b: bytes | bytearray | memoryview, i: int) -> bool:
        ctype = b[i]
        if ctype not in TYPES or b[i + 1] != 3:
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
        if s.mode == ENC and s.cipher is not None:
            if ln < s.cipher.overhead:
                return False
            if s.tls13_phase and ctype not in (APPLICATION_DATA, CHANGE_CIPHER_SPEC, CT_ALERT):
                return False
        return True

    def _find_header(self, s: Side, buf: memoryview, i: int) -> int:
        """The first plausible record header in ``buf[i:]`` (-1: none): one regular expression
        search for the type and version bytes from where the last one stopped (linear in the
        bytes searched), each match checked by ``_plausible``."""
        n = len(buf)
        pattern = _header_pattern(s.rec_version)
        while i + 5 <= n:
            m = pattern.search(buf, i)
            if m is None:
                return -1
            j = m.start()
            if j + 5 > n:
                return -1
            if self._plausible(s, buf, j):
                return j
            i = j + 1
        return -1

    def scan(self, s: Side, buf: memoryview, p: int, out: list[Item], at_end: bool = False) -> int:
        """Look for the next record in ``buf[p:]`` (``buf[p]`` at stream offset ``s.pos``): where
        the record found starts (``s.scanning`` is then False), or ``len(buf)`` with the bytes that
        may still start one (at most a record) kept in ``s.buf``. ``at_end``: the stream ends with
        ``buf``, so a candidate running past its end is no record (the search goes on inside it)."""
        n = len(buf)
        while True:
            found = self._find_header(s, buf, p)
            if found < 0:
                keep = max(p, n - 4)
                s.c.skipped += keep - p
                s.pos += keep - p
                s.hole_bytes += keep - p
                s.buf = bytearray(buf[keep:])
                s.scan_wait = 0
                return n
            if found > p:
                s.c.skipped += found - p
                s.pos += found - p
                s.hole_bytes += found - p
                p = found
            total = 5 + (buf[p + 3] << 8 | buf[p + 4])
            if n - p < total and at_end:
                s.c.skipped += 1
                s.pos += 1
                s.hole_bytes += 1
                p += 1
                continue
            if n - p < total:
                # wait for the whole candidate record (at most one record buffered)
                s.buf = bytearray(buf[p:])
                s.scan_wait = total
                return n
            ok = self._try_candidate(s, buf, p, total)
            if ok is None:     # cannot tell yet (need the next header): wait
                s.buf = bytearray(buf[p:])
                s.scan_wait = total + 5
                return n
            if not ok:
                s.c.skipped += 1
                s.pos += 1
                s.hole_bytes += 1
                p += 1
                continue
            # found: the record parser goes on from the candidate
            s.scanning = False
            s.scan_wait = 0
            skipped = s.pos - s.scan_from
            msg = "%s: records found again at offset %d after %d bytes skipped from offset %d" % (
                self.hs.where(s), s.pos, skipped, s.scan_from)
            if s.mode == ENC and s.cipher is not None:
                lost = s.seq - s.scan_first_seq
                if lost:
                    msg += " (%d records lost, sequence numbers %d-%d)" % (lost, s.scan_first_seq, s.seq - 1)
            out.append(TlsEvent(RESYNC, msg, s.d, s.pos, skipped, False))
            return p

    def _try_candidate(self, s: Side, buf: memoryview, p: int, total: int) -> bool | None:
        """Is the record at buf[p:p + total] a real one? With keys: it decrypts (the sequence
        number and keys are updated); without: the next header (if any) is plausible too."""
        if s.mode == ENC and s.cipher is not None:
            ctype = buf[p]
            version = buf[p + 1] << 8 | buf[p + 2]
            if s.tls13_phase and ctype != APPLICATION_DATA:
                return self._chain_ok(s, buf, p, total)
            body = bytes(buf[p + 5:p + total])
            found = self._search(s, ctype, version, body, self._seq_candidates(s, len(body)))
            if found is not None:
                s.seq = found[0]
                return True
            s.scan_tries += 1
            if s.scan_tries >= RESYNC_CANDIDATES:
                # plausible records that do not decrypt under any nearby sequence number: give up
                # decrypting this direction, keep walking its records to count them
                s.mode = FAILED
                return self._chain_ok(s, buf, p, total)
            return False
        return self._chain_ok(s, buf, p, total)

    def _chain_ok(self, s: Side, buf: memoryview, p: int, total: int) -> bool | None:
        n = len(buf) - p
        if n >= total + 5:
            return self._plausible(s, buf, p + total)
        if n == total:
            return True        # a record that ends where the bytes end (as records end segments)
        return None

    def _seq_candidates(self, s: Side, body_len: int) -> list[int]:
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

    def _search(self, s: Side, ctype: int, version: int, body: bytes, seqs: list[int]
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
        update = self.hs.next_update(s)
        if update is not None:
            nxt, c2 = update
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

    def retry(self, s: Side, ctype: int, version: int, body: memoryview) -> bytes | None:
        """A record failed under the expected sequence number: try the next few (a record lost
        without a gap being reported), or, in the TLS 1.3 handshake, the application keys."""
        c2 = self.hs.app_keys(s)
        if c2 is not None:
            assert s.app_secret is not None
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
