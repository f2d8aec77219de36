#!/usr/bin/env bash
# garbage.sh HOST PORT: sends remote-gpud bytes that are not a valid session,
# each case on its own connection, with bash's /dev/tcp. The server must answer
# with an error or drop the connection, and keep serving everyone else; the
# caller checks that afterwards (server alive, a probe client works, memory back
# to its baseline). Exit status 1 only if a connection could not be made at all.
#
# Frame header (protocol/include/proto.h): magic "RGPU" as little-endian u32
# (bytes 55 50 47 52), u16 version, u16 flags, u32 hdr_len, u32 reserved,
# u64 payload_len, then hdr_len bytes of msgpack [op, seq, args...].
set -u
# The server may close a connection while we still write to it: a write must
# then fail (EPIPE), not kill this script.
trap '' PIPE
host=${1:?host}
port=${2:?port}

MAGIC='\x55\x50\x47\x52'
V1='\x01\x00'
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
send "wrong version" "${MAGIC}\x77\x77\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x92\x01\x01\x01\x01"
send "hdr_len 4 GiB" "${MAGIC}${V1}\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
send "payload_len 2^64-1" "${MAGIC}${V1}\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x93\x01\x01\x00"
send "reserved nonzero" "${MAGIC}${V1}\x00\x00\x03\x00\x00\x00\xde\xad\xbe\xef\x00\x00\x00\x00\x00\x00\x00\x00\x92\x01\x01"
send "malformed msgpack" "${MAGIC}${V1}\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00$(printf '\\xc1%.0s' $(seq 16))"
send "msgpack not an array" "${MAGIC}${V1}\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x2a"
send "unknown op" "${MAGIC}${V1}\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x92\xcd\x27\x0f\x01"
send "reply flag from a client" "${MAGIC}${V1}\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x93\x00\x01\x00"
send "truncated header" "${MAGIC}${V1}\x00\x00\x64"
send "truncated msgpack" "${MAGIC}${V1}\x00\x00\x64\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x95\x01\x01" 1
send "truncated payload" "${MAGIC}${V1}\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x93\x01\x01\x00abcdef" 1
send "empty connection" ""
# many connections at once, all dropped without a byte
for _ in $(seq 32); do exec {fd}<>"/dev/tcp/$host/$port" && fds+=("$fd"); done 2>/dev/null
for fd in "${fds[@]:-}"; do [ -n "$fd" ] && exec {fd}>&-; done
echo "garbage: 32 idle connections: opened and closed"
exit $failed
