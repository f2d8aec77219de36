#!/usr/bin/env bash
# Makes the secrets docker-compose.yml mounts, in deploy/secrets/ (or DIR):
#   ca.pem              the CA clients trust (REMOTE_GPU_TLS_CA)
#   server.pem, server-key.pem
#                       the GPU nodes' certificate, valid for every name given
#                       (the compose service names by default: clients check the
#                       host name they dialled against it)
#   token               the shared secret (--token-file, REMOTE_GPU_TOKEN)
# Keys and token are mode 0600: remote-gpud refuses a token file others can read.
# An existing file is kept, so re-running adds nothing and rotates nothing.
#
#   deploy/gen-certs.sh [--dir DIR] [NAME...]      (default names: gpu0 gpu1 localhost)
set -euo pipefail
dir=$(dirname "$0")/secrets
if [ "${1:-}" = --dir ]; then dir=$2; shift 2; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(gpu0 gpu1 localhost)
mkdir -p "$dir"
umask 077
cd "$dir"
if [ ! -s ca.pem ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
		-subj "/CN=remote-gpu CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
fi
if [ ! -s server.pem ]; then
	san=$(printf 'DNS:%s,' "${names[@]}")
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${names[0]}" \
		-keyout server-key.pem -out server.csr 2>/dev/null
	openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 825 \
		-extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "${san%,}") -out server.pem 2>/dev/null
	rm -f server.csr ca.srl
fi
[ -s token ] || openssl rand -hex 32 >token
chmod 644 ca.pem server.pem
echo "gen-certs: $(pwd): ca.pem server.pem server-key.pem token (names: ${names[*]})"
