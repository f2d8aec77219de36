#!/usr/bin/env python3
"""--priority mps (issue 22 item 3; backend/src/mps.c) on the driver test double
with a stand-in control daemon (fake-mps-control, beside this file), whose log
says how it was started and which commands it got, and whose socket the double's
cuInit reaches (tests/fakecuda/mps.c: it then logs each client's priority and SM
share from the client's environment at cuInit, as an MPS server's log does).

    mps.py REMOTE_GPUD FAKE_LIBCUDA REMOTE_SMI [CASE...]

Cases:
  clients   the daemon started in the foreground with pipe and log folders in the
            run directory; the supervisor is no client of it, the probe is; a
            latency session's process is a client with priority 0, a batch
            one's with priority 1 and --batch-sm-percent's share; remote-smi
            and /metrics say mps up; SIGTERM: quit sent, the daemon gone, exit 0
  dead      the daemon SIGKILLed: logged, remote-smi "dead", mps_up 0, and a new
            session is refused rather than served without MPS
  missing   --mps-control naming no file, and no control program on PATH (nor
            in /usr/local/nvidia/bin): the server does not start, and says why
  fail      a daemon that exits at once: the server does not start, with the
            daemon's own words
  external  --mps-pipe-dir with no daemon there: the server does not start; with
            one (started by the test): sessions are its clients, remote-smi
            "external", and it is left running at exit
  usage     --isolation thread, the MPS options without --priority mps, a bad
            percentage: usage errors
  admit     --priority mps+admit: both MPS and the admission of batch work
Prints one line per check and exits 1 if any failed.
"""
import os
import json
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preauth  # noqa: E402
import tenants  # noqa: E402
from preauth import check  # noqa: E402
from tenants import Client, server, smi_json, tenants_text, until  # noqa: E402

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake-mps-control")
TOK_L, TOK_B = "tok-lat-0123456789", "tok-bat-0123456789"
L_LINE = "lat token=%s memory=none class=latency sessions=4" % TOK_L
B_LINE = "bat token=%s memory=none class=batch sessions=4" % TOK_B


