#!/usr/bin/env bash
# Make --tls-creds directories for the tests, the way a user would with openssl:
#   DIR/x509       ca-cert.pem, server-cert.pem (CN destination.test, for 127.0.0.1 and
#                  ::1), server-key.pem, client-cert.pem (CN source.test), client-key.pem
#   DIR/other-ca   the same names, signed by another CA
#   DIR/stranger   DIR/x509's CA, and a client certificate it signed for stranger.test
#   DIR/foreign    DIR/x509's CA, and DIR/other-ca's client certificate and key
#   DIR/psk        keys.psk: source:<32 random bytes in hex>
#   DIR/psk-wrong  keys.psk: the same name, another key
# Each directory serves both sides, as QEMU's do. Keys are made afresh on every run.
set -euo pipefail
out=${1:?usage: make-creds.sh DIR}
DAYS=36500

# One CA and the two certificates it signs, in $1.
ca_dir() {
	local d=$1 tag=$2
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/ca-key.pem" -out "$d/ca-cert.pem" -days $DAYS -subj "/CN=ccvm test CA $tag" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	leaf "$d" server "destination.test" \
		"subjectAltName=DNS:destination.test,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature"
	leaf "$d" client "source.test" \
		"subjectAltName=DNS:source.test
extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"
}

tidy() { rm -f "$1/ca-key.pem" "$1"/*.csr "$1"/*.srl "$1"/*.ext; }

leaf() {
	local d=$1 who=$2 cn=$3 ext=$4
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/$who-key.pem" -out "$d/$who.csr" -subj "/CN=$cn" 2>/dev/null
	printf '%s\n' "$ext" >"$d/$who.ext"
	openssl x509 -req -in "$d/$who.csr" -CA "$d/ca-cert.pem" -CAkey "$d/ca-key.pem" \
		-CAcreateserial -out "$d/$who-cert.pem" -days $DAYS -extfile "$d/$who.ext" 2>/dev/null
}

ca_dir "$out/x509" A
ca_dir "$out/other-ca" B
mkdir -p "$out/stranger"
cp "$out/x509/ca-cert.pem" "$out/x509/ca-key.pem" "$out/stranger/"
leaf "$out/stranger" client "stranger.test" "extendedKeyUsage=clientAuth"
tidy "$out/x509"; tidy "$out/other-ca"; tidy "$out/stranger"
mkdir -p "$out/foreign"
cp "$out/x509/ca-cert.pem" "$out/foreign/"
cp "$out/other-ca/client-cert.pem" "$out/other-ca/client-key.pem" "$out/foreign/"
mkdir -p "$out/psk" "$out/psk-wrong"
echo "source:$(openssl rand -hex 32)" >"$out/psk/keys.psk"
echo "source:$(openssl rand -hex 32)" >"$out/psk-wrong/keys.psk"
chmod 0600 "$out"/*/*key* "$out"/*/keys.psk
