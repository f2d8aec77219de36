#!/usr/bin/env python3
"""The PyTorch benchmarks of the run of record, local against remote on one GPU,
in alternating runs (bench/run-gpu.sh runs them behind RG_COMPILED_GPT2=1 and
RG_MODEL_LOAD=1; see its header):

  torch_bench.py gpt2 --gpud remote-gpud --lib libremote.so --wrap 'CMD...' --md OUT.md
        [--modes default,reduce-overhead] [--steps 30] [--rounds 2] [--budget 100]
  torch_bench.py load --gpud ... --lib ... --wrap ... --md OUT.md
        [--transports tcp,shm] [--gib 4] [--rounds 2] [--budget 50]

gpt2 (issue 18 item 7): bench/torch_gpt2.py, the GPT-2-small example compiled with
torch.compile and trained; every run with Inductor's and Triton's caches in a new
folder, so local and remote runs all compile. One remote-gpud with --cubin-store;
one remote run fills the store (reported as the cold-store run), then local and
remote alternate (L R L R). Targets: median step remote/local <= 1.03, time to the
first compiled step remote/local <= 1.2 (warm store). Losses: bit for bit where
the local runs agree bit for bit, else within their spread (the report says which).

load (issue 20 item 4): bench/torch_load.py, a state dict of about 4 GiB made once
from a fixed seed and saved under the work folder, then per round a local run and
a remote run per transport (tcp://, shm://), each torch.load'ing the file and
moving it to the GPU (.to and load_state_dict); remote/local per transport, and the
digests of what arrived equal to local.

WRAP is the command that runs a program in the GPU-less namespace (run-gpu.sh
--gpu-less BENCH under unshare -m). The remote runs get LD_PRELOAD=libremote.so,
REMOTE_GPU, and LD_LIBRARY_PATH/TRITON_LIBCUDA_PATH = libremote.so's driver folder.
--budget: seconds for the whole benchmark; a mode's first round always runs, later
rounds only where they fit (the report says how many ran). --dry-run: no server,
no namespace, every "remote" run is a second local run on --device (cpu): it tests
the harness and the report on a machine without a GPU. Exit status: 0 when every
run produced its result, 1 otherwise, 2 for a missing tool.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Stopped(Exception):
    """SIGTERM (the caller's time limit): the report is written with the runs done."""


STOPPED = "stopped by SIGTERM (the caller's time limit): the report has the runs finished before"


def on_sigterm(*_):
    raise Stopped()


def die(msg):
    print(f"torch_bench: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("gpt2", "load"))
    p.add_argument("--gpud", help="remote-gpud")
    p.add_argument("--lib", help="libremote.so (its driver/ folder beside it)")
    p.add_argument("--wrap", default="", help="command running a program in the GPU-less namespace")
    p.add_argument("--md", required=True, help="the report (markdown)")
    p.add_argument("--work", help="scratch folder (default: a new one under /tmp)")
    p.add_argument("--gpu", default="0", help="the GPU for local runs and remote-gpud --device")
    p.add_argument("--budget", type=float, default=None, help="seconds (gpt2 100, load 50)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--commit", default=os.environ.get("RG_COMMIT", ""))
    p.add_argument("--python", default="python3", help="the interpreter of every run")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--device", default=None, help="torch device of the runs (cuda; cpu in a dry run)")
    g = p.add_argument_group("gpt2")
    g.add_argument("--modes", default="default", help="torch.compile modes, comma-separated "
                   "(default, reduce-overhead; eager for dry runs)")
    g.add_argument("--steps", type=int, default=30)
    g.add_argument("--no-deterministic", dest="deterministic", action="store_false")
    g.add_argument("--layers", type=int, help="fewer blocks (dry runs only)")
    g.add_argument("--run-timeout", type=float, default=None, help="seconds per run (gpt2 240, load 120)")
    g = p.add_argument_group("load")
    g.add_argument("--transports", default="tcp,shm")
    g.add_argument("--gib", type=float, default=4.0)
    a = p.parse_args()
    a.budget = a.budget if a.budget is not None else (100.0 if a.what == "gpt2" else 50.0)
    a.run_timeout = a.run_timeout or (240.0 if a.what == "gpt2" else 120.0)
    a.device = a.device or ("cpu" if a.dry_run else "cuda")
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    if not set(a.transports.split(",")) <= {"tcp", "shm"}:
        p.error(f"--transports {a.transports}: tcp, shm or both")
    if not set(a.modes.split(",")) <= {"default", "reduce-overhead", "eager"}:
        p.error(f"--modes {a.modes}: default, reduce-overhead (or eager, for dry runs)")
    if a.layers is not None and not a.dry_run:
        p.error("--layers is for dry runs only: the benchmark is GPT-2-small")
    return a


def check_tools(a):
    """Everything a run needs, before any run: missing pieces end here, by name."""
    if not a.dry_run:
        for what, path in (("--gpud", a.gpud), ("--lib", a.lib)):
            if not path or not os.path.exists(path):
                die(f"{what} {path or '(not given)'}: missing (build the project first)")
        drv = os.path.join(os.path.dirname(os.path.abspath(a.lib)), "driver")
        if not os.path.exists(os.path.join(drv, "libcuda.so.1")):
            die(f"{drv}/libcuda.so.1 missing: the build's driver folder (Triton and -lcuda programs need it)")
        if not a.wrap:
            die("--wrap missing: the remote runs must be GPU-less")
        if not shutil.which(shlex.split(a.wrap)[0]):
            die(f"--wrap: {shlex.split(a.wrap)[0]} not found")
    need = "import torch"
    if a.device.startswith("cuda"):
        need += "; assert torch.cuda.is_available(), 'torch sees no GPU'"
    if a.what == "gpt2" and any(m != "eager" for m in a.modes.split(",")):
        need += "; import torch._inductor"
        if a.device.startswith("cuda"):
            need += "; import triton"
    r = subprocess.run([a.python, "-c", need], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        die(f"{a.python} cannot run the benchmark ({need}): {last}")


class Server:
    """remote-gpud on the GPU, listening on loopback tcp or an shm:// socket."""

    def __init__(self, a, work, name, scheme, extra=()):
        self.name, self.target, self.p, self.note = name, None, None, None
        port_file = os.path.join(work, f"port-{name}")
        listen = f"shm://{work}/gpud-{name}.sock" if scheme == "shm" else "127.0.0.1:0"
        self.log = os.path.join(work, f"gpud-{name}.log")
        env = dict(os.environ, REMOTE_GPU_LOG=os.environ.get("RG_GPUD_LOG", "warn"))
        with open(self.log, "w") as log:
            self.p = subprocess.Popen([a.gpud, "--listen", listen, "--port-file", port_file, "--device", a.gpu,
                                       "--drain-seconds", "0", *extra], stdout=log, stderr=subprocess.STDOUT, env=env)
        for _ in range(200):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                port = open(port_file).read().strip()
                self.target = listen if scheme == "shm" else f"tcp://127.0.0.1:{port}"
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        self.note = f"remote-gpud ({name}) did not start: {tail(self.log, 3)}"
        self.stop()

    def stop(self):
        if self.p is None or self.p.poll() is not None:
            rc = None if self.p is None else self.p.returncode
        else:
            self.p.send_signal(signal.SIGTERM)
            try:
                rc = self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return f"remote-gpud ({self.name}) still running 5 s after SIGTERM: killed"
        if rc not in (0, None) and self.target:
            return f"remote-gpud ({self.name}) exited with {rc} after SIGTERM (expected 0)"
        return None


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
    except OSError:
        return "(no log)"
    return " / ".join(l[:200] for l in lines[-n:]) or "(empty log)"


class Runner:
    def __init__(self, a, work):
        self.a, self.work, self.n = a, work, 0
        self.t0 = time.monotonic()
        self.failures = 0
        if a.lib:
            self.driver = os.path.join(os.path.dirname(os.path.abspath(a.lib)), "driver")

    def elapsed(self):
        return time.monotonic() - self.t0

    def why_not(self, k, rows, est):
        """Why round k is not run (None: run it): the first always runs; later ones
        not after a failed run, nor where about est seconds more would pass the budget."""
        if k == 1:
            return None
        if any(x["error"] for x in rows):
            return f"rounds {k}..{self.a.rounds} not run: a run failed"
        if self.elapsed() + est > self.a.budget:
            return (f"rounds {k}..{self.a.rounds} not run: they would pass the budget ({self.elapsed():.0f} s "
                    f"used, about {est:.0f} s more, budget {self.a.budget:.0f} s)")
        return None

    def run(self, label, argv, target=None):
        """One run of a workload (argv after the interpreter; '{out}' is its JSON file),
        locally or, with a target, through libremote.so. Returns a dict: the workload's
        JSON plus label, wall_s, images, error."""
        self.n += 1
        tag = f"{self.n:02d}-{re.sub('[^a-z0-9]+', '-', label.lower()).strip('-')}"
        out = os.path.join(self.work, tag + ".json")
        log = os.path.join(self.work, tag + ".log")
        caches = tempfile.mkdtemp(prefix=tag + "-caches.", dir=self.work)
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(caches, "triton"))
        cmd = [self.a.python] + [x.replace("{out}", out) for x in argv]
        if target and not self.a.dry_run:
            ldp = ":".join(x for x in (self.driver, os.environ.get("LD_LIBRARY_PATH", "")) if x)
            cmd = shlex.split(self.a.wrap) + [
                "env", f"REMOTE_GPU={target}", f"LD_PRELOAD={os.path.abspath(self.a.lib)}",
                f"LD_LIBRARY_PATH={ldp}", f"TRITON_LIBCUDA_PATH={self.driver}",
                "REMOTE_GPU_LOG=" + os.environ.get("RG_CLIENT_LOG", "warn,frontend=info")] + cmd
        elif self.a.device.startswith("cuda"):
            env["CUDA_VISIBLE_DEVICES"] = self.a.gpu
        print(f"torch_bench: {label} ({self.elapsed():.0f} s of {self.a.budget:.0f})", flush=True)
        t = time.monotonic()
        err = None
        with open(log, "w") as lf:
            try:
                rc = subprocess.run(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                    timeout=self.a.run_timeout).returncode
            except subprocess.TimeoutExpired:
                rc, err = "timeout", f"stopped after {self.a.run_timeout:.0f} s"
        wall = time.monotonic() - t
        res = {}
        if rc == 0:
            try:
                with open(out) as f:
                    res = json.load(f)
            except (OSError, ValueError) as e:
                err = f"no result: {e}"
        else:
            err = err or f"exit status {rc}: {tail(log, 2)}"
        if err:
            self.failures += 1
            print(f"torch_bench: {label}: FAILED: {err}", flush=True)
        images = [tuple(int(x) for x in m) for m in re.findall(
            r"kernel images: (\d+) loaded, (\d+) uploaded \((\d+) bytes\)", open(log, errors="replace").read())]
        res.update(label=label, wall_s=wall, error=err, log=os.path.basename(log),
                   images=[sum(col) for col in zip(*images)] if images else None)
        return res


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def ratio(r, l):
    return None if r is None or not l else r / l


def met(v, target):
    return "not measured" if v is None else ("**met**" if v <= target else "**not met**")


def header(a, title, notes):
    gpu = subprocess.run(["nvidia-smi", "-i", a.gpu, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True) if not a.dry_run else None
    torch_v = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    w = [f"# {title}", ""]
    if a.dry_run:
        w += ["**DRY RUN**: no server and no namespace; every \"remote\" run is a second local run "
              f"on `{a.device}`. The numbers say nothing about remote-gpu.", ""]
    w.append(f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; GPU: "
             f"{(gpu.stdout.strip() if gpu and gpu.returncode == 0 else a.device) or '?'}; "
             f"{os.cpu_count()} cores; torch {torch_v}")
    w.append(f"- commit: `{a.commit or 'unknown'}`")
    w.append("- remote: the client in the GPU-less namespace (`" + (a.wrap or "-") + "`) with LD_PRELOAD="
             "libremote.so, LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH = its driver folder; remote-gpud on "
             f"GPU {a.gpu}, over loopback")
    for n in notes:
        w.append(f"- note: {n}")
    return w


# ---- gpt2 ---------------------------------------------------------------------------
def step_ms(run):
    s = run.get("step_s") or []
    return 1e3 * statistics.median(s[2:]) if len(s) > 2 else None


def rel(x, y):
    return abs(float(x) - float(y)) / max(abs(float(y)), 1e-30)


def compare_losses(locals_, remotes):
    """'bitwise' when the local runs agree bit for bit (then every remote run must too),
    else the largest relative difference remote/local against local/local."""
    ref = next((r["losses"] for r in locals_ if r.get("losses")), None)
    if ref is None:
        return "no local losses to compare", None
    others = [r["losses"] for r in locals_[1:] if r.get("losses")]
    rem = [r["losses"] for r in remotes if r.get("losses")]
    if not rem:
        return "no remote losses to compare", None
    spread = max((rel(x, y) for o in others for x, y in zip(o, ref)), default=None)
    worst = max((rel(x, y) for o in rem for x, y in zip(o, ref)), default=0.0)
    equal = all(o == ref for o in rem)
    if others and all(o == ref for o in others):
        ok = equal
        how = (f"bitwise: the {len(others) + 1} local runs agree bit for bit, and the {len(rem)} remote runs "
               + ("equal them bit for bit" if equal else f"DIFFER (max relative difference {worst:.2e})"))
    elif spread is not None:
        ok = worst <= spread
        how = (f"within the local spread: the local runs differ among themselves (max relative {spread:.2e}); "
               f"remote vs local max relative {worst:.2e}" + ("" if ok else " (OUTSIDE the local spread)"))
    else:
        ok = equal
        how = ("one local run only: remote " + ("equal bit for bit" if equal else f"max relative {worst:.2e}"))
    return how, ok


def bench_gpt2(a, work, notes):
    r = Runner(a, work)
    rows, summary = [], []
    for mode in a.modes.split(","):
        store = os.path.join(work, f"store-{mode}")
        srv = None
        target = "dry-run"
        if not a.dry_run:
            srv = Server(a, work, f"gpt2-{mode}", "tcp", ["--cubin-store", store])
            if srv.note:
                notes.append(srv.note)
                r.failures += 1
                continue
            target = srv.target
        argv = [os.path.join(HERE, "torch_gpt2.py"), "--out", "{out}", "--mode", mode, "--steps", str(a.steps),
                "--device", a.device] + (["--deterministic"] if a.deterministic else [])
        if a.layers is not None:
            argv += ["--layers", str(a.layers)]
        cold, loc, rem = {}, [], []
        try:
            cold = r.run(f"{mode}: remote, empty store", argv, target)
            cold["side"], cold["store"] = "remote", "empty (fills it)"
            rows.append(cold)
            for k in range(1, a.rounds + 1):
                est = max([x["wall_s"] for x in rows[-3:]] or [0]) * 2
                why = r.why_not(k, rows, est)
                if why:
                    notes.append(f"{mode}: {why}")
                    break
                x = r.run(f"{mode}: local {k}", argv)
                x["side"], x["store"] = "local", "-"
                loc.append(x)
                rows.append(x)
                y = r.run(f"{mode}: remote {k}", argv, target)
                y["side"], y["store"] = "remote", "warm"
                rem.append(y)
                rows.append(y)
        except Stopped:
            notes.append(STOPPED)
        finally:
            n = srv.stop() if srv else None
            if n:
                notes.append(n)
        ls, rs = median([step_ms(x) for x in loc]), median([step_ms(x) for x in rem])
        lf, rf = median([x.get("to_first_step_s") for x in loc]), median([x.get("to_first_step_s") for x in rem])
        how, ok = compare_losses(loc, [cold] + rem)
        summary.append((mode, ls, rs, lf, rf, cold.get("to_first_step_s"), how, ok, len(loc)))
        if STOPPED in notes:
            break

    used = r.elapsed()
    params = next((x.get("parameters") for x in rows if x.get("parameters")), None)
    batch = next((x.get("batch") for x in rows if x.get("batch")), None) or ["?", "?"]
    w = header(a, "Compiled GPT-2-small training, local vs remote (issue 18 item 7)", notes)
    w += [f"- model: `examples/transformer/gpt2.py` built from its configuration ({fmt(params, ',')} parameters, "
          f"batch {batch[0]} x {batch[1]} tokens, Adam), `torch.compile(model, mode=...)`, {a.steps} steps a run; "
          + ("deterministic algorithms (and Inductor's deterministic mode)" if a.deterministic else
             "not deterministic"),
          "- every run compiles: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in a new folder per run",
          "- remote-gpud with `--cubin-store` (a new store per mode); the first remote run fills it "
          "(cold store), the later ones find their images there (warm store)",
          "- order: remote (cold store), then local and remote alternating; medians over the rounds",
          "- time to the first compiled step: from the script's start (before `import torch`; libremote.so "
          "connects at the first CUDA call, after it) to the end of the first training step (compilation "
          "of forward and backward included)",
          "- step time: the median of steps 3 to the last of a run, each ending with `loss.item()`",
          f"- device time of this benchmark: {used:.0f} s (budget {a.budget:.0f} s)", ""]
    w += ["## Targets", "", "| mode | target | local | remote | ratio | |", "|---|---|---|---|---|---|"]
    for mode, ls, rs, lf, rf, cf, how, ok, n in summary:
        sr, fr = ratio(rs, ls), ratio(rf, lf)
        w.append(f"| {mode} | step time remote/local <= 1.03 | {fmt(ls)} ms | {fmt(rs)} ms | {fmt(sr, '.3f')}x | "
                 f"{met(sr, 1.03)} |")
        w.append(f"| {mode} | first compiled step remote/local <= 1.2 (warm store) | {fmt(lf)} s | {fmt(rf)} s | "
                 f"{fmt(fr, '.3f')}x | {met(fr, 1.2)} |")
        w.append(f"| {mode} | (first compiled step, cold store) | {fmt(lf)} s | {fmt(cf)} s | "
                 f"{fmt(ratio(cf, lf), '.3f')}x | - |")
    w += ["", "## Losses", ""]
    for mode, *_, how, ok, n in summary:
        w.append(f"- {mode}: {how}: **{'equal' if ok else 'NOT equal' if ok is False else 'not compared'}**")
    w += ["", "## Runs", "",
          "| run | side | store | to first step s | import s | model s | first step s | median step ms | "
          "images loaded / uploaded (bytes) | wall s | error |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        im = x.get("images")
        w.append(f"| {x['label']} | {x['side']} | {x['store']} | {fmt(x.get('to_first_step_s'))} | "
                 f"{fmt(x.get('import_s'))} | {fmt(x.get('model_s'))} | {fmt(x.get('first_step_s'))} | "
                 f"{fmt(step_ms(x))} | {f'{im[0]} / {im[1]} ({im[2]:,})' if im else '-'} | {x['wall_s']:.1f} | "
                 f"{x['error'] or ''} |")
    w.append("")
    return w, r.failures, used


# ---- load ---------------------------------------------------------------------------
def bench_load(a, work, notes):
    r = Runner(a, work)
    state = os.path.join(work, "state.pt")
    t = time.monotonic()
    mk = subprocess.run([a.python, os.path.join(HERE, "torch_load.py"), "make", state, "--gib", str(a.gib)],
                        capture_output=True, text=True)
    make_s = time.monotonic() - t
    if mk.returncode != 0:
        die(f"torch_load.py make failed: {(mk.stderr.strip().splitlines() or ['?'])[-1]}")
    servers = {}
    for tr in a.transports.split(","):
        if a.dry_run:
            servers[tr] = "dry-run"
            continue
        s = Server(a, work, f"load-{tr}", tr)
        if s.note:
            notes.append(s.note)
            r.failures += 1
        else:
            servers[tr] = s
    argv = [os.path.join(HERE, "torch_load.py"), "run", state, "--out", "{out}", "--device", a.device]
    rows, loc, rem = [], [], {tr: [] for tr in servers}
    try:
        for k in range(1, a.rounds + 1):
            est = sum(x["wall_s"] for x in rows[-(1 + len(servers)):]) if rows else 0
            why = r.why_not(k, rows, est)
            if why:
                notes.append(why)
                break
            x = r.run(f"local {k}", argv)
            x["side"] = "local"
            loc.append(x)
            rows.append(x)
            for tr, s in servers.items():
                y = r.run(f"remote {tr} {k}", argv, s if a.dry_run else s.target)
                y["side"] = tr
                rem[tr].append(y)
                rows.append(y)
    except Stopped:
        notes.append(STOPPED)
    finally:
        for tr, s in servers.items():
            n = None if a.dry_run else s.stop()
            if n:
                notes.append(n)
    used = r.elapsed()  # the state dict's making included
    first = next((x for x in rows if x.get("bytes")), {})
    ref = next((x for x in loc if x.get("digest_to")), None)
    w = header(a, "Model load: a state dict moved to the GPU, local vs remote (issue 20 item 4)", notes)
    sizes = first.get("sizes") or []
    w += [f"- state dict: {first.get('tensors', '?')} tensors, {fmt((first.get('bytes') or 0) / (1 << 30))} GiB, "
          f"fp32 and bf16, {len(sizes)} sizes from {fmt((sizes or [0])[0] / 1024, '.0f')} KiB to "
          f"{fmt((sizes or [0])[-1] / (1 << 20), '.0f')} MiB (`bench/torch_load.py`, seed 0), made once "
          f"and torch.save'd under /tmp ({make_s:.0f} s)",
          "- each run: `torch.load` of the file (page cache), then timed: `{k: v.to(\"cuda\")}` of the whole "
          "dict, and `load_state_dict` into a module whose parameters were made on the GPU (pageable host "
          "memory to device, synchronised at the end); digests (per tensor, the sum of its bits) of what "
          "arrived compared with the local run's",
          "- order: local, then one remote run per transport, repeated; medians over the rounds",
          f"- device time of this benchmark: {used:.0f} s (budget {a.budget:.0f} s)", ""]
    w += ["## remote/local per transport", "",
          "| transport | .to local s | .to remote s | remote/local | remote GB/s | load_state_dict local s | "
          "remote s | remote/local | digests equal local |", "|---|---|---|---|---|---|---|---|---|"]
    nb = first.get("bytes")
    lt, ll = median([x.get("to_s") for x in loc]), median([x.get("load_state_dict_s") for x in loc])
    w.append(f"| (local) | {fmt(lt, '.3f')} | - | - | {fmt(nb / lt / 1e9 if nb and lt else None)} | {fmt(ll, '.3f')} | "
             "- | - | - |")
    for tr, runs in rem.items():
        rt, rl = median([x.get("to_s") for x in runs]), median([x.get("load_state_dict_s") for x in runs])
        eq = ("-" if not ref or not runs else "yes" if all(
            x.get("digest_to") == ref["digest_to"] and x.get("digest_load_state_dict") == ref["digest_load_state_dict"]
            for x in runs) else "**NO**")
        w.append(f"| {tr} | {fmt(lt, '.3f')} | {fmt(rt, '.3f')} | {fmt(ratio(rt, lt), '.2f')}x | "
                 f"{fmt(nb / rt / 1e9 if nb and rt else None)} | {fmt(ll, '.3f')} | {fmt(rl, '.3f')} | "
                 f"{fmt(ratio(rl, ll), '.2f')}x | {eq} |")
    w += ["", "## Runs", "", "| run | torch.load s | .to s | load_state_dict s | wall s | error |",
          "|---|---|---|---|---|---|"]
    for x in rows:
        w.append(f"| {x['label']} | {fmt(x.get('load_s'))} | {fmt(x.get('to_s'), '.3f')} | "
                 f"{fmt(x.get('load_state_dict_s'), '.3f')} | {x['wall_s']:.1f} | {x['error'] or ''} |")
    w.append("")
    try:
        os.unlink(state)
    except OSError:
        pass
    return w, r.failures, used


def main():
    a = parse()
    signal.signal(signal.SIGTERM, on_sigterm)
    check_tools(a)
    work = a.work or tempfile.mkdtemp(prefix=f"rg-torch-{a.what}.")
    os.makedirs(work, mode=0o700, exist_ok=True)  # an shm:// socket lives here
    notes = []
    try:
        w, failures, used = (bench_gpt2 if a.what == "gpt2" else bench_load)(a, work, notes)
    except Stopped:
        die(f"{a.what}: {STOPPED.split(':')[0]} before any run")
    failures += STOPPED in notes
    os.makedirs(os.path.dirname(os.path.abspath(a.md)), exist_ok=True)
    with open(a.md, "w") as f:
        f.write("\n".join(w))
    print("\n".join(w))
    print(f"torch_bench: {a.what}: {used:.0f} s of the budget of {a.budget:.0f} s; {failures} runs failed; "
          f"wrote {a.md} (runs' logs in {work})", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
