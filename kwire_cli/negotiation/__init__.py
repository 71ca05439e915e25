"""KIP-35 version negotiation: what brokers advertise, what a client supports, what it will use.

* ``model``: ``BrokerAnswer`` (one broker's ApiVersions answer), ``Range``, shared helpers.
* ``forms``: ``load_broker_file`` / ``parse_broker_input`` detect the form of an input and hand it
  to its parser, one module each: ``apiversions`` (ApiVersionsResponse bytes, hex in any dump form
  through ``kwire_cli.inputs``, value trees), ``capture`` (the answers in a pcap/pcapng capture,
  gzip-compressed or not), ``kafka_broker_api_versions`` (the tool's text), ``java_client_log``
  (the Java client's DEBUG lines), ``librdkafka`` (``debug=feature`` logs), ``yaml_answers``
  (YAML/JSON).
* ``live``: ask live brokers (``--bootstrap``): ApiVersions and Metadata over a small client
  connection that TLS and SASL will extend.
* ``client``: the client side (kwire's own ranges, --client FILE or a bundled profile of
  ``clients/``) and --require FILE.
* ``negotiate``: the intersection, pure logic; ``render``: table, JSON and YAML.
"""
from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.apiversions import answer_from_body, decode_api_versions_bytes
from kwire_cli.negotiation.client import kwire_api_names, kwire_client_ranges, load_client_file, load_requirements
from kwire_cli.negotiation.forms import detect_form, load_broker_file, parse_broker_input, read_broker_argument
from kwire_cli.negotiation.kafka_broker_api_versions import parse_kafka_broker_api_versions
from kwire_cli.negotiation.librdkafka import parse_librdkafka_log
from kwire_cli.negotiation.model import BrokerAnswer, unique_addresses
from kwire_cli.negotiation.negotiate import common_range, intersect, negotiate
from kwire_cli.negotiation.yaml_answers import parse_yaml_answers

__all__ = ["BrokerAnswer", "NegotiationError", "answer_from_body", "common_range", "read_broker_argument",
           "decode_api_versions_bytes", "detect_form", "intersect", "kwire_api_names",
           "kwire_client_ranges", "load_broker_file", "load_client_file", "load_requirements",
           "negotiate", "parse_broker_input", "parse_kafka_broker_api_versions",
           "parse_librdkafka_log", "parse_yaml_answers", "unique_addresses"]
