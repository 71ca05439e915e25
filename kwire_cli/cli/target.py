"""What `kwire decode` (and `kwire diff --what-if-tagged` for hex) decodes INPUT as: the target
resolved from --api, --version, --kind, --request, --no-header and --size-prefix (usage errors
here); decoding itself, one frame or several, is ``kwire_cli.inputs.decoding``'s.
"""
from __future__ import annotations

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, read_input
from kwire_cli.cli.options import check_version, resolve_api
from kwire_cli.errors import KwireError
from kwire_cli.inputs.decoding import Target, decode_frames

__all__ = ["Target", "decode_frames", "resolve_target"]


def resolve_target(api_name: str | None, api_version: int | None, kind: str | None,
                   request_input: str | None, no_header: bool = False, size_prefix: bool | None = None,
                   *, input_on_stdin: bool = False, strict: bool = False) -> Target:
    from kwire_cli.codec import decode_request
    api = resolve_api(api_name) if api_name is not None else None
    request_msg = None
    if request_input is not None:
        if input_on_stdin and request_input == "-":
            raise KwireUsageError("INPUT and --request cannot both read stdin")
        try:
            request_msg = decode_request(read_input(request_input, what="--request"))
        except KwireError as e:
            if isinstance(e, click.ClickException):
                raise
            raise KwireError(f"--request: {e}") from None
        if api is not None and api.key != request_msg.api_key:
            raise KwireUsageError(f"--api {api_name} does not match the request, which is "
                                  f"{request_msg.api_name} (api key {request_msg.api_key})")
        if api_version is not None and api_version != request_msg.api_version:
            raise KwireUsageError(f"--version {api_version} does not match the request, which is "
                                  f"v{request_msg.api_version}")
        api = resolve_api(str(request_msg.api_key))
        api_version = request_msg.api_version
    guessed = kind is None
    if kind is None:
        kind = "response" if (api is not None or request_msg is not None) else "request"
    if (kind == "response" or no_header) and (api is None or api_version is None):
        what = "a bare body" if no_header else "a response"
        raise KwireUsageError(f"{what} does not name its API: give --api NAME --version N"
                              + ("" if no_header else ", or --request HEX"))
    if api_version is not None and api is not None:
        check_version(api, api_version, kind, allow_newer=True)
    if no_header and size_prefix:
        raise KwireUsageError("--no-header bodies have no size prefix; drop --size-prefix")
    t = Target(api, api_version, kind, no_header, size_prefix, request_msg, strict,
               warn=lambda message: diagnostic("warning", message))
    t.kind_guessed = guessed
    return t


