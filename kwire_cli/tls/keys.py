"""Key schedules and record protection, on ``cryptography``'s primitives (no cipher written here).

* TLS 1.2 PRF (RFC 5246 5): P_SHA256 / P_SHA384 over ``cryptography``'s HMAC; master secret from a
  pre-master (RFC 5246 8.1, extended master secret RFC 7627 4); key block (RFC 5246 6.3).
* TLS 1.3 HKDF-Expand-Label (RFC 8446 7.1) over ``cryptography``'s HMAC (``HKDFExpand`` beyond
  one hash length); traffic keys and IVs (7.3); the next traffic secret after a KeyUpdate (7.2).
* Record decryption: ``RecordCipher`` objects, one per direction and key: AES-GCM, AES-CCM and
  ChaCha20-Poly1305 through ``cryptography``'s AEAD classes (TLS 1.2 explicit and implicit nonces,
  RFC 5288 / 7905; TLS 1.3 per-record nonce, RFC 8446 5.3), and AES-CBC with HMAC-SHA1/256/384,
  MAC-then-encrypt (RFC 5246 6.2.3.2) and encrypt-then-MAC (RFC 7366).

Every object here holds key material: none has a repr that shows it.
"""
from __future__ import annotations

import hmac as _stdlib_hmac
import struct
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from kwire_cli import speedups

from .suites import CBC, CCM, CHACHA, GCM, Suite

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha1": hashes.SHA1, "sha256": hashes.SHA256, "sha384": hashes.SHA384}
HASH_LEN = {"sha1": 20, "sha256": 32, "sha384": 48}
_HASH_ALGS = {name: alg() for name, alg in _HASHES.items()}   # algorithm descriptors, no state

_U64 = struct.Struct(">Q")
_AAD12 = struct.Struct(">QBHH")   # TLS 1.2 additional data: seq_num, type, version, length


def _hash(name: str) -> hashes.HashAlgorithm:
    return _HASHES[name]()


# -- TLS 1.2 ---------------------------------------------------------------------------------------

def p_hash(hash_name: str, secret: bytes, seed: bytes, length: int) -> bytes:
    """RFC 5246 5: P_hash(secret, seed), ``length`` bytes."""
    base = HMAC(secret, _hash(hash_name))
    out = bytearray()
    a = seed
    while len(out) < length:
        h = base.copy()
        h.update(a)
        a = h.finalize()
        h = base.copy()
        h.update(a + seed)
        out += h.finalize()
    return bytes(out[:length])


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """The TLS 1.2 PRF: P_<hash>(secret, label + seed)."""
    return p_hash(hash_name, secret, label + seed, length)


def master_from_premaster(hash_name: str, premaster: bytes, client_random: bytes, server_random: bytes,
                          session_hash: bytes | None) -> bytes:
    """RFC 5246 8.1, or RFC 7627 4 when ``session_hash`` is given (extended master secret)."""
    if session_hash is not None:
        return prf12(hash_name, premaster, b"extended master secret", session_hash, 48)
    return prf12(hash_name, premaster, b"master secret", client_random + server_random, 48)


class KeyBlock12:
    """The TLS 1.2 key block split into the client's and the server's MAC key, key and IV."""

    __slots__ = ("client_mac", "server_mac", "client_key", "server_key", "client_iv", "server_iv")

    def __init__(self, suite: Suite, master: bytes, client_random: bytes, server_random: bytes):
        mac_len = HASH_LEN[suite.mac] if suite.cipher == CBC else 0
        iv_len = {GCM: 4, CCM: 4, CHACHA: 12, CBC: 0}[suite.cipher]
        kl = suite.key_len
        block = prf12(suite.prf, master, b"key expansion", server_random + client_random,
                      2 * (mac_len + kl + iv_len))
        p = 0
        self.client_mac, p = block[p:p + mac_len], p + mac_len
        self.server_mac, p = block[p:p + mac_len], p + mac_len
        self.client_key, p = block[p:p + kl], p + kl
        self.server_key, p = block[p:p + kl], p + kl
        self.client_iv, p = block[p:p + iv_len], p + iv_len
        self.server_iv = block[p:p + iv_len]

    def __repr__(self) -> str:
        return "<KeyBlock12>"


# -- TLS 1.3 ---------------------------------------------------------------------------------------

