"""A first look at stock PyTorch through libremote.so: what works, what is asked
for that we do not forward yet. Prints one line per step; never raises."""
import os
import sys
import traceback


def step(name, fn):
    try:
        out = fn()
        print(f"ok   {name}: {out}", flush=True)
        return True
    except Exception as e:  # report and go on: the point is to see everything
        print(f"FAIL {name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
        if os.environ.get("PROBE_TRACE"):
            traceback.print_exc()
        return False


import torch  # noqa: E402

step("is_available", lambda: torch.cuda.is_available())
step("device", lambda: (torch.cuda.device_count(), torch.cuda.get_device_name(0)))
torch.manual_seed(0)
step("tensor to gpu", lambda: torch.arange(10, dtype=torch.float32).cuda().sum().item())
step("elementwise", lambda: (torch.ones(1000, device="cuda") * 3 + 1).sum().item())
step("randn", lambda: torch.randn(1000, device="cuda").abs().sum().item())
step("matmul f32", lambda: (torch.ones(64, 64, device="cuda") @ torch.ones(64, 64, device="cuda")).sum().item())
step("matmul bf16", lambda: (torch.ones(64, 64, device="cuda", dtype=torch.bfloat16) @
                             torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)).float().sum().item())


def train():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).cuda()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-3)
    x = torch.randn(8, 16, 64, device="cuda")
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = layer(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 6))
    return losses


step("transformer train", train)
step("synchronize", lambda: torch.cuda.synchronize())
print("probe done", flush=True)
sys.stdout.flush()
os._exit(0)
