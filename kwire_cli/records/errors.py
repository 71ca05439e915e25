"""The records codec's exception.

``RecordsError`` subclasses ``kwire_cli.errors.KwireError``, so one ``except KwireError`` catches every
kwire failure (the message codec wraps it with the field path of the records field).
"""

from kwire_cli.errors import KwireError


class RecordsError(KwireError):
    """A records field whose framing cannot be used, or a value that cannot be encoded.

    The message is one line naming the batch index and byte offset (decode) or the value path (encode).
    """
