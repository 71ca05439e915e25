"""Kafka message specs: JSON-with-comments loading, version ranges, validated model, registry."""
from kwire_cli.spec.model import FieldSpec, FieldType, MessageSpec, StructSpec, build_message_spec
from kwire_cli.spec.registry import Api, Registry, load_folder, registry, use_specs
from kwire_cli.spec.versions import Versions

__all__ = ["Api", "FieldSpec", "FieldType", "MessageSpec", "Registry", "StructSpec", "Versions",
           "build_message_spec", "load_folder", "registry", "use_specs"]
