"""kwire decode: bytes in any common dump form -> the message as a tree, JSON or YAML."""
from __future__ import annotations

import sys
from typing import Any

import click

from kwire_cli.cli.app import diagnostic, join_hex_words, read_frames
from kwire_cli.cli.options import (
    FORMATS,
    complete_api,
    complete_input,
    complete_version,
    emit,
    limit_options,
    may_hold_floats,
    show_secrets_option,
)
from kwire_cli.cli.schemas import values_options
from kwire_cli.cli.target import resolve_target
from kwire_cli.errors import DecodeError, KwireError, TrailingBytes
from kwire_cli.values.records import decode_body as decode_values


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input", nargs=-1, metavar="[INPUT]", shell_complete=complete_input, callback=join_hex_words)
@click.option("--api", "api_name", metavar="NAME|KEY", shell_complete=complete_api,
              help="API of a response or bare body, by name (Metadata) or key (3).")
@click.option("--version", "api_version", type=int, metavar="N", shell_complete=complete_version,
              help="API version of a response or bare body.")
@click.option("--kind", type=click.Choice(["request", "response"]),
              help="request or response (default: response when --api or --request is given, "
                   "else request).")
@click.option("--request", "request_input", metavar="HEX|@FILE", shell_complete=complete_input,
              help="The request this response answers: API and version are taken from it.")
@click.option("--no-header", is_flag=True, help="INPUT is a bare body: no size prefix, no header.")
@click.option("--size-prefix/--no-size-prefix", "size_prefix", default=None,
              help="Whether INPUT starts with the 4-byte size (default: detected).")
@click.option("--binary", is_flag=True, default=None,
              help="Read @FILE or stdin as raw bytes (default: raw unless it is text).")
@click.option("--records", "records_mode", type=click.Choice(["decode", "hex"]), default="decode",
              show_default=True, help="Decode records fields into batches, or keep them as hex.")
@click.option("--partial", is_flag=True,
              help="On a decode error, show the tree up to the failure, then the error (exit 1).")
@click.option("--strict", is_flag=True,
              help="A violation of the format (a null where none is allowed, a string that is not UTF-8, "
                   "trailing bytes, tags out of order...) is an error (exit 1), not a listed violation.")
@limit_options()
@show_secrets_option()
@values_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pretty", show_default=True,
              help="Output: a tree (pretty), or one JSON / YAML object.")
def decode(input, api_name, api_version, kind, request_input, no_header, size_prefix, binary, records_mode,
           partial, strict, fmt, limits, show_secrets):
    """Decode Kafka requests and responses from hex or any dump of them.

    INPUT is hex (spaces, colons, newlines, quotes and 0x prefixes are fine; bytes given as
    separate arguments, 00 00 00 1d ..., are joined), @FILE or - for stdin; a file or stdin may
    also hold xxd, hexdump -C, od, tshark -x (any link type), tcpdump -x/-xx/-X or Follow TCP
    Stream output, byte literals (Go, Java, C / xxd -i, Python, Node; a byte string's content
    without its quotes), base64, or raw bytes. A captured packet in hex (Wireshark's Copy as Hex
    Stream) is cut to its TCP payload. The 4-byte size prefix is detected. A request names its
    API and version in its header; a response needs --api and --version, or --request with the
    request it answers. With --no-header, an empty INPUT ('') is an empty body (a message with no
    fields at its version).

    Several frames in one input (a conversation, a log of hex lines, frames back to back) are
    decoded one after another, each response with the request it answers when the input holds
    it: a tree per frame under a heading naming its lines, a JSON list, or YAML documents.

    The JSON/YAML output of one frame is one object with api_key, api_name, api_version, kind,
    header, body and size (bytes after the size prefix); of several, each also has input (its
    lines, form, direction, and the frame it answers).

    Secrets (a SASL password, token or SCRAM proof, SCRAM salted passwords, delegation token
    HMACs, sensitive config values) are shown as {"redacted": REASON, "bytes": N} unless
    --show-secrets. A SaslAuthenticate's AuthBytes is decoded into Sasl beside it (the mechanism
    from a SaslHandshake earlier in the input, else recognised from the bytes), an Envelope's
    forwarded request into Request.

    \b
    Examples:
      kwire decode @fixtures/hex/metadata-request-v12.hex
      kwire decode 0000001d001200030000000100056b7769726500066b7769726506302e312e3000 --format json
      kwire decode @fixtures/hex/produce-response-v9.hex --api Produce --version 9
      kwire decode @fixtures/hex/produce-response-v9.hex --request @fixtures/hex/produce-request-v9.hex
      kwire decode ffffffff --api Metadata --version 1 --kind request --no-header
      kwire decode '' --api ListGroups --version 2 --kind request --no-header
      kwire decode 00 00 00 0a 00 12 00 00 00 00 00 07 ff ff
      kwire decode @fixtures/hex/dumps/kafkajs-produce.follow-tcp-hex.txt
      kwire decode @fixtures/hex/dumps/kafkajs-packets-4-9.tcpdump-X.txt --format json
    """
    from kwire_cli.codec.secrets import redact_message

    frames = read_frames(input, binary=binary, chained=not no_header and size_prefix is not False,
                         empty=no_header)
    target = resolve_target(api_name, api_version, kind, request_input, no_header, size_prefix,
                            input_on_stdin=input in (None, "-"), strict=strict)
    if len(frames) > 1:
        with limits.apply():
            _decode_frames(frames, target, records_mode, fmt, show_secrets)
        return
    data = frames[0].data
    with limits.apply():
        try:
            msg = target.decode(data, records=records_mode)
        except DecodeError as e:
            if partial:
                _show_partial(data, target, records_mode, fmt, e, show_secrets)
            raise
        redact_message(msg.api_key, msg.kind, msg.body, show=show_secrets, records=records_mode,
                       inner=_envelope_request(msg, target, records_mode))
        decode_values(msg.body)
    if fmt == "pretty":
        _print_message(msg)
    else:
        emit(msg.to_json(), fmt)
    _warn_violations([msg])
    _warn_cut([msg.body])


