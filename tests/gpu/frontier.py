#!/usr/bin/env python3
"""What the programs of the next frontier (issue 18: compilers, graphs, CuPy, JAX,
NVML, device printf and asserts) do through libremote.so: each case runs locally
and remotely, and the report says whether it ran, whether its output equals the
local one, and the first error line where it did not.

  frontier.py WRAPPER PORT LIBREMOTE OUT.md

Each remote run's stderr is kept in frontier-logs/ beside OUT.md (its last 256 KiB),
and both outputs of a case whose outputs differ (NAME.local.out, NAME.remote.out);
RG_FRONTIER_LOG=debug (or any REMOTE_GPU_LOG spec) sets the remote runs' log level;
RG_FRONTIER_ONLY="JAX,graph" runs only the cases whose name holds one of these words.

Judging: where the remote output differs from the local one, the case runs locally
again, up to RG_FRONTIER_LOCAL_RUNS runs in all (4), until a local run gives the
remote's output ("equal to local run k") or differs from the first. If every local
run agrees, the program is deterministic here and the remote output must equal it.
If they differ (JAX's reductions use atomics; its autotuner may pick other
kernels), each number of the remote output must lie within the local run-to-run
spread (|remote - local1| <= max |localk - local1|) and every other word must be
equal ("within local spread S"). The report says which judgement was made. "JAX jit (deterministic ops)" runs the same
program with XLA_FLAGS=--xla_gpu_deterministic_ops=true, where it must be equal;
"JAX jit (no autotuning)" with --xla_gpu_autotune_level=0, which tells whether a
remote difference comes from the autotuner choosing other kernels (its timings
differ through the remote).
The JAX cases run with the client's defaults (REMOTE_GPU_MAPPED_PINNED_MAX
unset).

WRAPPER runs a command in the GPU-less namespace (tests/gpu/run.sh's gpuless.sh).
Cases print "result ..." lines, compared local vs remote; anything else is noise.
"""
import os
import subprocess
import sys
import tempfile

wrap, port, lib, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
driver_dir = os.path.join(os.path.dirname(lib), "driver")
work = tempfile.mkdtemp(prefix="rg-frontier.")
logs = os.path.join(os.path.dirname(os.path.abspath(out)), "frontier-logs")
os.makedirs(logs, exist_ok=True)
log_spec = os.environ.get("RG_FRONTIER_LOG")

