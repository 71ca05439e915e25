"""YAML or JSON broker answers: ``{ApiKeys: [{ApiKey, MinVersion, MaxVersion}]}``, alone or as
the body of kwire decode's own output (``{"api_key": 18, "kind": "response", "body": {...}}``),
several documents (or a list of them) allowed."""
from __future__ import annotations

from typing import Any

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.apiversions import answer_from_body
from kwire_cli.negotiation.model import API_VERSIONS_KEY, BrokerAnswer, default_address, field_of, unique_addresses


def parse_yaml_answers(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    import yaml

    from kwire_cli.inputs.yamlsafe import safe_load_all

    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise NegotiationError(f"{where}: not a recognised broker answer (hex, kafka-broker-api-versions "
                               f"output, librdkafka log) and not valid YAML/JSON: {problem}") from None
    except RecursionError:
        raise NegotiationError(f"{source}: YAML/JSON nested too deep to read") from None
    if not docs:
        raise NegotiationError(f"{source}: empty input")
    items: list[Any] = []
    for d in docs:
        if isinstance(d, list) and all(isinstance(x, dict) and ("body" in x or "ApiKeys" in x) for x in d):
            items.extend(d)
        else:
            items.append(d)
    answers = []
    for i, doc in enumerate(items):
        where = source if len(items) == 1 else f"{source}[{i}]"
        if not isinstance(doc, dict):
            raise NegotiationError(f"{where}: not a recognised broker answer: expected a mapping with "
                                   f"ApiKeys, got {type(doc).__name__} {str(doc)[:40]!r}")
        address = str(field_of(doc, "address", "Address", "broker", "Broker") or default_address(source))
        if len(items) > 1 and field_of(doc, "address", "Address", "broker", "Broker") is None:
            address = f"{address}#{i}"
        body = doc
        if "body" in doc and isinstance(doc["body"], dict):
            key, kind = doc.get("api_key"), doc.get("kind")
            if (key is not None and int(key) != API_VERSIONS_KEY) or kind == "request":
                name = doc.get("api_name") or f"api key {key}"
                version = f" v{doc['api_version']}" if "api_version" in doc else ""
                raise NegotiationError(f"{where}: this is a {kind or 'message'}: {name}{version} "
                                       f"(api key {key}), not an ApiVersionsResponse")
            body = doc["body"]
        ans = answer_from_body(body, address=address, source=where,
                               form="json" if text.lstrip().startswith(("{", "[")) else "yaml")
        if "api_version" in doc:
            try:
                ans.api_version = int(doc["api_version"])
            except (TypeError, ValueError):
                pass
        answers.append(ans)
    unique_addresses(answers)
    return answers
