"""The decode policy of an input: what bytes are decoded as, and how several frames of one input
are decoded together. The commands resolve their options into a ``Target``; this module owns
what follows.

* ``Target.decode``: strictly, then (unless strict) leniently, listing each violation of the
  format; a size prefix that does not fit is blamed for what it says (the input is cut short, or
  bytes follow the frame it gives).
* ``decode_frames``: the frames of one input (``kwire_cli.inputs.frames``), each as the options
  say when they say what to decode (--no-header, --kind, --request), else requests as requests
  and responses paired with the request they answer (``frames.iter_pair_frames``), the target's
  --api/--version for the responses nothing in the input asks for.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kwire_cli.codec import decode_body, decode_request, decode_response
from kwire_cli.codec.framing import has_size_prefix
from kwire_cli.codec.lenient import decode_lenient
from kwire_cli.errors import DecodeError, KwireError, TrailingBytes, UnknownApiKey, UnknownVersion, Violation
from kwire_cli.inputs.frames import Decoded, Frame, iter_pair_frames


class Target:
    """What to decode bytes as (``kwire decode``'s --api, --version, --kind, --request,
    --no-header, --size-prefix and --strict, resolved by the command): ``api`` (a spec ``Api``
    or None), ``version``, ``kind``, a bare body (``no_header``), whether a size prefix is there
    (None: detected), the request a response answers (``request_msg``), ``strict``, and
    ``kind_guessed`` (no --kind: a request unless the options name a response). ``warn`` is
    told what is worth a warning line (a response whose correlation id is not its request's)."""

    def __init__(self, api: Any, version: int | None, kind: str, no_header: bool, size_prefix: bool | None,
                 request_msg: Any = None, strict: bool = False, warn: Callable[[str], object] | None = None):
        self.api, self.version, self.kind = api, version, kind
        self.no_header, self.size_prefix, self.request_msg = no_header, size_prefix, request_msg
        self.kind_guessed = False
        self.strict = strict  # --strict: a violation of the format is an error, not a listed violation
        self.warn = warn

    def decode(self, data: bytes, records: str | None = None):
        """The message, strictly; when that fails (and not --strict), leniently: what the bytes
        hold with each violation of the format listed (``Message.violations``). Where even that
        stops, the strict error is raised, with what was read in its ``partial``."""
        try:
            return self.decode_strict(data, records)
        except DecodeError as e:
            if self.strict or isinstance(e, (UnknownApiKey, UnknownVersion)) or e.reason.startswith("size prefix says"):
                raise
            if isinstance(e, TrailingBytes) and e.decoded is not None:
                msg = e.decoded
                msg.violations = [*msg.violations, Violation.of(e)]
                return msg
            return self._lenient(data, records, e)

    def _lenient(self, data: bytes, records: str | None, err: DecodeError):
        if self.kind == "request" and not self.no_header:
            api_key, version = None, None
        else:
            api_key, version = self.api.key, self.version
        try:
            msg = decode_lenient(data, self.kind, api_key, version, size_prefixed=self.size_prefix,
                                 header=not self.no_header, records=records)
        except DecodeError as stop:
            err.partial = stop.partial
            raise err from None
        except KwireError:
            raise err from None
        if self.size_prefix is None and not self.no_header and len(data) >= 4:
            # read without a size prefix, the bytes break rules; if their first 4 bytes are a size
            # prefix saying more bytes than follow, the likelier story is a frame cut short: say
            # that, and show what the frame after that prefix holds (never a tree read from the prefix)
            n = struct.unpack_from(">i", data, 0)[0]
            follow = len(data) - 4
            if follow < n:
                cut = DecodeError(f"size prefix says {n} bytes, only {follow} follow (the input is cut short; "
                                  "if it has no size prefix, give --no-size-prefix)", 0)
                cut.rule = "truncated"
                try:
                    decode_lenient(data[4:], self.kind, api_key, version, size_prefixed=False, records=records)
                except DecodeError as stop:
                    if stop.partial is not None:
                        stop.partial.size = n
                    cut.partial = stop.partial
                except KwireError:
                    pass
                raise cut
        return msg

    def decode_strict(self, data: bytes, records: str | None = None):
        try:
            if self.kind == "request" and not self.no_header:
                msg = decode_request(data, size_prefixed=self.size_prefix, records=records)
            else:
                assert self.api is not None and self.version is not None  # resolve_target checks it
                if self.no_header:
                    msg = decode_body(data, self.api.key, self.version, self.kind, records=records)
                else:
                    msg = decode_response(data, self.api.key, self.version, size_prefixed=self.size_prefix,
                                          records=records)
        except KwireError as e:
            if self.size_prefix is None and not self.no_header and len(data) >= 4 and not has_size_prefix(data):
                self._blame_size_prefix(data, records, e)
            if (self.kind_guessed and self.kind == "request" and isinstance(e, DecodeError)
                    and (e.context.endswith("header") or "API key" in e.reason or "valid version" in e.reason)):
                e.reason += " (if this is a response, give --api NAME --version N, or --request HEX)"
            raise
        if self.kind == "request" and not self.no_header:
            if self.api is not None and msg.api_key != self.api.key:
                raise KwireError(f"the request is {msg.api_name} (api key {msg.api_key}), not {self.api.name} "
                                 f"as --api says")
            if self.version is not None and msg.api_version != self.version:
                raise KwireError(f"the request is {msg.api_name} v{msg.api_version}, not v{self.version} "
                                 f"as --version says")
        if self.request_msg is not None and msg.header and self.request_msg.header:
            want, got = self.request_msg.header.get("CorrelationId"), msg.header.get("CorrelationId")
            if want != got and self.warn is not None:
                self.warn(f"the response's CorrelationId {got} differs from the request's {want}")
        return msg


    def _blame_size_prefix(self, data: bytes, records: str | None, err: KwireError) -> None:
        """The bytes did not decode without a size prefix. When their first 4 bytes read as a
        size prefix that does not fit, raise the error about that instead: the size says more
        bytes than follow (the input is cut short: the codec's "size prefix says N bytes, only M
        follow"), or fewer and the frame it says decodes (bytes after the frame). Otherwise
        add what the first 4 bytes say to ``err``."""
        n = struct.unpack_from(">i", data, 0)[0]
        if not 0 < n < 4 * len(data) + 64:
            return
        follow = len(data) - 4
        if n > follow and (self.kind == "request" or n - follow <= 64):  # a response starts with its
            # correlation id: only a size a few bytes past the end is taken for a size prefix
            raise DecodeError(f"size prefix says {n} bytes, only {follow} follow (the input is cut short; "
                              "if it has no size prefix, give --no-size-prefix)", 0) from None
        try:
            msg = Target(self.api, self.version, self.kind, False, True, strict=True).decode(data[:4 + n], records)
        except KwireError:
            hint = f" (read without a size prefix: the first 4 bytes say {n} bytes follow, but {follow} do)"
            if isinstance(err, DecodeError):
                err.reason += hint
            else:
                err.args = (f"{err}{hint}",)
            return
        raise TrailingBytes(f"{follow - n} bytes after the {n}-byte frame at offset {4 + n}, which are not a "
                            f"whole Kafka frame (the size prefix says {n} bytes, {follow} follow)", 4 + n,
                            decoded=msg) from None


def decode_frames(frames: Sequence[Frame], target: Target, records: str | None = None, *,
                  lenient: bool = False) -> Iterator[Decoded]:
    """Several frames decoded one after another (``kwire_cli.inputs.frames.Decoded`` each, the
    error kept with its frame), each yielded as soon as it is decoded (the caller lets it go
    before the next: a frame's tree can be hundreds of MB): as the options say for every frame
    when they say what to decode (--no-header, --kind, --request); else requests as requests and
    responses with the request they answer, or with --api/--version when no request in the input
    asks for them. ``lenient`` (``kwire decode`` without --strict): a frame that does not decode
    strictly is read again leniently where it is known what it is (``read_leniently``)."""
    versions: dict[int, tuple[int, int]] = {}  # requests: index -> (api key, version), for lenient answers
    for index, d in enumerate(_decoded(frames, target, records)):
        if lenient:
            read_leniently(d, versions, records)
        m = d.message
        if m is not None and m.kind == "request":
            versions[index] = (m.api_key, m.api_version)
        yield d


def _decoded(frames: Sequence[Frame], target: Target, records: str | None) -> Iterator[Decoded]:
    if target.no_header or not target.kind_guessed or target.request_msg is not None:
        for f in frames:
            d = Decoded(f)
            try:
                d.message = target.decode(f.data, records=records)
            except KwireError as e:
                d.error = e
            yield d
        return
    yield from iter_pair_frames(frames, records=records, unpaired=None if target.api is None else target)


def read_leniently(d: Decoded, versions: dict[int, tuple[int, int]], records: str | None) -> None:
    """A frame that did not decode strictly, read again leniently where it is known what it is (a
    response paired with its request, whose (api key, version) ``versions`` holds by index, or a
    request whose header read): what it holds, with its violations listed; a frame that even so
    cannot be read keeps its error."""
    e = d.error
    if not isinstance(e, DecodeError) or isinstance(e, (UnknownApiKey, UnknownVersion)):
        return
    if isinstance(e, TrailingBytes) and e.decoded is not None:
        d.message, d.error = e.decoded, None
        d.message.violations = [*d.message.violations, Violation.of(e)]
        return
    try:
        if d.request is not None and d.request in versions:
            key, version = versions[d.request]
            d.message = decode_lenient(d.frame.data, "response", key, version, records=records)
        elif e.context.endswith(" request"):
            d.message = decode_lenient(d.frame.data, "request", records=records)
        else:
            return
    except KwireError:
        return
    d.error = None
