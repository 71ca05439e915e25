"""What the codec knows about a candidate Kafka frame: the evidence resynchronisation relies on.

A byte stream caught mid-way (a capture that starts inside a conversation, or after a gap) has no
trustworthy frame boundary: a size prefix read at the wrong place is payload. ``StreamAssembler``
(given ``check=CodecCheck()``, as ``kwire pcap`` and ``spark-decode`` do) accepts a candidate frame
start only when the codec agrees:

* a request: its API key and version exist in the specs (``api_ok``) and the whole frame decodes,
  header and body, with no byte left over (``request``; a complete message followed by bytes the
  spec does not explain is weaker evidence: the stream must also go on with another frame there);
* a response: its correlation id is one the connection is waiting for, and the frame decodes as
  the answer to that request's API and version (``response``, the response header version implied
  by that API and version). Responses to requests the capture never showed are confirmed by
  decoding as one of the connection's APIs and by landing exactly where the next confirmed
  response starts.

Records fields are not decoded for this (``records="bytes"``): their length must fit, which is
what places the rest of the body. Every answer is cached per (api key, version).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kwire_cli.codec.message import decode_request, decode_response
from kwire_cli.codec.partial import walk_message
from kwire_cli.errors import DecodeError, TrailingBytes
from kwire_cli.spec.headers import response_header_version
from kwire_cli.spec.registry import registry

if TYPE_CHECKING:
    from kwire_cli.spec.versions import Versions

NO = 0        # does not decode
TRAILING = 1  # a complete message, followed by bytes the spec does not explain (weak evidence)
EXACT = 2     # decodes, every byte used
SASL_AUTHENTICATE = 36


def _versions(v: Versions) -> range:
    return range(v.lo, min(v.hi, v.lo + 100) + 1) if not v.empty else range(0)


class CodecCheck:
    """Confirm candidate frames with the codec (the specs in use: ``--specs`` or the bundled ones)."""

    def __init__(self) -> None:
        self._reg = registry()
        self._ok: dict[tuple[int, int], bool] = {}
        self._rhv: dict[tuple[int, int], int] = {}
        self._layouts: list[tuple[int, int]] | None = None

    def api_ok(self, api_key: int, api_version: int) -> bool:
        """Is there a request of this API key and version in the specs?"""
        k = (api_key, api_version)
        ok = self._ok.get(k)
        if ok is None:
            api = self._reg.apis.get(api_key)
            ok = api is not None and api_version in api.request.valid_versions
            if len(self._ok) < 65536:
                self._ok[k] = ok
        return ok

    def layouts(self) -> list[tuple[int, int]]:
        """Every (api key, version) of the specs, for answers whose request is unknown; without
        SaslAuthenticate, whose body (opaque bytes) would take almost anything."""
        out = self._layouts
        if out is None:
            out = self._layouts = [(k, v) for k, api in sorted(self._reg.apis.items()) if k != SASL_AUTHENTICATE
                                   for v in _versions(api.request.valid_versions)]
        return out

    def response_header_version(self, api_key: int, api_version: int) -> int:
        """0 or 1: the header of the response to a request of this API and version (0 if unknown)."""
        k = (api_key, api_version)
        hv = self._rhv.get(k)
        if hv is None:
            api = self._reg.apis.get(api_key)
            hv = response_header_version(api, api_version) if api is not None else 0
            if len(self._rhv) < 65536:
                self._rhv[k] = hv
        return hv

    def request(self, data: bytes) -> int:
        """``EXACT`` if ``data`` (a request frame without its size prefix) decodes completely,
        ``TRAILING`` if a complete request is followed by unexplained bytes, else ``NO``."""
        try:
            decode_request(data, size_prefixed=False, records="bytes")
        except TrailingBytes:
            return TRAILING
        except Exception:
            return NO
        return EXACT

    def rare_response(self, data: bytes, api_key: int, api_version: int) -> int:
        """As ``response``, without compiling a plan (the codec's interpreted walker): for the
        layouts tried once or twice, where compiling all of them would cost seconds."""
        if not self.api_ok(api_key, api_version):
            return NO
        try:
            pm = walk_message(data, "response", api_key, api_version, size_prefixed=False, records="bytes")
        except Exception:
            return NO
        err = pm.error
        if err is None:
            return EXACT
        return TRAILING if isinstance(err, TrailingBytes) else NO

    def request_prefix(self, prefix: bytes, size: int) -> bool:
        """Could ``prefix`` be the first bytes of a request frame of ``size`` bytes (no size
        prefix)? False when it already contradicts the spec (see ``_prefix_ok``)."""
        return _prefix_ok(prefix, size, lambda data: decode_request(data, size_prefixed=False, records="bytes"))

    def response_prefix(self, prefix: bytes, size: int, api_key: int, api_version: int) -> bool:
        """As ``request_prefix``, for a response answering ``api_key`` v``api_version``."""
        if not self.api_ok(api_key, api_version):
            return False
        return _prefix_ok(prefix, size, lambda data: decode_response(data, api_key, api_version,
                                                                     size_prefixed=False, records="bytes"))

    def response(self, data: bytes, api_key: int, api_version: int) -> int:
        """As ``request``, for a response frame answering a request of ``api_key`` v``api_version``."""
        if not self.api_ok(api_key, api_version):
            return NO
        try:
            decode_response(data, api_key, api_version, size_prefixed=False, records="bytes")
        except TrailingBytes:
            return TRAILING
        except Exception:
            return NO
        return EXACT


PREFIX_MARGIN = 10  # an error this close to the end of the real bytes may come from the padding


def _prefix_ok(prefix: bytes, size: int, decode: Callable[[bytes], Any]) -> bool:
    """Decode ``prefix`` padded with zero bytes to ``size``: a real frame's first bytes decode, or
    fail only where the padding begins (zeros read as counts, lengths, nulls); a failure well
    inside the real bytes (a count or length that cannot fit, a bad value, the message ending
    before them) shows the candidate is not a frame."""
    n = len(prefix)
    if n >= size:
        return True
    try:
        decode(prefix + bytes(size - n))
    except DecodeError as e:
        off = e.offset
        return off is None or off >= n - PREFIX_MARGIN
    except Exception:
        return True
    return True
