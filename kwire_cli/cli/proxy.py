"""kwire proxy: decode a running client's traffic by standing between it and its brokers."""
from __future__ import annotations

import sys

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, std_binary
from kwire_cli.cli.options import limit_options, parse_size, show_secrets_option
from kwire_cli.cli.schemas import values_options
from kwire_cli.errors import FilterError
from kwire_cli.render.safe import escape

EPILOG = """\b
Examples:
  kwire proxy --broker 127.0.0.1:9092 --listen 127.0.0.1:19092
  kwire proxy --broker kafka-1:9092 --broker kafka-2:9092 --listen 0.0.0.0:19092 --format jsonl --filter 'api=Produce'
  kwire proxy --broker kafka:9093 --broker-tls --ca ca.pem --listen 127.0.0.1:19092 --write-pcap client.pcap

\b
Point the client's bootstrap servers at the --listen address. Answers that tell clients where
brokers are (Metadata, FindCoordinator, DescribeCluster, Produce/Fetch NodeEndpoints,
ShareFetch/ShareAcknowledge, DescribeQuorum) are rewritten so that every later connection comes
through the proxy too: each broker gets a local port when it first appears (the listen port + 1,
+ 2 ... or --node-ports), said on stderr. Every client connection has its own connection to its
broker; bytes are forwarded as they come, and frames are decoded off the forwarding path.

\b
Output: the rows of `kwire pcap` (table or JSON lines) or its record lines (--format records),
flushed one by one. Frames the decoding falls behind on wait in a spool file (--decode-spool)
and are shown late. Ctrl-C (or SIGTERM) stops the proxy: the spooled frames are decoded first
(a second Ctrl-C counts them as not shown instead), then the summary is printed with --summary.
Secrets are redacted unless --show-secrets.

\b
Exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 the proxy could not start (a port in use, no
certificate), 2 usage."""


def _hostport(value: str, option: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise KwireUsageError(f"{option}: {value!r} is not HOST:PORT")
    return host, int(port)


@click.command(epilog=EPILOG)
@click.option("--broker", "brokers", multiple=True, required=True, metavar="HOST:PORT",
              help="A bootstrap broker (repeatable: the first that answers serves each new client connection).")
@click.option("--listen", default="127.0.0.1:19092", show_default=True, metavar="HOST:PORT",
              help="Where clients connect (their bootstrap address).")
@click.option("--advertise", metavar="HOST",
              help="The host written into rewritten answers (default: the listen host).")
@click.option("--node-ports", metavar="FIRST-LAST",
              help="Local ports for the brokers (default: the listen port + 1, + 2 ...).")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "records"]), default="table",
              show_default=True, help="One line per frame (table), one JSON object per line (jsonl), or one line "
              "per record produced or fetched, as kcat prints them (records: kwire pcap's --format records, a "
              "Produce's records when it is answered).")
@click.option("--filter", "filter_expr", metavar="EXPR", help="Show only frames matching EXPR (kwire pcap's filter).")
@click.option("--summary", is_flag=True, help="Print the summary when the proxy stops (with the "
              "answers of kwire pcap --summary: latency, connections, who, groups, lag, commits, producers, "
              "expert findings).")
