"""TLS key logs: the NSS key log format (as Wireshark reads it) and pcapng Decryption Secrets Blocks.

One line per secret, ``<LABEL> <client random, 64 hex> <secret, hex>``:

    CLIENT_RANDOM                   TLS 1.2 (and older): the 48-byte master secret
    PMS_CLIENT_RANDOM               the pre-master secret, by client random (Wireshark reads it too)
    RSA                             ``RSA <first 8 bytes of the encrypted pre-master, 16 hex> <pre-master>``
    CLIENT_EARLY_TRAFFIC_SECRET     TLS 1.3 secrets (32 or 48 bytes, by the suite's hash) ...
    CLIENT_HANDSHAKE_TRAFFIC_SECRET
    SERVER_HANDSHAKE_TRAFFIC_SECRET
    CLIENT_TRAFFIC_SECRET_0
    SERVER_TRAFFIC_SECRET_0
    EARLY_EXPORTER_SECRET, EXPORTER_SECRET   read and kept, not needed to decrypt

Lines starting with ``#`` and blank lines are comments. Other labels (OpenSSL 3.0's
``CLIENT_TRAFFIC_SECRET_N`` for instance) are counted and skipped: after a KeyUpdate the next
secret is derived (RFC 8446 7.2), as Wireshark does. A line that cannot be read is reported by
line number and reason, never with its content: **key material never appears in a message, a
repr or an exception text** (every secret is held in a ``Secret``, whose repr says only its size).

A pcapng Decryption Secrets Block (block type 0x0000000A) of secrets type ``TLSK`` (0x544c534b)
holds a key log in the same format (``editcap --inject-secrets tls,FILE`` writes it):
``KeyLog.add_dsb_block(body, little_endian)`` takes the block body, ``KeyLog.add_dsb(type, data)``
the secrets type and data.
"""
from __future__ import annotations

import binascii
import re
import struct
from collections.abc import Iterable
from typing import NamedTuple

DSB_BLOCK_TYPE = 0x0000000A
SECRETS_TLS = 0x544C534B  # "TLSK"
SECRETS_TYPES = {SECRETS_TLS: "TLS key log", 0x57474B4C: "WireGuard key log", 0x5353484B: "SSH key log",
                 0x4F504353: "OPC UA key log", 0x5A4E574B: "ZigBee NWK key", 0x5A415053: "ZigBee APS key"}

MAX_LINE = 1024            # longer lines are reported, not read (the longest valid line is ~230 chars)
MAX_SESSIONS = 100_000     # session ids / tickets remembered for TLS 1.2 resumption (oldest dropped)
MAX_PROBLEMS = 100         # problems kept per KeyLog; the rest are counted in ``more_problems``

# labels and the byte lengths their secrets may have
MASTER_LABELS = {"CLIENT_RANDOM": (48,), "PMS_CLIENT_RANDOM": None}   # None: any length 1..512
TLS13_LABELS = ("CLIENT_EARLY_TRAFFIC_SECRET", "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0",
                "EARLY_EXPORTER_SECRET", "EXPORTER_SECRET")
KNOWN_LABELS = ("CLIENT_RANDOM", "PMS_CLIENT_RANDOM", "RSA") + TLS13_LABELS

_HEX = re.compile(rb"[0-9a-fA-F]+\Z")
# a line as OpenSSL writes it (one space between the fields, a label used here, a 32-, 48- or
# 64-byte secret): read without the checks of ``_read_line``, which it passes
_PLAIN_LINE = re.compile(rb"(%s) ([0-9a-fA-F]{64}) ((?:[0-9a-fA-F]{32}){2,4})\Z" % b"|".join(
    label.encode() for label in ("CLIENT_RANDOM",) + TLS13_LABELS)).match
_LABEL_TEXT = {label.encode(): label for label in KNOWN_LABELS}
_unhex = binascii.unhexlify
_LABEL = re.compile(rb"[A-Z][A-Z0-9_]{0,63}\Z")


