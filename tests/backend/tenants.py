#!/usr/bin/env python3
"""Tenants and their memory quotas (issue 22 items 1-2): remote-gpud --tenants on
the driver test double, spoken to over the wire (the hello and allocation ops).

    tenants.py REMOTE_GPUD FAKE_LIBCUDA REMOTE_SMI [CASE...]

Cases (each starts its own server on a free port):
  quota     two tenants: a's allocations (mem_alloc, mem_alloc_async, arrays)
            fail with CUDA_ERROR_OUT_OF_MEMORY past its quota, across two of
            its sessions, while b's succeed; frees give bytes back; the quota is
            back once a's session ends; remote-smi (text, --json, --prometheus)
            shows use, peak and sessions per tenant
  sigkill   a session process SIGKILLed while holding a's whole quota: the
            supervisor gives it back
  sessions  sessions= is enforced at the hello (CUDA_ERROR_TOO_MANY_PEERS), and
            a slot is free again when a session ends
  reload    SIGHUP: a tenant added takes sessions, a removed one's token is
            refused while its live session keeps working; a bad file keeps the
            tenants in force and the log names the line
  badfile   refused at start, naming the line: unknown keys, missing ones,
            duplicate names and tokens, bad sizes; a file others can read; two
            tenants in thread mode; --tenants with --token-file
  thread    thread mode with one tenant: its quota holds
  modules   a module's image is charged at its load (over the quota:
            CUDA_ERROR_OUT_OF_MEMORY) and its variables when resolved (over the
            quota: that entry's CUDA_ERROR_OUT_OF_MEMORY); needs the double's
            test_kernels.cubin in $RG_FAKECUDA_KERNELS (nvcc), else skipped
  graphs    a captured graph's memory-allocation nodes are charged while an
            exec of it lives (over the quota: its instantiate is
            CUDA_ERROR_OUT_OF_MEMORY), not twice for an allocation captured
            without its free, and given back at the exec's destroy
  cublas    a cuBLAS handle's default workspace (32 MiB on the double's
            compute capability 9.0) is charged at cublasCreate_v2 (over the
            quota: CUBLAS_STATUS_ALLOC_FAILED) and given back at its destroy;
            needs the fake cuBLAS in $RG_FAKECUBLAS and $RG_FAKECUBLASLT
Prints one line per check and exits 1 if any failed.
"""
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
GPUD, DRIVER, SMI = sys.argv[1], sys.argv[2], sys.argv[3]
import preauth  # noqa: E402  the wire helpers and the server wrapper
from preauth import check, recv_exact, connect, frame, VERSION, OP_HELLO  # noqa: E402

OP_MEM_ALLOC, OP_MEM_FREE, OP_MEM_ALLOC_ASYNC, OP_ARRAY_CREATE = 3, 4, 5, 51
OP_CUBLAS_CREATE, OP_CUBLAS_DESTROY, CUBLAS_ALLOC_FAILED = 1024, 1025, 3
OP_MEM_FREE_ASYNC, OP_STREAM_CREATE, OP_CAPTURE_BEGIN, OP_CAPTURE_END = 6, 16, 34, 35
OP_GRAPH_INSTANTIATE, OP_GRAPH_EXEC_DESTROY, CAPTURE_RELAXED = 36, 39, 2
OOM, NOT_PERMITTED, TOO_MANY_PEERS = 2, 800, 711
TOK_A, TOK_B, TOK_C = "tok-a-0123456789", "tok-b-0123456789", "tok-c-0123456789"
KiB, MiB = 1024, 1024 * 1024


