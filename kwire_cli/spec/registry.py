"""Where specs come from, and lookup by API key or name.

Order of precedence: an explicit folder (`--specs DIR`), the `KWIRE_SPECS` environment
variable, the specs bundled in the wheel, the repository's `specs/` (editable installs).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kwire_cli.errors import KwireError, SpecError
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.spec.model import MessageSpec, build_message_spec
from kwire_cli.spec.versions import Versions


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    request: MessageSpec
    response: MessageSpec

    @property
    def valid_versions(self) -> Versions:
        return self.request.valid_versions

    @property
    def flexible_versions(self) -> Versions:
        return self.request.flexible_versions

    def spec(self, kind: str) -> MessageSpec:
        return self.request if kind == "request" else self.response


class Registry:
    """All specs of one folder: APIs by key and name, other schemas by name."""

    def __init__(self, specs: dict[str, MessageSpec], folder: str):
        self.folder = folder
        self.by_name = specs
        self.apis: dict[int, Api] = {}
        # (the loader gives every request and response spec an api key)
        requests = {s.api_key: s for s in specs.values() if s.type == "request" and s.api_key is not None}
        responses = {s.api_key: s for s in specs.values() if s.type == "response" and s.api_key is not None}
        for key, req in sorted(requests.items()):
            resp = responses.get(key)
            if resp is None:
                raise SpecError(f"{folder}: {req.name} (api key {key}) has no response spec")
            self.apis[key] = Api(key, req.api_name, req, resp)
        for key, resp in responses.items():
            if key not in requests:
                raise SpecError(f"{folder}: {resp.name} (api key {key}) has no request spec")
        self._api_names = {a.name.lower(): a for a in self.apis.values()}

    def api(self, key_or_name: int | str) -> Api:
        """Look an API up by key (3, "3") or name ("Metadata", "metadata", "MetadataRequest")."""
        if isinstance(key_or_name, int) or (isinstance(key_or_name, str) and key_or_name.strip().isdigit()):
            key = int(key_or_name)
            if key not in self.apis:
                raise KwireError(f"unknown API key {key} (known: 0-{max(self.apis)}; see `kwire list`)")
            return self.apis[key]
        name = str(key_or_name).strip().lower()
        for suffix in ("request", "response"):
            if name.endswith(suffix) and name[: -len(suffix)] in self._api_names:
                name = name[: -len(suffix)]
        if name not in self._api_names:
            raise KwireError(f"unknown API {key_or_name!r} (see `kwire list`)")
        return self._api_names[name]

    def api_name(self, key: int) -> str:
        a = self.apis.get(key)
        return a.name if a else f"UNKNOWN({key})"

    def schema(self, name: str) -> MessageSpec:
        try:
            return self.by_name[name]
        except KeyError:
            raise KwireError(f"no spec named {name} in {self.folder}") from None


def load_folder(folder: str | os.PathLike[str]) -> Registry:
    path = Path(folder)
    if not path.is_dir():
        raise KwireError(f"specs folder {folder} does not exist")
    specs: dict[str, MessageSpec] = {}
    files = sorted(path.glob("*.json"))
    if not files:
        raise KwireError(f"specs folder {folder} holds no *.json spec files")
    for f in files:
        try:
            raw = loads_jsonc(f.read_text(encoding="utf-8"), source=str(f))
        except UnicodeDecodeError:
            raise SpecError(f"{f}: not UTF-8 text") from None
        if raw.get("type") not in ("request", "response", "header", "data"):
            continue  # metadata records and the like: not on the wire between client and broker
        spec = build_message_spec(raw, source=str(f))
        if spec.name in specs:
            raise SpecError(f"{f}: message {spec.name} is also defined in {specs[spec.name].source}")
        specs[spec.name] = spec
    return Registry(specs, str(path))


@cache
def bundled_folder() -> Path:
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_bundled_specs", here.parent / "specs"):
        if candidate.is_dir():
            return candidate
    raise KwireError("kwire's bundled specs are missing from this installation")


_override: str | None = None
_current: Registry | None = None


def use_specs(folder: str | None) -> None:
    """Make the registry read another folder (the CLI's --specs)."""
    global _override, _current
    _override = folder
    _current = None


@cache
def _load(folder: str) -> Registry:
    from kwire_cli.spec.cache import cached
    return cached(folder, lambda: load_folder(folder), Registry)


def registry() -> Registry:
    """The registry in use: resolved once (from --specs, KWIRE_SPECS or the bundled specs), then
    returned as is on every call (the codec calls this per message)."""
    global _current
    reg = _current
    if reg is None:
        folder = _override or os.environ.get("KWIRE_SPECS") or str(bundled_folder())
        reg = _current = _load(folder)
    return reg


def _clear() -> None:
    global _current
    _current = None
    _load.cache_clear()


registry.cache_clear = _clear  # type: ignore[attr-defined]
