"""Shared training loop for the Transformer examples: seeded, generated tokens, one
line per step with the loss printed exactly (repr of the float), so that a local
and a remote run can be compared bit for bit."""
import argparse
import os
import time

import torch
import torch.nn as nn


def parse_args(steps=50):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--time", action="store_true", help="print the mean step time (after 3 warm-up steps)")
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True): run to run, bit for bit")
    args = p.parse_args()
    if args.deterministic:
        # cuBLAS needs a fixed workspace layout to be deterministic; torch reads
        # this before the first cuBLAS call and refuses deterministic mode without it.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    return args


def tokens(gen, batch, seq, vocab, device):
    """Generated data with structure to learn: each sequence counts upward from a
    random start (mod vocab), so the next token is predictable."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    seqs = (start + torch.arange(seq + 1).unsqueeze(0)) % vocab
    return seqs.to(device)


def train(model, batch_fn, steps, lr=1e-3, time_steps=False, label="model"):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = batch_fn(step)
        loss.backward()
        opt.step()
        value = loss.item()  # synchronises: the step is done
        times.append(time.perf_counter() - t0)
        print(f"{label} step {step} loss {value!r}", flush=True)
    if time_steps and len(times) > 3:
        mean = sum(times[3:]) / len(times[3:])
        print(f"{label} mean step time {mean * 1e3:.3f} ms", flush=True)


def lm_loss(logits, target):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))
