#!/usr/bin/env python3
"""Nothing is spent before authentication (issue 24): remote-gpud on the driver
test double, attacked the way the issue's findings were found.

    preauth.py REMOTE_GPUD FAKE_LIBCUDA [CASE...]

Cases (each starts its own servers on free ports):
  flood        60 idle connections from 127.0.0.1: at most --max-per-source
               session processes; a client from 127.0.0.2 is still served; the
               idle ones are closed at the hello deadline
  flood_thread the same in thread mode with 256 descriptors: no EMFILE, an
               honest client served during and after
  early_frame  a module_load of 1 GiB before the hello: closed before a payload
               byte is read, no memory taken
  backoff      wrong tokens in a loop for 2 s: a handful answered, not hundreds
  token        the token never in a session process's command line; a token
               file others can read is refused
  run_dir      the run directory is 0700, its files 0600; a store planted in a
               sticky shared folder by another user is refused
  idle         --idle-timeout ends an authenticated session with no call
Prints one line per check and exits 1 if any failed.
"""
import os
import resource
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

GPUD, DRIVER = sys.argv[1], sys.argv[2]
MAGIC = 0x52475055
# the protocol's version, as the C side has it
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../protocol/include/proto.h")) as f:
    VERSION = int(re.search(r"#define PROTO_VERSION (\d+)", f.read()).group(1))
OP_HELLO, OP_MODULE_LOAD = 1, 2
NOT_PERMITTED = 800  # CUDA_ERROR_NOT_PERMITTED
failed = 0


def check(cond, what):
    global failed
    print("%s: %s" % ("ok" if cond else "FAILED", what))
    if not cond:
        failed += 1


def run_cases(cases, names):
    """Runs the named cases (all when none), then exits 1 if any check failed."""
    for name in names or list(cases):
        print("== %s" % name)
        try:
            cases[name]()
        except Exception as e:  # a crash of the test is a failure, not a pass
            check(False, "%s raised %r" % (name, e))
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)


# ---- the wire: a 40-byte header, msgpack arguments -------------------------

def mp(v):
    if isinstance(v, int):
        return bytes([v]) if v < 128 else b"\xcf" + struct.pack(">Q", v)
    b = v.encode() if isinstance(v, str) else v
    return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b


def frame(op, args, payload_len=0, seq=1):
    msg = bytes([0x90 | len(args)]) + b"".join(mp(a) for a in args)
    return struct.pack("<IHHIIQQii", MAGIC, VERSION, 0, len(msg), op, payload_len, seq, 0, 0) + msg


def hello_frame(token):
    return frame(OP_HELLO, [VERSION, token, os.getpid(), "preauth", "preauth.py"])


