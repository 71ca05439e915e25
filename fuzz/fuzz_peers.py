"""Fuzz targets for what a hostile peer or a damaged disk hands kwire outside captures: the proxy's
rewriting of broker answers, and dump-log's index and state files. Registered into
``fuzzlib.TARGETS`` (and their seeds into ``fuzzlib.seeds_for``) when fuzzlib is imported.

* ``rewrite``: an answer that names brokers (Metadata, FindCoordinator, DescribeCluster, Produce
  v10+, Fetch v16+, ApiVersions), mutated, given to ``rewrite_response`` with an address book that
  runs out of local ports after a few brokers: only KwireErrors (``CannotRewrite`` among them);
  a rewritten answer's size prefix is its length; where the splicing walk rewrote an answer the
  codec also decodes, the decode and re-encode path gives the same message; every address of the
  result is the proxy's; for Produce and Fetch, the walk that looks for their tagged
  ``NodeEndpoints`` without decoding agrees with the codec.
* ``index``: ``*.index`` / ``*.timeindex`` bytes read entry by entry and each checked against a
  real segment's map (``IndexCheck``): entries only, or one trailing-bytes line last; entry
  numbers in order; nothing but KwireErrors.
* ``state``: producer state snapshots (``*.snapshot``) and transaction indexes (``*.txnindex``):
  the streamed reading (``scan_producer_snapshot`` and ``iter_producers``, a megabyte at a time)
  gives exactly the entries there is room for, and the whole-bytes reader agrees with it.
"""
from __future__ import annotations

import io
import random
import struct
from typing import Any

import fuzzlib
from fuzzlib import FIXTURES


def t_rewrite(data: bytes, rng: random.Random, key: int = 3, version: int = 12) -> None:
    from kwire_cli.codec import decode_response
    from kwire_cli.errors import DecodeError
    from kwire_cli.proxy.rewrite import (
        SPLICED,
        AddressBook,
        CannotRewrite,
        NotSpliced,
        reencode_addresses,
        rewrite_response,
        splice_addresses,
    )
    ports = rng.choice((1, 3, 50, 2000))

    def bind_in(book_ports: list[int]) -> Any:
        def bind(_host: str, port: int) -> tuple[str, int]:
            if len(book_ports) >= ports:
                raise CannotRewrite("no port left")
            book_ports.append(port)
            return "127.0.0.1", 20000 + len(book_ports)
        return bind

    got = rewrite_response(data, key, version, AddressBook(bind_in([])))
    if got is None:
        return
    if struct.unpack_from(">i", got.data)[0] != len(got.data) - 4:
        raise AssertionError("the rewritten answer's size prefix is not its length")
    if key not in SPLICED:
        _agrees_on_endpoints(data, key, version)
        return
    try:
        spliced = splice_addresses(data, key, version, AddressBook(bind_in([])))
    except NotSpliced:
        return
    try:
        whole = reencode_addresses(data, key, version, AddressBook(bind_in([])))
    except DecodeError:
        return  # the walk stops after the last address; the codec reads the rest too
    if spliced is None or whole is None:
        raise AssertionError("the splicing walk and the codec disagree on whether the answer names brokers")
    body = decode_response(whole.data, key, version, size_prefixed=True, records="hex").body
    # (bytes the codec reads in a form it would not write, a bool of 2, stay as they came in the
    # spliced answer: the same message, not always the same bytes)
    if decode_response(spliced.data, key, version, size_prefixed=True, records="hex").body != body:
        raise AssertionError("the spliced answer differs from the decoded and re-encoded one")
    hosts = _hosts(body)
    if any(h != ("127.0.0.1", p) for h, p in hosts if p > 20000):
        raise AssertionError("an address of the rewritten answer is not the proxy's")


def _agrees_on_endpoints(data: bytes, key: int, version: int) -> None:
    """The walk that looks for top-level tagged addresses (Produce, Fetch) and the codec agree."""
    from kwire_cli.codec import decode_response
    from kwire_cli.errors import DecodeError
    from kwire_cli.proxy.rewrite import NotSpliced, tagged_addresses
    try:
        walked = tagged_addresses(data, key, version)
    except NotSpliced:
        return
    try:
        body = decode_response(data, key, version, size_prefixed=True, records="hex").body
    except DecodeError:
        return
    if walked != bool(body.get("NodeEndpoints")):
        raise AssertionError(f"the tag walk says {walked}, the codec {body.get('NodeEndpoints')!r}")


