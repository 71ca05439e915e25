"""Facts about TLS: protocol versions, cipher suites kwire can decrypt, alert and handshake names.

Suite numbers and names are IANA's TLS Cipher Suites registry; the record protection of each
(AEAD with explicit or implicit nonce, or CBC with an HMAC) follows RFC 5246 6.2.3, RFC 5288
(AES-GCM), RFC 6655 / 7251 (AES-CCM), RFC 7905 (ChaCha20-Poly1305) and RFC 8446 5.2 (TLS 1.3).
"""
from __future__ import annotations

from typing import NamedTuple

TLS10 = 0x0301
TLS11 = 0x0302
TLS12 = 0x0303
TLS13 = 0x0304

VERSION_NAMES = {0x0300: "SSLv3", TLS10: "TLSv1.0", TLS11: "TLSv1.1", TLS12: "TLSv1.2", TLS13: "TLSv1.3"}


def version_name(v: int) -> str:
    """``TLSv1.2`` as OpenSSL and the fixtures' manifest write it; ``0x7f1c`` for the unknown."""
    name = VERSION_NAMES.get(v)
    return name if name is not None else "0x%04x" % v


# content types (RFC 8446 5.1)
CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
HEARTBEAT = 24
CONTENT_TYPES = {CHANGE_CIPHER_SPEC: "change_cipher_spec", ALERT: "alert", HANDSHAKE: "handshake",
                 APPLICATION_DATA: "application_data", HEARTBEAT: "heartbeat"}

# handshake message types (RFC 8446 4, RFC 5246 7.4)
HELLO_REQUEST = 0
CLIENT_HELLO = 1
SERVER_HELLO = 2
NEW_SESSION_TICKET = 4
END_OF_EARLY_DATA = 5
ENCRYPTED_EXTENSIONS = 8
CERTIFICATE = 11
SERVER_KEY_EXCHANGE = 12
CERTIFICATE_REQUEST = 13
SERVER_HELLO_DONE = 14
CERTIFICATE_VERIFY = 15
CLIENT_KEY_EXCHANGE = 16
FINISHED = 20
KEY_UPDATE = 24
HANDSHAKE_NAMES = {
    HELLO_REQUEST: "HelloRequest", CLIENT_HELLO: "ClientHello", SERVER_HELLO: "ServerHello",
    NEW_SESSION_TICKET: "NewSessionTicket", END_OF_EARLY_DATA: "EndOfEarlyData",
    ENCRYPTED_EXTENSIONS: "EncryptedExtensions", CERTIFICATE: "Certificate",
    SERVER_KEY_EXCHANGE: "ServerKeyExchange", CERTIFICATE_REQUEST: "CertificateRequest",
    SERVER_HELLO_DONE: "ServerHelloDone", CERTIFICATE_VERIFY: "CertificateVerify",
    CLIENT_KEY_EXCHANGE: "ClientKeyExchange", FINISHED: "Finished", KEY_UPDATE: "KeyUpdate",
}

# extensions (IANA TLS ExtensionType Values)
EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_ENCRYPT_THEN_MAC = 22
EXT_EXTENDED_MASTER_SECRET = 23
EXT_SESSION_TICKET = 35
EXT_PRE_SHARED_KEY = 41
EXT_EARLY_DATA = 42
EXT_SUPPORTED_VERSIONS = 43
EXT_PSK_KEY_EXCHANGE_MODES = 45
EXT_KEY_SHARE = 51

# RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest (SHA-256 of "HelloRetryRequest")
HELLO_RETRY_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

ALERT_LEVELS = {1: "warning", 2: "fatal"}
ALERT_NAMES = {
    0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 21: "decryption_failed",
    22: "record_overflow", 30: "decompression_failure", 40: "handshake_failure", 41: "no_certificate",
    42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked",
    45: "certificate_expired", 46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca",
    49: "access_denied", 50: "decode_error", 51: "decrypt_error", 60: "export_restriction",
    70: "protocol_version", 71: "insufficient_security", 80: "internal_error",
    86: "inappropriate_fallback", 90: "user_canceled", 100: "no_renegotiation", 109: "missing_extension",
    110: "unsupported_extension", 111: "certificate_unobtainable", 112: "unrecognized_name",
    113: "bad_certificate_status_response", 114: "bad_certificate_hash_value",
    115: "unknown_psk_identity", 116: "certificate_required", 120: "no_application_protocol",
}

# record protection kinds
GCM = "gcm"          # AES-GCM: 4-byte implicit salt + 8-byte explicit nonce in TLS 1.2
CCM = "ccm"          # AES-CCM: same nonce layout as GCM
CHACHA = "chacha"    # ChaCha20-Poly1305: 12-byte IV XOR sequence number (RFC 7905)
CBC = "cbc"          # AES-CBC + HMAC (explicit per-record IV, TLS 1.1+)


