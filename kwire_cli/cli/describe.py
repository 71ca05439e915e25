"""kwire list and kwire describe: the APIs kwire knows and their schemas."""
from __future__ import annotations

import click

from kwire_cli.cli.options import FORMATS, check_version, complete_api, complete_version, emit, resolve_api


@click.command("list", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pretty", show_default=True,
              help="Output: a table (pretty), JSON or YAML.")
def list_apis(fmt):
    """List every API: key, name, valid versions, flexible versions, and notes.

    The versions are every version any Kafka release shipped; the notes say which were removed and
    in which release ("v0-2 removed in 4.0": older clients and brokers still send them), which
    are unstable (not enabled by default), and an API's former name.

    \b
    Examples:
      kwire list
      kwire list --format json
    """
    from kwire_cli.spec.registry import registry
    rows = []
    for key, api in sorted(registry().apis.items()):
        vv, fv = api.request.valid_versions, api.request.flexible_versions
        first_flex = None if fv.empty or fv.lo > vv.hi else max(fv.lo, vv.lo)
        req = api.request
        rows.append({"api_key": key, "api_name": api.name, "valid_versions": str(vv), "min_version": vv.lo,
                     "max_version": vv.hi, "flexible_versions": None if first_flex is None else str(fv),
                     "first_flexible_version": first_flex,
                     "removed_versions": None if req.removed_versions.empty else str(req.removed_versions),
                     "removed_in": req.removed_in, "unstable_versions": req.unstable_list(),
                     "former_names": [n.removesuffix("Request") for n in req.former_names],
                     "notes": "; ".join(req.lifecycle()) or None})
    if fmt != "pretty":
        emit(rows, fmt)
        return
    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.tables import table
    print_renderable(table(None, [("key", "right"), "name", "versions", "flexible", "notes"],
                           [(r["api_key"], r["api_name"], r["valid_versions"], r["flexible_versions"] or "none",
                             r["notes"] or "") for r in rows]))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("api_name", metavar="API", shell_complete=complete_api)
@click.argument("version", type=int, required=False, metavar="[VERSION]", shell_complete=complete_version)
@click.option("--kind", type=click.Choice(["request", "response"]),
              help="Only the request or the response (default: both).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pretty", show_default=True,
              help="Output: trees (pretty), JSON or YAML.")
def describe(api_name, version, kind, fmt):
    """Show the request and response schemas of an API.

    API is a name (Metadata, metadata, MetadataRequest) or a key (3). With VERSION, the fields
    at that version with their wire types, nullability, tags and defaults; without, every field
    with the versions it exists, is nullable and is tagged in. Versions a Kafka release removed
    (still sent by older clients and brokers) say which release removed them, and unstable
    versions say so.

    \b
    Examples:
      kwire describe Metadata 12
      kwire describe 0 9 --kind response
      kwire describe ApiVersions --format yaml
    """
    api = resolve_api(api_name, "API")
    kinds = (kind,) if kind else ("request", "response")
    if version is not None:
        for k in kinds:
            check_version(api, version, k, "VERSION")
    if fmt != "pretty":
        from kwire_cli.render.schema import message_json
        out = {"api_key": api.key, "api_name": api.name, "version": version,
               "valid_versions": str(api.valid_versions), "flexible_versions": str(api.flexible_versions),
               "notes": api.request.lifecycle() if version is None else api.request.version_note(version)}
        for k in kinds:
            out[k] = message_json(api, api.spec(k), k, version)
        emit(out, fmt)
        return
    from rich.console import Group
    from rich.text import Text

    from kwire_cli.render.console import print_renderable
    from kwire_cli.render.schema import message_schema_tree
    parts = []
    for k in kinds:
        if parts:
            parts.append(Text(""))
        parts.append(message_schema_tree(api, api.spec(k), k, version))
    print_renderable(Group(*parts))
