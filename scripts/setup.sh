#!/bin/sh
# Set-up for kwire on a fresh machine: the package (editable) with its `spark` extra (PySpark, for
# `kwire spark-decode`), its `values` extra (Avro, Protobuf and JSON Schema keys and values) and, with --test, the test extras (pytest, ruff, mypy, import-linter...) and
# the packet tools the capture tests cross-check against (tcpdump, editcap/tshark) and the TLS
# terminator the proxy's --broker-tls test puts in front of tansu (stunnel4) and the headless browser of
# kwire report's test (chromium); Debian packages,
# installed when this runs as root with apt-get; otherwise those tests skip and say why.
# Without Spark: `python -m pip install -e .` (decode, encode, diff, negotiate, pcap).
set -e
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--test" ]; then
  python -m pip install -q -e '.[spark,values,test]'
  # kafkajs (the third real client of tests/test_proxy.py; its test skips without node)
  if command -v npm >/dev/null 2>&1; then
    (cd scripts/record && npm install --silent --no-audit --no-fund >/dev/null 2>&1) \
      || echo "setup: npm install in scripts/record failed; the kafkajs tests will skip" >&2
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    if ! command -v tcpdump >/dev/null 2>&1 || ! command -v tshark >/dev/null 2>&1 \
        || ! command -v stunnel4 >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump tshark stunnel4 >/dev/null) \
        || echo "setup: could not install tcpdump/tshark/stunnel4; the tests that need them will skip" >&2
    fi
    # the headless browser kwire report's page is tested in (Playwright's client drives it; its own
    # browser downloads are never used)
    if ! command -v chromium >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
        || echo "setup: could not install chromium; the report's browser test will skip" >&2
    fi
  fi
else
  python -m pip install -q -e '.[spark,values]'
fi
# the man pages: a wheel install puts them in PREFIX/share/man/man1 (setup.py's data_files); an
# editable install does not, so they are copied there, and (as root) to /usr/local/share/man/man1,
# which man finds whatever PATH holds (pyenv's shims hide PREFIX/bin from man's PATH mapping)
prefix=$(python -c 'import sys; print(sys.prefix)')
mkdir -p "$prefix/share/man/man1" && cp man/*.1 "$prefix/share/man/man1/" 2>/dev/null || true
if [ "$(id -u)" = "0" ] && [ -d /usr/local/share/man ]; then
  mkdir -p /usr/local/share/man/man1 && cp man/*.1 /usr/local/share/man/man1/ 2>/dev/null || true
fi