PY = {
    "torch.compile (default)": """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
y = torch.compile(m)(x)
print("result", y.double().sum().item(), y.abs().max().item())
""",
    "torch.compile (reduce-overhead)": """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
f = torch.compile(m, mode="reduce-overhead")
for _ in range(3):
    y = f(x)
print("result", y.double().sum().item())
""",
    "torch.cuda.graph": """
import torch
torch.manual_seed(0)
m = torch.nn.Linear(512, 512).cuda()
x = torch.randn(32, 512, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        m(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = m(x)
x.copy_(torch.randn(32, 512, device="cuda"))
g.replay()
torch.cuda.synchronize()
print("result", y.double().sum().item())
""",
    "torch.cuda.graph (two streams)": """
import torch
torch.manual_seed(0)
a = torch.nn.Linear(256, 256).cuda()
b = torch.nn.Linear(256, 256).cuda()
x = torch.randn(16, 256, device="cuda")
s, side = torch.cuda.Stream(), torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        a(x), b(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    side.wait_stream(torch.cuda.current_stream())
    ya = a(x)
    with torch.cuda.stream(side):
        yb = b(x)
    torch.cuda.current_stream().wait_stream(side)
    y = ya + yb
x.copy_(torch.randn(16, 256, device="cuda"))
g.replay()
torch.cuda.synchronize()
r1 = y.double().sum().item()
x.mul_(2)
g.replay()
torch.cuda.synchronize()
print("result", r1, y.double().sum().item())
""",
    "torch.compile (max-autotune)": """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
f = torch.compile(m, mode="max-autotune")
with torch.no_grad():
    for _ in range(3):
        y = f(x)
# autotuning picks kernels by timing, so the sum is compared to 5 digits
print("result", "%.5g" % y.double().sum().item())
""",
    "CuPy elementwise and matmul": """
import cupy as cp
k = cp.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y + 1", "fma1")
a = cp.arange(1 << 20, dtype=cp.float32) / 1000
b = cp.ones_like(a) * 2
c = k(a, b)
m = cp.arange(256 * 256, dtype=cp.float32).reshape(256, 256) / 65536
print("result", float(c.sum()), float((m @ m).sum()))
""",
    "CuPy RawKernel": """
import cupy as cp
k = cp.RawKernel(r'''extern "C" __global__ void sq(const float* x, float* y, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x; if (i < n) y[i] = x[i] * x[i]; }''', "sq")
x = cp.arange(4096, dtype=cp.float32)
y = cp.empty_like(x)
k((16,), (256,), (x, y, cp.int32(4096)))
print("result", float(y.sum()))
""",
    "JAX jit": """
import jax, jax.numpy as jnp
print("result devices", [d.platform for d in jax.devices()])
f = jax.jit(lambda x: jnp.sin(x) @ x.T)
x = jnp.arange(256 * 256, dtype=jnp.float32).reshape(256, 256) / 65536
print("result", float(f(x).sum()))
""",
    "JAX jit (deterministic ops)": """
import os
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true").strip()
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) @ x.T)
x = jnp.arange(256 * 256, dtype=jnp.float32).reshape(256, 256) / 65536
print("result", float(f(x).sum()))
""",
    "JAX jit (no autotuning)": """
import os
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) @ x.T)
x = jnp.arange(256 * 256, dtype=jnp.float32).reshape(256, 256) / 65536
print("result", float(f(x).sum()))
""",
    "CuPy ReductionKernel, fft, linalg, random, sort": """
import cupy as cp
# the examples of CuPy's user guide: a user-defined reduction (L2 norm),
# cuFFT, cuSOLVER, cuRAND, CUB's sort, and the memory pool's accounting
l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
x = cp.arange(1000, dtype=cp.float64)
print("result l2", float(l2(x)))
f = cp.fft.fft(cp.arange(64, dtype=cp.complex128))
print("result fft", float(cp.abs(f).sum()))
a = cp.eye(32) * 4 + cp.ones((32, 32))
print("result solve", float(cp.linalg.solve(a, cp.arange(32.0)).sum()))
print("result eigvalsh", "%.10g" % float(cp.linalg.eigvalsh(a).sum()))
cp.random.seed(1)
r = cp.random.standard_normal(1 << 16, dtype=cp.float32)
print("result random", "%.6g" % float(r.sum()))
print("result sort", float(cp.sort(r)[:10].sum()) < 0)
pool = cp.get_default_memory_pool()
print("result pool", pool.used_bytes() > 0, pool.total_bytes() >= pool.used_bytes())
""",
    "JAX grad, vmap, scan, random, conv": """
import jax, jax.numpy as jnp
from jax import lax
# the examples of JAX's quickstart: grad of a loss, vmap of a per-example
# function, lax.scan, PRNG keys, and a convolution (cuDNN)
def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)
w = jnp.arange(64, dtype=jnp.float32).reshape(8, 8) / 64
x = jnp.arange(32, dtype=jnp.float32).reshape(4, 8) / 32
g = jax.jit(jax.grad(loss))(w, x)
print("result grad", "%.6g" % float(g.sum()))
per = jax.vmap(lambda v: jnp.dot(v, v))(x)
print("result vmap", [float(v) for v in per])
c, ys = lax.scan(lambda c, v: (c + v, c * v), 0.0, jnp.arange(10.0))
print("result scan", float(c), float(ys.sum()))
k = jax.random.key(0)
print("result random", "%.6g" % float(jax.random.normal(k, (1000,)).sum()))
img = jnp.ones((1, 3, 16, 16), jnp.float32)
ker = jnp.ones((4, 3, 3, 3), jnp.float32) / 27
y = lax.conv_general_dilated(img, ker, (1, 1), "SAME")
print("result conv", "%.6g" % float(y.sum()))
""",
    "NVML device count": """
import ctypes
n = ctypes.CDLL("libnvidia-ml.so.1")
print("result init", n.nvmlInit_v2())
c = ctypes.c_uint()
print("result count", n.nvmlDeviceGetCount_v2(ctypes.byref(c)), c.value)
""",
    "transformers GPT-2 generate": """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=128)).cuda().eval()
ids = torch.tensor([[1, 2, 3, 4]], device="cuda")
out = m.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
print("result", out.tolist())
""",
}

CU = {
    "device printf": r'''#include <cstdio>
__global__ void k() { printf("thread %d\n", threadIdx.x); }
int main() { k<<<1, 4>>>(); cudaDeviceSynchronize(); printf("result host after\n"); return 0; }
''',
    "device assert": r'''#include <cstdio>
#include <cassert>
__global__ void k(int v) { assert(v == 0); }
int main() { k<<<1, 1>>>(1); cudaError_t e = cudaDeviceSynchronize();
printf("result %s\n", cudaGetErrorName(e)); return 0; }
''',
}


def run(cmd, remote, timeout=240):
    env = dict(os.environ)
    env.pop("REMOTE_GPU_MAPPED_PINNED_MAX", None)  # the client's default
    pre = []
    if remote:
        pre = wrap.split() + ["env", f"REMOTE_GPU=127.0.0.1:{port}", f"LD_PRELOAD={lib}",
                              f"LD_LIBRARY_PATH={driver_dir}", f"TRITON_LIBCUDA_PATH={driver_dir}"]
        if log_spec:
            pre.append(f"REMOTE_GPU_LOG={log_spec}")
    try:
        p = subprocess.run(pre + cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), ""


