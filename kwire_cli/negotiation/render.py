"""Show a negotiation result: a Rich table (markup off) for people, JSON/YAML for programs. Broker
addresses, racks, feature names, errors, notes and file names come from the answers: every text
of the table goes through ``kwire_cli.render.safe.escape``."""
from __future__ import annotations

import json
import re
import shutil
import sys
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kwire_cli.render.safe import escape


def _r(v: list | None) -> str:
    if v is None:
        return "-"
    lo, hi = v
    return str(lo) if lo == hi else f"{lo}-{hi}"


def render_json(result: dict) -> str:
    return json.dumps(result, indent=2) + "\n"


def render_yaml(result: dict) -> str:
    import yaml

    return yaml.safe_dump(result, sort_keys=False, default_flow_style=None, width=100)


def _api_label(e: dict) -> str:
    name = e["api_name"]
    return name if name.startswith("UNKNOWN(") else f"{name}({e['api_key']})"


def _short(text: str, labels: dict[str, str]) -> str:
    """Write broker addresses as their column labels, in one pass (an address may look like a label)."""
    if not text or not labels:
        return text
    pattern = re.compile("|".join(re.escape(a) for a in sorted(labels, key=len, reverse=True)))
    return pattern.sub(lambda m: labels[m.group(0)], text)


def render_table(result: dict, file: IO[str] | None = None, width: int | None = None,
                 show_all: bool = False) -> None:
    """Print the API table, the feature table and what each broker said beyond its ranges.

    Brokers are columns B1..Bn (listed under the table). Unless `show_all`, APIs that no broker
    lists are left out of the table (they are always in the JSON/YAML).
    """
    file = file or sys.stdout
    if width is None:
        width = shutil.get_terminal_size((160, 24)).columns if file.isatty() else 160
    console = Console(file=file, markup=False, highlight=False, emoji=False, width=width,
                      color_system="auto" if file.isatty() else None)
    addresses = [b["address"] for b in result["brokers"]]
    if all(len(a) <= 21 for a in addresses):
        labels = {a: a for a in addresses}  # short enough to head a column
    else:
        labels = {a: f"B{i}" for i, a in enumerate(addresses, start=1)}

    table = Table(title="API versions (KIP-35)", title_justify="left", show_lines=False)
    table.add_column("API")
    table.add_column("client", justify="right")
    for a in addresses:
        table.add_column(escape(labels[a]), justify="right")
    table.add_column("common", justify="right")
    table.add_column("chosen", justify="right")
    table.add_column("why not")
    hidden = 0
    for e in result["apis"]:
        if not show_all and not any(v is not None for v in e["brokers"].values()):
            hidden += 1
            continue
        row = [Text(escape(_api_label(e))), Text(_r(e["client"]))]
        for a in addresses:
            row.append(Text(_r(e["brokers"][a]) if a in e["brokers"] else "?"))
        row += [Text(_r(e["common"])), Text("-" if e["chosen"] is None else str(e["chosen"])),
                Text(escape(_short(e["reason"] or "", labels)))]
        table.add_row(*row)
    console.print(table)
    legend = [f"{labels[a]} = {a}" for a in addresses if labels[a] != a]
    if any(b["complete"] is False for b in result["brokers"]):
        legend.append("? = the broker's answer is incomplete and does not list this API")
    if hidden:
        legend.append(f"{hidden} APIs that no broker lists are not shown (--all shows them)")
    if legend:
        console.print(Text("\n".join(escape(x) for x in legend)))
    console.print()

    if result["features"]:
        ft = Table(title="Features", title_justify="left")
        ft.add_column("feature")
        ft.add_column("usable")
        ft.add_column("versions / why not")
        for f in result["features"]:
            if f["usable"]:
                detail = ", ".join(f"{_api_label(a)} v{a['chosen']}" for a in f["apis"])
            else:
                detail = _short(f["reason"], labels)
            ft.add_row(Text(escape(f["name"])), Text("yes" if f["usable"] else "no"), Text(escape(detail)))
        console.print(ft)
        console.print()

    for b in result["brokers"]:
        label = labels[b["address"]]
        lines = [(f"{label + ' = ' if label != b['address'] else ''}{b['address']} "
                  f"({b['form']}, {b['source']})")]
        if b.get("node_id") is not None:
            lines.append(f"  node id {b['node_id']}" + (f", rack {b['rack']}" if b.get("rack") else ""))
        if b["error"]:
            lines.append(f"  error: {b['error']}")
        for n in b["notes"]:
            lines.append(f"  note: {n}")
        if b["supported_features"]:
            lines.append("  SupportedFeatures: " + ", ".join(
                f"{k} {_r(v)}" for k, v in b["supported_features"].items()))
        if b["finalized_features"]:
            lines.append(f"  FinalizedFeatures (epoch {b['finalized_features_epoch']}): " + ", ".join(
                f"{k} {_r(v)}" for k, v in b["finalized_features"].items()))
        console.print(Text("\n".join(escape(x) for x in lines)))

    if result.get("finalized_features"):
        console.print(Text("\nFinalized features (what the cluster runs at):\n" + "\n".join(
            "  " + escape(f["meaning"]) for f in result["finalized_features"])))

    apis = result["apis"]
    chosen = sum(1 for e in apis if e["chosen"] is not None)
    summary = f"{chosen} of {len(apis)} APIs have a version to use"
    if result["features"]:
        usable = sum(1 for f in result["features"] if f["usable"])
        summary += f"; {usable} of {len(result['features'])} features usable"
    console.print(Text(summary))