class Secret:
    """Key material. Its repr and str say only its size; ``reveal()`` gives the bytes."""

    __slots__ = ("_b",)

    def __init__(self, b: bytes):
        self._b = bytes(b)

    def reveal(self) -> bytes:
        return self._b

    def __len__(self) -> int:
        return len(self._b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._b == self._b

    def __hash__(self) -> int:
        return hash(self._b)

    def __repr__(self) -> str:
        return "<secret %d bytes>" % len(self._b)

    __str__ = __repr__

    def __reduce__(self) -> tuple[type[Secret], tuple[bytes]]:  # picklable (Spark ships key logs)
        return (Secret, (self._b,))


class KeyLogProblem(NamedTuple):
    """A key log line that was not read: where (``source`` and ``line``) and why, never its content."""

    source: str
    line: int      # 1-based line number (0: the block or file as a whole)
    reason: str

    def __str__(self) -> str:
        if self.line:
            return "%s line %d: %s" % (self.source, self.line, self.reason)
        return "%s: %s" % (self.source, self.reason)


_snew = object.__new__   # a Secret without its __init__'s copy (the key log's own bytes)


def _printable_label(label: bytes) -> str | None:
    """The label as text when it looks like one: upper case, digits and ``_``, and not all hex
    digits (an all-hex word may be a secret pasted without its label)."""
    if not _LABEL.match(label) or _HEX.match(label):
        return None
    return label.decode("ascii")


class KeyLog:
    """Secrets by client random (and the RSA pre-masters by encrypted pre-master prefix).

    Fill it with ``add_text`` (a key log file's bytes or text), ``add_line``, ``add_dsb`` or
    ``add_dsb_block``; each returns the problems it found (also kept in ``problems``). ``counts``:
    lines read per label; ``ignored``: lines with labels not used, per label (unprintable labels
    as ``"(unreadable label)"``). Several sources may be added; a later line for the same label and
    client random replaces the earlier one.

    Decoders also remember TLS 1.2 master secrets by session id and session ticket here
    (``remember_session``) so that a resumed connection with no key log line of its own still
    decrypts, as Wireshark does; at most ``MAX_SESSIONS`` are kept.
    """

    def __init__(self) -> None:
        self._by_label: dict[str, dict[bytes, Secret]] = {}
        self._rsa: dict[bytes, Secret] = {}
        self._sessions: dict[bytes, Secret] = {}
        self.counts: dict[str, int] = {}
        self.ignored: dict[str, int] = {}
        self.comments = 0
        self.problems: list[KeyLogProblem] = []
        self.more_problems = 0     # problems beyond MAX_PROBLEMS, counted only

    def __repr__(self) -> str:
        n = sum(self.counts.values())
        return "<KeyLog %d secrets, %d client randoms, %d problems>" % (
            n, len(self.client_randoms()), len(self.problems))

    def __len__(self) -> int:
        return sum(len(d) for d in self._by_label.values()) + len(self._rsa)

    # -- reading -------------------------------------------------------------------------------

    def add_text(self, text: bytes | str, source: str = "key log") -> list[KeyLogProblem]:
        """Read every line of a key log; return the problems found (line numbers from 1)."""
        data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
        return self.add_chunks((data,), source)

    def add_chunks(self, chunks: Iterable[bytes], source: str = "key log") -> list[KeyLogProblem]:
        """Read a key log given in pieces of any size and number (a file read block by block, so
        that one of any size is read whole): lines are read as they complete; what is held is one
        piece, one line (a line over ``MAX_LINE`` is reported, not kept) and the secrets (a later
        line for the same label and client random replaces the earlier one). Returns the problems
        found (line numbers from 1)."""
        problems: list[KeyLogProblem] = []
        more = self.more_problems
        no = 0
        tail = b""          # the start of a line not complete yet
        long_line = False   # the current line is over MAX_LINE: dropped up to its end
        cap = 4 * MAX_LINE  # a line longer than this is too long even with spaces around it
        for chunk in chunks:
            lines = chunk.split(b"\n")
            if tail:
                lines[0] = tail + lines[0]
            last = lines.pop()
            plain_line = _PLAIN_LINE
            by_label, counts, unhex, snew = self._by_label, self.counts, _unhex, _snew
            for line in lines:
                no += 1
                m = plain_line(line)
                if m is not None and not long_line and (m[1] != b"CLIENT_RANDOM" or len(m[3]) == 96):
                    # as add_line, inline (the regular expression has checked the fields)
                    label = _LABEL_TEXT[m[1]]
                    secret = snew(Secret)
                    secret._b = unhex(m[3])
                    d = by_label.get(label)
                    if d is None:
                        d = by_label[label] = {}
                    d[unhex(m[2])] = secret
                    counts[label] = counts.get(label, 0) + 1
                    continue
                if long_line:
                    long_line = False
                    p: KeyLogProblem | None = self._problem(
                        KeyLogProblem(source, no, "line longer than %d characters, not read" % MAX_LINE))
                else:
                    p = self.add_line(line, no, source)
                if p is not None:
                    problems.append(p)
            if long_line or len(last) > cap:
                long_line = True
                tail = b""
            else:
                tail = last
        no += 1
        if long_line:
            p = self._problem(KeyLogProblem(source, no, "line longer than %d characters, not read" % MAX_LINE))
        else:
            p = self.add_line(tail, no, source)
        if p is not None:
            problems.append(p)
        if self.more_problems > more:
            # the last problem says how many more there were (kept even past the cap)
            p = KeyLogProblem(source, 0, "%d more lines not read" % (self.more_problems - more))
            self.problems.append(p)
            problems.append(p)
        return problems

    def add_line(self, line: bytes | str, no: int = 0, source: str = "key log") -> KeyLogProblem | None:
        """Read one line; return the problem (also kept in ``problems``) or None."""
        raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
        reason = self._read_line(raw.strip())
        if reason is None:
            return None
        return self._problem(KeyLogProblem(source, no, reason))

    def _problem(self, p: KeyLogProblem) -> KeyLogProblem | None:
        if len(self.problems) >= MAX_PROBLEMS:
            self.more_problems += 1
            return None
        self.problems.append(p)
        return p

    def _read_line(self, line: bytes) -> str | None:
        if not line or line.startswith(b"#"):
            if line:
                self.comments += 1
            return None
        if len(line) > MAX_LINE:
            return "line longer than %d characters, not read" % MAX_LINE
        fields = line.split()
        label_b = fields[0]
        label = _printable_label(label_b)
        if label is None:
            if len(fields) == 1:
                return "not a key log line (one word, no label)"
            return "not a key log line (the first word is not a label)"
        if label not in KNOWN_LABELS:
            self.ignored[label] = self.ignored.get(label, 0) + 1
            return None
        if len(fields) != 3:
            return "%s: expected 3 fields, found %d" % (label, len(fields))
        first, secret_hex = fields[1], fields[2]
        if not _HEX.match(first):
            return "%s: the %s is not hex" % (label, "encrypted pre-master prefix" if label == "RSA"
                                              else "client random")
        if not _HEX.match(secret_hex) or len(secret_hex) % 2:
            return "%s: the secret is not an even number of hex digits" % label
        secret = bytes.fromhex(secret_hex.decode("ascii"))
        if label == "RSA":
            if len(first) != 16:
                return "RSA: the encrypted pre-master prefix is %d hex digits, not 16" % len(first)
            if len(secret) != 48:
                return "RSA: the pre-master secret is %d bytes, not 48" % len(secret)
            self._rsa[bytes.fromhex(first.decode("ascii"))] = Secret(secret)
        else:
            if len(first) != 64:
                return "%s: the client random is %d hex digits, not 64" % (label, len(first))
            if label == "CLIENT_RANDOM" and len(secret) != 48:
                return "CLIENT_RANDOM: the master secret is %d bytes, not 48" % len(secret)
            if label in TLS13_LABELS and len(secret) not in (32, 48, 64):
                return "%s: the secret is %d bytes, not 32, 48 or 64" % (label, len(secret))
            if not 1 <= len(secret) <= 512:
                return "%s: the secret is %d bytes" % (label, len(secret))
            self._by_label.setdefault(label, {})[bytes.fromhex(first.decode("ascii"))] = Secret(secret)
        self.counts[label] = self.counts.get(label, 0) + 1
        return None

    def add_dsb(self, secrets_type: int, data: bytes, source: str = "decryption secrets block"
                ) -> list[KeyLogProblem]:
        """Read the secrets of a pcapng Decryption Secrets Block: ``TLSK`` holds a key log; other
        types are counted in ``ignored`` (``"DSB WireGuard key log"``) and skipped."""
        if secrets_type != SECRETS_TLS:
            name = "DSB " + SECRETS_TYPES.get(secrets_type, "secrets type 0x%08x" % secrets_type)
            self.ignored[name] = self.ignored.get(name, 0) + 1
            return []
        return self.add_text(bytes(data).rstrip(b"\x00"), source)

    def add_dsb_block(self, body: bytes, little_endian: bool = True, source: str = "decryption secrets block"
                      ) -> list[KeyLogProblem]:
        """Read a Decryption Secrets Block given its body: the bytes after the block type and block
        total length and before the trailing block total length (secrets type, secrets length,
        secrets data, padding, options), in the section's byte order."""
        fmt = "<II" if little_endian else ">II"
        if len(body) < 8:
            p = KeyLogProblem(source, 0, "decryption secrets block of %d bytes, shorter than its 8-byte header"
                              % len(body))
            return [p] if self._problem(p) else []
        stype, slen = struct.unpack_from(fmt, body, 0)
        if slen > len(body) - 8:
            p = KeyLogProblem(source, 0, "decryption secrets block says %d bytes of secrets, holds %d"
                              % (slen, len(body) - 8))
            return [p] if self._problem(p) else []
        return self.add_dsb(stype, body[8:8 + slen], source)

    # -- lookups ---------------------------------------------------------------------------------

    def get(self, label: str, client_random: bytes) -> Secret | None:
        """The secret logged under ``label`` for this client random, or None."""
        d = self._by_label.get(label)
        return None if d is None else d.get(bytes(client_random))

    def get_all(self, labels: tuple[str, ...], client_random: bytes) -> list[Secret | None]:
        """``get(label, client_random)`` of each of ``labels``, in one call."""
        by_label = self._by_label
        cr = bytes(client_random)
        out: list[Secret | None] = []
        for label in labels:
            d = by_label.get(label)
            out.append(None if d is None else d.get(cr))
        return out

    def rsa_premaster(self, encrypted_premaster: bytes) -> Secret | None:
        """The pre-master secret of an RSA key exchange, found by its encrypted form's first 8 bytes."""
        return self._rsa.get(bytes(encrypted_premaster[:8]))

    def client_randoms(self) -> set[bytes]:
        out: set[bytes] = set()
        for d in self._by_label.values():
            out.update(d)
        return out

    def has_client_random(self, client_random: bytes) -> bool:
        cr = bytes(client_random)
        return any(cr in d for d in self._by_label.values())

    def remember_session(self, key: bytes, master: Secret) -> None:
        """Keep a TLS 1.2 master secret under a session id or ticket (``b"id:"``/``b"ticket:"`` prefixed)."""
        s = self._sessions
        if key in s:
            del s[key]
        elif len(s) >= MAX_SESSIONS:
            del s[next(iter(s))]
        s[key] = master

    def session(self, key: bytes) -> Secret | None:
        return self._sessions.get(key)