def _envelope_request(msg, target, records_mode) -> tuple[int, int] | None:
    """(api key, version) an Envelope response's forwarded request had, from --request."""
    from kwire_cli.codec.secrets import ENVELOPE, envelope_inner, redact_message

    rq = target.request_msg
    if msg.api_key != ENVELOPE or msg.kind != "response" or rq is None:
        return None
    redact_message(rq.api_key, rq.kind, rq.body, records=records_mode)  # decodes its RequestData
    return envelope_inner(rq.body)


def _decode_frames(frames, target, records_mode: str, fmt: str, show_secrets: bool = False) -> None:
    """Several frames: decoded one after another (responses with the request they answer, when
    the input holds it), printed as trees with a heading each, a JSON list or YAML documents.
    Each frame is printed and let go of before the next one decodes (a frame's tree can be
    hundreds of MB). A frame that does not decode is shown with its error; the command then
    fails (exit 1)."""
    from kwire_cli.cli.app import std_binary
    from kwire_cli.cli.target import decode_frames
    from kwire_cli.codec.secrets import ENVELOPE, SASL_HANDSHAKE, envelope_inner, redact_message
    from kwire_cli.records.stats import batch_stats, new_batch_stats
    from kwire_cli.render.json import write_json, write_yaml

    n = len(frames)
    mechanism = None  # the input is one conversation: the last SaslHandshake names the mechanism
    inners: dict[int, tuple[int, int] | None] = {}  # Envelope requests: index -> the request they carry
    stats = new_batch_stats()
    failed: list[tuple[int, Any]] = []
    violations: list[Any] = []
    out = None
    if fmt != "pretty":
        sys.stdout.flush()
        out = std_binary("stdout")
        if fmt == "json":
            out.write(b"[" if n else b"[]\n")
    for i, d in enumerate(decode_frames(frames, target, records_mode, lenient=not target.strict), start=1):
        m = d.message
        if m is not None:
            violations += m.violations
            if m.api_key == SASL_HANDSHAKE and m.kind == "request":
                mechanism = m.body.get("Mechanism")
            inner = None
            if m.api_key == ENVELOPE and m.kind == "response" and d.request is not None:
                inner = inners.get(d.request)
            redact_message(m.api_key, m.kind, m.body, show=show_secrets, mechanism=mechanism, inner=inner,
                           records=records_mode)
            decode_values(m.body)
            if m.api_key == ENVELOPE and m.kind == "request":
                inners[i - 1] = envelope_inner(m.body)
            batch_stats(m.body, stats)
        if d.error is not None:
            failed.append((i, d))
        if fmt == "pretty":
            _print_heading(i, n, d)
            if m is not None:
                _print_message(m)
            d.message = m = None
            continue
        where = {"frame": i, **d.frame.provenance()}
        if d.request is not None:
            where["answers_frame"] = d.request + 1
        doc: dict | None
        if m is not None:
            doc = {**m.to_json(), "input": where}
        else:
            assert d.error is not None
            doc = {"input": where, "error": {"kind": getattr(d.error, "kind", "decode-error"),
                                             "message": str(d.error)}}
        d.message = m = None
        assert out is not None
        if fmt == "json":
            out.write(b"\n  ")
            write_json(doc, out.write, careful=may_hold_floats(doc), level=1, end=b"," if i < n else b"\n]\n")
        else:
            out.write(b"---\n")
            write_yaml(doc, out.write)
        doc = None
    if out is not None:
        out.flush()
    _warn_violations_of(violations)
    _warn_caps(stats)
    if failed:
        i, d = failed[0]
        raise KwireError(f"{len(failed)} of {n} frames do not decode; frame {i} ({d.frame.where()}): {d.error}")


def _warn_cut(bodies: list) -> None:
    """A warning on stderr when record batches were cut at a frame's cap of records and headers
    (their ``error`` in the output says where; the tree or JSON is complete otherwise)."""
    from kwire_cli.records.stats import batch_stats, new_batch_stats
    stats = new_batch_stats()
    for body in bodies:
        batch_stats(body, stats)
    _warn_caps(stats)


