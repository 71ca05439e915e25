#!/usr/bin/env python3
"""Generate man/kwire.1 and man/kwire-<command>.1 from the Click definitions.

    python scripts/gen_man.py           # write the pages
    python scripts/gen_man.py --check   # exit 1 and name the stale pages (the tests run this)

Everything comes from the commands themselves: the first line of a command's help is its NAME,
the rest its DESCRIPTION, an "Examples:" block becomes EXAMPLES, and the options come from
Click's own help records. The pages carry no date, so regenerating is deterministic.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kwire_cli import __version__  # noqa: E402
from kwire_cli.cli import cli  # noqa: E402

MAN_DIR = ROOT / "man"

EXIT_STATUS = [
    ("0", "Success."),
    ("1", ("The input could not be decoded or encoded: bad hex, a truncated or malformed message, a "
           "YAML value the message cannot hold, an unreadable capture. One line on stderr, "
           "\"kwire: error: ...\", names what was wrong and where (field path, byte offset).")),
    ("2", ("Usage error: an unknown option or command, a missing argument, an unknown API name or "
           "key given as an option, a version out of range, a file that does not exist.")),
]

ENVIRONMENT = [
    ("KWIRE_SPECS", ("A folder of Kafka message specs (JSON) to use instead of the bundled ones; "
                     "the same as --specs.")),
    ("KWIRE_DEBUG", "Set to 1 to get a Python traceback instead of the one-line internal error."),
    ("NO_COLOR", "Set to turn colours off on a terminal (output to a pipe or file never has them)."),
    ("_KWIRE_COMPLETE", "Click's shell completion hook, see SHELL COMPLETION in kwire(1)."),
]

COMPLETION = [
    "kwire uses Click's standard completion. To turn it on, add one line to your shell's startup file:",
    ("bash (~/.bashrc)", 'eval "$(_KWIRE_COMPLETE=bash_source kwire)"'),
    ("zsh (~/.zshrc)", 'eval "$(_KWIRE_COMPLETE=zsh_source kwire)"'),
    ("fish (~/.config/fish/completions/kwire.fish)", "_KWIRE_COMPLETE=fish_source kwire | source"),
]


def esc(text: str) -> str:
    """Escape text for roff: backslashes, hyphens, and a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in text.split("\n"))


def one_line(summary: str) -> str:
    """A NAME line: the summary on one line, its whitespace collapsed, without the final period."""
    return re.sub(r"\s+", " ", summary).strip().rstrip(".")


def split_help(help_text: str) -> tuple[str, list[tuple[str, list[str]]], list[str]]:
    """(summary, paragraphs, examples); paragraphs are ("fill"|"verbatim", lines)."""
    text = help_text.strip("\n")
    blocks = re.split(r"\n\s*\n", text)
    summary = re.sub(r"\s+", " ", blocks[0]).strip()
    paras: list[tuple[str, list[str]]] = []
    examples: list[str] = []
    for b in blocks[1:]:
        lines = b.split("\n")
        verbatim = lines[0].strip() == "\b"
        if verbatim:
            lines = lines[1:]
        if lines and lines[0].strip().rstrip(":").lower() == "examples":
            examples.extend(ln.strip() for ln in lines[1:] if ln.strip())
            continue
        if verbatim:
            paras.append(("verbatim", lines))
        else:
            paras.append(("fill", [" ".join(ln.strip() for ln in lines)]))
    return summary, paras, examples


def command_examples(cmd: click.Command) -> list[str]:
    return split_help(cmd.help or "")[2] + split_epilog(cmd.epilog or "")[0]


def split_epilog(epilog: str) -> tuple[list[str], list[tuple[str, list[str]]], list[str], list[str]]:
    """(examples, other paragraphs, filter lines, exit-code lines) of a command's --help epilog: its
    blocks are "Examples:", "Filter fields:", "Exit codes:" or plain text (kept as description)."""
    examples: list[str] = []
    paras: list[tuple[str, list[str]]] = []
    filters: list[str] = []
    exits: list[str] = []
    for b in re.split(r"\n\s*\n", epilog.strip("\n")):
        lines = [ln for ln in b.split("\n") if ln.strip() != "\b"]
        if not lines:
            continue
        head = lines[0].strip().lower()
        if head.rstrip(":") == "examples":
            examples += [ln.strip() for ln in lines[1:] if ln.strip()]
        elif head.startswith("filter fields:"):
            filters.append(" ".join(ln.strip() for ln in lines))
        elif head.startswith("exit codes:"):
            exits.append(" ".join(ln.strip() for ln in lines)[len("exit codes:"):].strip())
        else:
            paras.append(("fill", [" ".join(ln.strip() for ln in lines)]))
    return examples, paras, filters, exits


def _options(cmd: click.Command, ctx: click.Context) -> list[str]:
    out = []
    for p in cmd.get_params(ctx):
        if isinstance(p, click.Argument):  # Click 8.5+ gives arguments help records too; the synopsis names them
            continue
        rec = p.get_help_record(ctx)
        if not rec:
            continue
        opts, help_text = rec
        out += [".TP", "\\fB" + esc(opts) + "\\fR", esc(help_text)]
    return out


