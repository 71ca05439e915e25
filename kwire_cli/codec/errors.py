"""The codec's errors (one family, defined in kwire_cli.errors)."""
from kwire_cli.errors import DecodeError, EncodeError, KwireError, SpecError

__all__ = ["DecodeError", "EncodeError", "KwireError", "SpecError"]