def _hkdf_label(label: bytes, context: bytes, length: int) -> bytes:
    """RFC 8446 7.1: the HkdfLabel structure, the ``info`` of HKDF-Expand."""
    full = b"tls13 " + label
    return struct.pack(">HB", length, len(full)) + full + bytes((len(context),)) + context


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, context: bytes, length: int) -> bytes:
    """RFC 8446 7.1: HKDF-Expand(secret, HkdfLabel(length, "tls13 " + label, context), length).

    Up to one hash length (every key, IV and secret TLS 1.3 derives), HKDF-Expand is one HMAC:
    T(1) = HMAC(secret, info || 0x01) (RFC 5869 2.3), taken here from ``cryptography``'s HMAC
    directly, without an ``HKDFExpand`` object per call (2x faster); longer outputs go through
    ``HKDFExpand``."""
    info = _hkdf_label(label, context, length)
    if length <= HASH_LEN[hash_name]:
        h = HMAC(secret, _HASH_ALGS[hash_name])
        h.update(info + b"\x01")
        return h.finalize()[:length]
    return HKDFExpand(_hash(hash_name), length, info).derive(secret)


def next_traffic_secret(hash_name: str, secret: bytes) -> bytes:
    """RFC 8446 7.2: application_traffic_secret_N+1 (after a KeyUpdate)."""
    return hkdf_expand_label(hash_name, secret, b"traffic upd", b"", HASH_LEN[hash_name])


_INFOS: dict[int, tuple[bytes, bytes]] = {}   # key length -> the HkdfLabels || 0x01 of key and iv


def _infos13(key_len: int) -> tuple[bytes, bytes]:
    """The HKDF-Expand ``info`` of a traffic key of ``key_len`` bytes and of its 12-byte IV, each
    with the counter byte 0x01 of the first (and only) block."""
    infos = _INFOS.get(key_len)
    if infos is None:
        infos = _INFOS[key_len] = (_hkdf_label(b"key", b"", key_len) + b"\x01",
                                   _hkdf_label(b"iv", b"", 12) + b"\x01")
    return infos


def traffic_keys13(suite: Suite, secret: bytes) -> tuple[bytes, bytes]:
    """RFC 8446 7.3: (key, iv) of a traffic secret: ``hkdf_expand_label`` twice, one HMAC keyed
    once and copied."""
    kl = suite.key_len
    ik, iv_info = _infos13(kl)
    base = HMAC(secret, _HASH_ALGS[suite.prf])
    h = base.copy()
    h.update(ik)
    base.update(iv_info)
    return h.finalize()[:kl], base.finalize()[:12]


# -- record protection -----------------------------------------------------------------------------

class DecryptFailed(Exception):
    """A record did not authenticate (or its padding or length is impossible). Says why, no key."""


def _aead(suite: Suite, key: bytes) -> AESGCM | AESCCM | ChaCha20Poly1305:
    if suite.cipher == GCM:
        return AESGCM(key)
    if suite.cipher == CCM:
        return AESCCM(key, tag_length=suite.tag_len)
    return ChaCha20Poly1305(key)


class RecordCipher:
    """Decrypts the records of one direction under one key. ``decrypt(seq, type, version, body)``
    returns the plaintext (TLS 1.3: the inner plaintext, content type and padding included) or
    raises ``DecryptFailed``. ``explicit_seq(body)`` gives the sequence number a TLS 1.2 AES-GCM/CCM
    sender put in its explicit nonce (OpenSSL uses the sequence number), to try first after a gap."""

    __slots__ = ("overhead",)   # ciphertext bytes that are not plaintext (at least)
    tls13 = False

    def __init__(self) -> None:
        self.overhead = 0

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        raise NotImplementedError

    def explicit_seq(self, body: bytes | memoryview) -> int | None:  # noqa: ARG002 - subclasses use it
        return None

    def __repr__(self) -> str:
        return "<%s>" % type(self).__name__


def native_complete(mod: Any) -> bool:
    """``mod`` (a build of ``_records13``) has every call the record layer makes: a build older
    than the sources (one not rebuilt after an update) is not used, the Python path is."""
    opener = getattr(mod, "Opener", None)
    return callable(getattr(mod, "derive", None)) and callable(getattr(mod, "Entry", None)) and all(
        callable(getattr(opener, name, None)) for name in ("open", "opens", "records", "attach", "feed", "detach"))


_native: Any = speedups.load("kwire_cli.tls._records13", native_complete)
#: ``_records13.Opener`` (the record loop in C over OpenSSL's libcrypto), or None: not built, no
#: libcrypto.so.3 on the machine, or KWIRE_NO_SPEEDUPS=1. Tests set it to None for the Python path
#: (``cipher13`` then derives the keys in Python too).
native_opener = _native.Opener if _native is not None else None


def native_entry(stage: Any, direct: list[Any], stats: Any) -> Any:
    """``_records13.Entry(stage, direct, stats)``: a capture's TLS stage's data path in C, for the
    bytes whose direction's record state a native opener holds (``TlsConnection.direct``); None
    without ``native_opener``."""
    if native_opener is None:
        return None
    return _native.Entry(stage, direct, stats)


