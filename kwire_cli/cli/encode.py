"""kwire encode: a message as YAML or JSON -> its bytes, as hex or raw."""
from __future__ import annotations

import click

from kwire_cli.cli.app import KwireUsageError, read_text_source, std_binary
from kwire_cli.cli.options import complete_api, complete_version, resolve_api
from kwire_cli.errors import KwireError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--api", "api_name", metavar="NAME|KEY", shell_complete=complete_api, help="API, when FILE does not say.")
@click.option("--version", "api_version", type=int, metavar="N", shell_complete=complete_version,
              help="API version, when FILE does not say.")
@click.option("--kind", type=click.Choice(["request", "response"]), help="When FILE does not say (default request).")
@click.option("--raw", is_flag=True, help="Write raw bytes instead of hex.")
@click.option("--size-prefix/--no-size-prefix", "size_prefix", default=True, show_default=True,
              help="Start each message with its 4-byte size.")
@click.option("--no-header", is_flag=True, help="Write the bare body: no size prefix, no header.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), metavar="PATH",
              help="Write to PATH instead of stdout.")
def encode(file, api_name, api_version, kind, raw, size_prefix, no_header, output):
    """Encode Kafka messages written as YAML or JSON.

    FILE (a path, or - for stdin) holds one message per YAML document: api (name or key),
    version, kind (request or response, default request), an optional header (CorrelationId,
    ClientId) and the body. Fields left out take the spec's defaults; a field the version does
    not have is an error that names the versions that have it. kwire decode's JSON output is
    accepted as is, so decode | edit | encode round-trips (the Sasl, Request and Response it
    adds are left out; a value it redacted is an error: decode with --show-secrets to re-encode).
    The output is made from your own input, so nothing in it is redacted.

    Bytes fields are hex strings (quote them: 00 is a number in YAML), uuids Kafka's base64 text
    form or dashed hex, non-finite floats "NaN", "Infinity", "-Infinity". Output is one line
    of hex per message, or the raw bytes with --raw.

    \b
    Examples:
      kwire encode fixtures/yaml/metadata-request-v12.yaml
      kwire encode fixtures/yaml/produce-response-v9.yaml --no-size-prefix
      kwire encode fixtures/yaml/apiversions-request-v3.yaml --raw -o /tmp/apiversions.bin
      kwire decode @fixtures/hex/metadata-request-v12.hex --format json | kwire encode -
    """
    from kwire_cli.codec.secrets import for_encode
    from kwire_cli.inputs.messages import message_docs

    if api_name is not None:
        resolve_api(api_name)  # an unknown --api is a usage error, whatever FILE says
    text, name = read_text_source(file)
    docs = message_docs(text, name, api=api_name, version=api_version, kind=kind)
    for d in docs:  # what kwire decode added (Sasl, an Envelope's Request): not fields
        for_encode(d.api.key, d.body, f"{d.where}: body")
    blobs = [d.encode(size_prefix=size_prefix and not no_header, header=not no_header) for d in docs]
    if raw:
        payload = b"".join(blobs)
        if output:
            _write_file(output, payload)
            return
        stream = std_binary("stdout")
        if stream.isatty():
            raise KwireUsageError("refusing to write raw bytes to a terminal; redirect stdout or use -o PATH")
        stream.write(payload)
        stream.flush()
        return
    text_out = "".join(b.hex() + "\n" for b in blobs)
    if output:
        _write_file(output, text_out.encode("ascii"))
    else:
        click.echo(text_out, nl=False)


def _write_file(path: str, data: bytes) -> None:
    """-o PATH: a path that cannot be opened for writing is a usage error (exit 2), a write that
    fails (a full disk, /proc/version) an error (exit 1); both one line naming PATH."""
    try:
        f = open(path, "wb")  # noqa: SIM115 - closed below, where its errors are told apart
    except OSError as e:
        raise KwireUsageError(f"-o: cannot write {path}: {e.strerror or e}") from None
    try:
        with f:
            f.write(data)
    except OSError as e:
        raise KwireError(f"-o: writing {path} failed: {e.strerror or e}") from None
