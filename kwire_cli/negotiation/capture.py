"""The ApiVersions answers in a pcap/pcapng capture (gzip-compressed or not), one per broker
address, read with ``kwire_cli.capture``."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from kwire_cli.errors import KwireError, NegotiationError
from kwire_cli.negotiation.apiversions import answer_from_body, decode_api_versions_bytes
from kwire_cli.negotiation.model import API_VERSIONS_KEY, BrokerAnswer, last_answers


def answers_from_capture(data: bytes | str | Path, source: str) -> list[BrokerAnswer]:
    """The ApiVersions answers in a pcap/pcapng capture, one per broker address (the last one).

    Each answer is decoded at the version of the request it answers (the capture reader pairs
    them); when that fails (a KIP-511 answer to a version the broker does not know uses the v0
    layout) the layout is detected as for hex input.
    """
    from kwire_cli.capture import KafkaFrame, iter_capture

    src = io.BytesIO(data) if isinstance(data, bytes) else str(data)
    found: dict[str, list[BrokerAnswer]] = {}
    packets: dict[int, int] = {}  # id of an answer -> the packet it was read from
    unpaired = 0
    for ev in iter_capture(src, file_label=source):
        if not isinstance(ev, KafkaFrame) or ev.kind != "response":
            continue
        if ev.api_key is None:
            unpaired += 1
            continue
        if ev.api_key != API_VERSIONS_KEY:
            continue
        where = f"{source} frame {ev.packet}"
        ans = _decode_paired(ev, where)
        ans.address, ans.form = ev.src, "capture"
        packets[id(ans)] = ev.packet
        found.setdefault(ev.src, []).append(ans)
    answers = last_answers(found, who="broker", where="capture", compare=True,
                           which=lambda a: f" (frame {packets[id(a)]})")
    if not answers:
        extra = f" ({unpaired} responses could not be paired with a request)" if unpaired else ""
        raise NegotiationError(f"{source}: the capture holds no ApiVersions answer{extra}")
    return answers


def _decode_paired(ev: Any, where: str) -> BrokerAnswer:
    from kwire_cli.codec import decode_response

    try:
        msg = decode_response(ev.data, API_VERSIONS_KEY, ev.api_version, size_prefixed=False)
    except KwireError:
        ans = decode_api_versions_bytes(ev.data, address=ev.src, source=where, form="capture")
        ans.notes.insert(0, f"the request was ApiVersions v{ev.api_version}; the answer does not "
                            "decode at that version")
        return ans
    ans = answer_from_body(msg.body, address=ev.src, source=where, form="capture")
    if msg.layout_version is not None:  # a KIP-511 answer (v0 layout), or a version newer than the specs
        ans.api_version = msg.layout_version
        ans.notes.insert(0, f"the request was ApiVersions v{ev.api_version} (frame {ev.request_packet}); "
                            f"the answer reads whole with the v{msg.layout_version} layout: {msg.notes[0]}")
        return ans
    ans.api_version = ev.api_version
    ans.notes.insert(0, f"ApiVersionsResponse v{ev.api_version} to the request of frame "
                        f"{ev.request_packet}, correlation id {ev.correlation_id}")
    return ans