_NATIVE_NAMES = {(GCM, 16, 16): "aes-128-gcm", (GCM, 32, 16): "aes-256-gcm", (CHACHA, 32, 16): "chacha20-poly1305"}


class Aead13(RecordCipher):
    """TLS 1.3: nonce = iv XOR seq (RFC 8446 5.3), additional data = the record header.

    ``native``: an opener of ``native_opener`` (OpenSSL's EVP through ``_records13``) when there
    is one for the suite, else None. With one, ``decrypt`` opens bodies of up to ``native_max``
    bytes through it and the record layer hands it whole runs of application data records
    (``records``, which stops before a longer one); longer records (AES-GCM over 4 KiB, where the
    library ``cryptography`` bundles is faster) and every record without an opener go through
    ``open(nonce, body, header)``, the AEAD's own decrypt (raises ``InvalidTag``; made at its
    first use when there is an opener), ``iv`` being the IV as an integer: the record layer's
    Python loop over whole records calls them directly. The two give the same results
    (tests/test_tls_native.py)."""

    __slots__ = ("open", "iv", "native", "native_max", "_suite", "_key")
    tls13 = True

    def __init__(self, suite: Suite, key: bytes, iv: bytes):
        self.iv = int.from_bytes(iv, "big")
        self.overhead = suite.tag_len + 1
        self.native: Any = None
        self.native_max = -1
        self._suite = suite
        self._key = key
        self.open: Any = None
        if native_opener is not None:
            name = _NATIVE_NAMES.get((suite.cipher, suite.key_len, suite.tag_len))
            if name is not None:
                self.native = native_opener(name, key, iv)
                self.native_max = self.native.max_len
                return
        self.open = _aead(suite, key).decrypt

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        n = len(body)
        header = bytes((ctype, version >> 8, version & 0xFF, n >> 8, n & 0xFF))
        if n <= self.native_max:
            pt: bytes | None = self.native.open(seq, body, header)
            if pt is None:
                raise DecryptFailed("authentication failed")
            return pt
        aead_open = self.open
        if aead_open is None:
            aead_open = self.open = _aead(self._suite, self._key).decrypt
        try:
            out: bytes = aead_open((self.iv ^ seq).to_bytes(12, "big"), body, header)
        except InvalidTag:
            raise DecryptFailed("authentication failed") from None
        return out


class AeadExplicit12(RecordCipher):
    """TLS 1.2 AES-GCM / AES-CCM: nonce = 4-byte salt + 8-byte explicit nonce from the record."""

    __slots__ = ("_aead", "_salt", "_tag")

    def __init__(self, suite: Suite, key: bytes, salt: bytes):
        self._aead = _aead(suite, key)
        self._salt = salt
        self._tag = suite.tag_len
        self.overhead = 8 + suite.tag_len

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        n = len(body) - self.overhead
        if n < 0:
            raise DecryptFailed("record of %d bytes is shorter than nonce and tag" % len(body))
        try:
            return self._aead.decrypt(self._salt + bytes(body[:8]), body[8:],
                                      _AAD12.pack(seq, ctype, version, n))
        except InvalidTag:
            raise DecryptFailed("authentication failed") from None

    def explicit_seq(self, body: bytes | memoryview) -> int | None:
        if len(body) < 8:
            return None
        v: int = _U64.unpack_from(body, 0)[0]
        return v


class AeadImplicit12(RecordCipher):
    """TLS 1.2 ChaCha20-Poly1305 (RFC 7905): nonce = 12-byte IV XOR seq."""

    __slots__ = ("_aead", "_iv", "_tag")

    def __init__(self, suite: Suite, key: bytes, iv: bytes):
        self._aead = _aead(suite, key)
        self._iv = int.from_bytes(iv, "big")
        self._tag = suite.tag_len
        self.overhead = suite.tag_len

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        n = len(body) - self._tag
        if n < 0:
            raise DecryptFailed("record of %d bytes is shorter than its tag" % len(body))
        try:
            return self._aead.decrypt((self._iv ^ seq).to_bytes(12, "big"), body,
                                      _AAD12.pack(seq, ctype, version, n))
        except InvalidTag:
            raise DecryptFailed("authentication failed") from None