def _hosts(node: Any) -> list[tuple[Any, int]]:
    out: list[tuple[Any, int]] = []
    if isinstance(node, list):
        for x in node:
            out += _hosts(x)
    elif isinstance(node, dict):
        if "Host" in node and isinstance(node.get("Port"), int):
            out.append(((node["Host"], node["Port"]), node["Port"]))
        for v in node.values():
            out += _hosts(v)
    return out


def t_index(data: bytes, rng: random.Random, kind: str = "offset-index") -> None:
    from kwire_cli.logs import IndexCheck, read_index, segment_map
    seg = SEGMENTS[rng.randrange(len(SEGMENTS))]
    check = IndexCheck(kind, segment_map(io.BytesIO(seg), len(seg)))
    base = rng.choice((0, 22, 1 << 40, -5))
    last = -1
    tail = False
    for e in read_index(io.BytesIO(data), kind, base):
        if tail:
            raise AssertionError("an index entry after the trailing-bytes line")
        if isinstance(e, str):
            tail = True
            continue
        if e.number != last + 1:
            raise AssertionError(f"index entry {e.number} after {last}")
        last = e.number
        check.check(e)
        e.to_json()
    if last + 1 > len(data) // (8 if kind == "offset-index" else 12):
        raise AssertionError("more index entries than the bytes hold")


def t_state(data: bytes, rng: random.Random, kind: str = "producer-snapshot") -> None:
    from kwire_cli.logs import state
    if kind == "txn-index":
        n = 0
        for item in state.read_txn_index(io.BytesIO(data)):
            if isinstance(item, str):
                break
            n += 1
        if n > len(data) // 34:
            raise AssertionError("more aborted transactions than the bytes hold")
        return
    saved = state.CHUNK
    state.CHUNK = rng.choice((1, 7, 46, 1 << 20))  # the streamed reading a few bytes at a time too
    try:
        f = io.BytesIO(data)
        snap = state.scan_producer_snapshot(f)
        entries = list(state.iter_producers(f, snap))
    finally:
        state.CHUNK = saved
    whole = state.read_producer_snapshot(data)
    if entries != whole.entries or snap.problems != whole.problems or snap.computed_crc != whole.computed_crc:
        raise AssertionError("the streamed snapshot reading differs from the whole-bytes one")
    if len(entries) != snap.producers or snap.producers * 46 > max(len(data) - 10, 0):
        raise AssertionError("producer entries past what the bytes hold")
    snap.to_json()


def _segments() -> list[bytes]:
    return [p.read_bytes() for p in sorted((FIXTURES / "logs").glob("*/*.log"))]


SEGMENTS = _segments()


def _rewrite_seeds() -> list[tuple[bytes, dict]]:
    from kwire_cli.proxy.rewrite import may_rewrite
    out = [(p[3], {"key": p[0], "version": p[1]}) for p in fuzzlib.pairs() if p[3] and may_rewrite(p[0], p[1])]
    from kwire_cli.codec import encode_response
    for version in (9, 12):  # many brokers: the caps (the address book runs out of ports)
        brokers = [{"NodeId": i, "Host": f"b{i}.example", "Port": 9092 + i % 3, "Rack": None} for i in range(30)]
        out.append((encode_response(3, version, {"CorrelationId": 7},
                                    {"Brokers": brokers, "ClusterId": None, "ControllerId": 1, "Topics": [],
                                     **({"ClusterAuthorizedOperations": 0} if version < 11 else {})}),
                    {"key": 3, "version": version}))
    hexes = FIXTURES / "hex"
    for name, key, version in (("metadata-response-v12.hex", 3, 12), ("apiversions-response-v3.hex", 18, 3)):
        out.append((bytes.fromhex((hexes / name).read_text().strip()), {"key": key, "version": version}))
    return out


def _index_seeds() -> list[tuple[bytes, dict]]:
    logs = FIXTURES / "logs"
    return ([(p.read_bytes(), {"kind": "offset-index"}) for p in sorted(logs.glob("*/*.index"))]
            + [(p.read_bytes(), {"kind": "time-index"}) for p in sorted(logs.glob("*/*.timeindex"))])


def _state_seeds() -> list[tuple[bytes, dict]]:
    logs = FIXTURES / "logs"
    txn = b"".join(struct.pack(">hqqqq", 0, 1000 + i, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(4))
    return ([(p.read_bytes(), {"kind": "producer-snapshot"}) for p in sorted(logs.glob("*/*.snapshot"))]
            + [(txn, {"kind": "txn-index"}), (txn[:50], {"kind": "txn-index"})])


TARGETS = {"rewrite": t_rewrite, "index": t_index, "state": t_state}
SEEDS = {"rewrite": _rewrite_seeds, "index": _index_seeds, "state": _state_seeds}