@click.option("--write-pcap", "write_pcap", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Also write the conversations, as the client saw them, to a pcap file.")
@click.option("--listen-tls", nargs=2, metavar="CERT KEY", type=click.Path(exists=True, dir_okay=False),
              help="Accept TLS from clients with this certificate chain and key (PEM).")
@click.option("--broker-tls", is_flag=True, help="Talk TLS to the brokers.")
@click.option("--ca", type=click.Path(exists=True, dir_okay=False),
              help="CA certificates (PEM) the brokers' are checked against (default: the system's).")
@click.option("--client-cert", nargs=2, metavar="CERT KEY", type=click.Path(exists=True, dir_okay=False),
              help="A client certificate and key (PEM) for brokers that ask for one.")
@click.option("--insecure", is_flag=True, help="Do not check the brokers' certificates (testing only).")
@click.option("--decode-spool", "decode_spool", metavar="SIZE", default="1G", show_default=True,
              help="Frames the decoding falls behind on wait in a file in the temporary directory (TMPDIR) up "
              "to SIZE, and are shown late; past it they are counted as not shown. 0: no file. SIZE is bytes, "
              "or a number with K, M or G.")
@click.option("--decode-priority", "decode_priority", type=click.Choice(["yield", "low", "normal"]), default="yield",
              show_default=True, help="The decoding process's share of the CPU while the proxy forwards. yield: the "
              "idle scheduling class, and while the traffic is busy (256 KiB or more forwarded within 20 ms) the "
              "decoding is not fed at all: the frames go to the spool file and are decoded once the traffic "
              "has stayed under that for 100 ms (or the spool is half full), so the rows of a burst come after "
              "it (with --decode-spool 0, as low). low: the idle class only, a CPU when nothing else wants one (the "
              "clients and brokers on the same machine come first; under load the decoding falls behind into the "
              "spool and catches up later). normal: the "
              "same as the forwarding process (it keeps up, taking CPU from them).")
@limit_options(capture=True)
@show_secrets_option()
@values_options
def proxy(brokers, listen, advertise, node_ports, fmt, filter_expr, summary, write_pcap, decode_spool, decode_priority,
          listen_tls, broker_tls, ca, client_cert, insecure, limits, show_secrets):
    """Decode a running client's Kafka traffic by proxying it to its brokers.

    The client connects to --listen instead of its brokers; kwire forwards everything, rewrites
    the broker addresses in the answers so that the client's later connections come through
    the proxy too, and prints every request and answer as `kwire pcap` does. Because it
    terminates TLS itself, it decodes encrypted traffic without key logs; SASL passes through
    unchanged and is decoded, secrets redacted.
    """
    import ssl

    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.capture.session import Conversation
    from kwire_cli.output.options import OutputOptions
    from kwire_cli.output.show import FrameRows, RowPrinter
    from kwire_cli.output.writers import JsonLinesWriter, RecordsWriter, TableWriter, write_summary
    from kwire_cli.proxy import Proxy, ProxyConfig
    from kwire_cli.proxy.decoding import RowsOnly

    targets = [_hostport(b, "--broker") for b in brokers]
    lhost, lport = _hostport(listen, "--listen")
    ports = None
    if node_ports:
        a, _, b = node_ports.partition("-")
        if not (a.isdigit() and b.isdigit() and 0 < int(a) <= int(b) < 65536):
            raise KwireUsageError(f"--node-ports: {node_ports!r} is not FIRST-LAST")
        ports = (int(a), int(b))
    spool = 0 if str(decode_spool).strip() == "0" else parse_size(decode_spool, "--decode-spool")
    opts = OutputOptions(fmt=fmt, summary=summary, filter_expr=filter_expr, live=True)
    try:
        keep = opts.keep()
    except FilterError as e:
        raise KwireUsageError(str(e)) from None
    listen_ctx = broker_ctx = None
    try:
        if listen_tls:
            listen_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            listen_ctx.load_cert_chain(*listen_tls)
        if broker_tls or ca or client_cert:
            broker_ctx = ssl.create_default_context(cafile=ca)
            if client_cert:
                broker_ctx.load_cert_chain(*client_cert)
            if insecure:
                broker_ctx.check_hostname = False
                broker_ctx.verify_mode = ssl.CERT_NONE
    except (ssl.SSLError, OSError) as e:
        raise KwireUsageError(f"TLS: cannot load the certificates or keys: {e}") from None
    pcap_file = None
    if write_pcap:
        try:
            from kwire_cli.proxy.pcapout import open_pcap
            pcap_file = open_pcap(write_pcap)  # (open for the proxy's whole life)
        except OSError as e:
            raise KwireUsageError(f"--write-pcap: cannot write {write_pcap}: {e.strerror}") from None

    out = std_binary("stdout")
    if fmt == "table":
        writer = TableWriter(lambda line: out.write((line + "\n").encode("utf-8", "replace")), out.flush)
    elif fmt == "records":
        import io
        writer = RecordsWriter(io.TextIOWrapper(out, encoding="utf-8", errors="replace", write_through=True), None)
    else:
        writer = JsonLinesWriter(out)
    writer.start()
    writer.flush()
    # the summary is counted only when it is printed: for the rows alone it is work (a pass over every
    # record of every Produce request) the decoding process would spend falling behind
    sink = FrameRows(Conversation(show_secrets=show_secrets),
                     RowPrinter(writer, keep, live=True, summary=AnalysedSummary() if summary else RowsOnly()))

    def on_note(text: str) -> None:
        diagnostic("note", text)

    config = ProxyConfig(brokers=targets, listen=(lhost, lport), advertise=advertise, node_ports=ports,
                         listen_ssl=listen_ctx, broker_ssl=broker_ctx, max_frame=limits.frame_size(), pcap=pcap_file,
                         decode_spool=spool, decode_priority=decode_priority)
    import asyncio  # here, not at the top: `kwire --help` imports every command module

    with limits.apply():
        px = Proxy(config, sink, on_note)
        try:
            asyncio.run(_run(px))
        except OSError as e:
            from kwire_cli.errors import KwireError
            raise KwireError(f"cannot listen on {listen}: {e.strerror or e}") from None
        finally:
            if pcap_file is not None:
                pcap_file.close()
    st = px.stats
    decoded = px.decoded or {}
    for err in st.errors[:5]:
        diagnostic("note", escape(f"decoding: {err}"))
    if summary:
        result = decoded.get("summary") or AnalysedSummary().to_dict()
        result["proxy"] = {"connections": st.connections, "frames": st.frames, "rewritten": st.rewritten,
                           "upstream_failures": st.upstream_failures, "not_shown": st.not_shown,
                           "spooled": st.spooled,
                           "brokers": {f"{h}:{p}": f"{lh}:{lp}" for (h, p), (lh, lp) in px.book.local.items()}}
        if filter_expr:
            result["shown"] = decoded.get("shown", 0)
        write_summary(result, fmt, sys.stdout)
    diagnostic("note", escape(f"proxy stopped: {_n(st.connections, 'connection')}, {_n(st.frames, 'frame')}, "
                              f"{_n(st.rewritten, 'answer')} rewritten, "
                              f"{_n(st.upstream_failures, 'upstream failure')}"
                              + (f", {_n(st.spooled, 'frame')} decoded late from the spool file (at most "
                                 f"{st.spool_most / 1e6:,.1f} MB in it)" if st.spooled else "")
                              + (f", {_n(st.not_shown, 'frame')} not shown (decoding fell behind)"
                                 if st.not_shown else "")))


def _n(count: int, noun: str) -> str:
    """``1 answer``, ``2 answers``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


async def _run(px) -> None:
    import asyncio
    import signal

    await px.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second one: the frames still spooled are not decoded
            loop.add_signal_handler(sig, px.give_up)
        await px.close()
