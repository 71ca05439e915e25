"""The TLS handshake and key schedule of one connection: the hellos read in the clear, the
master secret or traffic secrets found in the key log, each side's record keys set at its
change_cipher_spec (TLS 1.2) or after the ServerHello, its Finished and each KeyUpdate (TLS 1.3).

``Handshake`` changes a ``Side``'s mode, cipher and sequence number; the record layer
(``connection.TlsConnection``) hands it the handshake records' bytes, change_cipher_spec and
alerts, and asks it for the key change a record announced.
"""
from __future__ import annotations

import dataclasses
import hashlib

from .events import (
    ALERT,
    HANDSHAKE,
    HANDSHAKE_ERROR,
    KEY_UPDATE,
    NO_KEY,
    UNSUPPORTED,
    HandshakeInfo,
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
    DecryptFailed,
    KeyBlock12,
    RecordCipher,
    cipher12,
    cipher13,
    master_from_premaster,
    next_traffic_secret,
)
from .side import ENC, NOKEY, Item, Side, hole
from .suites import (
    ALERT_LEVELS,
    ALERT_NAMES,
    CBC,
    CLIENT_HELLO,
    CLIENT_KEY_EXCHANGE,
    ENCRYPTED_EXTENSIONS,
    FINISHED,
    HANDSHAKE_NAMES,
    NEW_SESSION_TICKET,
    SERVER_HELLO,
    SUITES,
    TLS12,
    TLS13,
    Suite,
    suite_name,
    version_name,
)
from .suites import KEY_UPDATE as HS_KEY_UPDATE

MAX_HANDSHAKE = 256 * 1024        # longest handshake message kept (certificate chains are ~2-20 KB)
# the TLS 1.3 secrets a connection needs, as ``KeyLog.get_all`` looks them up
_SECRETS13 = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0",
              "SERVER_TRAFFIC_SECRET_0")
# the handshake messages ``Handshake._message`` reads (the others only join the transcript, if one is kept)
_ACTS = frozenset((CLIENT_HELLO, SERVER_HELLO, CLIENT_KEY_EXCHANGE, NEW_SESSION_TICKET, ENCRYPTED_EXTENSIONS,
                   FINISHED, HS_KEY_UPDATE))


def _names(d: int, client: int | None) -> str:
    if client is None:
        return "direction %d" % d
    return "client to server" if d == client else "server to client"


