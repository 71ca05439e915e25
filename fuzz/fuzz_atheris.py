#!/usr/bin/env python3
"""Coverage-guided fuzzing of one kwire decoder with atheris (libFuzzer for Python).

    pip install atheris
    python fuzz/fuzz_atheris.py TARGET [libFuzzer options]
    python fuzz/fuzz_atheris.py records -max_total_time=300 -rss_limit_mb=2048 -timeout=10

TARGET is one of fuzzlib.TARGETS (request, response, body, partial, partial_agrees, records,
decompress, embedded, capture, hexdump, negotiate, yaml, native_agrees). The corpus starts from the real fixtures
(written to fuzz/corpus/TARGET/ on first use). The first two input bytes choose the decode parameters (the
(api, version, kind) of a bare body or response, the codec of a payload); the rest are the bytes.
Anything but kwire's own one-line error is a crash: libFuzzer saves the input as crash-* and
stops. -rss_limit_mb turns an unbounded allocation into a reported crash too.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

with atheris.instrument_imports(include=["kwire_cli"]):
    import kwire_cli.capture
    import kwire_cli.capture.session
    import kwire_cli.codec
    import kwire_cli.codec.embedded
    import kwire_cli.codec.partial
    import kwire_cli.inputs
    import kwire_cli.inputs.messages
    import kwire_cli.negotiation.forms
    import kwire_cli.negotiation.negotiate
    import kwire_cli.negotiation.render
    import kwire_cli.records
    import kwire_cli.records.compression  # noqa: F401

import fuzzlib

NAME = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "records"
TARGET = fuzzlib.TARGETS[NAME]
PLANS = fuzzlib.api_versions()
CODECS = (1, 2, 3, 4)


def params(sel: int) -> dict:
    """Decode parameters from the 2-byte selector at the start of each input."""
    if NAME in ("response",):
        resp = [p for p in PLANS if p[2] == "response"]
        k, v, _ = resp[sel % len(resp)]
        return {"key": k, "version": v}
    if NAME in ("body", "partial", "partial_agrees", "native_agrees"):
        k, v, kind = PLANS[sel % len(PLANS)]
        header = NAME != "body" and bool(sel & 0x8000)
        return {"key": k, "version": v, "kind": kind, **({"header": True} if header else {})}
    if NAME == "decompress":
        return {"codec": CODECS[sel % 4]}
    return {}


def selector_for(kw: dict) -> int:
    if "codec" in kw:
        return CODECS.index(kw["codec"])
    if "key" in kw:
        if NAME == "response":
            resp = [p for p in PLANS if p[2] == "response"]
            return resp.index((kw["key"], kw["version"], "response"))
        return PLANS.index((kw["key"], kw["version"], kw["kind"])) | (0x8000 if kw.get("header") else 0)
    return 0


def write_corpus(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        return
    for i, (data, kw) in enumerate(fuzzlib.seeds_for(NAME)):
        (folder / f"seed-{i:04d}").write_bytes(selector_for(kw).to_bytes(2, "big") + data)


def test_one(raw: bytes) -> None:
    if len(raw) < 2:
        return
    kw = params(int.from_bytes(raw[:2], "big"))
    bug = fuzzlib.run_one(TARGET, raw[2:], random.Random(raw[0]), **kw)
    if bug is not None:
        raise RuntimeError(f"{NAME}: {bug}")


def main() -> None:
    corpus = Path(__file__).resolve().parent / "corpus" / NAME
    write_corpus(corpus)
    args = [sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")]
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(str(corpus))
    atheris.Setup(args, test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    os.environ.setdefault("KWIRE_NO_PROGRESS", "1")
    main()
