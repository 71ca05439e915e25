#!/bin/sh
# Set-up for kwire on a fresh machine: the package (editable) with its `spark` extra (PySpark, for
# `kwire spark-decode`) and, with --test, the test extras (pytest, ruff, mypy, import-linter...) and
# the packet tools the capture tests cross-check against (tcpdump, editcap/tshark; Debian packages,
# installed when this runs as root with apt-get; otherwise those tests skip and say why).
# Without Spark: `python -m pip install -e .` (decode, encode, diff, negotiate, pcap).
set -e
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--test" ]; then
  python -m pip install -q -e '.[spark,test]'
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    if ! command -v tcpdump >/dev/null 2>&1 || ! command -v tshark >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump tshark >/dev/null) \
        || echo "setup: could not install tcpdump/tshark; the tests that need them will skip" >&2
    fi
  fi
else
  python -m pip install -q -e '.[spark]'
fi
