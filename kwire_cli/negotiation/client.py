"""The client side and the required features: kwire's own ranges, --client FILE or NAME (the
profiles in ``clients/``, shipped with the package), --require FILE."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from kwire_cli.errors import NegotiationError
from kwire_cli.inputs import read_source
from kwire_cli.negotiation.forms import load_broker_file
from kwire_cli.negotiation.model import Range, to_int

Requirement = tuple[int, int, int]


def kwire_client_ranges() -> dict[int, Range]:
    """The versions kwire's specs can speak: each API's request validVersions."""
    from kwire_cli.spec import registry

    out: dict[int, Range] = {}
    for key, api in registry().apis.items():
        vv = api.valid_versions
        if not vv.empty:
            out[key] = (vv.lo, vv.hi)
    return out


def kwire_api_names() -> dict[int, str]:
    from kwire_cli.spec import registry

    return {key: api.name for key, api in registry().apis.items()}


#: the client profiles shipped with kwire (package data): what each client requests at most per API
CLIENTS_DIR = Path(__file__).resolve().with_name("clients")
_VERSIONED = re.compile(r"^(?P<name>.+?)-(?P<version>\d+(?:\.\d+)*)$")


def client_profiles() -> dict[str, Path]:
    """Profile name -> file: every file's stem (``librdkafka-2.15``), and the client's name alone
    (``librdkafka``, ``java``) for the newest version of it here."""
    out: dict[str, Path] = {}
    newest: dict[str, tuple[tuple[int, ...], Path]] = {}
    for f in sorted(CLIENTS_DIR.glob("*.yaml")):
        out[f.stem] = f
        m = _VERSIONED.match(f.stem)
        if m:
            v = tuple(int(x) for x in m["version"].split("."))
            if m["name"] not in newest or v > newest[m["name"]][0]:
                newest[m["name"]] = (v, f)
    for name, (_, f) in newest.items():
        out.setdefault(name, f)
    return dict(sorted(out.items()))


def resolve_client(arg: str) -> str | Path:
    """The file ``--client`` names: a path (or ``-``), else a profile's name (any case); a
    one-line ``NegotiationError`` when it is neither (naming the profile it is close to, if any)."""
    if arg == "-" or os.path.isfile(arg):
        return arg
    if os.path.isdir(arg):
        raise NegotiationError(f"--client: {arg} is a directory")
    profiles = client_profiles()
    if arg in profiles:
        return profiles[arg]
    lowered = {k.lower(): v for k, v in profiles.items()}
    if arg.lower() in lowered:
        return lowered[arg.lower()]
    import difflib

    close = difflib.get_close_matches(arg.lower(), list(lowered), n=1, cutoff=0.7)
    hint = f" (did you mean the client profile {close[0]}?)" if close else ""
    raise NegotiationError(f"--client: no such file: {arg}{hint}")


def load_client_file(path: str | Path) -> dict[int, Range]:
    """A client's ranges, in any of the broker-answer forms; the file must hold exactly one."""
    answers = load_broker_file(path)
    if len(answers) != 1:
        raise NegotiationError(f"{path}: holds {len(answers)} answers "
                               f"({', '.join(a.address for a in answers)}); a client file needs one")
    return dict(answers[0].ranges)


def load_requirements(path: str | Path, api_names: dict[int, str] | None = None
                      ) -> dict[str, list[Requirement]]:
    """Read --require FILE (YAML or JSON): feature name -> the APIs and version ranges it needs.

    Each requirement is `[api, min, max]` or `{ApiKey|api: .., MinVersion|min: .., MaxVersion|max: ..}`;
    `api` is a key or an API name. A feature may also be `{apis: [...]}`.
    """
    import yaml

    from kwire_cli.inputs.yamlsafe import safe_load

    data = read_source(str(path), what="--require", paths="any").data
    try:
        doc = safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NegotiationError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise NegotiationError(f"{where}: not valid YAML/JSON: "
                               f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    except RecursionError:
        raise NegotiationError(f"{path}: YAML/JSON nested too deep to read") from None
    if isinstance(doc, dict) and set(doc) == {"features"} and isinstance(doc["features"], dict):
        doc = doc["features"]
    if not isinstance(doc, dict) or not doc:
        raise NegotiationError(f"{path}: expected a mapping of feature name to required APIs")
    by_name = {n.lower(): k for k, n in (api_names or {}).items()}
    out: dict[str, list[Requirement]] = {}
    for fname, reqs in doc.items():
        where = f"{path}: {fname}"
        if isinstance(reqs, dict) and "apis" in reqs:
            reqs = reqs["apis"]
        if not isinstance(reqs, list) or not reqs:
            raise NegotiationError(f"{where}: expected a list of [api, min, max]")
        items = []
        for i, r in enumerate(reqs):
            w = f"{where}[{i}]"
            if isinstance(r, (list, tuple)) and len(r) == 3:
                api, lo, hi = r
            elif isinstance(r, dict):
                api = _first(r, "ApiKey", "api_key", "api", "key")
                lo = _first(r, "MinVersion", "min_version", "min")
                hi = _first(r, "MaxVersion", "max_version", "max")
                if api is None or lo is None or hi is None:
                    raise NegotiationError(f"{w}: needs api, min and max")
            else:
                raise NegotiationError(f"{w}: expected [api, min, max], got {r!r}")
            items.append((_api_key(api, by_name, w), _int(lo, w), _int(hi, w)))
        out[str(fname)] = items
    return out


def _first(d: dict, *names: str) -> Any:
    for n in names:
        if n in d:
            return d[n]
    return None


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)) or not str(v).strip().lstrip("-").isdigit():
        raise NegotiationError(f"{where}: expected an integer version, got {v!r}")
    return to_int(v, where)


def _api_key(v: Any, by_name: dict[str, int], where: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    s = str(v).strip()
    if s.lstrip("-").isdigit():
        return to_int(s, where)
    key = by_name.get(s.lower())
    if key is None:
        raise NegotiationError(f"{where}: unknown API {s!r}")
    return key