def _warn_caps(stats: dict) -> None:
    """The warnings for record batches a frame's caps stopped (``records.stats`` counts them)."""
    if stats["item_cap"]:
        diagnostic("warning", f"{stats['item_cap']} record batch(es) cut at a frame's cap of records and "
                              "headers (--max-records raises it)")
    if stats["byte_cap"]:
        diagnostic("warning", f"{stats['byte_cap']} record batch(es) not decoded at a frame's cap of decompressed "
                              "bytes and value text (--max-decompressed raises it)")


def _print_heading(i: int, n: int, d) -> None:
    from kwire_cli.render.plaintree import Label
    from kwire_cli.render.printtree import print_tree

    head = f"── frame {i} of {n}: {d.frame.where()}"
    if d.request is not None:
        head += f", the answer to frame {d.request + 1}"
    if d.error is not None:
        head += f": does not decode: {d.error}"
    print_tree(Label(("\n" if i > 1 else "") + head, style="bold"))


def _warn_violations(messages) -> None:
    """One diagnostic line when what was shown breaks the format (the output lists where)."""
    _warn_violations_of([v for m in messages for v in m.violations])


def _warn_violations_of(violations) -> None:
    n = len(violations)
    if n:
        rules = sorted({v.rule for v in violations})
        diagnostic("warning", f"{n} violation{'s' if n > 1 else ''} of the Kafka protocol format "
                              f"({', '.join(rules)}): shown as sent and listed; --strict makes them errors")


def _print_message(m, error: str | None = None) -> None:
    """The tree of a message; with ``error`` (where lenient decoding stopped), its last violation is
    that stop, printed once, as the error line."""
    violations = m.violations[:-1] if error is not None else m.violations
    _print_tree(m.api_key, m.api_name, m.api_version, m.kind, m.header, m.body, m.size, error=error,
                layout_version=m.layout_version, notes=m.notes, violations=violations)


def _print_tree(api_key, api_name, version, kind, header, body, size, error: str | None = None,
                layout_version: int | None = None, notes=(), violations=()) -> None:
    from kwire_cli.codec.headers import request_header_version, response_header_version
    from kwire_cli.render.printtree import print_tree
    from kwire_cli.render.tree import message_tree
    from kwire_cli.spec.registry import registry

    reg = registry()
    api = reg.api(api_key)
    hv = hs = None
    if header is not None:
        lv = version if layout_version is None else layout_version
        hv = request_header_version(api, lv) if kind == "request" else response_header_version(api, lv)
        hs = reg.schema("RequestHeader" if kind == "request" else "ResponseHeader").struct
    print_tree(message_tree(api_name, api_key, version, kind, header, body, size, header_struct=hs,
                                  header_version=hv, body_struct=api.spec(kind).struct, error=error,
                                  layout_version=layout_version, notes=notes, violations=violations))


def _show_partial(data, target, records_mode, fmt, err, show_secrets=False) -> None:
    """Print what decoded before `err` (the caller then raises it: one line on stderr, exit 1)."""
    from kwire_cli.codec.partial import walk_message
    from kwire_cli.codec.secrets import redact_message

    lenient = getattr(err, "partial", None)
    if lenient is not None:  # what lenient decoding read before it had to stop, with its violations
        redact_message(lenient.api_key, lenient.kind, lenient.body, show=show_secrets, records=records_mode)
        if fmt == "pretty":
            _print_message(lenient, error=str(err))
        else:
            out = lenient.to_json()
            out["partial"] = True
            out["error"] = {"message": str(err), "path": err.field_path, "offset": err.offset}
            emit(out, fmt)
        return
    t = target
    size_prefixed = t.size_prefix
    if isinstance(err, TrailingBytes) and err.decoded is not None:
        data, size_prefixed = data[:err.offset], True  # the frame the size prefix says, then the bytes after it
    elif isinstance(err, DecodeError) and err.offset == 0 and err.reason.startswith("size prefix says"):
        data, size_prefixed = data[4:], False  # cut short: what there is after the size prefix
    try:
        pm = walk_message(data, t.kind, None if (t.kind == "request" and not t.no_header) else t.api.key,
                          t.version, size_prefixed=size_prefixed, header=not t.no_header, records=records_mode)
    except KwireError:
        return  # failed before anything decoded: there is no tree to show
    if size_prefixed is not t.size_prefix:
        pm.error = err  # the size prefix is what is wrong, whatever the walk stopped at
    redact_message(pm.api.key, pm.kind, pm.body, show=show_secrets, records=records_mode)
    if fmt == "pretty":
        _print_tree(pm.api.key, pm.api.name, pm.api_version, pm.kind, pm.header, pm.body, pm.size,
                    error=str(pm.error or err))
    else:
        if pm.error is None:  # cannot happen when the walk agrees with the codec; keep the codec's word
            pm.error = err
        emit(pm.to_json(), fmt)
