#!/usr/bin/env python3
"""Memory handed between tenants (issue 22 item 4; backend/src/handover.c): a
latency tenant's allocation that the device cannot serve asks the batch
tenants' clients to release (a release event), waits for their release_done
(at most --handover-wait-ms) and is tried once more; a batch tenant's
allocation may wait for memory (--batch-alloc-wait-ms). Driven over the wire
on the driver test double with 64 MiB of device memory that every session
process shares (FAKECUDA_MEM_SHARED), as one GPU's is; the wire client plays
libremote.so's part (frontend/src/release.c): on a release event it frees
what it cached and answers. Every check is on state (replies, counters).

    handover.py REMOTE_GPUD FAKE_LIBCUDA REMOTE_SMI [CASE...]

Cases:
  handover  bat holds 48 MiB; lat asks for 32 MiB: bat gets a release event,
            frees, answers; lat's allocation succeeds; remote-smi and /metrics
            count the handover and the 48 MiB released
  nothing   bat answers without freeing: lat's allocation fails with
            CUDA_ERROR_OUT_OF_MEMORY, the handover is counted, 0 bytes released
  silent    bat never answers: lat's allocation fails with
            CUDA_ERROR_OUT_OF_MEMORY once --handover-wait-ms passed (a timeout
            counted); bat's late answer is harmless
  batchwait with --batch-alloc-wait-ms, bat's allocation that does not fit waits
            and succeeds once lat frees; without it, it fails at once
  libremote the batch tenant is a process through libremote.so (RG_LIBREMOTE,
            by ctypes): 24 MiB in its default pool's reserve and 24 MiB its
            release hook frees; lat's 48 MiB fit after libremote.so trimmed the
            pool and called the hook. Without a hook and with nothing in the
            pools, lat's allocation fails with CUDA_ERROR_OUT_OF_MEMORY
Prints one line per check and exits 1 if any failed.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preauth  # noqa: E402
import tenants  # noqa: E402  the wire client and the tenants file helpers
from preauth import check  # noqa: E402
from tenants import Client, smi_json, tenants_text, until, write_file, MiB, OOM  # noqa: E402
from prio import send_async, send_sync, recv_msg  # noqa: E402

OP_RELEASE, OP_RELEASE_DONE = 118, 119
TOK_L, TOK_B = "tok-lat-0123456789", "tok-bat-0123456789"
L_LINE = "lat token=%s memory=none class=latency sessions=4" % TOK_L
B_LINE = "bat token=%s memory=none class=batch sessions=4" % TOK_B


def server(*args):
    d = tempfile.mkdtemp(prefix="rg-handover.")
    path = os.path.join(d, "tenants")
    write_file(path, tenants_text(L_LINE, B_LINE))
    env = {"REMOTE_GPU_TOKEN": "", "REMOTE_GPU_LOG": "info", "FAKECUDA_MEM_BYTES": "64m",
           "FAKECUDA_MEM_SHARED": os.path.join(d, "devmem")}
    return preauth.Server("--tenants", path, *args, env=env)


def metric(srv, name, tenant):
    prom = subprocess.run([tenants.SMI, "--prometheus", "--run-dir", os.path.join(srv.dir, "run")],
                          capture_output=True, text=True).stdout.splitlines()
    for l in prom:
        if l.startswith(name + "{") and 'tenant="%s"' % tenant in l:
            return int(float(l.split()[-1]))
    return None


def with_pair(body, *args):
    """A server with args; lat and bat connected, bat holding 48 MiB: body(srv, lat, bat, ptr)."""
    srv = server(*args)
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        check(lat.status == 0 and bat.status == 0, "hellos of lat (latency) and bat (batch)")
        st, p = bat.alloc(48 * MiB)
        check(st == 0 and p, "bat: 48 MiB of the device's 64")
        body(srv, lat, bat, p)
        lat.close()
        bat.close()
    finally:
        srv.stop()


def ask(lat, bat):
    """lat asks for 32 MiB (no reply read yet); bat's release event: its gen."""
    send_sync(lat, tenants.OP_MEM_ALLOC, [32 * MiB])
    op, _, msg = recv_msg(bat)
    check(op == OP_RELEASE and len(msg) == 1, "bat: a release event (%r %r)" % (op, msg))
    return msg[0] if msg else 0


