"""The wire primitives under the codec's name: a re-export of ``kwire_cli.wire`` (varints, uuid text)."""
from kwire_cli.wire import (
    read_uvarint,
    read_varint,
    read_varlong,
    uuid_from_text,
    uuid_to_text,
    uvarint_bytes,
    write_uvarint,
    write_varint,
    write_varlong,
)

__all__ = ["read_uvarint", "read_varint", "read_varlong", "uuid_from_text", "uuid_to_text", "uvarint_bytes",
           "write_uvarint", "write_varint", "write_varlong"]
