#!/usr/bin/env bash
# Fuzz the optional native decoders (kwire_cli/codec/_speedups.c, kwire_cli/records/_native.c,
# kwire_cli/tls/_records13.c) built
# with AddressSanitizer and UndefinedBehaviorSanitizer, so that an out-of-bounds read is a report,
# not a silent wrong byte.
#
#   bash fuzz/asan_native.sh [seconds per target, default 60]
#
# Copies kwire_cli/ and specs/ to a scratch folder, compiles both there with
# -fsanitize=address,undefined, and runs the native_agrees (native vs generated Python decoder),
# request, response, records, records_big (long batches and values: native vs Python) and
# tls_native_agrees (TLS 1.3 records through OpenSSL's libcrypto vs cryptography) targets
# of fuzz/fuzzlib.py against that copy with libasan preloaded.
set -euo pipefail
secs="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$root/kwire_cli" "$root/specs" "$work/"
rm -f "$work"/kwire_cli/codec/_speedups*.so "$work"/kwire_cli/records/_native*.so "$work"/kwire_cli/tls/_records13*.so
for ext in codec/_speedups records/_native tls/_records13; do
    gcc -shared -fPIC -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer $(python3-config --includes) \
        "$work/kwire_cli/$ext.c" -o "$work/kwire_cli/$ext$(python3-config --extension-suffix)"
done
cat > "$work/drive.py" <<PY
import random, sys, time
sys.path.insert(0, "$work"); sys.path.insert(1, "$root/fuzz")
import kwire_cli
from kwire_cli.codec import compiler
from kwire_cli.records import native as records_native
from kwire_cli.tls import keys as tls_keys
assert kwire_cli.__file__.startswith("$work") and compiler._speedups is not None and records_native.available()
assert tls_keys.native_opener is not None
import fuzzlib
for name in ("native_agrees", "request", "response", "records", "records_big", "tls_native_agrees"):
    rng, seeds, n, found = random.Random(7), fuzzlib.seeds_for(name), 0, set()
    t0 = time.monotonic()
    while time.monotonic() - t0 < $secs:
        seed, kw = rng.choice(seeds)
        data = fuzzlib.mutate(rng, seed) if rng.random() > 0.1 else bytes(rng.randrange(256) for _ in range(rng.randrange(80)))
        bug = fuzzlib.run_one(fuzzlib.TARGETS[name], data, random.Random(n), **kw)
        n += 1
        if bug and bug not in found:
            found.add(bug)
            print(name, bug, data.hex()[:200], flush=True)
    print(f"{name}: {n} inputs under ASan+UBSan, {len(found)} findings", flush=True)
PY
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 LD_PRELOAD="$(gcc -print-file-name=libasan.so)" python3 "$work/drive.py"
