#!/bin/sh
# Write the dump-form fixtures of fixtures/hex/dumps/ with the real tools, from kwire's
# own recordings. Run from the repository root:  sh scripts/make_dump_fixtures.sh
# Needs: tcpdump, tshark + editcap (wireshark-common), od, xxd, base64, python3 (+ dpkt), node,
# jshell (a JDK), go. Timestamps in tcpdump/tshark output are those of the recording.
set -eu
D=fixtures/hex/dumps
CAP=fixtures/captures/kafkajs-produce.pcap
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# inputs: raw bytes of recorded messages (size prefix included)
xxd -r -p fixtures/hex/saslauthenticate-request-v2.hex "$D/saslauthenticate-request-v2.bin"
xxd -r -p fixtures/hex/produce-request-v9.hex "$D/produce-request-v9.bin"

# tcpdump: one packet (the ApiVersions v2 request, packet 4) and the first exchanges (packets 4-9)
editcap -r "$CAP" "$T/p4.pcap" 4
editcap -r "$CAP" "$T/p10.pcap" 10
editcap -r "$CAP" "$T/p4-9.pcap" 4-9
tcpdump -nn -r "$T/p4.pcap" -x 2>/dev/null > "$D/kafkajs-apiversions-request-v2.tcpdump-x.txt"
tcpdump -nn -r "$T/p4.pcap" -xx 2>/dev/null > "$D/kafkajs-apiversions-request-v2.tcpdump-xx.txt"
tcpdump -r "$T/p4.pcap" -X 2>/dev/null > "$D/kafkajs-apiversions-request-v2.tcpdump-X.txt"
tcpdump -nn -r "$T/p10.pcap" -X 2>/dev/null > "$D/kafkajs-produce-request-v7.tcpdump-X.txt"
tcpdump -nn -r "$T/p4-9.pcap" -X 2>/dev/null > "$D/kafkajs-packets-4-9.tcpdump-X.txt"

# od: hex bytes with hexadecimal offsets; `*` folds repeated lines; and the default octal offsets
od -A x -t x1 "$D/metadata-request-v12.bin" > "$D/metadata-request-v12.od-Ax-tx1.txt"
od -A x -t x1 "$D/saslauthenticate-request-v2.bin" > "$D/saslauthenticate-request-v2.od-Ax-tx1.txt"
od -t x1 "$D/produce-request-v9.bin" > "$D/produce-request-v9.od-tx1.txt"

# Wireshark: Follow TCP Stream as hex, and tshark -x of other link types
tshark -r "$CAP" -q -z follow,tcp,hex,0 > "$D/kafkajs-produce.follow-tcp-hex.txt"
for k in sll sll2 rawip null; do
    python3 scripts/relink_capture.py "$CAP" "$D/kafkajs-produce.$k.pcap" "$k"
    tshark -r "$D/kafkajs-produce.$k.pcap" -Y "frame.number == 10" -x > "$D/kafkajs-produce-request-v7.$k.tshark-x.txt"
done

# xxd as a C array
(cd "$D" && xxd -i metadata-request-v12.bin) > "$D/metadata-request-v12.xxd-i.txt"

# byte literals as programs print them
python3 -c 'import sys; print(open(sys.argv[1], "rb").read())' "$D/produce-request-v9.bin" \
    > "$D/produce-request-v9.python-bytes-repr.txt"
python3 -c 'import sys; print(repr(open(sys.argv[1], "rb").read().decode("latin-1")))' "$D/produce-request-v9.bin" \
    > "$D/produce-request-v9.python-str-repr.txt"
node -e 'const b = require("fs").readFileSync(process.argv[1]); console.log(b)' "$D/produce-request-v9.bin" \
    > "$D/produce-request-v9.node-buffer-inspect.txt"
node -e 'const b = require("fs").readFileSync(process.argv[1]); console.log(JSON.stringify(b))' "$D/produce-request-v9.bin" \
    > "$D/produce-request-v9.node-buffer-json.txt"
printf 'byte[] b = java.nio.file.Files.readAllBytes(java.nio.file.Path.of("%s"));\nSystem.out.println(java.util.Arrays.toString(b));\n/exit\n' \
    "$D/produce-request-v9.bin" > "$T/a.jsh"
jshell -q "$T/a.jsh" > "$D/produce-request-v9.java-arrays-tostring.txt"
cat > "$T/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"
)

func main() {
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	fmt.Printf(os.Args[2]+"\n", b)
}
EOF
(cd "$T" && go mod init dumps >/dev/null 2>&1 && go build -o dump main.go)
"$T/dump" "$D/produce-request-v9.bin" '%#v' > "$D/produce-request-v9.go-sharp-v.txt"
"$T/dump" "$D/produce-request-v9.bin" '%v' > "$D/produce-request-v9.go-v.txt"
base64 "$D/produce-request-v9.bin" > "$D/produce-request-v9.base64.txt"
echo "wrote $D"
