"""The report page: the template with the summary document embedded as data and the scripts inline.

The summary is embedded as JSON inside ``<script type="application/json">``: written with ASCII
escapes only (``\\uXXXX`` for every other character, lone surrogates included) and with ``<``,
``>``, ``&`` also escaped, so no text from the capture (a client id holding ``</script>``, control
characters, U+2028) can end the element or be read as markup; the page's script inserts text as
text. The scripts are checked to hold no ``</script``.
"""
from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from kwire_cli import __version__

ECHARTS_VERSION = "6.1.0"
SECTIONS = ("latency", "throughput", "groups", "lag", "errors", "clients", "connections")
_CLOSE = re.compile(r"</script", re.IGNORECASE)


def _asset(name: str) -> str:
    return resources.files("kwire_cli.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def embed_json(doc: Any) -> str:
    """JSON text safe inside a <script> element (see the module doc)."""
    text = json.dumps(doc, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_text(s: str) -> str:
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .encode("ascii", "xmlcharrefreplace").decode("ascii"))


def render(summary: dict[str, Any], sources: list[str], title: str | None = None) -> str:
    """The page for ``summary`` (the summary document); ``sources``: the inputs it was made from."""
    scripts = {"@ECHARTS_JS@": _asset("echarts.min.js"), "@REPORT_JS@": _asset("report.js")}
    for name, js in scripts.items():
        if _CLOSE.search(js):
            raise ValueError(f"{name} holds </script")  # (a packaging fault, never input)
    if title is None:
        title = "kwire report: " + ", ".join(sources) if sources else "kwire report"
    safe_title = _html_text("".join(c if c.isprintable() else "\ufffd" for c in title))
    out = _asset("report.html")
    # placeholders filled in one pass, so that nothing inserted is read as a placeholder
    values = {"@TITLE@": safe_title, "@VERSION@": _html_text(__version__), "@ECHARTS@": ECHARTS_VERSION,
              "@DATA@": embed_json({"sources": sources, "summary": summary}), **scripts}
    return re.sub("|".join(re.escape(k) for k in values), lambda m: values[m.group()], out)
