#!/usr/bin/env python3
"""Build fixtures/negotiate/kafka-4.3-apiversions-v4.hex: the ApiVersionsResponse v4 a Kafka 4.3.0
broker gives a client, from Kafka 4.3.0's message specs (every API whose request lists the
"broker" listener, with its validVersions; an API whose latest version is unstable advertises one
less, as a broker with unstable.api.versions.enable=false does) and the features a 4.3.0 broker
supports, finalized at their 4.3 defaults.

    python scripts/make_kafka43_apiversions.py ../shared/kafka-message-specs-4.3 \
        fixtures/negotiate/kafka-4.3-apiversions-v4.hex

The feature ranges are Kafka 4.3.0's (metadata.version 7 = 3.3-IV3 up to 30 = 4.3-IV0, per Kafka's
4.3 upgrade notes; the others from its feature classes: kraft.version 0-1, transaction.version 0-2,
group.version 0-1, eligible.leader.replicas.version 0-1, share.version 0-1, streams.version 0-1);
a real broker's answer lists the same APIs and ranges (the specs folder's README says so) but was not
recorded here.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.codec import encode_response
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.spec.versions import Versions

SUPPORTED = {"metadata.version": (7, 30), "kraft.version": (0, 1), "transaction.version": (0, 2),
             "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1),
             "streams.version": (0, 1)}
FINALIZED = {"metadata.version": 30, "kraft.version": 1, "transaction.version": 2, "group.version": 1,
             "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1}


def answer(folder: Path) -> dict:
    keys = []
    for path in sorted(folder.glob("*Request.json")):
        spec = loads_jsonc(path.read_text(encoding="utf-8"), source=str(path))
        valid = Versions.parse(spec["validVersions"])
        if valid.empty or "broker" not in spec.get("listeners", []):
            continue
        hi = valid.hi - 1 if spec.get("latestVersionUnstable") else valid.hi
        keys.append({"ApiKey": spec["apiKey"], "MinVersion": valid.lo, "MaxVersion": hi})
    keys.sort(key=lambda k: k["ApiKey"])
    return {"ErrorCode": 0, "ApiKeys": keys, "ThrottleTimeMs": 0,
            "SupportedFeatures": [{"Name": n, "MinVersion": lo, "MaxVersion": hi} for n, (lo, hi) in SUPPORTED.items()],
            "FinalizedFeaturesEpoch": 42,
            "FinalizedFeatures": [{"Name": n, "MaxVersionLevel": lv, "MinVersionLevel": lv}
                                  for n, lv in FINALIZED.items()],
            "ZkMigrationReady": False}


def main(argv: list[str]) -> int:
    body = answer(Path(argv[1]))
    frame = encode_response(18, 4, {"CorrelationId": 1}, body)
    Path(argv[2]).write_text(frame.hex() + "\n", encoding="ascii")
    print(f"wrote {argv[2]}: {len(body['ApiKeys'])} APIs, {len(frame)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