def handover(srv, lat, bat, p):
    gen = ask(lat, bat)
    check(bat.free(p) == 0, "bat: frees what it cached")
    send_async(bat, OP_RELEASE_DONE, [gen])
    op, st, res = recv_msg(lat)
    check(st == 0 and res and res[-1], "lat: its 32 MiB fit after the handover")
    t = smi_json(srv)
    check(t["lat"]["handovers"] == 1 and t["lat"]["handovers_served"] == 1 and t["lat"]["handover_timeouts"] == 0,
          "remote-smi: lat asked once, and then its allocation fit")
    check(t["bat"]["releases"] == 1 and t["bat"]["released_bytes"] == 48 * MiB,
          "remote-smi: bat answered once, 48 MiB released (%r)" % t["bat"]["released_bytes"])
    check(metric(srv, "remote_gpud_tenant_handovers_total", "lat") == 1, "metrics: handovers_total of lat is 1")
    check(metric(srv, "remote_gpud_tenant_released_bytes_total", "bat") == 48 * MiB,
          "metrics: released_bytes_total of bat is 48 MiB")


def nothing(srv, lat, bat, p):
    send_async(bat, OP_RELEASE_DONE, [ask(lat, bat)])
    op, st, _ = recv_msg(lat)
    check(st == OOM, "lat: nothing released: CUDA_ERROR_OUT_OF_MEMORY (%r)" % st)
    t = smi_json(srv)
    check(t["lat"]["handovers"] == 1 and t["lat"]["handovers_served"] == 0 and t["lat"]["handover_timeouts"] == 0,
          "remote-smi: lat asked once, answered, still short")
    check(t["bat"]["releases"] == 1 and t["bat"]["released_bytes"] == 0, "remote-smi: bat released 0 bytes")
    check(bat.free(p) == 0 and lat.alloc(32 * MiB)[0] == 0, "lat: fits once bat freed")


def silent(srv, lat, bat, p):
    st, _ = lat.alloc(32 * MiB)
    check(st == OOM, "lat: bat never answers: CUDA_ERROR_OUT_OF_MEMORY after the bound (%r)" % st)
    t = smi_json(srv)
    check(t["lat"]["handovers"] == 1 and t["lat"]["handover_timeouts"] == 1, "remote-smi: one handover timed out")
    op, _, msg = recv_msg(bat)
    check(op == OP_RELEASE, "bat: the release event was sent")
    send_async(bat, OP_RELEASE_DONE, [msg[0]])
    check(bat.alloc(MiB)[0] == 0, "bat: its late answer does no harm")
    check(until(lambda: smi_json(srv)["bat"]["releases"] == 1), "remote-smi: the late answer counted")


def t_batchwait():
    srv = server("--batch-alloc-wait-ms", "60000", "--handover-wait-ms", "0")
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        st, p = lat.alloc(48 * MiB)
        check(st == 0, "lat: 48 MiB of the device's 64")
        send_sync(bat, tenants.OP_MEM_ALLOC, [32 * MiB])
        check(until(lambda: smi_json(srv)["bat"]["alloc_waits"] == 1), "bat: its 32 MiB wait for memory")
        check(lat.free(p) == 0, "lat frees its 48 MiB")
        op, st, res = recv_msg(bat)
        check(st == 0 and res and res[-1], "bat: its allocation succeeds once there is room")
        lat.close()
        bat.close()
    finally:
        srv.stop()
    srv = server()
    try:
        lat, bat = Client(srv.port, TOK_L), Client(srv.port, TOK_B)
        check(lat.alloc(48 * MiB)[0] == 0, "lat: 48 MiB again, on a server with the defaults")
        check(bat.alloc(32 * MiB)[0] == OOM, "bat: --batch-alloc-wait-ms 0: CUDA_ERROR_OUT_OF_MEMORY at once")
        check(smi_json(srv)["bat"]["alloc_waits"] == 0, "remote-smi: no wait")
        lat.close()
        bat.close()
    finally:
        srv.stop()


# A batch tenant's process through libremote.so (RG_LIBREMOTE), by ctypes: the
# release hook, the pool trim and the answer are frontend/src/release.c's.
CHILD = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
MiB, hooked = 1 << 20, []
def ck(e, what):
    if e:
        print("error %d in %s" % (e, what), flush=True)
        sys.exit(1)