class Handshake:
    """The handshake state of one connection and its two ``sides``.

    ``info``: a ``HandshakeInfo`` once the ServerHello was read; ``client_direction``: the side
    whose first record was a ClientHello; ``no_key``: True once the connection is known to have no
    secrets in ``keys``; ``ch``/``sh``/``suite``/``version``: the hellos and what they agreed;
    ``label``: how messages name the connection.
    """

    __slots__ = ("keys", "sides", "label", "client_direction", "info", "no_key", "ch", "sh", "suite", "version",
                 "_hello_retry", "_transcript", "_session_hash", "_enc_pms", "_ticket12", "_master", "_master_tried",
                 "_kb", "_unsupported")

    def __init__(self, keys: KeyLog, sides: tuple[Side, Side], label: str = ""):
        self.keys = keys
        self.sides = sides
        self.label = label
        self.client_direction: int | None = None
        self.info: HandshakeInfo | None = None
        self.no_key = False
        self.ch: ClientHello | None = None
        self.sh: ServerHello | None = None
        self.suite: Suite | None = None
        self.version = 0
        self._hello_retry = False
        # the handshake so far for the extended master secret's session hash (a TLS 1.2 pre-master):
        # its messages as they came until the ServerHello names the hash (``_hashes``), then the hash
        self._transcript: list[bytes] | dict[str, hashlib._Hash] | None = None
        self._session_hash: bytes | None = None
        self._enc_pms: bytes | None = None
        self._ticket12: bytes | None = None
        self._master: Secret | None = None
        self._master_tried = False
        self._kb: KeyBlock12 | None = None
        self._unsupported = ""

    def prefix(self) -> str:
        return self.label + ": " if self.label else ""

    def where(self, s: Side) -> str:
        return self.prefix() + _names(s.d, self.client_direction)

    def next_update(self, s: Side) -> tuple[bytes, RecordCipher] | None:
        """TLS 1.3: the next KeyUpdate's secret and cipher for ``s`` (None before the application keys)."""
        if s.tls13_phase != "app" or s.secret is None or self.suite is None:
            return None
        nxt = next_traffic_secret(self.suite.prf, s.secret)
        return nxt, cipher13(self.suite, nxt)

    def app_keys(self, s: Side) -> RecordCipher | None:
        """TLS 1.3 during the handshake: a cipher under ``s``'s application traffic secret 0."""
        if s.tls13_phase != "hs" or s.app_secret is None or self.suite is None:
            return None
        return cipher13(self.suite, s.app_secret.reveal())

    def offers_early_data(self, s: Side) -> bool:
        """``s`` is the client of a TLS 1.3 handshake whose ClientHello offered 0-RTT data."""
        ch = self.ch
        return s.tls13_phase == "hs" and ch is not None and ch.offers_early_data and s.d == self.client_direction

    def no_key_event(self) -> TlsEvent | None:
        """At the end: the ``no-key`` event of bytes not decrypted for want of keys, if any."""
        nokey = 0
        for s in self.sides:
            if s.mode == NOKEY and not s.failed_records:
                nokey += s.c.undecrypted
        if self.no_key or nokey:
            ver = self.info.version.replace("v", " ") if self.info else "TLS"
            cr = self.ch.random.hex()[:16] + "..." if self.ch else "(no ClientHello seen)"
            reason = next((s.nokey_reason for s in self.sides if s.nokey_reason), "")
            if reason == "unsupported":
                msg = "%s, %s: not decrypted (%s); %d bytes not decrypted" % (ver, cr, self._unsupported, nokey)
            elif reason == "no-client-hello":
                msg = "%s, no ClientHello seen, so no client random to find keys; %d bytes not decrypted" % (
                    ver, nokey)
            elif reason == "no-server-hello":
                msg = "%s, no ServerHello seen for client random %s; %d bytes not decrypted" % (ver, cr, nokey)
            else:
                msg = "%s, no key for client random %s; %d bytes not decrypted" % (ver, cr, nokey)
            return TlsEvent(NO_KEY, self.prefix() + msg, None, None, nokey, False, self.info)
        return None

    def data(self, s: Side, data: bytes, start: int, out: list[Item]) -> None:
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
                                    "cap; skipped" % (self.where(s), HANDSHAKE_NAMES.get(mtype, "handshake type %d"
                                                                                           % mtype),
                                                      ln, start, MAX_HANDSHAKE // 1024), s.d, start, ln))
                have = n - p - 4
                s.hs_skip = ln - have if have < ln else 0
                p = n if have < ln else p + 4 + ln
                continue
            if n - p - 4 < ln:
                break
            if self._transcript is None:
                # as _message reads them, inline: a ClientHello, a TLS 1.3 Finished,
                # EncryptedExtensions without extensions; any message _message does not read
                # changes nothing (the certificate and its proof)
                if mtype == CLIENT_HELLO:
                    try:
                        self._client_hello(s, data[p + 4:p + 4 + ln], start, out)
                    except HelloError as e:
                        out.append(TlsEvent(HANDSHAKE_ERROR, "%s: %s at offset %d" % (self.where(s), e, start), s.d,
                                            start))
                    p += 4 + ln
                    continue
                if mtype == FINISHED:
                    if s.tls13_phase == "hs":
                        s.pending = "app"
                    p += 4 + ln
                    continue
                if mtype not in _ACTS or (mtype == ENCRYPTED_EXTENSIONS and ln == 2 and not data[p + 4]
                                          and not data[p + 5]):
                    p += 4 + ln
                    continue
            self._message(s, mtype, data[p:p + 4 + ln], start, out)
            p += 4 + ln
        if p < n:
            s.hs = bytearray(data[p:])

    def _message(self, s: Side, mtype: int, msg: bytes, start: int, out: list[Item]) -> None:
        body = msg[4:]
        tr = self._transcript
        if tr is not None and self._session_hash is None and mtype != 0:
            if tr.__class__ is list:
                tr.append(msg)
                if len(tr) > 8:     # bounded: hashed from here
                    self._hashes()
            else:
                for h in tr.values():   # type: ignore[union-attr]
                    h.update(msg)
        try:
            if mtype == CLIENT_HELLO:
                self._client_hello(s, body, start, out)
            elif mtype == SERVER_HELLO:
                self._server_hello(s, body, start, out)
            elif mtype == CLIENT_KEY_EXCHANGE:
                self._client_key_exchange(body)
            elif mtype == NEW_SESSION_TICKET:
                if self.version != TLS13:
                    self._ticket12 = parse_new_session_ticket12(body)
                    if self._ticket12 and self._master is not None:
                        self.keys.remember_session(b"ticket:" + self._ticket12, self._master)
            elif mtype == ENCRYPTED_EXTENSIONS:
                alpn = parse_encrypted_extensions_alpn(body)
                if alpn and self.info is not None:
                    self.info = dataclasses.replace(self.info, alpn=tuple(alpn))
            elif mtype == FINISHED:
                if s.tls13_phase == "hs":
                    s.pending = "app"
            elif mtype == HS_KEY_UPDATE and s.tls13_phase == "app":
                s.pending = "update"
                req = body[0] if body else -1
                what = {0: "update_not_requested", 1: "update_requested"}.get(req, "request_update %d" % req)
                s.c.key_updates += 1
                out.append(TlsEvent(KEY_UPDATE, "%s: KeyUpdate (%s) at offset %d"
                                    % (self.where(s), what, start), s.d, start))
        except HelloError as e:
            out.append(TlsEvent(HANDSHAKE_ERROR, "%s: %s at offset %d" % (self.where(s), e, start), s.d, start))

    def _client_hello(self, s: Side, body: bytes, start: int, out: list[Item]) -> None:
        del out, start
        ch = parse_client_hello(body)
        if self.client_direction is None:
            self.client_direction = s.d
        if self.ch is not None and self.sh is not None and self.version == TLS12:
            # renegotiation: a new handshake with its own randoms and master secret
            self.sh = None
            self._master = None
            self._master_tried = False
            self._kb = None
            self._session_hash = None
            self._enc_pms = None
        self.ch = ch
        self._transcript = None
        if not self._hello_retry and self.keys.get("CLIENT_RANDOM", ch.random) is None:
            # no master secret logged: a pre-master (RSA, PMS_CLIENT_RANDOM lines) may need the
            # extended master secret's session hash, the hash of the handshake up to the
            # ClientKeyExchange (RFC 7627 3)
            self._transcript = [b"\x01" + len(body).to_bytes(3, "big") + body]

    def _server_hello(self, s: Side, body: bytes, start: int, out: list[Item]) -> None:
        sh = parse_server_hello(body)
        ch = self.ch
        if sh.hello_retry:
            self._hello_retry = True
            return
        self.sh = sh
        version = sh.version
        self.version = version
        suite = SUITES.get(sh.cipher_suite)
        self.suite = suite
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
        self.info = info
        out.append(TlsEvent(HANDSHAKE, "%s%s" % (self.prefix(), info.describe()), s.d, start, 0, False, info))
        if self._transcript is not None:
            if version == TLS12 and suite is not None:
                # only the PRF hash's transcript is needed from here (extended master secret)
                self._transcript = {suite.prf: self._hashes()[suite.prf]}
            else:
                self._transcript = None
        if not decryptable:
            if version in (TLS12, TLS13):
                self._unsupported = "cipher suite %s" % suite_name(sh.cipher_suite)
            else:
                self._unsupported = "version %s" % version_name(version)
            out.append(TlsEvent(UNSUPPORTED, "%s%s with %s: kwire does not decrypt it" % (
                self.prefix(), version_name(version), suite_name(sh.cipher_suite)), None, start))
            for side in self.sides:
                side.nokey_reason = "unsupported"
                if version == TLS13:
                    side.tls13_phase = "hs"
                    side.mode = NOKEY
            self.no_key = True
            return
        if version == TLS13:
            assert suite is not None
            chs, shs, capp, sapp = self.keys.get_all(_SECRETS13, cr)
            self._setup13(self.sides[client], chs, capp, suite)
            self._setup13(self.sides[client ^ 1], shs, sapp, suite)

    def _setup13(self, s: Side, hs: Secret | None, app: Secret | None, suite: Suite) -> None:
        """TLS 1.3 after the ServerHello: the side's records are encrypted from now on, under its
        handshake traffic secret ``hs``; ``app``: its application traffic secret 0."""
        s.app_secret = app
        s.tls13_phase = "hs"
        s.rec_version = TLS12
        s.seq = 0
        if hs is None and app is None:
            s.mode = NOKEY
            s.nokey_reason = "no-key"
            self.no_key = True
            return
        s.mode = ENC
        if hs is not None:
            s.cipher = cipher13(suite, hs.reveal())
        else:
            # no handshake secret: the handshake records fail and are counted; recovery switches to
            # the application keys at the first record they open
            s.cipher = NeverCipher()

    def _client_key_exchange(self, body: bytes) -> None:
        suite = self.suite
        if suite is not None and suite.key_exchange == "RSA" and len(body) >= 2:
            n = body[0] << 8 | body[1]
            if n == len(body) - 2:
                self._enc_pms = body[2:]
        if self._transcript is not None and suite is not None:
            tr = self._hashes()
            if suite.prf in tr:
                self._session_hash = tr[suite.prf].digest()
                self._transcript = None

    def _hashes(self) -> dict[str, hashlib._Hash]:
        """The transcript as hashes (SHA-256 and SHA-384 while the hash is not known yet), made
        from the messages kept so far the first time."""
        tr = self._transcript
        if tr.__class__ is list:
            hashes = {"sha256": hashlib.sha256(), "sha384": hashlib.sha384()}
            for h in hashes.values():
                for msg in tr:
                    h.update(msg)
            self._transcript = tr = hashes
        assert isinstance(tr, dict)
        return tr

    def _resolve_master(self) -> Secret | None:
        if self._master_tried:
            return self._master
        self._master_tried = True
        ch, sh, suite = self.ch, self.sh, self.suite
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

    def change_cipher_spec(self, s: Side, start: int, out: list[Item]) -> None:
        del start, out
        if self.version == TLS13 or s.tls13_phase:
            return
        suite = self.suite
        if self.sh is None or self.ch is None:
            s.mode = NOKEY
            s.nokey_reason = s.nokey_reason or "no-client-hello"
            self.no_key = True
            return
        if suite is None or suite.tls13 or self.version != TLS12:
            s.mode = NOKEY
            s.nokey_reason = "unsupported"
            self.no_key = True
            return
        master = self._resolve_master()
        if master is None:
            s.mode = NOKEY
            s.nokey_reason = "no-key"
            self.no_key = True
            return
        if self._kb is None:
            self._kb = KeyBlock12(suite, master.reveal(), self.ch.random, self.sh.random)
        client = s.d == self.client_direction
        etm = self.info.encrypt_then_mac if self.info else False
        s.cipher = cipher12(suite, self._kb, client, etm)
        s.seq = 0
        s.mode = ENC
        s.rec_version = None

    def key_change(self, s: Side, out: list[Item]) -> None:
        what = s.pending
        s.pending = None
        suite = self.suite
        if suite is None:
            return
        if what == "app":
            if s.app_secret is None:
                s.mode = NOKEY
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

    def alert(self, s: Side, body: bytes, start: int, encrypted: bool, out: list[Item]) -> None:
        if len(body) < 2:
            out.append(TlsEvent(ALERT, "%s: alert of %d bytes at offset %d" % (self.where(s), len(body), start),
                                s.d, start))
            return
        level = ALERT_LEVELS.get(body[0], "level %d" % body[0])
        name = ALERT_NAMES.get(body[1], "alert %d" % body[1])
        out.append(TlsEvent(ALERT, "%s: %s alert %s%s at offset %d" % (
            self.where(s), level, name, "" if encrypted else " (in the clear)", start), s.d, start))

    def early_application_data(self, s: Side, start: int, total: int, out: list[Item]) -> None:
        """Application data before this side has keys: a capture that began after the hellos, a
        lost ServerHello, or TLS 1.3 early data (0-RTT, not decrypted)."""
        ch = self.ch
        if ch is not None and self.sh is None and s.d == self.client_direction and ch.offers_early_data:
            s.c.undecrypted += total
            s.failed_records += 1
            s.failed_bytes += total
            hole(s, UNSUPPORTED, "%s: TLS 1.3 early data (0-RTT) at offset %d is not decrypted"
                 % (self.where(s), start), start, total, out)
            return
        s.c.undecrypted += total
        s.mode = NOKEY
        self.no_key = True
        s.nokey_reason = "no-client-hello" if ch is None else "no-server-hello"


class NeverCipher(RecordCipher):
    """Stands for TLS 1.3 handshake keys that were not logged: every record fails, and
    ``Recovery.retry`` then tries the application keys."""

    __slots__ = ()
    tls13 = True

    def __init__(self) -> None:
        super().__init__()
        self.overhead = 17

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        del seq, ctype, version, body
        raise DecryptFailed("no handshake traffic secret logged")
