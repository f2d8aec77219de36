#!/usr/bin/env python3
"""Tickets of server to server copies (backend/src/peer.h), spoken on the wire
against remote-gpud on the driver test double, the way server A would:

    peer.py REMOTE_GPUD FAKE_LIBCUDA REMOTE_SMI

A client session asks for a ticket for a range of its memory; a peer
connection presents it and writes the range, and the client reads the exact
bytes back. Refused with CUDA_ERROR_NOT_PERMITTED and a log line saying why:
a wrong ticket, a used one, an expired one. Closed before anything is read:
a chunk before the ticket, a chunk past the ticket's range, a connection that
presents nothing in time. peer_open and peer_data on a client's own
connection are refused. Prints one line per check and exits 1 if any failed.
"""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preauth  # noqa: E402
import tenants  # noqa: E402  (its wire client)
from preauth import check, recv_exact, connect, MAGIC, VERSION  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../protocol/gen/proto_ops.h")) as f:
    OPS = dict((l.split()[0][9:], int(l.split()[2].rstrip(","))) for l in f if l.strip().startswith("PROTO_OP_"))
NOT_PERMITTED = 800
LIFE_MS = 400


def req(op, args, payload=b"", seq=1, flags=0):
    """A frame whose bytes arguments travel as msgpack bin."""
    def one(v):
        if isinstance(v, bytes):
            return b"\xc4" + bytes([len(v)]) + v
        return preauth.mp(v)
    msg = bytes([0x90 | len(args)]) + b"".join(one(a) for a in args)
    return struct.pack("<IHHIIQQii", MAGIC, VERSION, flags, len(msg), op, len(payload), seq, 0, 0) + msg + payload


def answer(s):
    """(status, seq) of the next frame, or None when the connection ended."""
    try:
        h = recv_exact(s, 40)
    except OSError:
        return None
    if h is None:
        return None
    _, _, _, hl, _, pl, seq, status, _ = struct.unpack("<IHHIIQQii", h)
    recv_exact(s, hl + pl)
    return status, seq


def ticket(c, ptr, n):
    st, msg = c.call(OPS["PEER_TICKET"], [ptr, n, 0])
    return (bytes(msg[0]), msg[1]) if st == 0 else (None, st)


def main():
    srv = preauth.Server(env={"REMOTE_GPU_TOKEN": "", "REMOTE_GPU_LOG": "info",
                              "REMOTE_GPUD_PEER_TICKET_MS": str(LIFE_MS)})
    try:
        c = tenants.Client(srv.port, "")
        check(c.status == 0, "a client session")
        st, ptr = c.alloc(1 << 16)
        t, port = ticket(c, ptr, 4096)
        check(t is not None and len(t) == 16 and 0 < port < 65536, "a ticket of 16 bytes and a peer port")

        p = connect(port)
        p.sendall(req(OPS["PEER_OPEN"], [os.urandom(16)], seq=5))
        check(answer(p) == (NOT_PERMITTED, 5), "a wrong ticket: CUDA_ERROR_NOT_PERMITTED")
        check(preauth.closed(p, 2), "... and the connection closed")

        data = os.urandom(4096)
        p = connect(port)
        p.sendall(req(OPS["PEER_OPEN"], [t], seq=1))
        check(answer(p) == (0, 1), "the ticket: accepted")
        p.sendall(req(OPS["PEER_DATA"], [0], payload=data[:1000], seq=2, flags=2))
        p.sendall(req(OPS["PEER_DATA"], [1000], payload=data[1000:], seq=3, flags=2))
        check(answer(p) == (0, 2) and answer(p) == (0, 3), "two chunks: each answered 0 in order")
        c.s.sendall(preauth.frame(OPS["MEMCPY_DTOH"], [ptr, 4096, 0], seq=99))
        h = recv_exact(c.s, 40)
        hl, pl = struct.unpack("<IHHIIQQii", h)[3], struct.unpack("<IHHIIQQii", h)[5]
        body = recv_exact(c.s, hl + pl)
        check(body[hl:] == data, "the client reads the exact bytes back")
        p.close()

        p = connect(port)
        p.sendall(req(OPS["PEER_OPEN"], [t], seq=1))
        check(answer(p) == (NOT_PERMITTED, 1), "the ticket again: refused")
        t2, _ = ticket(c, ptr, 4096)
        time.sleep(LIFE_MS / 1000 + 0.3)
        p = connect(port)
        p.sendall(req(OPS["PEER_OPEN"], [t2], seq=1))
        check(answer(p) == (NOT_PERMITTED, 1), "an expired ticket: refused")

        p = connect(port)
        p.sendall(req(OPS["PEER_DATA"], [0], payload=b"x" * 64, seq=1, flags=2))
        check(answer(p) is None, "a chunk before the ticket: closed unanswered")
        t3, _ = ticket(c, ptr, 4096)
        p = connect(port)
        p.sendall(req(OPS["PEER_OPEN"], [t3], seq=1))
        answer(p)
        p.sendall(req(OPS["PEER_DATA"], [0], payload=b"y" * 8192, seq=2, flags=2))
        check(answer(p) is None, "a chunk past the ticket's range: closed unanswered")
        idle = connect(port)
        check(preauth.closed(idle, 8), "a peer that presents nothing is closed within 5 s")

        c.s.sendall(req(OPS["PEER_OPEN"], [t3], seq=100))
        check(answer(c.s) == (NOT_PERMITTED, 100), "peer_open on a client's connection: refused")
        log = srv.logtext()
        for why in ("unknown ticket", "ticket already used", "ticket expired", "no ticket first",
                    "outside the ticket's range", "no ticket in time"):
            check(why in log, "the log says '%s'" % why)
        c.close()
    finally:
        srv.stop()
    print("%d failed" % preauth.failed)
    sys.exit(1 if preauth.failed else 0)


if __name__ == "__main__":
    main()
