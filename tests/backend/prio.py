#!/usr/bin/env python3
"""Latency first (issue 22 item 3; backend/src/prio.c): a batch tenant's frames
are held back while a latency tenant's session has work, released when that
work ends or after --batch-hold-ms; remote-smi and /metrics count it; stream
priorities follow the class. Driven over the wire on the driver test double,
whose streams run eagerly: a host function whose client does not answer keeps
the latency session's executor inside cuLaunchHostFunc, i.e. busy, for as long
as the test wants. Every check is on state (counters, replies), none on time.

    prio.py REMOTE_GPUD FAKE_LIBCUDA REMOTE_SMI [CASE...]

Cases:
  hold     a batch frame is held while the latency session is busy and released
           at the bound (holds 1, timeouts 1, held >= the bound); held again and
           released when the latency work ends (holds 2, timeouts 1); not held
           once the latency session is quiet; the counters in /metrics
  streams  a latency session's streams get the greatest priority, a batch
           one's the least, whatever they asked (the driver's log)
  ahead    the bound on a batch session's queued work: no markers while no
           latency tenant has a session; with one (quiet), --batch-ahead 4
           records a marker event after each async frame and lets at most 4
           be outstanding (the driver's log: records and destroys counted)
  kill     a latency session process SIGKILLed while busy: the supervisor's reap
           takes its mark back, and batch work is not held for it
  off      --priority off: the same batch frame is not held
Prints one line per check and exits 1 if any failed.
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preauth  # noqa: E402
import tenants  # noqa: E402  the wire client and the tenants file helpers
from preauth import check, recv_exact, MAGIC, VERSION  # noqa: E402
from tenants import Client, server, smi_json, tenants_text, until, unpack, MiB  # noqa: E402

OP_STREAM_CREATE, OP_HOSTFN, OP_HOSTFN_DONE = 16, 32, 33
F_ASYNC = 2
TOK_L, TOK_B = "tok-lat-0123456789", "tok-bat-0123456789"
L_LINE = "lat token=%s memory=none class=latency sessions=4" % TOK_L
B_LINE = "bat token=%s memory=none class=batch sessions=4" % TOK_B
HOLD_MS = 4000  # long enough for remote-smi to see a hold under way on a loaded machine


def mp(v):
    return bytes([v & 0xff]) if -32 <= v < 0 else preauth.mp(v)  # negative fixint too


def send_async(c, op, args):
    msg = bytes([0x90 | len(args)]) + b"".join(mp(a) for a in args)
    c.seq += 1
    c.s.sendall(struct.pack("<IHHIIQQii", MAGIC, VERSION, F_ASYNC, len(msg), op, 0, c.seq, 0, 0) + msg)


def send_sync(c, op, args):
    msg = bytes([0x90 | len(args)]) + b"".join(mp(a) for a in args)
    c.seq += 1
    c.s.sendall(struct.pack("<IHHIIQQii", MAGIC, VERSION, 0, len(msg), op, 0, c.seq, 0, 0) + msg)


def recv_msg(c):
    h = recv_exact(c.s, 40)
    if h is None:
        return None, None, None
    _, _, _, hl, op, pl, _, status, _ = struct.unpack("<IHHIIQQii", h)
    body = recv_exact(c.s, hl + pl)
    return op, status, (unpack(body[:hl])[0] if hl else [])


def busy_latency(lat, hid):
    """The latency session runs a host function its client does not answer yet:
    its executor stays inside cuLaunchHostFunc (the double runs it there)."""
    send_async(lat, OP_HOSTFN, [0, hid])
    op, _, msg = recv_msg(lat)
    return op == OP_HOSTFN and msg == [hid]


def t_hold():
    srv = server(tenants_text(L_LINE, B_LINE), "--batch-hold-ms", str(HOLD_MS), "--batch-run-ms", "0")
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        check(lat.status == 0 and bat.status == 0, "hellos of lat (latency) and bat (batch)")
        check(until(lambda: smi_json(srv)["lat"]["busy_sessions"] == 0), "lat is quiet after its hello")
        check(bat.alloc(MiB)[0] == 0 and smi_json(srv)["bat"]["holds"] == 0, "bat: not held while lat is quiet")

        check(busy_latency(lat, 1), "lat: a host function reached, left unanswered")
        check(smi_json(srv)["lat"]["busy_sessions"] == 1, "remote-smi: lat has a busy session")
        send_sync(bat, tenants.OP_MEM_ALLOC, [MiB])
        check(until(lambda: smi_json(srv)["bat"]["held_sessions"] == 1), "bat's mem_alloc is held back")
        op, st, _ = recv_msg(bat)
        check(st == 0, "... and answered once the bound passed, though lat is still busy")
        t = smi_json(srv)["bat"]
        check(t["holds"] == 1 and t["hold_timeouts"] == 1 and t["held_sessions"] == 0,
              "remote-smi: bat held once, and that hold reached the bound")
        check(t["held_seconds"] >= HOLD_MS / 1000.0, "remote-smi: bat held for the whole bound (%.3f s)" %
              t["held_seconds"])

        send_sync(bat, tenants.OP_MEM_ALLOC, [MiB])
        check(until(lambda: smi_json(srv)["bat"]["held_sessions"] == 1), "bat: the next frame is held again")
        send_async(lat, OP_HOSTFN_DONE, [1])
        op, st, _ = recv_msg(bat)
        check(st == 0, "lat's host function answered: bat's mem_alloc goes on")
        t = smi_json(srv)
        check(t["bat"]["holds"] == 2 and t["bat"]["hold_timeouts"] == 1,
              "remote-smi: the second hold ended with lat's work, not at the bound")
        check(until(lambda: smi_json(srv)["lat"]["busy_sessions"] == 0), "lat is quiet again")
        check(bat.alloc(MiB)[0] == 0 and smi_json(srv)["bat"]["holds"] == 2, "bat: not held once lat is quiet")
        prom = subprocess.run([tenants.SMI, "--prometheus", "--run-dir", os.path.join(srv.dir, "run")],
                              capture_output=True, text=True).stdout.splitlines()
        check(any(l.startswith("remote_gpud_tenant_holds_total{") and 'tenant="bat"' in l and l.endswith(" 2")
                  for l in prom), "metrics: remote_gpud_tenant_holds_total of bat is 2")
        check(any(l.startswith("remote_gpud_tenant_hold_timeouts_total{") and 'tenant="bat"' in l and
                  l.endswith(" 1") for l in prom), "metrics: remote_gpud_tenant_hold_timeouts_total of bat is 1")
        lat.close()
        bat.close()
    finally:
        srv.stop()


def t_streams():
    d = os.path.join(preauth.tempfile.mkdtemp(prefix="rg-prio."), "fakecuda.log")
    os.environ["FAKECUDA_LOG"] = d
    try:
        srv = server(tenants_text(L_LINE, B_LINE))
    finally:
        del os.environ["FAKECUDA_LOG"]
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        for c, who in ((lat, "lat"), (bat, "bat")):
            send_async(c, OP_STREAM_CREATE, [7, 1, -2])
            check(c.alloc(1)[0] == 0, "%s: a stream asking priority -2 (and a call after it)" % who)
        log = open(d).read()
        check("cuStreamCreateWithPriority(0x1, -5 ->" in log, "lat's stream: the greatest priority (-5)")
        check("cuStreamCreateWithPriority(0x1, 0 ->" in log, "bat's stream: the least priority (0)")
        check("cuStreamCreateWithPriority(0x1, -2 ->" not in log, "what they asked is not what they got")
        lat.close()
        bat.close()
    finally:
        srv.stop()


def t_ahead():
    d = os.path.join(preauth.tempfile.mkdtemp(prefix="rg-prio."), "fakecuda.log")
    os.environ["FAKECUDA_LOG"] = d
    try:
        srv = server(tenants_text(L_LINE, B_LINE), "--batch-ahead", "4")
    finally:
        del os.environ["FAKECUDA_LOG"]

    def count(what):
        """Calls of bat's executor only: the thread that created its streams (lat
        records markers of its own, on another thread)."""
        lines = open(d).read().splitlines()
        tids = {l.split("]")[0] for l in lines if "cuStreamCreateWithPriority(" in l}
        return sum(1 for l in lines if what in l and l.split("]")[0] in tids)
    try:
        bat = Client(srv.port, TOK_B)
        r0 = count("cuEventRecord(")
        for i in range(8):
            send_async(bat, OP_STREAM_CREATE, [10 + i, 1, 0])
        check(bat.alloc(1)[0] == 0 and count("cuEventRecord(") == r0, "no latency session: no markers")
        lat = Client(srv.port, TOK_L)
        check(until(lambda: smi_json(srv)["lat"]["busy_sessions"] == 0), "lat: a session, quiet")
        r0, d0 = count("cuEventRecord("), count("cuEventDestroy")
        for i in range(8):
            send_async(bat, OP_STREAM_CREATE, [20 + i, 1, 0])
        check(bat.alloc(1)[0] == 0, "bat: 8 async frames and a call")
        check(count("cuEventRecord(") - r0 == 8, "a marker after each (--batch-ahead 4: one every frame)")
        check(count("cuEventDestroy") - d0 == 4, "the oldest let go once 4 are outstanding: 4 of 8")
        check(smi_json(srv)["bat"]["ahead_waits"] == 0, "the double's work is done at once: no waits")
        lat.close()
        bat.close()
    finally:
        srv.stop()


def t_kill():
    srv = server(tenants_text(L_LINE, B_LINE), "--batch-hold-ms", "60000")
    try:
        lat = Client(srv.port, TOK_L)
        check(busy_latency(lat, 1) and smi_json(srv)["lat"]["busy_sessions"] == 1, "lat: busy in a host function")
        tenants.kill_session(srv)
        check(until(lambda: smi_json(srv)["lat"]["busy_sessions"] == 0 and smi_json(srv)["lat"]["sessions"] == 0),
              "lat's process killed: its busy mark is taken back")
        bat = Client(srv.port, TOK_B)
        check(bat.alloc(MiB)[0] == 0 and smi_json(srv)["bat"]["holds"] == 0, "bat: not held for a dead session")
        lat.close()
        bat.close()
    finally:
        srv.stop()


def t_off():
    srv = server(tenants_text(L_LINE, B_LINE), "--priority", "off", "--batch-hold-ms", "60000")
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        check(busy_latency(lat, 1), "lat: a host function reached, left unanswered")
        check(bat.alloc(MiB)[0] == 0, "--priority off: bat's mem_alloc is answered while lat is busy")
        t = smi_json(srv)
        check(t["bat"]["holds"] == 0 and t["lat"]["busy_sessions"] == 0, "remote-smi: no holds, nothing tracked")
        send_async(lat, OP_HOSTFN_DONE, [1])
        lat.close()
        bat.close()
    finally:
        srv.stop()


CASES = {"hold": t_hold, "streams": t_streams, "ahead": t_ahead, "kill": t_kill, "off": t_off}

if __name__ == "__main__":
    preauth.run_cases(CASES, sys.argv[4:])
