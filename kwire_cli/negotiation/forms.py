"""Read what brokers advertise: one ``BrokerAnswer`` per broker, whatever form the input takes.

Forms, detected from the content (never from the file name), in this order:

* a pcap/pcapng capture, gzip-compressed or not (``kwire_cli.capture.formats`` sniffs it): its
  ApiVersions answers, one per broker address (``negotiation.capture``);
* raw bytes of an ApiVersionsResponse (not UTF-8 text, or holding a NUL);
* hex of an ApiVersionsResponse in any dump form ``kwire decode`` reads (``kwire_cli.inputs``:
  plain hex, xxd, hexdump -C, tshark -x), any version v0-v4, with or without the 4-byte size
  prefix and the response header (``negotiation.apiversions``);
* the text ``kafka-broker-api-versions.sh`` / ``kafka-cluster.sh api-versions`` prints (several
  brokers, log noise around the blocks, indented, quoted with ``> ``, without the host, the
  one-line ``{...}`` form of Kafka 0.10.2, cut off at the end);
* the Java client's DEBUG log (``Recorded API versions for node -1: (Produce(0): 0 to 9 ...)``);
* librdkafka ``debug=feature`` log lines (``ApiKey Produce (0) Versions 0..9``), one broker per
  log source;
* YAML or JSON: ``{ApiKeys: [{ApiKey, MinVersion, MaxVersion}]}``, alone or as the body of kwire's
  own decode output, several documents allowed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kwire_cli.errors import NegotiationError
from kwire_cli.inputs import InputError, NotADump, SourceError, locate_source, read_blocks, read_file, read_stdin
from kwire_cli.negotiation.model import BrokerAnswer, default_address


def read_broker_argument(arg: str, *, what: str, source: str) -> list[BrokerAnswer]:
    """The answers a BROKER argument gives, read through ``kwire_cli.inputs.locate_source``: ``-``
    standard input, ``@FILE`` or a path that exists a file (a capture streamed, never whole), else
    the argument's own text when it reads as a dump (at least 12 characters); anything else is a
    ``SourceError`` (exit code 2) naming ``what`` (``broker 1``). ``source`` names inline text in
    the output (``argument 1``)."""
    origin, name = locate_source(arg, paths="existing")
    if origin != "argument":
        return load_broker_file("-" if origin == "stdin" else name, what)
    if os.path.isdir(arg):
        raise SourceError(f"{what}: {arg} is a directory (give the files in it)")
    if os.path.exists(arg) or len(arg.strip()) < 12 or not is_hex_text(arg):
        raise SourceError(f"{what}: no such file: {arg} (and not inline hex)")
    return parse_broker_input(arg, source=source)


def load_broker_file(path: str | Path, what: str | None = None) -> list[BrokerAnswer]:
    """Read one input file (any form); ``-`` is standard input. A capture is read from the
    file as a stream (never whole into memory). ``what`` names the argument in a ``SourceError``."""
    from kwire_cli.capture.formats import SNIFF_BYTES, capture_kind
    from kwire_cli.negotiation.capture import answers_from_capture

    if str(path) == "-":
        return parse_broker_input(read_stdin(), source="-")
    if capture_kind(read_file(path, what, limit=SNIFF_BYTES)):
        return answers_from_capture(Path(path), str(path))
    return parse_broker_input(read_file(path, what), source=str(path))


def parse_broker_input(data: bytes | str, source: str = "<input>") -> list[BrokerAnswer]:
    """Detect the form of ``data`` and return the broker answers it holds (at least one)."""
    from kwire_cli.negotiation.apiversions import decode_api_versions_bytes

    form, payload = detect_form(data, source)
    if form == "capture":
        from kwire_cli.negotiation.capture import answers_from_capture
        answers = answers_from_capture(payload, source)
    elif form in ("hex", "raw"):
        frames = dump_frames(payload, source)
        if len(frames) == 1:
            answers = [decode_api_versions_bytes(frames[0].data, address=default_address(source), source=source,
                                                 form=form)]
        else:
            from kwire_cli.negotiation.apiversions import answers_from_frames
            answers = answers_from_frames(frames, source, form)
    elif form == "kafka-broker-api-versions":
        from kwire_cli.negotiation.kafka_broker_api_versions import parse_kafka_broker_api_versions
        answers = parse_kafka_broker_api_versions(payload, source)
    elif form == "java-client-log":
        from kwire_cli.negotiation.java_client_log import parse_java_client_log
        answers = parse_java_client_log(payload, source)
    elif form == "librdkafka":
        from kwire_cli.negotiation.librdkafka import parse_librdkafka_log
        answers = parse_librdkafka_log(payload, source)
    else:
        from kwire_cli.negotiation.yaml_answers import parse_yaml_answers
        answers = parse_yaml_answers(payload, source)
    if not answers:
        raise NegotiationError(f"{source}: no broker answer found")
    return answers


def detect_form(data: bytes | str, source: str = "<input>") -> tuple[str, Any]:
    """Return (form, payload): payload is bytes for "capture"/"raw", text otherwise."""
    from kwire_cli.capture.formats import SNIFF_BYTES, capture_kind
    from kwire_cli.negotiation.java_client_log import ANSWER
    from kwire_cli.negotiation.kafka_broker_api_versions import HEADER
    from kwire_cli.negotiation.librdkafka import ENTRY, START

    if isinstance(data, bytes):
        if capture_kind(data[:SNIFF_BYTES]):
            return "capture", data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "raw", data
        if "\x00" in text:
            return "raw", data
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.strip()
    if not stripped:
        raise NegotiationError(f"{source}: empty input")
    # comment lines blanked, not removed: errors and answers name the lines of the input
    uncommented = "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())
    if uncommented.strip() and is_hex_text(uncommented):
        return "hex", uncommented
    if HEADER.search(text):
        return "kafka-broker-api-versions", text
    if ANSWER.search(text):
        return "java-client-log", text
    if ENTRY.search(text) or START.search(text):
        return "librdkafka", text
    return "yaml", text


def is_hex_text(text: str) -> bool:
    """True when ``text`` is in a dump form ``kwire_cli.inputs`` reads (it may still be broken:
    ``hex_bytes`` then says where)."""
    try:
        read_blocks(text)
    except NotADump:
        return False
    except InputError:
        return True
    return True


def hex_bytes(text: str, source: str) -> bytes:
    """The message in hex text of any dump form, or a one-line error naming ``source``."""
    from kwire_cli.inputs import message_bytes

    try:
        return message_bytes(read_blocks(text))
    except InputError as e:
        raise NegotiationError(f"{source}: {e}") from None


def dump_frames(payload: str | bytes, source: str) -> list[Any]:
    """The Kafka frames of hex text in any dump form, or of raw bytes (``kwire_cli.inputs.frames``);
    a one-line error naming ``source``."""
    from kwire_cli.inputs import Block
    from kwire_cli.inputs.frames import split_frames

    try:
        if isinstance(payload, bytes):
            blocks = [Block(payload, 0, 0, "binary")]
        else:
            blocks = read_blocks(payload)
        return split_frames(blocks)
    except InputError as e:
        raise NegotiationError(f"{source}: {e}") from None