def mps_server(*args, env=None, expect_fail=False):
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        if expect_fail:
            d = tempfile.mkdtemp(prefix="rg-mps.")
            p = os.path.join(d, "tenants")
            tenants.write_file(p, tenants_text(L_LINE, B_LINE))
            srv = preauth.Server("--tenants", p, *args, env={"REMOTE_GPU_TOKEN": "", "REMOTE_GPU_LOG": "info"},
                                 expect_fail=True)
            try:
                srv.p.wait(30)
            except subprocess.TimeoutExpired:
                srv.p.kill()
            return srv
        return server(tenants_text(L_LINE, B_LINE), *args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def server_json(srv):
    out = subprocess.run([tenants.SMI, "--json", "--run-dir", os.path.join(srv.dir, "run")], capture_output=True,
                         text=True)
    return json.loads(out.stdout)["servers"][0]


def prom(srv):
    return subprocess.run([tenants.SMI, "--prometheus", "--run-dir", os.path.join(srv.dir, "run")],
                          capture_output=True, text=True).stdout.splitlines()


def cmdline(pid):
    try:
        return open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
    except OSError:
        return []


def clients(pipe):
    """{pid: (priority, threads)} from the double's client log."""
    out = {}
    try:
        for line in open(os.path.join(pipe, "fake-clients.log")):
            _, pid, _, pr, _, th = line.split()
            out[int(pid)] = (pr, th)
    except OSError:
        pass
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
        return open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def session_pids(srv):
    return [k for k in srv.children() if b"--session-fd" in cmdline(k)]


def t_clients():
    srv = mps_server("--priority", "mps", "--batch-sm-percent", "30", "--mps-control", FAKE)
    run = os.path.join(srv.dir, "run")
    pipe, logd = os.path.join(run, "mps", "pipe"), os.path.join(run, "mps", "log")
    try:
        log = open(os.path.join(logd, "control.log")).read()
        check(("start -f pid") in log and ("pipe %s log %s" % (pipe, logd)) in log,
              "the daemon runs in the foreground with its folders in the run directory")
        daemon = int(open(os.path.join(pipe, "nvidia-cuda-mps-control.pid")).read())
        check(daemon in srv.children(), "... as the supervisor's own child")
        c0 = clients(pipe)
        check(len(c0) == 1 and srv.p.pid not in c0, "before any session: one client, the probe, not the supervisor")
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        check(lat.status == 0 and bat.status == 0, "hellos of lat (latency) and bat (batch)")
        check(lat.alloc(1)[0] == 0 and bat.alloc(1)[0] == 0, "both sessions serve calls")
        got = {v: k for k, v in clients(pipe).items() if k not in c0}
        sess = session_pids(srv)
        check(("0", "-") in got and got[("0", "-")] in sess, "lat's session process: an MPS client, priority 0")
        check(("1", "30") in got and got[("1", "30")] in sess,
              "bat's session process: an MPS client, priority 1, 30% of the SMs")
        j = server_json(srv)
        check(j.get("mps") == "up", "remote-smi: mps up")
        check(any(l.startswith("remote_gpud_mps_up{") and l.endswith(" 1") for l in prom(srv)), "metrics: mps_up 1")
        lat.close()
        bat.close()
        srv.p.send_signal(signal.SIGTERM)
        rc = srv.p.wait(20)
        check(rc == 0, "SIGTERM: the server exits 0 (%s)" % rc)
        log = open(os.path.join(logd, "control.log")).read()
        check("command quit" in log and "exit 0" in log, "... after sending quit to its daemon")
        check(not alive(daemon), "... and the daemon is gone")
    finally:
        srv.stop()


def t_dead():
    srv = mps_server("--priority", "mps", "--mps-control", FAKE)
    pipe = os.path.join(srv.dir, "run", "mps", "pipe")
    try:
        lat = Client(srv.port, TOK_L)
        check(lat.status == 0, "lat: a session under MPS")
        daemon = int(open(os.path.join(pipe, "nvidia-cuda-mps-control.pid")).read())
        os.kill(daemon, signal.SIGKILL)
        check(until(lambda: server_json(srv).get("mps") == "dead"), "the daemon killed: remote-smi says mps dead")
        check("MPS control daemon %d killed by signal 9" % daemon in srv.logtext(), "... and the log says so")
        check(any(l.startswith("remote_gpud_mps_up{") and l.endswith(" 0") for l in prom(srv)), "metrics: mps_up 0")
        bat = Client(srv.port, TOK_B)
        check(bat.status != 0, "a new session is refused (status %s)" % bat.status)
        check(until(lambda: "never served outside MPS" in srv.logtext()), "... because it would not be an MPS client")
        check(lat.alloc(1)[0] == 0, "the session that was there goes on (the double has no MPS server to lose)")
        lat.close()
        srv.p.send_signal(signal.SIGTERM)
        check(srv.p.wait(20) == 0, "SIGTERM: exits 0 without its daemon")
    finally:
        srv.stop()


def t_missing():
    srv = mps_server("--priority", "mps", "--mps-control", "/nonexistent/nvidia-cuda-mps-control", expect_fail=True)
    try:
        check(srv.p.returncode == 1 and "--mps-control /nonexistent/nvidia-cuda-mps-control: no such file" in
              srv.logtext(), "--mps-control naming no file: exit 1, said (%s)" % srv.p.returncode)
    finally:
        srv.stop()
    if os.path.exists("/usr/local/nvidia/bin/nvidia-cuda-mps-control"):
        print("skipped: the PATH case (this machine has /usr/local/nvidia/bin/nvidia-cuda-mps-control)")
        return
    empty = tempfile.mkdtemp(prefix="rg-mps-path.")
    srv = mps_server("--priority", "mps", env={"PATH": empty}, expect_fail=True)
    try:
        check(srv.p.returncode == 1 and "nvidia-cuda-mps-control is neither on PATH nor in /usr/local/nvidia/bin"
              in srv.logtext(), "no control program on PATH: exit 1, said (%s)" % srv.p.returncode)
    finally:
        srv.stop()


def t_fail():
    srv = mps_server("--priority", "mps", "--mps-control", FAKE, env={"FAKE_MPS_FAIL": "1"}, expect_fail=True)
    try:
        check(srv.p.returncode == 1 and "exited at once: An instance of this daemon is already running" in
              srv.logtext(), "a daemon that cannot start: exit 1, with its words (%s)" % srv.p.returncode)
        check(not os.path.exists(os.path.join(srv.dir, "port")), "... and never listened for clients")
    finally:
        srv.stop()


def t_external():
    ext = tempfile.mkdtemp(prefix="rg-mps-ext.")
    pipe, logd = os.path.join(ext, "pipe"), os.path.join(ext, "log")
    os.makedirs(pipe)
    os.makedirs(logd)
    srv = mps_server("--priority", "mps", "--mps-pipe-dir", pipe, expect_fail=True)
    try:
        check(srv.p.returncode == 1 and "MPS is not in force for this server's devices" in srv.logtext(),
              "--mps-pipe-dir with no daemon: exit 1, said (%s)" % srv.p.returncode)
    finally:
        srv.stop()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=logd)
    subprocess.run([FAKE, "-d"], env=env, check=True)
    check(until(lambda: os.path.exists(os.path.join(pipe, "control"))), "the operator's daemon (-d) is up")
    srv = mps_server("--priority", "mps", "--mps-pipe-dir", pipe)
    try:
        bat = Client(srv.port, TOK_B)
        check(bat.status == 0 and ("1", "-") in clients(pipe).values(), "bat: a client of the operator's daemon")
        check(server_json(srv).get("mps") == "external", "remote-smi: mps external")
        bat.close()
        srv.p.send_signal(signal.SIGTERM)
        check(srv.p.wait(20) == 0, "SIGTERM: exits 0")
        check("command quit" not in open(os.path.join(logd, "control.log")).read(),
              "... and leaves the operator's daemon running")
    finally:
        srv.stop()
        subprocess.run([FAKE], input="quit\n", text=True, env=env, capture_output=True)