cached = ctypes.c_void_p()
ck(lib.cudaMalloc(ctypes.byref(cached), ctypes.c_size_t(int(sys.argv[2]) * MiB)), "cudaMalloc")
if sys.argv[3] == "pool":  # 24 MiB in the default pool's reserve, kept there
    pool, q = ctypes.c_void_p(), ctypes.c_void_p()
    ck(lib.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0), "cudaDeviceGetDefaultMemPool")
    keep = ctypes.c_uint64(1 << 62)
    ck(lib.cudaMemPoolSetAttribute(pool, 4, ctypes.byref(keep)), "cudaMemPoolSetAttribute")  # ReleaseThreshold
    ck(lib.cudaMallocAsync(ctypes.byref(q), ctypes.c_size_t(24 * MiB), None), "cudaMallocAsync")
    ck(lib.cudaFreeAsync(q, None), "cudaFreeAsync")
    ck(lib.cudaStreamSynchronize(None), "cudaStreamSynchronize")
def release(arg):
    hooked.append(lib.cudaFree(cached))
HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(release)
if sys.argv[3] == "pool":
    lib.remote_gpu_set_release_hook(HOOK, None)
print("ready", flush=True)
sys.stdin.read()
print("hook calls %d, statuses %r" % (len(hooked), hooked), flush=True)
"""


def child(srv, mib, mode):
    env = dict(os.environ, REMOTE_GPU="127.0.0.1:%d" % srv.port, REMOTE_GPU_TOKEN=TOK_B, REMOTE_GPU_LOG="info")
    c = subprocess.Popen([sys.executable, "-c", CHILD, os.environ["RG_LIBREMOTE"], str(mib), mode], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = c.stdout.readline().strip()
    check(line == "ready", "the batch process through libremote.so is ready (%r)" % line)
    return c


def child_end(c):
    out, err = c.communicate("", timeout=30)
    return out.strip(), err


def t_libremote():
    if not os.environ.get("RG_LIBREMOTE"):
        check(False, "RG_LIBREMOTE: the libremote.so to test is not set")
        return
    srv = server("--handover-wait-ms", "20000")
    try:
        lat = Client(srv.port, TOK_L)
        c = child(srv, 24, "pool")
        st, _ = lat.alloc(48 * MiB)
        check(st == 0, "lat: 48 MiB fit after libremote.so trimmed its pool and ran the hook: both were "
              "needed (%r)" % st)
        t = smi_json(srv)
        check(t["lat"]["handovers_served"] == 1 and t["bat"]["releases"] == 1, "remote-smi: one handover, served")
        check(t["bat"]["released_bytes"] == 24 * MiB,
              "remote-smi: the hook's cudaFree counted as released (24 MiB; the pool's reserve is not charged)")
        out, err = child_end(c)
        check(out == "hook calls 1, statuses [0]", "the hook ran once, its cudaFree succeeded (%r)" % out)
        check("pools trimmed, hook called" in err, "libremote.so's log says what it did")
        lat.close()
    finally:
        srv.stop()
    srv = server("--handover-wait-ms", "20000")
    try:
        lat = Client(srv.port, TOK_L)
        c = child(srv, 48, "plain")
        st, _ = lat.alloc(32 * MiB)
        check(st == OOM, "no hook, nothing in the pools: lat gets CUDA_ERROR_OUT_OF_MEMORY (%r)" % st)
        t = smi_json(srv)
        check(t["lat"]["handovers"] == 1 and t["lat"]["handovers_served"] == 0 and t["lat"]["handover_timeouts"] == 0
              and t["bat"]["releases"] == 1 and t["bat"]["released_bytes"] == 0,
              "remote-smi: asked, answered at once, nothing released")
        out, err = child_end(c)
        check(out == "hook calls 0, statuses []" and "no hook installed" in err, "no hook was called")
        lat.close()
    finally:
        srv.stop()


CASES = {
    "handover": lambda: with_pair(handover, "--handover-wait-ms", "20000"),
    "nothing": lambda: with_pair(nothing, "--handover-wait-ms", "20000"),
    "silent": lambda: with_pair(silent, "--handover-wait-ms", "500"),
    "batchwait": t_batchwait,
    "libremote": t_libremote,
}

if __name__ == "__main__":
    preauth.run_cases(CASES, sys.argv[4:])
