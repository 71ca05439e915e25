"""`kwire negotiate`: which version of each API a client will use with these brokers (KIP-35)."""
from __future__ import annotations

import os
import sys

import click


@click.command()
@click.argument("brokers", nargs=-1, required=True, metavar="BROKER...")
@click.option("--client", "client_file", metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="The client's ranges, in any broker-answer form (default: what kwire's specs "
                   "can speak).")
@click.option("--require", "require_file", metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="YAML/JSON: feature name -> list of [api, min, max] it needs; each feature is "
                   "reported usable or not, and why.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
              show_default=True)
@click.option("--all", "show_all", is_flag=True,
              help="Table: also list the APIs that no broker advertises.")
def negotiate(brokers: tuple[str, ...], client_file: str | None, require_file: str | None,
              fmt: str, show_all: bool) -> None:
    """Intersect what brokers advertise with what a client supports.

    Each BROKER is a file (or `-` for stdin, or inline hex) holding one or more ApiVersions
    answers: ApiVersionsResponse bytes (any version, with or without size prefix and header),
    raw or as hex in any form `kwire decode` reads (plain, xxd, hexdump -C, tshark -x), the
    output of kafka-broker-api-versions.sh, librdkafka debug=feature log lines, YAML/JSON with
    ApiKeys (as `kwire decode` writes it), or a pcap/pcapng capture, gzip-compressed or not (its
    ApiVersions answers, one per broker address).

    For each API: the client's range, each broker's, the range common to all brokers (the max
    of the mins, the min of the maxes) and the version chosen (the highest both sides hold), or
    why none can be. Exit codes: 0 done, 1 unreadable input, 2 usage.

    \b
    Examples:
      kwire negotiate broker1.hex broker2.hex
      kwire negotiate versions.txt --require features.yaml --format json
    """
    from kwire_cli.cli.app import KwireUsageError
    from kwire_cli.negotiation import (
        kwire_api_names,
        kwire_client_ranges,
        load_broker_file,
        load_client_file,
        load_requirements,
        parse_broker_input,
        unique_addresses,
    )
    from kwire_cli.negotiation import negotiate as run
    from kwire_cli.negotiation.render import render_json, render_table, render_yaml

    for name, path in (("--client", client_file), ("--require", require_file)):
        if path and path != "-" and not os.path.isfile(path):
            raise KwireUsageError(f"{name}: no such file: {path}")
    if sum(1 for b in brokers if b == "-") + (client_file == "-") + (require_file == "-") > 1:
        raise KwireUsageError("standard input (-) can be used only once")

    answers = []
    for i, b in enumerate(brokers, start=1):
        if os.path.isdir(b):
            raise KwireUsageError(f"broker {i}: {b} is a directory (give the files in it)")
        if b == "-" or os.path.isfile(b):
            answers.extend(load_broker_file(b))
        elif not os.path.exists(b) and _looks_inline(b):
            answers.extend(parse_broker_input(b, source=f"argument {i}"))
        else:
            raise KwireUsageError(f"broker {i}: no such file: {b} (and not inline hex)")
    unique_addresses(answers)
    names = kwire_api_names()
    client = load_client_file(client_file) if client_file else kwire_client_ranges()
    required = load_requirements(require_file, names) if require_file else None
    result = run(client, answers, required, names)

    if fmt == "json":
        sys.stdout.write(render_json(result))
    elif fmt == "yaml":
        sys.stdout.write(render_yaml(result))
    else:
        render_table(result, file=sys.stdout, show_all=show_all)


def _looks_inline(arg: str) -> bool:
    from kwire_cli.negotiation.forms import is_hex_text

    return len(arg.strip()) >= 12 and is_hex_text(arg)