def t_usage():
    for args, what in ((["--priority", "mps", "--isolation", "thread", "--mps-control", FAKE], "--isolation thread"),
                       (["--batch-sm-percent", "30"], "goes with --priority mps"),
                       (["--priority", "mps", "--batch-sm-percent", "0", "--mps-control", FAKE], "percentage"),
                       (["--priority", "mps", "--mps-control", FAKE, "--mps-pipe-dir", "/tmp"], "give one of them")):
        srv = mps_server(*args, expect_fail=True)
        try:
            check(srv.p.returncode == 2 and what in srv.logtext(), "%s: exit 2 (%s)" % (" ".join(args[:4]),
                                                                                      srv.p.returncode))
        finally:
            srv.stop()


def t_admit():
    srv = mps_server("--priority", "mps+admit", "--mps-control", FAKE)
    try:
        log = srv.logtext()
        check("MPS: session processes are its clients" in log and "latency first: batch work held" in log,
              "--priority mps+admit: MPS and the admission of batch work")
        lat = Client(srv.port, TOK_L)
        check(lat.status == 0 and lat.alloc(1)[0] == 0, "lat: a session")
        lat.close()
    finally:
        srv.stop()


CASES = {"clients": t_clients, "dead": t_dead, "missing": t_missing, "fail": t_fail, "external": t_external,
         "usage": t_usage, "admit": t_admit}

if __name__ == "__main__":
    preauth.run_cases(CASES, sys.argv[4:])
