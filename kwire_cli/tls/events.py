"""What a TLS connection decoder hands back: plaintext pieces and events, in stream order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# event kinds
HANDSHAKE = "handshake"            # ServerHello seen: version, suite, resumed (``handshake`` holds them)
NO_KEY = "no-key"                  # at finish: the key log had nothing for this connection
ALERT = "alert"                    # a TLS alert (plaintext or decrypted)
KEY_UPDATE = "key-update"          # a TLS 1.3 KeyUpdate (the next keys are derived)
DECRYPT_FAILED = "decrypt-failed"  # a record did not authenticate: the plaintext has a hole
GAP = "gap"                        # bytes lost in the TCP stream (the caller said so)
BAD_RECORD = "bad-record"          # bytes that are not a TLS record header (garbage, damage)
RESYNC = "resync"                  # records found again after a gap or bad bytes: what was lost
TRUNCATED = "truncated"            # at finish: a record cut short by the end of the stream
NOT_DECRYPTED = "not-decrypted"    # at finish: records that could not be decrypted (not no-key)
UNSUPPORTED = "unsupported"        # a version or cipher suite kwire cannot decrypt
HANDSHAKE_ERROR = "handshake-error"  # a handshake message that does not parse, or one over the cap

KINDS = (HANDSHAKE, NO_KEY, ALERT, KEY_UPDATE, DECRYPT_FAILED, GAP, BAD_RECORD, RESYNC, TRUNCATED,
         NOT_DECRYPTED, UNSUPPORTED, HANDSHAKE_ERROR)

C2S = 0   # the usual labels of the two directions: client to server, server to client
S2C = 1


class Plaintext(NamedTuple):
    """Decrypted application data of one record.

    ``direction``: the caller's label of the direction (as given to ``feed``); ``start``/``end``:
    the record's position in that direction's TCP byte stream (header included), so a caller can
    name the packets it came from."""

    direction: int
    data: bytes
    start: int
    end: int


@dataclass(frozen=True)
class HandshakeInfo:
    """What the hellos said (nothing secret: the client random is public)."""

    version: str              # "TLSv1.2", "TLSv1.3"
    version_id: int
    cipher_suite: str         # IANA name, e.g. "TLS_AES_128_GCM_SHA256"
    cipher_suite_id: int
    resumed: bool             # TLS 1.2 abbreviated handshake / TLS 1.3 PSK accepted
    client_random: str        # 64 hex digits
    key_exchange: str         # "ECDHE", "RSA", "DHE", "PSK", ... (1.2); "(EC)DHE", "PSK", "PSK+(EC)DHE" (1.3)
    sni: str | None = None
    alpn: tuple[str, ...] = ()
    extended_master_secret: bool = False
    encrypt_then_mac: bool = False
    hello_retry: bool = False
    decryptable: bool = True  # kwire can decrypt this version and suite

    def describe(self) -> str:
        out = "%s %s" % (self.version, self.cipher_suite)
        if self.resumed:
            out += ", resumed"
        if self.sni:
            out += ", SNI %s" % self.sni
        return out


@dataclass(frozen=True)
class TlsEvent:
    """Something the caller should know: one line in ``message`` (no key material, no raw control
    characters). ``direction``/``offset``: where in which stream (None: the connection); ``nbytes``:
    stream bytes concerned (lost, skipped, not decrypted); ``breaks_stream``: the plaintext of
    ``direction`` has a hole here (what follows does not continue what came before)."""

    kind: str
    message: str
    direction: int | None = None
    offset: int | None = None
    nbytes: int = 0
    breaks_stream: bool = False
    handshake: HandshakeInfo | None = None

    def __str__(self) -> str:
        return self.message


class SideCounters:
    """Byte accounting of one direction. After ``finish()``:
    ``fed == plain + decrypted + undecrypted + skipped + truncated`` (``lost`` comes on top: bytes
    the caller said were missing)."""

    __slots__ = ("fed", "lost", "plain", "decrypted", "undecrypted", "skipped", "truncated", "plaintext",
                 "records", "key_updates")

    def __init__(self) -> None:
        self.fed = 0          # bytes given to feed()
        self.lost = 0         # bytes given to gap()
        self.plain = 0        # bytes of records read in the clear (hellos, change_cipher_spec, alerts)
        self.decrypted = 0    # bytes of records decrypted (header included)
        self.undecrypted = 0  # bytes of whole records not decrypted (no key, failed, unsupported)
        self.skipped = 0      # bytes that were no record (garbage; what was left of a record cut by a gap)
        self.truncated = 0    # bytes of a record the stream ended inside
        self.plaintext = 0    # application data bytes handed back
        self.records = 0
        self.key_updates = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return "SideCounters(%s)" % ", ".join("%s=%d" % kv for kv in self.as_dict().items())