def connect(port, src="127.0.0.1", timeout=5.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def hello(port, token="", src="127.0.0.1"):
    """The reply's status, or None when the connection was closed unanswered."""
    try:
        s = connect(port, src)
        s.sendall(hello_frame(token))
        h = recv_exact(s, 40)
        if h is None:
            return None, s
        _, _, _, hl, _, pl, _, status, _ = struct.unpack("<IHHIIQQii", h)
        recv_exact(s, hl + pl)
        return status, s
    except OSError:
        return None, None


def closed(s, within):
    """Whether the server closes s (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


# ---- servers ----------------------------------------------------------------

class Server:
    def __init__(self, *args, env=None, nofile=None, expect_fail=False):
        self.dir = tempfile.mkdtemp(prefix="rg-preauth.")
        self.log = os.path.join(self.dir, "log")
        pf = os.path.join(self.dir, "port")
        cmd = [GPUD, "--listen", "127.0.0.1:0", "--port-file", pf, "--driver", DRIVER,
               "--cubin-store", os.path.join(self.dir, "store"), "--run-dir", os.path.join(self.dir, "run"),
               "--drain-seconds", "0"] + list(args)
        e = dict(os.environ, **(env or {}))

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.p = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=e,
                                  preexec_fn=limits)
        self.port = None
        for _ in range(300):
            if self.p.poll() is not None:
                break
            try:
                self.port = int(open(pf).read())
                break
            except (OSError, ValueError):
                time.sleep(0.02)
        if not expect_fail and not self.port:
            raise RuntimeError("remote-gpud did not start: " + self.logtext()[-2000:])

    def logtext(self):
        return open(self.log, errors="replace").read()

    def children(self):
        out = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    st = open("/proc/%s/stat" % pid).read()
                except OSError:
                    continue
                if int(st[st.rindex(")") + 2:].split()[1]) == self.p.pid:
                    out.append(int(pid))
        return out

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.p.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        subprocess.call(["rm", "-rf", self.dir])


# ---- cases ------------------------------------------------------------------

def t_flood():
    srv = Server("--max-per-source", "8", "--max-connections", "32", "--hello-timeout", "2")
    try:
        idle = []
        for _ in range(60):
            try:
                idle.append(connect(srv.port))
            except OSError:
                pass
        time.sleep(0.5)
        n = len(srv.children())
        check(n <= 8, "60 idle connections from one source: %d session processes (at most 8)" % n)
        st, s = hello(srv.port, src="127.0.0.2")
        check(st == 0, "a client from another source is served during the flood (status %s)" % st)
        if s:
            s.close()
        t0 = time.monotonic()
        admitted_closed = all(closed(c, 6 - (time.monotonic() - t0)) for c in idle)
        check(admitted_closed, "every idle connection is closed (refused, or at the 2 s hello deadline)")
        check("no hello within" in srv.logtext(), "the hello deadline is logged")
        lines = srv.logtext().count("connection refused")
        check(0 < lines < 52, "refusals logged at most once a second (%d lines for 52 refusals)" % lines)
        for c in idle:
            c.close()
    finally:
        srv.stop()


def t_flood_thread():
    # 256 descriptors: before the limits, ~250 connections exhausted them and
    # libuv reset every connection after that, honest ones included.
    srv = Server("--isolation", "thread", "--max-per-source", "16", nofile=256)
    try:
        idle = []
        for _ in range(300):
            try:
                idle.append(connect(srv.port, timeout=2))
            except OSError:
                pass
        time.sleep(0.3)
        st, s = hello(srv.port, src="127.0.0.2")
        check(st == 0, "thread mode, 300 idle connections, 256 descriptors: another source is served "
              "(status %s)" % st)
        if s:
            s.close()
        log = srv.logtext()
        check("Too many open files" not in log and "EMFILE" not in log, "no descriptor exhaustion")
        check(srv.p.poll() is None, "the server is alive")
        for c in idle:
            c.close()
        time.sleep(0.3)
        st, s = hello(srv.port)
        check(st == 0, "after the flood, a client from the flooding source is served (status %s)" % st)
        if s:
            s.close()
    finally:
        srv.stop()


def t_early_frame():
    srv = Server("--isolation", "thread")  # the payload would be allocated in this process
    try:
        before = srv.rss_kib()
        socks = []
        ok = True
        for _ in range(4):
            s = connect(srv.port)
            s.sendall(frame(OP_MODULE_LOAD, [1], payload_len=1 << 30))
            ok = ok and closed(s, 3)
            socks.append(s)
        check(ok, "a 1 GiB module_load before the hello: the connection is closed before its payload")
        # a payload sent anyway is not taken in
        s = connect(srv.port)
        s.sendall(frame(OP_MODULE_LOAD, [1], payload_len=1 << 30))
        sent = 0
        try:
            chunk = b"\0" * (1 << 20)
            for _ in range(64):
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        grew = srv.rss_kib() - before
        check(grew < 16 * 1024, "server memory grew by %d KiB (sent %d MiB of payload)" % (grew, sent >> 20))
        st, s2 = hello(srv.port)
        check(st == 0, "the server still serves (status %s)" % st)
        for c in socks + [s, s2]:
            if c:
                c.close()
        # a hello too big for a hello
        s = connect(srv.port)
        s.sendall(struct.pack("<IHHIIQQii", MAGIC, VERSION, 0, 1 << 20, OP_HELLO, 0, 1, 0, 0))
        check(closed(s, 3), "a 1 MiB hello is refused")
        s.close()
    finally:
        srv.stop()


def t_backoff():
    srv = Server(env={"REMOTE_GPU_TOKEN": "right-token"})
    try:
        answered = refused = 0
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            st, s = hello(srv.port, token="guess")
            if s:
                s.close()
            if st == NOT_PERMITTED:
                answered += 1
            else:
                refused += 1
        check(answered <= 6, "wrong tokens for 2 s: %d answered, %d refused in back-off (at most 6 answered)"
              % (answered, refused))
        st, s = hello(srv.port, token="right-token", src="127.0.0.2")
        check(st == 0, "another source is not in back-off (status %s)" % st)
        if s:
            s.close()
    finally:
        srv.stop()


def t_token():
    tok = "tok-%d-secret" % os.getpid()
    d = tempfile.mkdtemp(prefix="rg-token.")
    tf = os.path.join(d, "token")
    with open(tf, "w") as f:
        f.write(tok + "\n")
    os.chmod(tf, 0o644)
    bad = Server("--token-file", tf, expect_fail=True)
    rc = bad.p.wait(10)
    check(rc == 2 and "readable by group or others" in bad.logtext(),
          "a token file others can read is refused (exit %s)" % rc)
    bad.stop()
    os.chmod(tf, 0o600)
    for args in (["--token-file", tf], ["--token", tok]):
        srv = Server(*args)
        try:
            st, s = hello(srv.port, token=tok)
            check(st == 0, "%s: the right token is accepted (status %s)" % (args[0], st))
            kids = srv.children()
            lines = [open("/proc/%d/cmdline" % p, "rb").read() for p in kids + [srv.p.pid]]
            check(len(kids) >= 1 and all(tok.encode() not in c for c in lines),
                  "%s: the token is in no command line (%d session processes)" % (args[0], len(kids)))
            if s:
                s.close()
        finally:
            srv.stop()
    subprocess.call(["rm", "-rf", d])


def t_run_dir():
    srv = Server()
    try:
        st, s = hello(srv.port)
        time.sleep(0.2)
        run = os.path.join(srv.dir, "run")
        mode = os.stat(run).st_mode & 0o777
        check(mode == 0o700, "run directory mode %o (0700)" % mode)
        modes = {n: os.stat(os.path.join(run, n)).st_mode & 0o777 for n in os.listdir(run)}
        check(len(modes) >= 2 and all(m == 0o600 for m in modes.values()), "run directory files %s (0600)" %
              {n: "%o" % m for n, m in modes.items()})
        if s:
            s.close()
    finally:
        srv.stop()
    if os.geteuid() != 0:
        print("skipped: a store planted by another user (needs root to make one)")
        return
    shared = tempfile.mkdtemp(prefix="rg-shared.")
    os.chmod(shared, 0o1777)
    planted = os.path.join(shared, "store")
    os.mkdir(planted)
    os.chown(planted, 65534, 65534)
    srv = Server("--cubin-store", planted, expect_fail=True)
    rc = srv.p.wait(10)
    check(rc != 0 and "made by another user" in srv.logtext(), "a store another user made in a sticky shared "
          "folder is refused (exit %s)" % rc)
    srv.stop()
    subprocess.call(["rm", "-rf", shared])


def t_idle():
    srv = Server("--idle-timeout", "1")
    try:
        st, s = hello(srv.port)
        check(st == 0 and closed(s, 5), "an authenticated session with no call is closed after --idle-timeout")
        if s:
            s.close()
    finally:
        srv.stop()


CASES = {"flood": t_flood, "flood_thread": t_flood_thread, "early_frame": t_early_frame, "backoff": t_backoff,
         "token": t_token, "run_dir": t_run_dir, "idle": t_idle}
if __name__ == "__main__":  # tenants.py imports the wire helpers and Server
    for name in sys.argv[3:] or CASES:
        print("--- %s" % name)
        try:
            CASES[name]()
        except Exception as e:  # a case that cannot even run is a failure
            check(False, "%s: %r" % (name, e))
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)
