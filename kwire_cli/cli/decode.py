"""kwire decode: bytes in any common dump form -> the message as a tree, JSON or YAML."""
from __future__ import annotations

import click

from kwire_cli.cli.common import (FORMATS, KwireUsageError, check_version, emit, read_input,
                                  resolve_api)
from kwire_cli.errors import DecodeError, KwireError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input", required=False, metavar="[INPUT]")
@click.option("--api", "api_name", metavar="NAME|KEY",
              help="API of a response or bare body, by name (Metadata) or key (3).")
@click.option("--version", "api_version", type=int, metavar="N",
              help="API version of a response or bare body.")
@click.option("--kind", type=click.Choice(["request", "response"]),
              help="request or response (default: response when --api or --request is given, "
                   "else request).")
@click.option("--request", "request_input", metavar="HEX|@FILE",
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
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pretty", show_default=True,
              help="Output: a tree (pretty), or one JSON / YAML object.")
def decode(input, api_name, api_version, kind, request_input, no_header, size_prefix, binary, records_mode,
           partial, fmt):
    """Decode one Kafka request or response.

    INPUT is hex (spaces, colons, newlines and 0x prefixes are fine), @FILE or - for stdin; a file
    or stdin may also hold xxd, hexdump -C or tshark -x output, or raw bytes. The 4-byte size
    prefix is detected. A request names its API and version in its header; a response needs
    --api and --version, or --request with the request it answers.

    The JSON/YAML output is one object with api_key, api_name, api_version, kind, header,
    body and size (bytes after the size prefix).

    \b
    Examples:
      kwire decode @fixtures/hex/metadata-request-v12.hex
      kwire decode 0000001d0012000300000001000d6b61666b612d707974686f6e00 --format json
      kwire decode @fixtures/hex/produce-response-v9.hex --api Produce --version 9
      kwire decode @fixtures/hex/produce-response-v9.hex --request @fixtures/hex/produce-request-v9.hex
      kwire decode 0000000000 --api Metadata --version 1 --kind request --no-header
    """
    from kwire_cli.codec import decode_body, decode_request, decode_response

    data = read_input(input, binary=binary)
    api = resolve_api(api_name) if api_name is not None else None
    request_msg = None
    if request_input is not None:
        if input in (None, "-") and request_input == "-":
            raise KwireUsageError("INPUT and --request cannot both read stdin")
        try:
            request_msg = decode_request(read_input(request_input, what="--request"))
        except KwireError as e:
            raise KwireError(f"--request: {e}") from None
        if api is not None and api.key != request_msg.api_key:
            raise KwireUsageError(f"--api {api_name} does not match the request, which is "
                                  f"{request_msg.api_name} (api key {request_msg.api_key})")
        if api_version is not None and api_version != request_msg.api_version:
            raise KwireUsageError(f"--version {api_version} does not match the request, which is "
                                  f"v{request_msg.api_version}")
        api = resolve_api(str(request_msg.api_key))
        api_version = request_msg.api_version
    if kind is None:
        kind = "response" if (api is not None or request_msg is not None) else "request"
    if kind == "response" or no_header:
        if api is None or api_version is None:
            what = "a bare body" if no_header else "a response"
            raise KwireUsageError(f"{what} does not name its API: give --api NAME --version N"
                                  + ("" if no_header else ", or --request HEX"))
    if api_version is not None and api is not None:
        check_version(api, api_version, kind)
    if no_header and size_prefix:
        raise KwireUsageError("--no-header bodies have no size prefix; drop --size-prefix")

    try:
        if no_header:
            msg = decode_body(data, api.key, api_version, kind, records=records_mode)
        elif kind == "request":
            msg = decode_request(data, size_prefixed=size_prefix, records=records_mode)
        else:
            msg = decode_response(data, api.key, api_version, size_prefixed=size_prefix,
                                  records=records_mode)
    except DecodeError as e:
        if partial:
            _show_partial(data, kind, api, api_version, size_prefix, no_header, records_mode, fmt, e)
        raise
    if kind == "request" and not no_header:
        if api is not None and msg.api_key != api.key:
            raise KwireError(f"the request is {msg.api_name} (api key {msg.api_key}), not {api.name} "
                             f"as --api says")
        if api_version is not None and msg.api_version != api_version:
            raise KwireError(f"the request is {msg.api_name} v{msg.api_version}, not v{api_version} "
                             f"as --version says")
    if request_msg is not None and msg.header and request_msg.header:
        want, got = request_msg.header.get("CorrelationId"), msg.header.get("CorrelationId")
        if want != got:
            click.echo(f"kwire: warning: the response's CorrelationId {got} differs from the "
                       f"request's {want}", err=True)
    if fmt == "pretty":
        _print_tree(msg.api_key, msg.api_name, msg.api_version, msg.kind, msg.header, msg.body, msg.size)
    else:
        emit(msg.to_json(), fmt)


def _print_tree(api_key, api_name, version, kind, header, body, size, error: str | None = None) -> None:
    from kwire_cli.codec.headers import request_header_version, response_header_version
    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.tree import message_tree
    from kwire_cli.spec.registry import registry

    reg = registry()
    api = reg.api(api_key)
    hv = hs = None
    if header is not None:
        hv = request_header_version(api, version) if kind == "request" else response_header_version(api, version)
        hs = reg.schema("RequestHeader" if kind == "request" else "ResponseHeader").struct
    print_renderable(message_tree(api_name, api_key, version, kind, header, body, size, header_struct=hs,
                                  header_version=hv, body_struct=api.spec(kind).struct, error=error))


def _show_partial(data, kind, api, api_version, size_prefix, no_header, records_mode, fmt, err) -> None:
    """Print what decoded before `err` (the caller then raises it: one line on stderr, exit 1)."""
    from kwire_cli.codec.partial import walk_message

    try:
        pm = walk_message(data, kind, None if (kind == "request" and not no_header) else api.key, api_version,
                          size_prefixed=size_prefix, header=not no_header, records=records_mode)
    except KwireError:
        return  # failed before anything decoded: there is no tree to show
    if fmt == "pretty":
        _print_tree(pm.api.key, pm.api.name, pm.api_version, pm.kind, pm.header, pm.body, pm.size,
                    error=str(pm.error or err))
    else:
        if pm.error is None:  # cannot happen when the walk agrees with the codec; keep the codec's word
            pm.error = err
        emit(pm.to_json(), fmt)
