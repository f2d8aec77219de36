#!/usr/bin/env python3
"""One run of issue 18's compiled-training benchmark: the GPT-2-small model of
examples/transformer/gpt2.py (built from its configuration, nothing downloaded),
torch.compile'd, trained on the example's generated tokens with Adam.

  torch_gpt2.py --out RUN.json [--mode default|reduce-overhead|eager] [--steps N]
                [--deterministic] [--device cuda] [--layers N]

Writes RUN.json: the time from this script's start (before torch is imported) to
the end of the first compiled training step, its parts, every later step's time
(each ends with loss.item(), which synchronises, as the example does) and every
loss as repr() of the float, for a bit-for-bit comparison between runs. Run by
bench/torch_bench.py, locally and through libremote.so, each run with Inductor's
and Triton's caches in a folder of its own, so that every run compiles.
--layers and --device cpu are for dry runs on a machine without a GPU.
"""
import time

T0 = time.time()  # before anything heavy: the first step is timed from here

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "transformer")


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the run's JSON file")
    p.add_argument("--mode", default="default", choices=("default", "reduce-overhead", "eager"))
    p.add_argument("--steps", type=int, default=30, help="training steps, the first one included")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic algorithms (and Inductor's deterministic mode where it has one)")
    p.add_argument("--layers", type=int, default=None, help="fewer blocks (dry runs only)")
    a = p.parse_args()
    if a.steps < 1:
        p.error("--steps must be at least 1")
    return a


def main():
    a = parse()
    if a.deterministic:
        # cuBLAS needs a fixed workspace layout before its first call (common.py does the same)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    sys.path.insert(0, EXAMPLE)
    import gpt2  # examples/transformer/gpt2.py: the model, sizes and batch shape
    from common import lm_loss, tokens

    t_import = time.time()
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
        try:
            import torch._inductor.config as ind
        except ImportError:  # a torch without Inductor: eager dry runs
            ind = None
        if hasattr(ind, "deterministic"):
            ind.deterministic = True  # no benchmarking-picked kernels that change bits run to run
    if a.layers is not None:
        gpt2.LAYERS = a.layers
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    model = gpt2.GPT2().to(a.device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t_model = time.time()
    fwd = model if a.mode == "eager" else torch.compile(model, mode=None if a.mode == "default" else a.mode)
    graphs = a.mode == "reduce-overhead"

    losses, step_s = [], []
    t_first = None
    for step in range(a.steps):
        t = time.perf_counter()
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()  # outputs of the last replay may be reused
        opt.zero_grad(set_to_none=True)
        seqs = tokens(gen, gpt2.BATCH, gpt2.SEQ, gpt2.VOCAB, a.device)
        loss = lm_loss(fwd(seqs[:, :-1]), seqs[:, 1:])
        loss.backward()
        opt.step()
        value = loss.item()  # synchronises: the step is done
        step_s.append(time.perf_counter() - t)
        if t_first is None:
            t_first = time.time()
        losses.append(repr(value))
    res = {
        "mode": a.mode,
        "device": a.device,
        "device_name": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else a.device,
        "torch": torch.__version__,
        "deterministic": a.deterministic,
        "layers": gpt2.LAYERS,
        "batch": [gpt2.BATCH, gpt2.SEQ],
        "parameters": sum(p.numel() for p in model.parameters()),
        "import_s": t_import - T0,
        "model_s": t_model - t_import,
        "first_step_s": step_s[0],
        "to_first_step_s": t_first - T0,
        "step_s": step_s,
        "losses": losses,
    }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"torch_gpt2: {a.mode}: first compiled step {res['to_first_step_s']:.2f} s from start; "
          f"last loss {losses[-1]}", flush=True)


if __name__ == "__main__":
    main()
