"""KIP-35 version negotiation: broker answer parsers, intersection, features."""
from kwire_cli.negotiation.inputs import (kwire_api_names, kwire_client_ranges, load_client_file,
                                          load_requirements)
from kwire_cli.negotiation.negotiate import common_range, intersect, negotiate
from kwire_cli.negotiation.parse import (BrokerAnswer, NegotiationError, answer_from_body,
                                         decode_api_versions_bytes, detect_form, load_broker_file,
                                         parse_broker_input, parse_kafka_broker_api_versions,
                                         parse_librdkafka_log, parse_yaml_answers)

__all__ = ["BrokerAnswer", "NegotiationError", "answer_from_body", "common_range",
           "decode_api_versions_bytes", "detect_form", "intersect", "kwire_api_names",
           "kwire_client_ranges", "load_broker_file", "load_client_file", "load_requirements",
           "negotiate", "parse_broker_input", "parse_kafka_broker_api_versions",
           "parse_librdkafka_log", "parse_yaml_answers"]
