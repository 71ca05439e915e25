"""The spec-driven codec: sans-io (bytes in, values out), compiled once per (message, version).

See DESIGN.md for the value tree it reads and writes.
"""
from kwire_cli.codec.compiler import Plan, compile_plan, compile_prefix
from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.codec.message import (
    Message,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)
from kwire_cli.codec.peek import peek_request_field
from kwire_cli.errors import (
    DecodeError,
    EncodeError,
    KwireError,
    SpecError,
    TrailingBytes,
    UnknownApiKey,
    UnknownVersion,
)

__all__ = ["DecodeError", "EncodeError", "KwireError", "Message", "Plan", "SpecError", "TrailingBytes",
           "UnknownApiKey", "UnknownVersion", "compile_plan", "compile_prefix", "decode_body", "decode_request",
           "decode_response", "encode_body", "encode_request", "encode_response", "peek_request_field",
           "request_header_version", "response_header_version"]
