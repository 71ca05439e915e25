"""The records codec's exception.

``RecordsError`` subclasses ``kwire_cli.codec.errors.KwireError`` when that module exists, so one
``except KwireError`` catches every kwire failure; before it exists a local base stands in.
"""

try:  # pragma: no cover - depends on the order the codec package lands in
    from kwire_cli.codec.errors import KwireError as _Base
except Exception:  # ImportError, or a partially initialised package during a circular import
    class _Base(Exception):
        """Stand-in for kwire_cli.codec.errors.KwireError."""


class RecordsError(_Base):
    """A records field whose framing cannot be used, or a value that cannot be encoded.

    The message is one line naming the batch index and byte offset (decode) or the value path (encode).
    """
