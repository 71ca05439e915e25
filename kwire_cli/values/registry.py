"""The Schema Registry's REST API over HTTP(S): the answer store of ``--schema-registry URL``.

Credentials come from the environment, never from the command line and never printed:
``KWIRE_SCHEMA_REGISTRY_USER_INFO`` (``user:password``, HTTP basic auth) or
``KWIRE_SCHEMA_REGISTRY_TOKEN`` (a bearer token).  Every request has a timeout; an answer larger
than 32 MiB is refused.
"""
from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from kwire_cli.values.schemas import MAX_ANSWER_BYTES, SchemaLookupError

USER_INFO_ENV = "KWIRE_SCHEMA_REGISTRY_USER_INFO"
TOKEN_ENV = "KWIRE_SCHEMA_REGISTRY_TOKEN"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


def auth_header(env: Mapping[str, str]) -> str | None:
    """The Authorization header the environment asks for (None: no credentials)."""
    token = env.get(TOKEN_ENV)
    if token:
        return f"Bearer {token}"
    user_info = env.get(USER_INFO_ENV)
    if user_info:
        return "Basic " + base64.b64encode(user_info.encode()).decode("ascii")
    return None


class RegistryAnswers:
    """GET answers from a Schema Registry at ``url`` (http or https)."""

    def __init__(self, url: str, timeout: float = 10.0, env: Mapping[str, str] | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"schema registry URL {url!r} is not http(s)://HOST[:PORT][/PATH]")
        if parsed.username or parsed.password:
            raise ValueError(f"schema registry URL: put credentials in ${USER_INFO_ENV}, not in the URL")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._auth = auth_header(os.environ if env is None else env)

    def describe(self) -> str:
        return f"schema registry {self.url}"

    def get(self, path: str) -> Any:
        """The answer to GET ``path`` (its segments already percent-encoded), None on 404."""
        request = urllib.request.Request(self.url + path, headers={"Accept": ACCEPT})
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise SchemaLookupError(f"{self.describe()} answered {exc.code} to GET {path}"
                                    f"{error_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SchemaLookupError(f"{self.describe()} unreachable ({reason})") from None
        if len(body) > MAX_ANSWER_BYTES:
            raise SchemaLookupError(f"{self.describe()}: answer to GET {path} larger than "
                                    f"{MAX_ANSWER_BYTES >> 20} MiB")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise SchemaLookupError(f"{self.describe()}: answer to GET {path} is not JSON ({exc})") from None


def error_message(exc: urllib.error.HTTPError) -> str:
    """``: <message>`` from the registry's error JSON (``{"error_code": ..., "message": ...}``)."""
    try:
        answer = json.loads(exc.read(64 << 10))
    except (OSError, ValueError):
        return ""
    message = answer.get("message") if isinstance(answer, dict) else None
    return f": {message}" if isinstance(message, str) else ""
