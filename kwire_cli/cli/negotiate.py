"""`kwire negotiate`: which version of each API a client will use with these brokers (KIP-35)."""
from __future__ import annotations

import os
import sys
from typing import Any

import click


class ClientOption(click.Option):
    """--client: its help lists the bundled client profiles, read when the help is shown (so that
    loading the command stays cheap)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from kwire_cli.negotiation.client import client_profiles

        if "profile:" not in (self.help or ""):
            self.help = (f"{self.help}, or a bundled client profile: {', '.join(client_profiles())} (a name "
                         "alone is its newest version)")
        return super().get_help_record(ctx)


def _complete_client(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list:
    """Completion of --client: the profile names, and file paths."""
    from click.shell_completion import CompletionItem

    from kwire_cli.negotiation.client import client_profiles

    names = [CompletionItem(n) for n in client_profiles() if n.startswith(incomplete)]
    return [*names, CompletionItem(incomplete, type="file")]


@click.command()
@click.argument("brokers", nargs=-1, metavar="[BROKER...]")
@click.option("--bootstrap", "bootstraps", multiple=True, metavar="HOST:PORT",
              help="Ask live brokers: ApiVersions to this one, Metadata for the others, then "
                   "ApiVersions to each (as kafka-broker-api-versions.sh does). Repeatable. "
                   "Plaintext TCP unless --tls; SASL with --sasl-mechanism.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="--bootstrap: how long to wait for a connection and for each answer.")
@click.option("--tls", is_flag=True, help="--bootstrap: talk TLS to the brokers (SSL and SASL_SSL listeners).")
@click.option("--ca", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="--tls: CA certificates (PEM) the brokers' are checked against (default: the system's).")
@click.option("--insecure", is_flag=True, help="--tls: do not check the brokers' certificates (testing only).")
@click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                                                    case_sensitive=False),
              help="--bootstrap: authenticate with SASL (SASL_PLAINTEXT, or SASL_SSL with --tls) before asking.")
@click.option("--sasl-username", metavar="NAME", help="--sasl-mechanism: the user.")
@click.option("--sasl-password", metavar="PASSWORD", envvar="KWIRE_SASL_PASSWORD",
              help="--sasl-mechanism: the password (also read from KWIRE_SASL_PASSWORD, which keeps it out "
                   "of the process list).")
@click.option("--client", "client_file", metavar="FILE|NAME", cls=ClientOption, shell_complete=_complete_client,
              help="The client's ranges (default: what kwire's specs can speak): a file in any "
                   "broker-answer form")
@click.option("--require", "require_file", metavar="FILE",
              type=click.Path(allow_dash=True),
              help="YAML/JSON: feature name -> list of [api, min, max] it needs; each feature is "
                   "reported usable or not, and why.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
              show_default=True)
@click.option("--all", "show_all", is_flag=True,
              help="Table: also list the APIs that no broker advertises.")
def negotiate(brokers: tuple[str, ...], bootstraps: tuple[str, ...], timeout: float, tls: bool, ca: str | None,
              insecure: bool, sasl_mechanism: str | None, sasl_username: str | None, sasl_password: str | None,
              client_file: str | None, require_file: str | None, fmt: str, show_all: bool) -> None:
    """Intersect what brokers advertise with what a client supports.

    Each BROKER is a file (or `-` for stdin, or inline hex) holding one or more ApiVersions
    answers: ApiVersionsResponse bytes (any version, with or without size prefix and header),
    raw or in any dump form `kwire decode` reads (hex, xxd, hexdump -C, od, tshark -x, tcpdump
    -x/-X, Follow TCP Stream, byte literals, base64; in a dumped conversation, the answers to its
    ApiVersions requests), the output of kafka-broker-api-versions.sh (or kafka-cluster.sh
    api-versions; pasted indented, quoted or cut off too), the Java client's DEBUG lines
    (Recorded API versions for node ...), librdkafka debug=feature log lines, YAML/JSON with
    ApiKeys (as `kwire decode` writes it), or a pcap/pcapng capture, gzip-compressed or not (its
    ApiVersions answers, one per broker address). A BROKER is read as decode's INPUT is: -
    for stdin, @FILE or a path that exists for a file, else the text itself. With --bootstrap,
    kwire asks the brokers themselves instead: over TLS with --tls (--ca, --insecure), after a
    SASL PLAIN or SCRAM-SHA-256/512 exchange with --sasl-mechanism, --sasl-username and
    --sasl-password (or KWIRE_SASL_PASSWORD).

    For each API: the client's range, each broker's, the range common to all brokers (the max
    of the mins, the min of the maxes) and the version chosen (the highest both sides hold), or
    why none can be. --client names the client: a file, or a bundled profile (librdkafka,
    java-4.1, kafka-python, franz-go, kafkajs, ...) of what that client requests at most, so
    "will this client work with this broker" is one command. Exit codes: 0 done, 1 unreadable
    input or a broker that cannot be asked, 2 usage.

    \b
    Examples:
      kwire negotiate --bootstrap localhost:9092
      kwire negotiate --client librdkafka --bootstrap kafka-1:9092 --bootstrap kafka-2:9092
      KWIRE_SASL_PASSWORD=... kwire negotiate --bootstrap kafka-1:9094 --tls --ca ca.pem \\
          --sasl-mechanism SCRAM-SHA-512 --sasl-username alice
      kwire negotiate broker1.hex broker2.hex --client java-4.1
      kwire negotiate versions.txt --require features.yaml --format json
      kwire negotiate fixtures/captures/kafkajs-produce.pcap --client kafkajs
    """
    from kwire_cli.cli.app import KwireUsageError
    from kwire_cli.inputs import SourceError
    from kwire_cli.negotiation import (
        NegotiationError,
        kwire_api_names,
        kwire_client_ranges,
        load_client_file,
        load_requirements,
        read_broker_argument,
        unique_addresses,
    )
    from kwire_cli.negotiation import negotiate as run
    from kwire_cli.negotiation.client import resolve_client
    from kwire_cli.negotiation.render import render_json, render_table, render_yaml

    if not brokers and not bootstraps:
        raise KwireUsageError("give BROKER answers (files, -, inline hex) or --bootstrap HOST:PORT")
    client_path: Any = None
    if client_file:
        try:
            client_path = resolve_client(client_file)
        except NegotiationError as e:
            raise KwireUsageError(str(e)) from None
    if require_file and require_file != "-":
        if os.path.isdir(require_file):
            raise KwireUsageError(f"--require: {require_file} is a directory")
        if not os.path.isfile(require_file):
            raise KwireUsageError(f"--require: no such file: {require_file}")
    if sum(1 for b in brokers if b == "-") + (client_file == "-") + (require_file == "-") > 1:
        raise KwireUsageError("standard input (-) can be used only once")
    if (tls or ca or insecure or sasl_mechanism or sasl_username or sasl_password) and not bootstraps:
        raise KwireUsageError("--tls, --ca, --insecure and --sasl-* go with --bootstrap")
    if (ca or insecure) and not tls:
        raise KwireUsageError("--ca and --insecure go with --tls")
    if sasl_mechanism and (sasl_username is None or sasl_password is None):
        raise KwireUsageError("--sasl-mechanism needs --sasl-username and --sasl-password (or KWIRE_SASL_PASSWORD)")
    if (sasl_username or sasl_password) and not sasl_mechanism:
        raise KwireUsageError("--sasl-username and --sasl-password go with --sasl-mechanism")
    if bootstraps:
        from kwire_cli.negotiation.live import parse_address
        for b in bootstraps:
            try:
                parse_address(b)
            except ValueError as e:
                raise KwireUsageError(f"--bootstrap: {e}") from None

    answers = []
    for i, b in enumerate(brokers, start=1):
        try:
            answers.extend(read_broker_argument(b, what=f"broker {i}", source=f"argument {i}"))
        except SourceError as e:  # an input that cannot be read: a usage error
            raise KwireUsageError(str(e)) from None
    if bootstraps:
        from kwire_cli.negotiation.live import ConnectOptions, ask_brokers
        answers.extend(ask_brokers(list(bootstraps), ConnectOptions(
            timeout=timeout, tls=_tls_context(ca, insecure) if tls else None,
            sasl=(sasl_mechanism.upper(), sasl_username or "", sasl_password or "") if sasl_mechanism else None)))
    unique_addresses(answers)
    names = kwire_api_names()
    client = load_client_file(client_path) if client_path is not None else kwire_client_ranges()
    required = load_requirements(require_file, names) if require_file else None
    result = run(client, answers, required, names)

    if fmt == "json":
        sys.stdout.write(render_json(result))
    elif fmt == "yaml":
        sys.stdout.write(render_yaml(result))
    else:
        render_table(result, file=sys.stdout, show_all=show_all)


def _tls_context(ca: str | None, insecure: bool) -> Any:
    """The TLS client context of --tls: the brokers' certificates checked against --ca (else the
    system's CAs) and their host names, unless --insecure."""
    import ssl

    from kwire_cli.cli.app import KwireUsageError
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (ssl.SSLError, OSError) as e:
        raise KwireUsageError(f"--ca: cannot read {ca}: {getattr(e, 'strerror', None) or e}") from None
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
