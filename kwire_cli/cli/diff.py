"""kwire diff: schema changes between two versions of an API, their cost in bytes, and the
ErrorCode/ErrorMessage-as-tagged-fields what-if."""
from __future__ import annotations

from typing import Any

import click

from kwire_cli.cli.app import KwireUsageError, argument_blocks, open_source, read_text_source, source_blocks
from kwire_cli.cli.options import (
    FORMATS,
    check_version,
    complete_api,
    complete_api_versions,
    complete_input,
    complete_version,
    emit,
    resolve_api,
)
from kwire_cli.cli.target import decode_frames, resolve_target
from kwire_cli.inputs import InputError
from kwire_cli.inputs.frames import split_frames
from kwire_cli.render.safe import escape


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, metavar="API V1 V2 | MESSAGE...", shell_complete=complete_api_versions)
@click.option("--kind", type=click.Choice(["request", "response"]),
              help="Only the request or the response schema (default: both); for --what-if-tagged, "
                   "the kind of hex MESSAGEs.")
@click.option("--bytes", "bytes_file", metavar="MESSAGE.yaml",
              help="Encode this message at V1 and V2 and show the bytes of each part.")
@click.option("--what-if-tagged", "what_if", metavar="FIELD,...",
              help="Bytes each MESSAGE would save or cost if these fields were tagged "
                   "(e.g. ErrorCode,ErrorMessage).")
@click.option("--api", "api_name", metavar="NAME|KEY", shell_complete=complete_api,
              help="API of hex response MESSAGEs (--what-if-tagged).")
@click.option("--version", "api_version", type=int, metavar="N", shell_complete=complete_version,
              help="Version of hex response MESSAGEs.")
@click.option("--request", "request_input", metavar="HEX|@FILE", shell_complete=complete_input,
              help="The request a hex response MESSAGE answers (gives API and version).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pretty", show_default=True,
              help="Output: tables (pretty), JSON or YAML.")
def diff(args, kind, bytes_file, what_if, api_name, api_version, request_input, fmt):
    """Compare two versions of an API, or weigh making fields tagged.

    kwire diff API V1 V2 lists what changes from V1 to V2 in the request and response schemas:
    fields added and removed, wire type (e.g. STRING to COMPACT_STRING when the message becomes
    flexible), nullability, mandatory vs tagged, plus flexible or not and the header version, and
    whether either version was removed by a Kafka release or is unstable. With --bytes it encodes
    one message (YAML) at both versions, leaving out the fields a version lacks, and shows the
    bytes of each part.

    kwire diff --what-if-tagged FIELDS MESSAGE... reports, per message and in total, the bytes
    that moving FIELDS into the tagged section would save or cost: a field at its default (0,
    null) then costs nothing, a set one costs tag + size + value. MESSAGE is a YAML/JSON file
    (several documents are several messages), or hex / @FILE in any form kwire decode reads
    (several frames are several messages; a response needs --api and --version, or --request,
    unless its request is in the input too). Only flexible versions have tagged fields.

    \b
    Examples:
      kwire diff Metadata 8 12
      kwire diff Produce 8 9 --kind response --format json
      kwire diff Metadata 1 12 --bytes fixtures/yaml/metadata-request-v12.yaml
      kwire diff --what-if-tagged ErrorCode,ErrorMessage fixtures/yaml/produce-response-v9.yaml
      kwire diff --what-if-tagged ErrorMessage @fixtures/hex/findcoordinator-response-v4.hex --api 10 --version 4
    """
    if what_if is not None:
        if bytes_file is not None:
            raise KwireUsageError("--what-if-tagged and --bytes do not go together")
        _what_if(args, what_if, kind, api_name, api_version, request_input, fmt)
        return
    if api_name or api_version is not None or request_input:
        raise KwireUsageError("--api, --version and --request go with --what-if-tagged; "
                              "give the API and versions as arguments: kwire diff API V1 V2")
    if len(args) != 3:
        raise KwireUsageError(f"expected API V1 V2, got {len(args)} argument{'s' if len(args) != 1 else ''}")
    api = resolve_api(args[0], "API")
    v1, v2 = (_int_arg(a, n) for a, n in ((args[1], "V1"), (args[2], "V2")))
    kinds = (kind,) if kind else ("request", "response")
    for k in kinds:
        check_version(api, v1, k, "V1")
        check_version(api, v2, k, "V2")
    if bytes_file is not None:
        _bytes(api, v1, v2, bytes_file, kind, fmt)
        return
    from kwire_cli.spec.diff import schema_diff
    d = schema_diff(api, v1, v2, kinds)
    if fmt != "pretty":
        out = d.to_json()
        # "v2": "removed in 4.0", "v6": "unstable": what a reader should know of either version
        out["version_notes"] = {f"v{v}": n for v in (v1, v2) if (n := api.request.version_note(v))}
        emit(out, fmt)
        return
    from rich.console import Group
    from rich.text import Text

    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.tables import table
    parts = []
    for kd in d.kinds:
        yn = lambda b: "flexible" if b else "not flexible"  # noqa: E731
        spec = api.spec(kd.kind)
        notes = [f"v{v} {n}" for v in (v1, v2) if (n := spec.version_note(v))]
        facts = [f"{kd.spec_name} v{v1} → v{v2}" + (f" ({'; '.join(notes)})" if notes else "")]
        facts.append(yn(kd.flexible[0]) + (f" → {yn(kd.flexible[1])}" if kd.flexible[0] != kd.flexible[1] else ""))
        h1, h2 = kd.header_version
        facts.append(f"header v{h1}" + (f" → v{h2}" if h1 != h2 else ""))
        if kd.changes:
            parts.append(table(", ".join(facts), ["change", "field", f"v{v1}", f"v{v2}"],
                               [(c.change.replace("_", " "), c.path, c.before or "", c.after or "")
                                for c in kd.changes]))
        else:
            parts.append(Text(escape(", ".join(facts)) + ": no field changes", style="bold"))
        parts.append(Text(""))
    print_renderable(Group(*parts[:-1]))


