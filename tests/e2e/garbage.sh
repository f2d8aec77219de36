#!/usr/bin/env bash
# garbage.sh HOST PORT: sends remote-gpud bytes that are not a valid session,
# each case on its own connection, with bash's /dev/tcp. The server must answer
# with an error or drop the connection, and keep serving everyone else; the
# caller checks that afterwards (server alive, a probe client works, memory back
# to its baseline). Exit status 1 only if a connection could not be made at all.
#
# Frame header (protocol/include/proto.h), 40 bytes little-endian: magic "RGPU"
# as u32 (bytes 55 50 47 52), u16 version, u16 flags, u32 hdr_len, u32 op,
# u64 payload_len, u64 seq, i32 status, i32 latched; then hdr_len bytes of
# msgpack [args...].
set -u
# The server may close a connection while we still write to it: a write must
# then fail (EPIPE), not kill this script.
trap '' PIPE
host=${1:?host}
port=${2:?port}

MAGIC='\x55\x50\x47\x52'
V=3 # PROTO_VERSION
# le N VALUE: VALUE as N little-endian bytes, in printf escapes
le() { local n=$1 v=$2 i out=; for ((i = 0; i < n; i++)); do out+=$(printf '\\x%02x' $(( (v >> (8 * i)) & 255 ))); done; printf '%s' "$out"; }
# hdr VERSION FLAGS HDR_LEN OP PAYLOAD_LEN [SEQ STATUS LATCHED]: a frame header
hdr() { printf '%s' "${MAGIC}$(le 2 "$1")$(le 2 "$2")$(le 4 "$3")$(le 4 "$4")$(le 8 "$5")$(le 8 "${6:-1}")$(le 4 "${7:-0}")$(le 4 "${8:-0}")"; }
failed=0

# send NAME PRINTF-FORMAT [hold]: connect, write the bytes, read whatever comes
# back for a moment, close. hold=1 keeps the connection open a little first.
send() {
  local name=$1 bytes=$2 hold=${3:-0}
  if ! exec 3<>"/dev/tcp/$host/$port"; then
    echo "garbage: $name: cannot connect" >&2
    failed=1
    return
  fi
  printf "$bytes" >&3 2>/dev/null
  [ "$hold" = 1 ] && sleep 0.5
  timeout 1 cat <&3 >/dev/null 2>&1
  exec 3>&- 3<&-
  echo "garbage: $name: sent"
}

# 4 KiB of random bytes
rnd=$(head -c 4096 /dev/urandom | od -An -v -tx1 | tr -d ' \n' | sed 's/../\\x&/g')
send "random 4 KiB" "$rnd"
send "http request" 'GET / HTTP/1.0\r\nHost: x\r\n\r\n'
send "wrong version" "$(hdr 0x7777 0 5 1 0)\x92\x01\x01\x01\x01"
send "version 1 header" "${MAGIC}\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x93\x01\x01\x00"
send "hdr_len 4 GiB" "$(hdr $V 0 0xffffffff 1 0)"
send "payload_len 2^64-1" "$(hdr $V 0 1 1 -1)\x91\x00"
send "status on a request" "$(hdr $V 0 1 1 0 1 700)\x91\x01"
send "malformed msgpack" "$(hdr $V 0 16 1 0)$(printf '\\xc1%.0s' $(seq 16))"
send "msgpack not an array" "$(hdr $V 0 1 1 0)\x2a"
send "unknown op" "$(hdr $V 0 1 9999 0)\x91\x01"
send "reply flag from a client" "$(hdr $V 1 1 0 0)\x91\x00"
send "truncated header" "${MAGIC}\x03\x00\x00\x00\x64"
send "truncated msgpack" "$(hdr $V 0 100 1 0)\x95\x01\x01" 1
send "truncated payload" "$(hdr $V 0 1 8 16)\x91\x01abcdef" 1
send "a header alone, op 0" "$(hdr $V 0 0 0 0)"
send "empty connection" ""
# many connections at once, all dropped without a byte
for _ in $(seq 32); do exec {fd}<>"/dev/tcp/$host/$port" && fds+=("$fd"); done 2>/dev/null
for fd in "${fds[@]:-}"; do [ -n "$fd" ] && exec {fd}>&-; done
echo "garbage: 32 idle connections: opened and closed"
exit $failed