def unpack(b, i=0):
    """One msgpack value of b at i: (value, next index); ints, strings, arrays."""
    c = b[i]
    if c < 0x80:
        return c, i + 1
    if c >= 0xe0:
        return c - 256, i + 1
    if 0x90 <= c <= 0x9f or c in (0xdc, 0xdd):
        n, i = (c & 15, i + 1) if c <= 0x9f else (struct.unpack(">H" if c == 0xdc else ">I",
                                                                 b[i + 1:i + (3 if c == 0xdc else 5)])[0],
                                                   i + (3 if c == 0xdc else 5))
        out = []
        for _ in range(n):
            v, i = unpack(b, i)
            out.append(v)
        return out, i
    if 0xa0 <= c <= 0xbf:
        return b[i + 1:i + 1 + (c & 31)], i + 1 + (c & 31)
    sizes = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q"}
    if c in sizes:
        n = struct.calcsize(sizes[c])
        return struct.unpack(sizes[c], b[i + 1:i + 1 + n])[0], i + 1 + n
    if c == 0xc0:
        return None, i + 1
    lens = {0xd9: ">B", 0xc4: ">B", 0xda: ">H", 0xc5: ">H", 0xdb: ">I", 0xc6: ">I"}  # str, bin
    if c in lens:
        k = struct.calcsize(lens[c])
        n = struct.unpack(lens[c], b[i + 1:i + 1 + k])[0]
        return b[i + 1 + k:i + 1 + k + n], i + 1 + k + n
    raise ValueError("msgpack byte 0x%02x" % c)


class Client:
    """One connection: a session of the tenant whose token it presents."""

    def __init__(self, port, token, src="127.0.0.1"):
        # A wrong token puts its source in back-off (admit.c): such hellos
        # come from sources of their own.
        self.s = connect(port, src)
        self.seq = 1
        self.status, _ = self.call(OP_HELLO, [VERSION, token, os.getpid(), "tenants", "tenants.py"])

    def call(self, op, args):
        self.seq += 1
        self.s.sendall(frame(op, args, seq=self.seq))
        h = recv_exact(self.s, 40)
        if h is None:
            return None, None
        _, _, _, hl, _, pl, _, status, _ = struct.unpack("<IHHIIQQii", h)
        body = recv_exact(self.s, hl + pl)
        msg = unpack(body[:hl])[0] if hl else []
        return status, msg

    def post(self, op, args):
        # an async op: no reply unless it fails (a later call's answer tells)
        self.seq += 1
        self.s.sendall(frame(op, args, seq=self.seq))

    def alloc(self, size):
        st, msg = self.call(OP_MEM_ALLOC, [size])
        return st, (msg[-1] if st == 0 and msg else None)

    def free(self, ptr):
        return self.call(OP_MEM_FREE, [ptr])[0]

    def alloc_async(self, size):
        return self.call(OP_MEM_ALLOC_ASYNC, [size, 0])[0]

    def array(self, aid, width, height):
        # CU_AD_FORMAT_UNSIGNED_INT8 (1), one channel: width * height bytes
        return self.call(OP_ARRAY_CREATE, [aid, width, height, 0, 1, 1, 0])[0]

    def module_load(self, mid, image, names):
        """[m, bin hash, size, names] with the image as payload: (status, entries)."""
        h = hashlib.sha256(image).hexdigest().encode()
        msg = (bytes([0x94]) + preauth.mp(mid) + b"\xc4" + bytes([len(h)]) + h + preauth.mp(len(image)) +
               preauth.mp(names))
        self.seq += 1
        self.s.sendall(struct.pack("<IHHIIQQii", preauth.MAGIC, VERSION, 0, len(msg), preauth.OP_MODULE_LOAD,
                                   len(image), self.seq, 0, 0) + msg + image)
        hd = recv_exact(self.s, 40)
        _, _, _, hl, _, pl, _, status, _ = struct.unpack("<IHHIIQQii", hd)
        body = recv_exact(self.s, hl + pl)
        msg = unpack(body[:hl])[0] if hl else []
        return status, (msg[0] if status == 0 and msg else None)

    def close(self):
        self.s.close()


