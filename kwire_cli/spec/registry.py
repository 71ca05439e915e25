"""Where specs come from, and lookup by API key or name.

Order of precedence: an explicit folder (`--specs DIR`), the `KWIRE_SPECS` environment
variable, the specs bundled in the wheel, the repository's `specs/` (editable installs).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kwire_cli.errors import KwireError, SpecError
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.spec.model import MessageSpec, api_name_of, build_message_spec
from kwire_cli.spec.versions import Versions


class Api:
    """One API: its key, name and request and response specs (looked up, and with the spec cache
    unpickled, only when first used: decoding one message loads two specs, not two hundred)."""

    __slots__ = ("key", "name", "_specs", "_request", "_response")

    def __init__(self, key: int, name: str, specs: Mapping[str, MessageSpec], request: str, response: str):
        self.key, self.name = key, name
        self._specs, self._request, self._response = specs, request, response

    @property
    def request(self) -> MessageSpec:
        return self._specs[self._request]

    @property
    def response(self) -> MessageSpec:
        return self._specs[self._response]

    @property
    def valid_versions(self) -> Versions:
        return self.request.valid_versions

    @property
    def flexible_versions(self) -> Versions:
        return self.request.flexible_versions

    def spec(self, kind: str) -> MessageSpec:
        return self.request if kind == "request" else self.response

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name!r})"


class LazySpecs(Mapping[str, MessageSpec]):
    """Specs by name, each kept pickled (as the spec cache stores it) until first looked up."""

    def __init__(self, blobs: dict[str, bytes]):
        self._blobs = blobs
        self._specs: dict[str, MessageSpec] = {}

    def __getitem__(self, name: str) -> MessageSpec:
        spec = self._specs.get(name)
        if spec is None:
            import pickle
            spec = self._specs[name] = pickle.loads(self._blobs[name])
        return spec

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)


# what the registry needs of each spec without loading it: (name, type, api key)
Index = list[tuple[str, str, "int | None"]]


@dataclass(frozen=True)
class RegistryImage:
    """A registry as the spec cache stores it: the index and each spec pickled on its own."""

    folder: str
    index: Index
    blobs: dict[str, bytes]

    @classmethod
    def of(cls, reg: Registry) -> RegistryImage:
        import pickle
        specs = reg.by_name
        return cls(reg.folder, [(s.name, s.type, s.api_key) for s in specs.values()],
                   {name: pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL) for name, s in specs.items()})

    def registry(self) -> Registry:
        return Registry(LazySpecs(self.blobs), self.folder, self.index)


class Registry:
    """All specs of one folder: APIs by key and name, other schemas by name."""

    def __init__(self, specs: Mapping[str, MessageSpec], folder: str, index: Index | None = None):
        self.folder = folder
        self.by_name = specs
        self.apis: dict[int, Api] = {}
        if index is None:
            index = [(s.name, s.type, s.api_key) for s in specs.values()]
        # (the loader gives every request and response spec an api key)
        requests = {key: name for name, kind, key in index if kind == "request" and key is not None}
        responses = {key: name for name, kind, key in index if kind == "response" and key is not None}
        for key, req in sorted(requests.items()):
            resp = responses.get(key)
            if resp is None:
                raise SpecError(f"{folder}: {req} (api key {key}) has no response spec")
            self.apis[key] = Api(key, api_name_of(req, "request"), specs, req, resp)
        for key, resp in responses.items():
            if key not in requests:
                raise SpecError(f"{folder}: {resp} (api key {key}) has no request spec")
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
            former = self._former_name(name)
            if former is None:
                raise KwireError(f"unknown API {key_or_name!r} (see `kwire list`)")
            return former
        return self._api_names[name]

    def _former_name(self, name: str) -> Api | None:
        """The API that once had this name (ListClientMetricsResources, now ListConfigResources):
        looked for only when a name is not current, so every other lookup loads no spec."""
        for a in self.apis.values():
            if any(api_name_of(n, "request").lower() == name for n in a.request.former_names):
                return a
        return None

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
    return cached(folder, lambda: RegistryImage.of(load_folder(folder)), RegistryImage).registry()


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
