"""The options of Schema Registry formats every command that shows records takes:
--schema-registry URL, --schemas DIR, --key-format / --value-format, --validate-values.

The decorator takes the options off the command's arguments and puts the decoder in force
(``kwire_cli.values.records.use``) before the command runs, so every output the command writes
(trees, rows, record lines, JSON) shows keys and values decoded.  Credentials for the registry
come from the environment only (``KWIRE_SCHEMA_REGISTRY_USER_INFO`` or
``KWIRE_SCHEMA_REGISTRY_TOKEN``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic

FORMAT_CHOICES = ("auto", "avro", "protobuf", "json", "string", "hex")
NAMES = ("schema_registry", "schemas_dir", "key_format", "value_format", "validate_values", "registry_timeout")


def values_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the Schema Registry options, applied before the command body runs."""
    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        opts = {name: kwargs.pop(name) for name in NAMES}
        install(**opts)
        try:
            return f(*args, **kwargs)
        finally:
            from kwire_cli.values.records import current, use
            decoder = current()
            use(None)
            if decoder is not None:
                report(decoder.notes)

    options = [
        click.option("--schema-registry", "schema_registry", metavar="URL",
                     help="Decode keys and values framed by a Schema Registry (Avro, Protobuf, JSON Schema: "
                          "magic byte 0 and a schema id, magic byte 1 and a GUID, or a __key_schema_id / "
                          "__value_schema_id header) with schemas from the registry at URL; each schema "
                          "looked up once. Credentials from $KWIRE_SCHEMA_REGISTRY_USER_INFO (user:password) "
                          "or $KWIRE_SCHEMA_REGISTRY_TOKEN (bearer)."),
        click.option("--schemas", "schemas_dir", metavar="DIR",
                     type=click.Path(exists=True, file_okay=False, path_type=Path),
                     help="As --schema-registry, with the registry's answers saved as files in DIR (ID.json as "
                          "`curl URL/schemas/ids/ID` saves it; GUID.json; subjects/S/versions/V.json for "
                          "references)."),
        click.option("--key-format", "key_format", type=click.Choice(FORMAT_CHOICES), default="auto",
                     show_default=True, help="How to read record keys: auto (a schema's framing, when its "
                     "schema is found), or forced."),
        click.option("--value-format", "value_format", type=click.Choice(FORMAT_CHOICES), default="auto",
                     show_default=True, help="How to read record values (as --key-format)."),
        click.option("--validate-values", "validate_values", is_flag=True,
                     help="Check JSON Schema keys and values against their schema (a value that does not "
                          "validate is shown with a note saying why)."),
        click.option("--registry-timeout", "registry_timeout", type=click.FloatRange(0, min_open=True),
                     default=10.0, show_default=True, metavar="SECONDS",
                     help="Timeout of each --schema-registry request."),
    ]
    for option in reversed(options):
        run = option(run)
    return run


SHOWN_NOTES = 5


def report(notes: dict[str, int]) -> None:
    """The reasons keys and values were not decoded (or did not validate), on stderr: one line
    each, the most frequent first, at most SHOWN_NOTES."""
    for note, n in sorted(notes.items(), key=lambda kv: -kv[1])[:SHOWN_NOTES]:
        diagnostic("note", f"{n} key{'s' if n != 1 else ''}/values: {note}")
    if len(notes) > SHOWN_NOTES:
        diagnostic("note", f"{len(notes) - SHOWN_NOTES} other reasons (the notes beside the keys and values)")


def install(schema_registry: str | None, schemas_dir: Path | None, key_format: str, value_format: str,
            validate_values: bool, registry_timeout: float) -> None:
    """Build the decoder the options ask for and put it in force."""
    from kwire_cli.values import DirectoryAnswers, Schemas, ValueDecoder
    from kwire_cli.values.records import use
    from kwire_cli.values.registry import RegistryAnswers

    if schema_registry and schemas_dir:
        raise KwireUsageError("--schema-registry and --schemas: give one")
    schemas = None
    if schema_registry:
        try:
            schemas = Schemas(RegistryAnswers(schema_registry, timeout=registry_timeout))
        except ValueError as exc:
            raise KwireUsageError(f"--schema-registry: {exc}") from None
    elif schemas_dir:
        schemas = Schemas(DirectoryAnswers(schemas_dir))
    use(ValueDecoder(schemas, key_format, value_format, validate_values))