def write_file(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def tenants_text(*lines):
    return "# name  token  memory  class  sessions\n" + "".join(l + "\n" for l in lines)


A_LINE = "a token=%s memory=1M class=latency sessions=2" % TOK_A
B_LINE = "b  token=%s  memory=none  class=batch  sessions=none" % TOK_B
C_LINE = "c token=%s memory=64K class=batch sessions=1" % TOK_C


def server(text, *args):
    d = tempfile.mkdtemp(prefix="rg-tenants.")
    path = os.path.join(d, "tenants")
    write_file(path, text)
    srv = preauth.Server("--tenants", path, *args, env={"REMOTE_GPU_TOKEN": "", "REMOTE_GPU_LOG": "info"})
    srv.tenants_file = path
    srv.tdir = d
    return srv


def smi_json(srv):
    out = subprocess.run([SMI, "--json", "--run-dir", os.path.join(srv.dir, "run")], capture_output=True, text=True)
    return {t["name"]: t for t in json.loads(out.stdout)["servers"][0].get("tenants", [])}


def until(cond, secs=5.0):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def kill_session(srv):
    """SIGKILL for the server's one session process."""
    kids = srv.children()
    check(len(kids) == 1, "one session process")
    for k in kids:
        os.kill(k, signal.SIGKILL)


# ---- cases ------------------------------------------------------------------

def t_quota():
    srv = server(tenants_text(A_LINE, B_LINE))
    try:
        a1, a2, b = Client(srv.port, TOK_A), Client(srv.port, TOK_A), Client(srv.port, TOK_B)
        check(a1.status == 0 and a2.status == 0 and b.status == 0, "hellos of a (twice) and b")
        st, p = a1.alloc(768 * KiB)
        check(st == 0 and p, "a: 768 KiB of its 1 MiB")
        check(a1.alloc(512 * KiB)[0] == OOM, "a: 512 KiB more is CUDA_ERROR_OUT_OF_MEMORY")
        check(a2.alloc(512 * KiB)[0] == OOM, "a's other session: the quota is the tenant's, not the session's")
        check(a2.alloc_async(512 * KiB) == OOM, "a: mem_alloc_async past the quota too")
        check(a2.array(7, 512, 1024) == OOM, "a: a 512 KiB array past the quota too")
        check(a2.array(8, 128, 1024) == 0, "a: a 128 KiB array within it")
        check(b.alloc(64 * MiB)[0] == 0 and b.alloc_async(64 * MiB) == 0, "b: 128 MiB, no quota")
        t = smi_json(srv)
        check(t["a"]["memory"] == 896 * KiB and t["a"]["memory_quota"] == MiB and t["a"]["sessions"] == 2
              and t["a"]["class"] == "latency", "remote-smi --json: a uses 896 KiB of 1 MiB, 2 sessions")
        check(t["a"]["allocations_refused"] == 4, "remote-smi --json: a's 4 refusals")
        check(t["b"]["memory"] == 128 * MiB and t["b"]["memory_quota"] is None and t["b"]["class"] == "batch",
              "remote-smi --json: b uses 128 MiB, no quota")
        txt = subprocess.run([SMI, "--run-dir", os.path.join(srv.dir, "run")], capture_output=True, text=True).stdout
        check("TENANT" in txt and any(l.split()[:2] == ["a", "latency"] and "2/2" in l for l in txt.splitlines()),
              "remote-smi: a tenant table with a's sessions (2/2)")
        prom = subprocess.run([SMI, "--prometheus", "--run-dir", os.path.join(srv.dir, "run")], capture_output=True,
                              text=True).stdout
        check(any(l.startswith("remote_gpud_tenant_memory_bytes{") and 'tenant="a"' in l and
                  l.endswith(" %d" % (896 * KiB)) for l in prom.splitlines()),
              "metrics: remote_gpud_tenant_memory_bytes of a")
        check(a1.free(p) == 0 and a2.alloc(512 * KiB)[0] == 0, "a: after a free of 768 KiB, 512 KiB fits")
        check(a2.alloc(512 * KiB)[0] == OOM, "a: and then is full again")
        a2.close()  # its 640 KiB go back when its session ends
        check(until(lambda: smi_json(srv)["a"]["memory"] == 0), "a: the quota is back after its session ended")
        check(smi_json(srv)["a"]["memory_peak"] == 896 * KiB, "a: the peak stays (896 KiB)")
        check(a1.alloc(MiB)[0] == 0, "a: the whole 1 MiB again")
        a1.close()
        b.close()
    finally:
        srv.stop()


def t_sigkill():
    srv = server(tenants_text(A_LINE, B_LINE))
    try:
        a = Client(srv.port, TOK_A)
        check(a.status == 0 and a.alloc(MiB)[0] == 0, "a: its whole quota in one session")
        kill_session(srv)
        check(until(lambda: smi_json(srv)["a"]["memory"] == 0 and smi_json(srv)["a"]["sessions"] == 0),
              "a: the killed process's memory and session are given back")
        a2 = Client(srv.port, TOK_A)
        check(a2.status == 0 and a2.alloc(MiB)[0] == 0, "a: 1 MiB again after the kill")
        a2.close()
        a.close()
    finally:
        srv.stop()


def t_sessions():
    srv = server(tenants_text(A_LINE, C_LINE))
    try:
        a1, a2 = Client(srv.port, TOK_A), Client(srv.port, TOK_A)
        a3 = Client(srv.port, TOK_A)
        check(a1.status == 0 and a2.status == 0 and a3.status == TOO_MANY_PEERS,
              "a (sessions=2): the third hello is CUDA_ERROR_TOO_MANY_PEERS")
        check("tenant a has its maximum of 2 sessions" in srv.logtext(), "the log says why")
        c = Client(srv.port, TOK_C)
        check(c.status == 0, "c is not held back by a's sessions")
        a1.close()
        check(until(lambda: smi_json(srv)["a"]["sessions"] == 1), "a: one session after one ended")
        a4 = Client(srv.port, TOK_A)
        check(a4.status == 0, "a: a session again once one ended")
        check(Client(srv.port, "no-such-token", "127.0.0.2").status == NOT_PERMITTED, "an unknown token: CUDA_ERROR_NOT_PERMITTED")
        for x in (a2, a3, a4, c):
            x.close()
    finally:
        srv.stop()


def t_reload():
    srv = server(tenants_text(A_LINE))
    try:
        a = Client(srv.port, TOK_A)
        check(a.status == 0 and a.alloc(512 * KiB)[0] == 0, "a: a session holding 512 KiB")
        check(Client(srv.port, TOK_B, "127.0.0.2").status == NOT_PERMITTED, "b: not a tenant yet")
        write_file(srv.tenants_file, tenants_text(B_LINE))
        srv.p.send_signal(signal.SIGHUP)
        check(until(lambda: "reloaded" in srv.logtext()), "SIGHUP: reloaded")
        b = Client(srv.port, TOK_B)
        check(b.status == 0, "b: added by the reload")
        check(Client(srv.port, TOK_A, "127.0.0.3").status == NOT_PERMITTED, "a: removed: new sessions refused")
        check(a.alloc(256 * KiB)[0] == 0 and a.alloc(512 * KiB)[0] == OOM,
              "a's live session keeps its tenant and quota")
        t = smi_json(srv)
        check(t["a"]["removed"] and t["a"]["memory"] == 768 * KiB, "remote-smi: a removed, still 768 KiB")
        a.close()
        check(until(lambda: "a" not in smi_json(srv)), "a's record is gone with its last session")
        write_file(srv.tenants_file, tenants_text(B_LINE, "d token=x memory=12Q class=batch sessions=1"))
        srv.p.send_signal(signal.SIGHUP)
        check(until(lambda: ":3: memory=12Q" in srv.logtext()), "a bad file on reload: the log names line 3")
        check("the tenants in force stay" in srv.logtext() and Client(srv.port, TOK_B).status == 0,
              "... and b stays")
        check(srv.p.poll() is None, "the server lives on")
        b.close()
    finally:
        srv.stop()


def t_badfile():
    cases = [
        (tenants_text(A_LINE, "b token=y memory=1G class=fast sessions=1"), ":3: class=fast"),
        (tenants_text(A_LINE, "b token=y memory=1G class=batch"), ":3: sessions= missing"),
        (tenants_text(A_LINE, "b token=y memory=1G class=batch sessions=1 color=red"), ":3: 'color'"),
        (tenants_text(A_LINE, "a token=y memory=1G class=batch sessions=1"), ":3: tenant a named twice"),
        (tenants_text(A_LINE, "b token=%s memory=1G class=batch sessions=1" % TOK_A), ":3: tenant b has the token"),
        (tenants_text("Bad/name token=y memory=1 class=batch sessions=1"), ":2: tenant name"),
        (tenants_text(A_LINE, "b token=y memory=-1 class=batch sessions=0"), ":3: memory=-1"),
        (tenants_text(), "no tenant"),
    ]
    for text, want in cases:
        d = tempfile.mkdtemp(prefix="rg-tenants.")
        path = os.path.join(d, "tenants")
        write_file(path, text)
        r = subprocess.run([GPUD, "--listen", "127.0.0.1:0", "--driver", DRIVER, "--tenants", path],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr, "refused at start: %s (%s)" % (want, r.stderr.strip()[:120]))
        subprocess.call(["rm", "-rf", d])
    d = tempfile.mkdtemp(prefix="rg-tenants.")
    path = os.path.join(d, "tenants")
    write_file(path, tenants_text(A_LINE), 0o640)
    r = subprocess.run([GPUD, "--listen", "127.0.0.1:0", "--driver", DRIVER, "--tenants", path],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "chmod 600" in r.stderr, "a file group can read is refused")
    write_file(path, tenants_text(A_LINE, B_LINE))
    r = subprocess.run([GPUD, "--listen", "127.0.0.1:0", "--driver", DRIVER, "--tenants", path, "--isolation",
                        "thread"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "--isolation thread serves one" in r.stderr, "two tenants in thread mode: refused")
    tf = os.path.join(d, "token")
    write_file(tf, "t\n")
    r = subprocess.run([GPUD, "--listen", "127.0.0.1:0", "--driver", DRIVER, "--tenants", path, "--token-file", tf],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "--tenants holds the tokens" in r.stderr, "--tenants with --token-file: refused")
    subprocess.call(["rm", "-rf", d])


def t_thread():
    srv = server(tenants_text(A_LINE), "--isolation", "thread")
    try:
        a1, a2 = Client(srv.port, TOK_A), Client(srv.port, TOK_A)
        check(a1.status == 0 and a2.status == 0, "thread mode: two sessions of a")
        check(a1.alloc(768 * KiB)[0] == 0 and a2.alloc(512 * KiB)[0] == OOM, "thread mode: a's quota holds")
        a1.close()
        check(until(lambda: a2.alloc(512 * KiB)[0] == 0), "thread mode: back after a session ended")
        a2.close()
    finally:
        srv.stop()


def t_modules():
    kdir = os.environ.get("RG_FAKECUDA_KERNELS", "")
    path = os.path.join(kdir, "test_kernels.cubin")
    if not kdir or not os.path.exists(path):
        print("skipped: no test_kernels.cubin (RG_FAKECUDA_KERNELS; built where nvcc is)")
        return
    image = open(path, "rb").read()
    n = len(image)
    srv = server(tenants_text("m token=%s memory=%d class=batch sessions=none" % (TOK_A, n + 20),
                              "s token=%s memory=%d class=batch sessions=none" % (TOK_C, n - 1), B_LINE))
    try:
        m, sm, b = Client(srv.port, TOK_A), Client(srv.port, TOK_C), Client(srv.port, TOK_B)
        st, _ = sm.module_load(1, image, "")
        check(st == OOM, "s (quota one byte short of the image): module_load is CUDA_ERROR_OUT_OF_MEMORY")
        check(smi_json(srv)["s"]["memory"] == 0 and smi_json(srv)["s"]["allocations_refused"] == 1,
              "s: nothing charged, one refusal")
        st, ents = m.module_load(1, image, "v:gvar\n")
        check(st == 0 and ents and ents[0][0] == OOM,
              "m (image + 20 bytes): the module loads, its 40-byte gvar is out of memory")
        check(smi_json(srv)["m"]["memory"] == n, "m: the image's %d bytes are charged" % n)
        st, ents = b.module_load(1, image, "v:gvar\nv:gvar\n")
        check(st == 0 and ents and ents[0][0] == 0 and ents[0][2] == 40 and ents[1][0] == 0,
              "b (no quota): the module and gvar (40 bytes), resolved twice")
        check(smi_json(srv)["b"]["memory"] == n + 40, "b: the image and gvar once: %d bytes" % (n + 40))
        b.close()
        check(until(lambda: smi_json(srv)["b"]["memory"] == 0), "b: given back when its session ends")
        m.close()
        sm.close()
    finally:
        srv.stop()


def t_graphs():
    srv = server(tenants_text(A_LINE, B_LINE))
    try:
        a = Client(srv.port, TOK_A)
        mem = lambda: smi_json(srv)["a"]["memory"]  # noqa: E731
        a.post(OP_STREAM_CREATE, [5, 1, 0])

        def capture(g, size, free):
            # a graph g captured on stream 5: one allocation of size, freed in it or not
            ok = a.call(OP_CAPTURE_BEGIN, [5, CAPTURE_RELAXED, g])[0] == 0
            st, msg = a.call(OP_MEM_ALLOC_ASYNC, [size, 5])
            ok = ok and st == 0 and msg
            if free:
                a.post(OP_MEM_FREE_ASYNC, [msg[-1], 5])
            return ok and a.call(OP_CAPTURE_END, [5, g])[0] == 0
        check(capture(1, 768 * KiB, True) and mem() == 0,
              "a: a graph of a 768 KiB allocation and its free captured: nothing held")
        check(a.call(OP_GRAPH_INSTANTIATE, [11, 1, 0])[0] == 0 and mem() == 768 * KiB,
              "a: its exec is charged the 768 KiB its node may hold")
        check(a.call(OP_GRAPH_INSTANTIATE, [12, 1, 0])[0] == OOM, "a: a second exec passes the 1 MiB quota")
        check(a.alloc(512 * KiB)[0] == OOM, "a: and so does a 512 KiB cudaMalloc while the exec lives")
        a.post(OP_GRAPH_EXEC_DESTROY, [11])
        check(until(lambda: mem() == 0), "a: the exec's destroy gives it back")
        check(a.call(OP_GRAPH_INSTANTIATE, [12, 1, 0])[0] == 0 and mem() == 768 * KiB, "a: then an exec fits again")
        a.post(OP_GRAPH_EXEC_DESTROY, [12])
        check(capture(2, 512 * KiB, False) and until(lambda: mem() == 512 * KiB),
              "a: an allocation captured without its free is held from its capture")
        check(a.call(OP_GRAPH_INSTANTIATE, [13, 2, 0])[0] == 0 and mem() == 512 * KiB,
              "a: and its exec is not charged it twice")
        a.close()
        check(until(lambda: mem() == 0), "a: nothing left once its session ended")
    finally:
        srv.stop()


def t_cublas():
    blas, blaslt = os.environ.get("RG_FAKECUBLAS", ""), os.environ.get("RG_FAKECUBLASLT", "")
    if not blas or not blaslt:
        print("skipped: no fake cuBLAS (RG_FAKECUBLAS, RG_FAKECUBLASLT)")
        return
    srv = server(tenants_text("a token=%s memory=16M class=batch sessions=none" % TOK_A,
                              "b token=%s memory=48M class=batch sessions=none" % TOK_B),
                 "--cublas", blas, "--cublaslt", blaslt)
    try:
        a, b = Client(srv.port, TOK_A), Client(srv.port, TOK_B)

        def blas(c, op, hid):  # sent without the async flag: answered, the library's status first
            st, msg = c.call(op, [hid])
            return msg[0] if st == 0 and msg else ("transport", st)
        check(blas(a, OP_CUBLAS_CREATE, 1) == CUBLAS_ALLOC_FAILED,
              "a (16 MiB): cublasCreate_v2 is CUBLAS_STATUS_ALLOC_FAILED (a 32 MiB workspace)")
        check(smi_json(srv)["a"]["memory"] == 0, "a: nothing charged")
        check(blas(b, OP_CUBLAS_CREATE, 1) == 0, "b (48 MiB): cublasCreate_v2")
        check(smi_json(srv)["b"]["memory"] == 32 * MiB, "b: its handle's 32 MiB workspace is charged")
        check(blas(b, OP_CUBLAS_CREATE, 2) == CUBLAS_ALLOC_FAILED, "b: a second handle passes the quota")
        check(blas(b, OP_CUBLAS_DESTROY, 1) == 0 and smi_json(srv)["b"]["memory"] == 0,
              "b: cublasDestroy_v2 gives the 32 MiB back")
        check(blas(b, OP_CUBLAS_CREATE, 3) == 0, "b: and a new handle fits again")
        a.close()
        b.close()
    finally:
        srv.stop()


CASES = {"quota": t_quota, "sigkill": t_sigkill, "sessions": t_sessions, "reload": t_reload, "badfile": t_badfile,
         "thread": t_thread, "modules": t_modules, "graphs": t_graphs,
         "cublas": t_cublas}

if __name__ == "__main__":
    preauth.run_cases(CASES, sys.argv[4:])