class Cbc12(RecordCipher):
    """TLS 1.1/1.2 AES-CBC with an explicit IV per record and an HMAC, MAC-then-encrypt or (RFC
    7366) encrypt-then-MAC.

    One CBC decryptor serves every record of the direction: fed ``IV || ciphertext``, CBC decrypts
    block i with block i-1, so everything after the record's first block (its IV) comes out right
    whatever the decryptor decrypted before; the first 16 bytes are dropped."""

    __slots__ = ("_dec", "_mac", "_mac_len", "_etm", "_hash")

    def __init__(self, suite: Suite, key: bytes, mac_key: bytes, etm: bool):
        self._dec = Cipher(algorithms.AES(key), modes.CBC(b"\x00" * 16)).decryptor()
        self._hash = suite.mac
        self._mac = HMAC(mac_key, _hash(suite.mac))
        self._mac_len = HASH_LEN[suite.mac]
        self._etm = etm
        self.overhead = 16 + self._mac_len + 1 if not etm else 16 + 16 + self._mac_len

    def _mac_of(self, seq: int, ctype: int, version: int, data: bytes | memoryview) -> bytes:
        h = self._mac.copy()
        h.update(_AAD12.pack(seq, ctype, version, len(data)))
        h.update(data)
        return h.finalize()

    def decrypt(self, seq: int, ctype: int, version: int, body: bytes | memoryview) -> bytes:
        return self.decrypt_any(ctype, version, body, (seq,))[1]

    def decrypt_any(self, ctype: int, version: int, body: bytes | memoryview, seqs: tuple[int, ...] | range
                    ) -> tuple[int, bytes]:
        """Decrypt once and check the MAC against each sequence number in turn: (seq, plaintext)."""
        ml = self._mac_len
        if self._etm:
            if len(body) < 32 + ml or (len(body) - ml) % 16:
                raise DecryptFailed("encrypt-then-MAC record of %d bytes is not IV + whole blocks + MAC"
                                    % len(body))
            enc = body[:-ml]
            tag = bytes(body[-ml:])
            for seq in seqs:
                if _stdlib_hmac.compare_digest(self._mac_of(seq, ctype, version, enc), tag):
                    plain = self._dec.update(enc)[16:]
                    pad = plain[-1]
                    if pad + 1 > len(plain):
                        raise DecryptFailed("bad CBC padding")
                    return seq, plain[:-(pad + 1)]
            raise DecryptFailed("MAC check failed")
        if len(body) < 32 or len(body) % 16:
            raise DecryptFailed("CBC record of %d bytes is not IV + whole blocks" % len(body))
        plain = self._dec.update(body)[16:]
        pad = plain[-1]
        end = len(plain) - pad - 1 - ml
        if end < 0:
            raise DecryptFailed("bad CBC padding")
        data = plain[:end]
        tag = plain[end:end + ml]
        for seq in seqs:
            if _stdlib_hmac.compare_digest(self._mac_of(seq, ctype, version, data), tag):
                return seq, data
        raise DecryptFailed("MAC check failed")


def cipher12(suite: Suite, kb: KeyBlock12, client: bool, etm: bool) -> RecordCipher:
    """The record cipher of one direction of a TLS 1.2 connection (``client``: client to server)."""
    key = kb.client_key if client else kb.server_key
    iv = kb.client_iv if client else kb.server_iv
    if suite.cipher in (GCM, CCM):
        return AeadExplicit12(suite, key, iv)
    if suite.cipher == CHACHA:
        return AeadImplicit12(suite, key, iv)
    return Cbc12(suite, key, kb.client_mac if client else kb.server_mac, etm)


_new = object.__new__
_NATIVE13: dict[int, tuple[Any, ...]] = {}   # suite id -> derive's arguments but the secret; () without


def cipher13(suite: Suite, secret: bytes) -> RecordCipher:
    """The record cipher of a TLS 1.3 traffic secret: with ``native_opener``, key and IV derived
    and the opener keyed in one native call (``_records13.derive``, the same HMACs through
    OpenSSL's EVP_MAC), else ``traffic_keys13`` and ``Aead13``."""
    if native_opener is not None:
        args = _NATIVE13.get(suite.id)
        if args is None:
            name = _NATIVE_NAMES.get((suite.cipher, suite.key_len, suite.tag_len))
            args = _NATIVE13[suite.id] = (name, suite.prf) + _infos13(suite.key_len) if name is not None else ()
        if args:
            opener, key, iv = _native.derive(args[0], args[1], secret, args[2], args[3])
            # an Aead13 around the opener the call keyed, made without __init__ (four times a connection)
            c = _new(Aead13)
            c.iv = int.from_bytes(iv, "big")
            c.overhead = suite.tag_len + 1
            c.native = opener
            c.native_max = opener.max_len
            c._suite = suite
            c._key = key
            c.open = None
            return c
    key, iv = traffic_keys13(suite, secret)
    return Aead13(suite, key, iv)