def _section(name: str) -> list[str]:
    return [f".SH {name}"]


def _paragraphs(paras) -> list[str]:
    out = []
    for kind, lines in paras:
        if kind == "fill":
            out += [".PP", esc(lines[0])]
        else:
            out += [".PP", ".nf", ".RS 4"] + [esc(ln.strip()) for ln in lines] + [".RE", ".fi"]
    return out


def _examples(examples: list[str]) -> list[str]:
    if not examples:
        return []
    out = _section("EXAMPLES") + [".nf", ".RS 4"]
    for e in examples:
        out.append(esc(e))
    return out + [".RE", ".fi"]


def _tail(see_also: list[str], exits: list[str] | None = None) -> list[str]:
    out = _section("EXIT STATUS")
    if exits:  # the command's own words (its --help says them too)
        out += [".PP", esc(" ".join(exits))]
    else:
        for code, text in EXIT_STATUS:
            out += [".TP", f"\\fB{code}\\fR", esc(text)]
    out += _section("SEE ALSO") + [", ".join(f"\\fB{esc(p)}\\fR(1)" for p in see_also)]
    return out


def _header(title: str) -> list[str]:
    t = esc(title.upper())
    return ['.\\" Generated by scripts/gen_man.py from the Click definitions; do not edit.',
            f'.TH {t} 1 "" "kwire {__version__}" "kwire manual"', ".nh", ".ad l"]


def command_page(name: str, cmd: click.Command, parent: click.Context, all_names: list[str]) -> str:
    ctx = click.Context(cmd, info_name=f"kwire {name}", parent=parent, **cmd.context_settings)
    summary, paras, examples = split_help(cmd.help or "")
    more_examples, more_paras, filters, exits = split_epilog(cmd.epilog or "")
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    lines = _header(f"kwire-{name}")
    lines += _section("NAME") + [f"kwire\\-{esc(name)} \\- {esc(one_line(summary))}"]
    lines += _section("SYNOPSIS") + [f"\\fBkwire {esc(name)}\\fR {esc(usage)}"]
    lines += _section("DESCRIPTION") + _paragraphs([("fill", [summary])] + paras + more_paras)
    lines += _section("OPTIONS") + _options(cmd, ctx)
    if filters:
        lines += _section("FILTER") + _paragraphs([("fill", [f]) for f in filters])
    lines += _examples(examples + more_examples)
    lines += _tail(["kwire"] + [f"kwire-{n}" for n in all_names if n != name], exits)
    return "\n".join(lines) + "\n"


def main_page(group: click.Group, ctx: click.Context, names: list[str]) -> str:
    summary, paras, examples = split_help(group.help or "")
    lines = _header("kwire")
    lines += _section("NAME") + [f"kwire \\- {esc(one_line(summary))}"]
    lines += _section("SYNOPSIS") + ["\\fBkwire\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]..."]
    lines += _section("DESCRIPTION") + _paragraphs([("fill", [summary])] + paras)
    lines += [".PP", esc("Output goes to stdout, diagnostics to stderr. On a terminal the output is a "
                         "coloured tree or table; --format json or --format yaml gives one document "
                         "for scripts. Every command has --help with examples.")]
    lines += _section("COMMANDS")
    for n in names:
        cmd = group.get_command(ctx, n)
        lines += [".TP", f"\\fBkwire\\-{esc(n)}\\fR(1)", esc(cmd.get_short_help_str(limit=200))]
    lines += _section("OPTIONS") + _options(group, ctx)
    lines += _section("SHELL COMPLETION") + [".PP", esc(COMPLETION[0])]
    for label, line in COMPLETION[1:]:
        lines += [".TP", esc(label), "\\fB" + esc(line) + "\\fR"]
    lines += _section("ENVIRONMENT")
    for var, text in ENVIRONMENT:
        lines += [".TP", f"\\fB{esc(var)}\\fR", esc(text)]
    lines += _examples(examples)
    lines += _tail([f"kwire-{n}" for n in names])
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    ctx = click.Context(cli, info_name="kwire", **cli.context_settings)
    names = cli.list_commands(ctx)
    out = {"kwire.1": main_page(cli, ctx, names)}
    for n in names:
        out[f"kwire-{n}.1"] = command_page(n, cli.get_command(ctx, n), ctx, names)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that man/ is current")
    ap.add_argument("--out", type=Path, default=MAN_DIR)
    a = ap.parse_args(argv)
    want = pages()
    if a.check:
        stale = [n for n, text in want.items()
                 if not (a.out / n).is_file() or (a.out / n).read_text(encoding="utf-8") != text]
        extra = sorted(p.name for p in a.out.glob("kwire*.1") if p.name not in want) if a.out.is_dir() else []
        if stale or extra:
            print("man pages out of date: " + ", ".join(stale + [f"{e} (no such command)" for e in extra])
                  + "; run python scripts/gen_man.py", file=sys.stderr)
            return 1
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    for n, text in want.items():
        (a.out / n).write_text(text, encoding="utf-8")
    for p in a.out.glob("kwire*.1"):
        if p.name not in want:
            p.unlink()
    print(f"wrote {len(want)} pages to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