def first_error(err):
    lines = [l for l in err.splitlines() if l.strip()]
    for l in reversed(lines):
        if "Error" in l or "error" in l or "not supported" in l:
            return l.strip()[:220]
    return lines[-1].strip()[:220] if lines else ""


def numbers(line):
    """The words of a result line, numbers as floats (brackets and commas apart)."""
    out = []
    for w in line.replace("[", " ").replace("]", " ").replace(",", " ").split():
        try:
            out.append(float(w))
        except ValueError:
            out.append(w)
    return out


def judge(lres, rres, others):
    """(same, how): the remote output against the first local run and the others."""
    if lres == rres:
        return ("yes" if lres else "no"), "equal"
    runs = 1 + len(others)
    if rres in others:
        return "yes", f"equal to local run {others.index(rres) + 2} of {runs}"
    if all(o == lres for o in others):
        return "no", f"local deterministic ({runs} runs equal): must be equal"
    spread = 0.0
    for o in others:
        if not (len(lres) == len(rres) == len(o)):
            return "no", "local nondeterministic, but the remote has other lines"
    for i, (a, r) in enumerate(zip(lres, rres)):
        wa, wr = numbers(a), numbers(r)
        wos = [numbers(o[i]) for o in others]
        if any(len(w) != len(wa) for w in [wr] + wos):
            return "no", "local nondeterministic, but a line differs in shape"
        for j, (x, y) in enumerate(zip(wa, wr)):
            zs = [w[j] for w in wos]
            if isinstance(x, float) and isinstance(y, float) and all(isinstance(z, float) for z in zs):
                far = max(abs(z - x) for z in zs)
                spread = max(spread, far)
                if abs(y - x) > far:
                    return "no", f"outside the local run-to-run spread (remote {y}; local {x}, {', '.join(map(str, zs))})"
            elif x != y:
                return "no", "local nondeterministic, but a word differs"
    return "yes", f"within the local run-to-run spread ({spread:g}, {runs} local runs)"


rows = []
cases = [(n, ["python3", "-c", s]) for n, s in PY.items()]
for name, src in CU.items():
    f = os.path.join(work, name.replace(" ", "_") + ".cu")
    exe = f[:-3]
    with open(f, "w") as fh:
        fh.write(src)
    b = subprocess.run(["nvcc", "-o", exe, f], capture_output=True, text=True)
    cases.append((name, [exe] if b.returncode == 0 else ["false"]))
only = [w for w in os.environ.get("RG_FRONTIER_ONLY", "").split(",") if w]
local_runs = max(2, int(os.environ.get("RG_FRONTIER_LOCAL_RUNS", "4")))
if only:
    cases = [c for c in cases if any(w in c[0] for w in only)]
for name, cmd in cases:
    lrc, lout, lerr = run(cmd, False)
    rrc, rout, rerr = run(cmd, True)
    slug = "".join(c if c.isalnum() else "_" for c in name)
    with open(os.path.join(logs, slug + ".err"), "w") as fh:
        fh.write(rerr[-(256 << 10):])
    lres = [l for l in lout.splitlines() if not l.startswith("time")]
    rres = [l for l in rout.splitlines() if not l.startswith("time")]
    others = []
    # Is the program deterministic here? More local runs, until one gives the
    # remote's output or differs from the first (a few runs may agree by chance).
    while lres != rres and lres and len(others) < local_runs - 1:
        _, lnout, _ = run(cmd, False)
        others.append([l for l in lnout.splitlines() if not l.startswith("time")])
        with open(os.path.join(logs, f"{slug}.local{len(others) + 1}.out"), "w") as fh:
            fh.write(lnout[-(64 << 10):])
        if others[-1] == rres or others[-1] != lres:
            break
    if lres != rres:  # keep both outputs of a case that differs
        for side, text in (("local", lout), ("remote", rout)):
            with open(os.path.join(logs, f"{slug}.{side}.out"), "w") as fh:
                fh.write(text[-(64 << 10):])
    same, how = judge(lres, rres, others)
    unsup = sum(1 for l in rerr.splitlines() if "not supported" in l)
    why = "" if same == "yes" else first_error(rerr) or "(no error text)"
    rows.append((name, lrc, rrc, same, how, unsup, why, lres[-1][:80] if lres else first_error(lerr)))
    print(f"frontier: {name}: local {lrc} remote {rrc} same {same} (judged: {how}) {why}", flush=True)

with open(out, "w") as f:
    f.write("# The next frontier (issue 18) through libremote.so\n\n")
    f.write("Each case locally and remotely (GPU-less namespace); *same*: its output lines equal, or\n"
            "within the local run-to-run spread where local runs differ (*judged by*).\n\n")
    f.write("| case | local exit | remote exit | same | judged by | 'not supported' lines | remote's error | local result |\n|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write("| " + " | ".join(str(x).replace("|", "/") for x in r) + " |\n")
