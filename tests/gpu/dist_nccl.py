"""torch.distributed with the NCCL backend, one process per GPU, for
tests/gpu/multigpu.sh. Run under torchrun (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR/PORT from it), locally or through libremote.so, where each rank sees
one device (its own server's GPU: cuda:0) instead of all of them.

  dist_nccl.py check            collectives: a digest per operation and rank
  dist_nccl.py busbw [--mib N]  all-reduce bus bandwidth of N MiB of float32
  dist_nccl.py train [--fsdp] [--steps N]
                                DDP (or FSDP2) training of examples/transformer/gpt2.py's
                                model: per-step losses, exactly (repr), and step time

Every line a rank prints starts with "rank R "; multigpu.sh compares the local and
the remote outputs.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "transformer")


def setup():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    # through libremote.so each rank has one device: its server's GPU
    dev = torch.device("cuda", local if torch.cuda.device_count() > 1 else 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    return rank, world, dev


def say(rank, text):
    # One write(2) per line: the ranks share the pipe, and print() under an
    # unbuffered stdout writes the text and its newline apart (lines of two
    # ranks ran together on 2 H100s).
    sys.stdout.flush()
    os.write(1, f"rank {rank} {text}\n".encode())


def digest(t):
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def check(rank, world, dev):
    g = torch.Generator(device="cpu").manual_seed(1234 + rank)
    x = torch.randn(1 << 20, generator=g).to(dev)
    say(rank, f"input {digest(x)}")

    y = x.clone()
    dist.all_reduce(y)
    say(rank, f"all_reduce_sum {digest(y)}")
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    say(rank, f"all_reduce_max {digest(y)}")
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.AVG)
    say(rank, f"all_reduce_avg {digest(y)}")
    y = x.to(torch.bfloat16)
    dist.all_reduce(y)
    say(rank, f"all_reduce_bf16 {digest(y)}")
    y = x.clone()
    dist.broadcast(y, src=world - 1)
    say(rank, f"broadcast {digest(y)}")
    out = torch.empty(world * x.numel(), device=dev)
    dist.all_gather_into_tensor(out, x)
    say(rank, f"all_gather {digest(out)}")
    part = torch.empty(x.numel() // world, device=dev)
    dist.reduce_scatter_tensor(part, x)
    say(rank, f"reduce_scatter {digest(part)}")
    # point to point in a group (ncclGroupStart/End around send and recv)
    recv = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    say(rank, f"send_recv {digest(recv)}")
    # premultiplied sum (ncclRedOpCreatePreMulSum), as FSDP uses it
    try:
        y = x.clone()
        dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.25))
        say(rank, f"premul_sum {digest(y)}")
    except Exception as e:  # noqa: BLE001 (what failed is the result)
        say(rank, f"premul_sum error {type(e).__name__}: {e}")
    # an all-reduce captured in a CUDA graph, replayed twice
    try:
        y = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            dist.all_reduce(y)  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(s)
        y.copy_(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            dist.all_reduce(y)
        graph.replay()
        graph.replay()
        torch.cuda.synchronize()
        say(rank, f"graph_all_reduce {digest(y)}")
    except Exception as e:  # noqa: BLE001
        say(rank, f"graph_all_reduce error {type(e).__name__}: {e}")
    dist.barrier()
    say(rank, "check done")


def busbw(rank, world, dev, mib, iters):
    n = mib * (1 << 20) // 4
    x = torch.ones(n, device=dev)
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / iters
    bus = 2 * (world - 1) / world * n * 4 / t / 1e9
    say(rank, f"busbw {mib} MiB float32: {t * 1e3:.3f} ms per all-reduce, {bus:.1f} GB/s bus bandwidth")


def train(rank, world, dev, steps, fsdp, deterministic):
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    sys.path.insert(0, EXAMPLES)
    import gpt2  # noqa: E402 (examples/transformer/gpt2.py)
    from common import lm_loss, tokens  # noqa: E402

    torch.manual_seed(0)  # the same initial weights on every rank
    model = gpt2.GPT2().to(dev)
    if fsdp:
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    else:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev])
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    label = "fsdp" if fsdp else "ddp"
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        seqs = tokens(gen, gpt2.BATCH, gpt2.SEQ, gpt2.VOCAB, dev)
        loss = lm_loss(model(seqs[:, :-1]), seqs[:, 1:])
        loss.backward()
        opt.step()
        value = loss.item()
        times.append(time.perf_counter() - t0)
        say(rank, f"{label} step {step} loss {value!r}")
    # FSDP2's parameters are shards (DTensor): gathered whole, on every rank alike
    w = sum((p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().sum().item()
            for p in model.parameters())
    say(rank, f"{label} weights sum {w!r}")
    if len(times) > 3:
        say(rank, f"{label} mean step time {sum(times[3:]) / len(times[3:]) * 1e3:.3f} ms")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["check", "busbw", "train"])
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--nondeterministic", action="store_true")
    a = p.parse_args()
    rank, world, dev = setup()
    say(rank, f"world {world} device {dev} {torch.cuda.get_device_name(dev)} nccl {torch.cuda.nccl.version()}")
    if a.what == "check":
        check(rank, world, dev)
    elif a.what == "busbw":
        busbw(rank, world, dev, a.mib, a.iters)
    else:
        train(rank, world, dev, a.steps, a.fsdp, not a.nondeterministic)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
