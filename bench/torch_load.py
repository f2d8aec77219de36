#!/usr/bin/env python3
"""Issue 20's model-load benchmark, one run: a torch state dict of mixed sizes (a
few large tensors, many medium and small ones, fp32 and bf16) moved to the GPU.

  torch_load.py make STATE.pt [--gib 4] [--seed 0]     # once, on the CPU
  torch_load.py run STATE.pt --out RUN.json [--device cuda]

`make` fills the tensors from a fixed seed and torch.save's them. `run` times
torch.load of the file (from the page cache after the first run: the CPU's part,
the same locally and remotely), then the two ways a model reaches the GPU:
`{k: v.to(device)}` of the whole dict (synchronised at the end), and
`load_state_dict` into a module whose parameters were made on the device. Each
ends with a digest of what arrived (per tensor, the sum of its bits as int64 on
the device), so a remote run is checked against the local one.
"""
import argparse
import json
import time

import torch

MIB = 1 << 20
# (share of the bytes, bytes per tensor, dtype): a few large tensors (embeddings),
# many medium (projection matrices), many small (norms, biases), some tiny.
RECIPE = [
    (0.25, 512 * MIB, torch.float32),
    (0.45, 24 * MIB, torch.float32),
    (0.10, 24 * MIB, torch.bfloat16),
    (0.19, 3 * MIB // 2, torch.float32),
    (0.01, 16 << 10, torch.float32),
]


def shapes(gib):
    """[(name, shape, dtype)] of about gib GiB."""
    total = gib * (1 << 30)
    out = []
    for i, (share, size, dtype) in enumerate(RECIPE):
        size = min(size, max(4096, int(total * share)))
        n = max(1, round(total * share / size))
        elem = torch.tensor([], dtype=dtype).element_size()
        cols = 1024 if size >= 1024 * 1024 * elem else 256
        rows = max(1, size // elem // cols)
        out += [(f"group{i}.t{j}", (rows, cols), dtype) for j in range(n)]
    return out


def make(path, gib, seed):
    g = torch.Generator().manual_seed(seed)
    sd = {name: torch.rand(shape, generator=g, dtype=dtype) for name, shape, dtype in shapes(gib)}
    torch.save(sd, path)
    n = sum(t.numel() * t.element_size() for t in sd.values())
    print(f"torch_load: made {len(sd)} tensors, {n / (1 << 30):.2f} GiB, in {path}", flush=True)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def digest(tensors):
    """Per tensor, the sum of its bits as int64 (exact, on the device), then one copy back."""
    sums = []
    for t in tensors:
        bits = t.detach().contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)
        sums.append(bits.sum(dtype=torch.int64))
    return torch.stack(sums).cpu().tolist()


class Holder(torch.nn.Module):
    """Parameters named as the state dict's keys ("group0.t0" -> group0 / t0)."""

    def __init__(self, sd, device):
        super().__init__()
        for key, t in sd.items():
            group, name = key.split(".")
            if not hasattr(self, group):
                self.add_module(group, torch.nn.Module())
            getattr(self, group).register_parameter(
                name, torch.nn.Parameter(torch.empty(t.shape, dtype=t.dtype, device=device), requires_grad=False))


def run(path, out, device):
    t = time.perf_counter()
    sd = torch.load(path)
    load_s = time.perf_counter() - t
    nbytes = sum(v.numel() * v.element_size() for v in sd.values())
    torch.empty(1, device=device)  # the context, outside the timings
    sync(device)

    t = time.perf_counter()
    moved = {k: v.to(device) for k, v in sd.items()}
    sync(device)
    to_s = time.perf_counter() - t
    d_to = digest(moved.values())
    del moved

    model = Holder(sd, device)
    sync(device)
    t = time.perf_counter()
    model.load_state_dict(sd)
    sync(device)
    lsd_s = time.perf_counter() - t
    d_lsd = digest(model.state_dict().values())
    res = {
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else device,
        "torch": torch.__version__,
        "tensors": len(sd),
        "bytes": nbytes,
        "sizes": sorted({v.numel() * v.element_size() for v in sd.values()}),
        "load_s": load_s,
        "to_s": to_s,
        "load_state_dict_s": lsd_s,
        "digest_to": d_to,
        "digest_load_state_dict": d_lsd,
    }
    with open(out, "w") as f:
        json.dump(res, f)
    print(f"torch_load: {len(sd)} tensors, {nbytes / 1e9:.2f} GB: .to {to_s:.3f} s "
          f"({nbytes / to_s / 1e9:.2f} GB/s), load_state_dict {lsd_s:.3f} s", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("path")
    m.add_argument("--gib", type=float, default=4.0)
    m.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run")
    r.add_argument("path")
    r.add_argument("--out", required=True)
    r.add_argument("--device", default="cuda")
    a = p.parse_args()
    if a.cmd == "make":
        make(a.path, a.gib, a.seed)
    else:
        run(a.path, a.out, a.device)


if __name__ == "__main__":
    main()