def _int_arg(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise KwireUsageError(f"{name} must be a version number, got {text!r}") from None


def _bytes(api, v1: int, v2: int, path: str, kind: str | None, fmt: str) -> None:
    from kwire_cli.inputs.messages import message_docs
    from kwire_cli.whatif import bytes_diff
    text, name = read_text_source(path, "--bytes")
    docs = message_docs(text, name, api=str(api.key), kind=kind)
    results = []
    for doc in docs:
        for k in (doc.kind,):
            check_version(api, v1, k, "V1")
            check_version(api, v2, k, "V2")
        results.append(bytes_diff(doc, v1, v2))
    if fmt != "pretty":
        emit(results[0] if len(results) == 1 else results, fmt)
        return
    from rich.console import Group
    from rich.text import Text

    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.tables import signed, table
    out = []
    for r in results:
        rows = [(p["part"], "—" if p["from"] is None else p["from"], "—" if p["to"] is None else p["to"],
                 signed(p["delta"])) for p in r["parts"]]
        t = r["total"]
        rows.append((Text("total", style="bold"), t["from"], t["to"], signed(t["delta"])))
        out.append(table(f"{r['api_name']} {r['kind']}: bytes at v{v1} and v{v2}",
                         ["part", (f"v{v1}", "right"), (f"v{v2}", "right"), ("Δ", "right")], rows))
        for side, v in (("from", v1), ("to", v2)):
            if r["dropped"][side]:
                out.append(Text(escape(f"left out at v{v}: {', '.join(r['dropped'][side])}"), style="dim"))
    print_renderable(Group(*out))


def _load_messages(arg: str, kind, api_name, api_version, request_input) -> list[tuple[str, Any]]:
    """(label, Message) for each message in one MESSAGE argument: a YAML/JSON file (several
    documents are several messages), or hex / @FILE / a file / raw bytes in any dump form (several
    frames are several messages)."""
    from kwire_cli.codec import decode_request, decode_response
    from kwire_cli.inputs.messages import load_documents, message_docs

    src = open_source(arg, what="MESSAGE", forms="a YAML/JSON file, hex, @FILE or - (stdin)", paths="existing")
    label = src.name
    frames = None
    if src.origin == "argument":  # on the command line a MESSAGE is bytes; YAML comes in files
        blocks, src = argument_blocks(arg, "MESSAGE")
        label = src.name if blocks is None else (f"{arg[:24]}…" if len(arg) > 24 else arg)
        if blocks is not None:
            frames = split_frames(blocks)
    if frames is None:
        try:
            frames = split_frames(source_blocks(src.data))
        except InputError as hex_error:
            try:
                docs = load_documents(src.data.decode("utf-8", errors="replace"), label)
            except InputError:
                docs = []
            if not docs or not all(isinstance(d, dict) for d in docs):
                raise InputError(f"{label}: neither hex nor a YAML/JSON message ({hex_error})") from None
    if frames is None:  # YAML / JSON message documents
        docs = message_docs(src.data.decode("utf-8", errors="replace"), label)
        out = []
        for i, doc in enumerate(docs):
            enc = doc.encode(size_prefix=False)
            if doc.kind == "request":
                msg = decode_request(enc, size_prefixed=False, records="hex")
            else:
                msg = decode_response(enc, doc.api.key, doc.version, size_prefixed=False, records="hex")
            out.append((label if len(docs) == 1 else f"{label} #{i + 1}", msg))
        return out
    target = resolve_target(api_name, api_version, kind, request_input, input_on_stdin=arg == "-")
    if len(frames) == 1:
        return [(label, target.decode(frames[0].data, records="hex"))]
    out = []
    for i, d in enumerate(decode_frames(frames, target, "hex"), start=1):
        where = f"{label} #{i} ({d.frame.lines})"
        if d.error is not None:
            raise InputError(f"{where}: {d.error}")
        out.append((where, d.message))
    return out


def _what_if(args, fields_text: str, kind, api_name, api_version, request_input, fmt) -> None:
    from kwire_cli.whatif import sum_what_if, what_if_message
    fields = [f.strip() for f in fields_text.split(",") if f.strip()]
    if not fields:
        raise KwireUsageError("--what-if-tagged needs field names, e.g. ErrorCode,ErrorMessage")
    if not args:
        raise KwireUsageError("--what-if-tagged needs at least one MESSAGE (YAML/JSON file, hex or @FILE)")
    results = []
    for a in args:
        for label, msg in _load_messages(a, kind, api_name, api_version, request_input):
            r = what_if_message(msg, fields)
            r["source"] = label
            results.append(r)
    total = sum_what_if(results)
    if fmt != "pretty":
        emit({"fields": fields, "messages": results, "total": total}, fmt)
        return
    from rich.console import Group
    from rich.text import Text

    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.tables import saving_text, table
    out = []
    for r in results:
        title = f"{r['source']}: {r['api_name']} v{r['version']} {r['kind']}, {r['bytes_now']} bytes"
        if not r["applicable"]:
            out.append(Text(escape(f"{title}: not applicable: {r['reason']}"), style="bold"))
            continue
        rows = [(p["path"], p["instances"], p["at_default"], p["set"], p["bytes_now"], p["bytes_tagged"],
                 saving_text(p["saving"])) for p in r["per_field"]]
        if r["tag_count_bytes"]:
            rows.append(("tag counts", "", "", "", "", r["tag_count_bytes"], saving_text(-r["tag_count_bytes"])))
        rows.append((Text("message", style="bold"), "", "", "", r["bytes_now"], r["bytes_tagged"],
                     saving_text(r["saving"])))
        out.append(table(title, ["field", ("count", "right"), ("default", "right"), ("set", "right"),
                                 ("bytes now", "right"), ("tagged", "right"), ("", "right")], rows))
    if len(results) > 1:
        out.append(Text(escape(f"total over {total['messages']} messages ({total['applicable']} applicable): "
                               f"{total['bytes_now']} bytes now, {total['bytes_tagged']} with "
                               f"{', '.join(fields)} tagged: "), style="bold") + saving_text(total["saving"]))
    print_renderable(Group(*out))
