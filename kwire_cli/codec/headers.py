"""Which header version goes with which API version: the rules are protocol facts and live in
``kwire_cli.spec.headers``; the codec uses (and re-exports) them."""
from kwire_cli.spec.headers import API_VERSIONS, CONTROLLED_SHUTDOWN, request_header_version, response_header_version

__all__ = ["API_VERSIONS", "CONTROLLED_SHUTDOWN", "request_header_version", "response_header_version"]