class Suite(NamedTuple):
    """One cipher suite: IANA number and name, protection, key length, MAC and PRF/HKDF hash."""

    id: int
    name: str
    cipher: str        # GCM, CCM, CHACHA, CBC
    key_len: int
    tag_len: int       # AEAD tag length (0 for CBC)
    mac: str           # CBC: HMAC hash name ("sha1", "sha256", "sha384"); "" for AEAD
    prf: str           # TLS 1.2 PRF hash / TLS 1.3 HKDF hash: "sha256" or "sha384"
    tls13: bool
    key_exchange: str  # TLS 1.2: "RSA", "ECDHE", "DHE", "PSK", ...; TLS 1.3: "" (from the hello)


def _s12(sid: int, name: str) -> Suite:
    """A TLS 1.2 suite, its parameters read from its IANA name."""
    kx = name[4:name.index("_WITH_")]
    kx = {"ECDHE_RSA": "ECDHE", "ECDHE_ECDSA": "ECDHE", "DHE_RSA": "DHE", "DHE_DSS": "DHE"}.get(kx, kx)
    if "CHACHA20_POLY1305" in name:
        return Suite(sid, name, CHACHA, 32, 16, "", "sha256", False, kx)
    key_len = 32 if "AES_256" in name else 16
    if "_GCM_" in name:
        return Suite(sid, name, GCM, key_len, 16, "", "sha384" if name.endswith("SHA384") else "sha256",
                     False, kx)
    if "_CCM" in name:
        return Suite(sid, name, CCM, key_len, 8 if name.endswith("_CCM_8") else 16, "", "sha256", False, kx)
    mac = "sha1" if name.endswith("_SHA") else name.rsplit("_", 1)[1].lower()
    return Suite(sid, name, CBC, key_len, 0, mac, "sha384" if mac == "sha384" else "sha256", False, kx)


_TLS12_SUITES = {
    # AES-GCM
    0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384",
    0x009E: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", 0x009F: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
    0x00A8: "TLS_PSK_WITH_AES_128_GCM_SHA256", 0x00A9: "TLS_PSK_WITH_AES_256_GCM_SHA384",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    # ChaCha20-Poly1305 (RFC 7905)
    0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAA: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAB: "TLS_PSK_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAC: "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAD: "TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAE: "TLS_RSA_PSK_WITH_CHACHA20_POLY1305_SHA256",
    # AES-CCM (RFC 6655, RFC 7251)
    0xC09C: "TLS_RSA_WITH_AES_128_CCM", 0xC09D: "TLS_RSA_WITH_AES_256_CCM",
    0xC0A0: "TLS_RSA_WITH_AES_128_CCM_8", 0xC0A1: "TLS_RSA_WITH_AES_256_CCM_8",
    0xC0AC: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", 0xC0AD: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
    0xC0AE: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8", 0xC0AF: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8",
    # AES-CBC with HMAC
    0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA", 0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
    0x003C: "TLS_RSA_WITH_AES_128_CBC_SHA256", 0x003D: "TLS_RSA_WITH_AES_256_CBC_SHA256",
    0x0033: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", 0x0039: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
    0x0067: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", 0x006B: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
    0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    0xC023: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xC024: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    0xC027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xC028: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    0x008C: "TLS_PSK_WITH_AES_128_CBC_SHA", 0x008D: "TLS_PSK_WITH_AES_256_CBC_SHA",
}

SUITES: dict[int, Suite] = {sid: _s12(sid, name) for sid, name in _TLS12_SUITES.items()}
SUITES.update({
    0x1301: Suite(0x1301, "TLS_AES_128_GCM_SHA256", GCM, 16, 16, "", "sha256", True, ""),
    0x1302: Suite(0x1302, "TLS_AES_256_GCM_SHA384", GCM, 32, 16, "", "sha384", True, ""),
    0x1303: Suite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", CHACHA, 32, 16, "", "sha256", True, ""),
    0x1304: Suite(0x1304, "TLS_AES_128_CCM_SHA256", CCM, 16, 16, "", "sha256", True, ""),
    0x1305: Suite(0x1305, "TLS_AES_128_CCM_8_SHA256", CCM, 16, 8, "", "sha256", True, ""),
})

# names of suites kwire cannot decrypt, for messages (the rest print as 0x....)
_OTHER_NAMES = {
    0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA", 0x0005: "TLS_RSA_WITH_RC4_128_SHA",
    0x00FF: "TLS_EMPTY_RENEGOTIATION_INFO_SCSV", 0x5600: "TLS_FALLBACK_SCSV",
    0xC012: "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
}


def suite_name(sid: int) -> str:
    s = SUITES.get(sid)
    if s is not None:
        return s.name
    name = _OTHER_NAMES.get(sid)
    return name if name is not None else "0x%04x" % sid
