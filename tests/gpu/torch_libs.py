#!/usr/bin/env python3
"""The CUDA libraries PyTorch reaches through the driver API (cuDNN, cuFFT,
cuSOLVER, cuSPARSE, cuRAND) and its own kernels, each as a small deterministic
workload whose results are printed as digests: run once locally and once
through libremote.so, the two outputs must be equal line for line.

  python3 torch_libs.py [--only NAME[,NAME...]] [--bench STEPS]

Lines "time ..." are timings (ms), not compared. --bench adds ResNet-50
training steps in bf16 autocast with channels_last, timed after a warm-up.
"""
import argparse
import hashlib
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.use_deterministic_algorithms(True, warn_only=True)
dev = torch.device("cuda")


def digest(*ts):
    h = hashlib.sha256()
    for t in ts:
        t = t.detach()
        if t.is_sparse or t.layout != torch.strided:
            t = t.to_dense()
        # flattened: a channels_last tensor with 1x1 spatial dims counts as
        # contiguous but keeps strides that view() refuses
        t = t.cpu().flatten()
        h.update(t.view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool else t.numpy().tobytes())
    return h.hexdigest()[:16]


def t_randn():
    torch.manual_seed(1)
    a = torch.randn(1 << 16, device=dev)
    b = torch.rand(1 << 16, device=dev)
    d = torch.nn.functional.dropout(torch.ones(1 << 16, device=dev), p=0.3, training=True)
    return f"randn {digest(a)} rand {digest(b)} dropout {digest(d)} kept {int((d != 0).sum())}"


def t_conv():
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).to(dev)
    x = torch.randn(8, 16, 32, 32, device=dev, requires_grad=True)
    y = conv(x)
    y.square().mean().backward()
    return f"conv2d y {digest(y)} dx {digest(x.grad)} dw {digest(conv.weight.grad)}"


def t_lstm():
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(32, 64, num_layers=2, batch_first=True).to(dev)
    x = torch.randn(4, 20, 32, device=dev, requires_grad=True)
    y, (h, c) = lstm(x)
    y.sum().backward()
    return f"lstm y {digest(y)} h {digest(h)} dx {digest(x.grad)}"


def t_fft():
    torch.manual_seed(4)
    x = torch.randn(4096, device=dev)
    r = torch.fft.rfft(x)
    i = torch.fft.irfft(r, n=4096)
    z = torch.fft.fft2(torch.randn(64, 64, dtype=torch.complex64, device=dev))
    return f"rfft {digest(r)} irfft {digest(i)} fft2 {digest(z)}"


def t_linalg():
    torch.manual_seed(5)
    a = torch.randn(64, 64, device=dev, dtype=torch.float64)
    spd = a @ a.T + 64 * torch.eye(64, device=dev, dtype=torch.float64)
    b = torch.randn(64, 8, device=dev, dtype=torch.float64)
    ch = torch.linalg.cholesky(spd)
    so = torch.linalg.solve(spd, b)
    q, r = torch.linalg.qr(a)
    ev = torch.linalg.eigvalsh(spd)
    return f"cholesky {digest(ch)} solve {digest(so)} qr {digest(q, r)} eigvalsh {digest(ev)}"


def t_sparse():
    torch.manual_seed(6)
    d = torch.randn(128, 128, device=dev)
    d[d.abs() < 1.0] = 0
    csr = d.to_sparse_csr()
    m = torch.randn(128, 16, device=dev)
    y = csr @ m
    # cuSPARSE's SpMM is not deterministic (two local runs differ in the last
    # bits): judged against float64 instead of by digest
    ref = d.double() @ m.double()
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    return f"csr@dense within 1e-6 of float64: {err < 1e-6} nnz {csr._nnz()}"


def resnet_steps(steps, timed):
    import torchvision
    torch.manual_seed(7)
    model = torchvision.models.resnet50(num_classes=100).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (32,), device=dev)
    losses, times = [], []
    for s in range(steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return losses, times, model


def t_resnet():
    losses, _, model = resnet_steps(3, False)
    return "resnet50 losses " + " ".join(repr(v) for v in losses) + \
        f" params {digest(*[p for p in model.parameters()][:8])}"


TESTS = [("randn", t_randn), ("conv", t_conv), ("lstm", t_lstm), ("fft", t_fft), ("linalg", t_linalg),
         ("sparse", t_sparse), ("resnet", t_resnet)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--bench", type=int, default=0)
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    fails = 0
    for name, fn in TESTS:
        if only and name not in only:
            continue
        t = time.perf_counter()
        try:
            print(f"{name}: {fn()}", flush=True)
        except Exception as e:  # one library failing must not hide the others
            fails += 1
            print(f"{name}: FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            traceback.print_exc(file=sys.stderr)
        print(f"time {name} {(time.perf_counter() - t) * 1e3:.1f}", flush=True)
    if a.bench:
        _, times, _ = resnet_steps(a.bench + 5, True)
        ts = sorted(times[5:])
        print(f"time resnet50_step_median {ts[len(ts) // 2]:.2f}", flush=True)
        print(f"time resnet50_step_mean {sum(ts) / len(ts):.2f}", flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
