"""Sans-io TLS record decryption from key logs.

    keys = KeyLog()
    problems = keys.add_text(open(path, "rb").read(), source=path)   # NSS key log; or
    keys.add_dsb_block(body, little_endian)                             # a pcapng Decryption Secrets Block
    conn = TlsConnection(keys, label="10.0.0.1:50412 -> 10.0.0.2:9093")
    for item in conn.feed(C2S, segment_payload):   # in-order bytes of one direction
        ...                                        # Plaintext(direction, data, start, end) | TlsEvent
    conn.gap(S2C, 1448)                            # bytes lost in a direction
    conn.finish()                                  # end of the connection: last events

No I/O, no threads; key material never appears in a message, repr or exception text.
``looks_like_client_hello(first_bytes)`` recognises a TLS connection on any port;
``looks_like_tls_record(first_bytes)`` one whose handshake the capture missed.
"""
from __future__ import annotations

from .connection import MAX_HANDSHAKE, MAX_RECORD, TlsConnection, looks_like_client_hello, looks_like_tls_record
from .events import (
                     ALERT,
                     BAD_RECORD,
                     C2S,
                     DECRYPT_FAILED,
                     GAP,
                     HANDSHAKE,
                     HANDSHAKE_ERROR,
                     KEY_UPDATE,
                     KINDS,
                     NO_KEY,
                     NOT_DECRYPTED,
                     RESYNC,
                     S2C,
                     TRUNCATED,
                     UNSUPPORTED,
                     HandshakeInfo,
                     Plaintext,
                     SideCounters,
                     TlsEvent,
)
from .keylog import DSB_BLOCK_TYPE, SECRETS_TLS, KeyLog, KeyLogProblem, Secret
from .keys import hkdf_expand_label, native_entry, next_traffic_secret, prf12
from .suites import SUITES, Suite, suite_name, version_name

__all__ = [
    "TlsConnection", "looks_like_client_hello", "looks_like_tls_record", "MAX_RECORD", "MAX_HANDSHAKE",
    "Plaintext", "TlsEvent", "HandshakeInfo", "SideCounters", "C2S", "S2C",
    "HANDSHAKE", "NO_KEY", "ALERT", "KEY_UPDATE", "DECRYPT_FAILED", "GAP", "BAD_RECORD", "RESYNC",
    "TRUNCATED", "NOT_DECRYPTED", "UNSUPPORTED", "HANDSHAKE_ERROR", "KINDS",
    "KeyLog", "KeyLogProblem", "Secret", "DSB_BLOCK_TYPE", "SECRETS_TLS",
    "hkdf_expand_label", "native_entry", "next_traffic_secret", "prf12",
    "SUITES", "Suite", "suite_name", "version_name",
]
