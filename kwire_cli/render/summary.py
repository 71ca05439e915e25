"""The summary of `kwire pcap --summary` and `kwire spark-decode` as tables (the dict of
``kwire_cli.capture.summary.Summary.to_dict``: this module reads it, it does not import capture).
Client ids, brokers, API and error names, file names and damage details come from the captures:
every line and cell goes through ``kwire_cli.render.safe.escape``."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kwire_cli.render.console import make_console
from kwire_cli.render.safe import escape


def _row(t: Table, *cells: object) -> None:
    t.add_row(*(Text(escape(c)) for c in cells))  # Text: never read as markup, whatever the console


def print_summary(s: dict, console: Console | None = None) -> None:
    """Print a summary dict (``Summary.to_dict``, as `kwire pcap --summary` and spark-decode give it) as
    lines and tables."""
    con = console if console is not None else make_console()

    def line(text: str) -> None:
        con.print(Text(escape(text)))

    cap = s.get("capture") or {}
    # reconciled: every frame is counted as decoded or undecodable; said only when it is not so (a bug)
    line(f"files {cap.get('files', '?')}  packets {cap.get('packets', '?')}  frames {s['frames']}  "
         f"decoded {s['decoded']}  undecodable {s['undecodable']}"
         + ("" if s["reconciled"] else "  NOT RECONCILED: decoded and undecodable do not add up to the frames"))
    if s["undecodable_by_reason"]:
        line("undecodable by reason: " + ", ".join(f"{k} {v}" for k, v in s["undecodable_by_reason"].items()))
    if s.get("violations_by_rule"):
        line(f"decoded with violations of the format {s['decoded_with_violations']} (--strict makes them "
             "undecodable); violations by rule: "
             + ", ".join(f"{k} {v}" for k, v in s["violations_by_rule"].items()))
    t = Table(title="APIs", title_justify="left")
    for c in ("API", "version", "kind", "count", "bytes", "undecodable", "p50 ms", "p99 ms"):
        t.add_column(c, justify="right" if c not in ("API", "kind") else "left")
    for a in s["apis"]:
        f = lambda x: "" if x is None else f"{x:.3f}"  # noqa: E731
        _row(t, a["api_name"], a["api_version"], a["kind"], a["count"], a["bytes"], a["undecodable"],
             f(a["latency_p50_ms"]), f(a["latency_p99_ms"]))
    con.print(t)
    if s["error_codes"]:
        t = Table(title="Error codes", title_justify="left")
        t.add_column("error")
        t.add_column("frames", justify="right")
        for k, v in s["error_codes"].items():
            _row(t, k, v)
        con.print(t)
    t = Table(title="Clients", title_justify="left")
    t.add_column("client id")
    t.add_column("requests", justify="right")
    t.add_column("API versions used")
    for cid, c in s["clients"].items():
        _row(t, cid, c["requests"], ", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in c["versions"].items()))
    con.print(t)
    if s.get("tls"):
        print_tls(s["tls"], con)
    if s.get("auth"):
        print_auth(s["auth"], con)
    audit = s["negotiation_audit"]
    if s["advertised_by"]:
        if audit:
            t = Table(title="Negotiation audit: versions outside what the broker advertised", title_justify="left")
            for c in ("broker", "client id", "API", "version", "advertised", "requests"):
                t.add_column(c)
            for a in audit:
                adv = "missing" if a["advertised"] is None else f"{a['advertised'][0]}-{a['advertised'][1]}"
                _row(t, a["broker"], a["client_id"], a["api_name"], a["api_version"], adv, a["requests"])
            con.print(t)
        else:
            line("negotiation audit: every request is within what its broker advertised "
                 f"({', '.join(s['advertised_by'])})")
    else:
        line("negotiation audit: no ApiVersions answer in the capture")
    w = s["what_if_tagged_error_fields"]
    if w["applicable"]:  # the protocol proposal kwire diff --what-if-tagged weighs, on this capture's answers
        line(f"if ErrorCode/ErrorMessage were tagged fields (kwire diff --what-if-tagged): {w['applicable']} of "
             f"{w['responses']} responses would shrink, {w['bytes_now']} bytes to {w['bytes_tagged']} "
             f"(saving {w['saving']})")
    rb = s.get("record_batches") or {}
    if rb.get("batches"):
        codecs = ", ".join(f"{c} {n}" for c, n in rb["compression"].items())
        line(f"record batches: {rb['batches']} ({codecs}) holding {rb['records']} records; "
             f"bad CRC {rb['crc_invalid']}, not decoded {rb['batch_errors']}, "
             f"fields ending in a partial batch {rb['partial_trailing_batches']}")
        if rb.get("item_cap"):
            line(f"  {rb['item_cap']} of them cut at a frame's cap of records and headers "
                 f"(--max-records raises it)")
        if rb.get("byte_cap"):
            line(f"  {rb['byte_cap']} of them not decoded at a frame's cap of decompressed bytes and value text "
                 f"(--max-decompressed raises it)")
    dmg = s.get("damage") or {}
    if dmg:
        line("damage: " + ", ".join(f"{k} {v['events']} ({v['bytes']} bytes)" for k, v in dmg.items()))
        for d in s.get("damage_events", [])[:20]:
            where = f" packet {d['frame']}" if d["frame"] is not None else ""  # None: no one packet
            line(f"  {d['file']}{where} {d['conn'] or ''}: {d['kind']}: {d['detail']}")
    if "latency" in s:
        from kwire_cli.render.analysis import print_analysis
        print_analysis(s, con)


def print_auth(a: dict, con: Console) -> None:
    """The summary's ``auth`` section (``kwire_cli.capture.auth``): totals, then one line per
    connection and the failures."""
    mechs = ", ".join(f"{k} {v}" for k, v in a["mechanisms"].items())
    con.print(Text(escape(f"SASL authentications {a['authentications']} ({mechs}): succeeded {a['succeeded']}, "
              f"failed {a['failed']}, incomplete {a['incomplete']}, re-authentications {a['reauthentications']}, "
              f"on {a['connections']} connections")))
    t = Table(title="Authentication per connection", title_justify="left")
    for c in ("client", "broker", "mechanism", "principal", "result", "auths", "failed", "re-auths",
              "session lifetime ms"):
        t.add_column(c, justify="right" if c in ("auths", "failed", "re-auths", "session lifetime ms") else "left")
    opt = lambda x: "" if x is None else str(x)  # noqa: E731
    for c in a["by_connection"]:
        _row(t, c["client"], c["broker"], opt(c["mechanism"]), opt(c["principal"]), c["result"],
             str(c["authentications"]), str(c["failed"]), str(c["reauthentications"]),
             opt(c["session_lifetime_ms"]))
    con.print(t)
    if a["failures"]:
        t = Table(title="Authentication failures", title_justify="left")
        for c in ("client", "broker", "mechanism", "principal", "error", "message"):
            t.add_column(c)
        for f in a["failures"]:
            _row(t, f["client"], f["broker"], opt(f["mechanism"]), opt(f["principal"]), opt(f["error"]),
                 opt(f["message"]))
        con.print(t)


def print_tls(tls: dict, con: Console) -> None:
    """The summary's ``tls`` section (``kwire_cli.capture.summary.tls_section``)."""
    sessions = ", ".join(f"{k} {v}" for k, v in tls["sessions"].items()) or "no handshake seen"
    con.print(Text(escape(f"TLS connections {tls['connections']}, decrypted {tls['decrypted']} ({sessions}); "
                          f"{tls['record_bytes']} bytes of TLS records gave {tls['plaintext_bytes']} bytes "
                          "of plaintext")))
    for where, n in (tls.get("not_decrypted") or {}).items():
        con.print(Text(escape(f"  not decrypted (no keys): {where}: {n} connection{'s' if n != 1 else ''}")))
    for h in tls.get("handshakes") or []:
        con.print(Text(escape(f"  {h['conn']}: {h['detail']}")))
