#!/usr/bin/env python3
"""Models a user brings, none of them written for this project: torchvision
classifiers, detection and segmentation (torchvision's own CUDA operators),
transformers models built from their configuration classes (BERT, T5, Llama,
Whisper, ViT), mixed precision with a gradient scaler, and torch.compile of a
convolutional network. Each case runs locally and through libremote.so in the
GPU-less namespace; its "result" lines are compared.

  zoo.py WRAPPER PORT LIBREMOTE OUT.md

Cases run with deterministic algorithms where PyTorch has them, so local and
remote should match bit for bit. Where they differ, the case runs locally once
more: if the two local runs differ too, the case is judged by its numbers (the
largest relative difference remote vs local against local vs local again),
and the report says so. RG_ZOO_ONLY="bert,llama" runs only the cases whose name
holds one of these words. Remote stderr is kept in zoo-logs/ beside OUT.md.
"""
import os
import re
import subprocess
import sys
import time

wrap, port, lib, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
driver_dir = os.path.join(os.path.dirname(lib), "driver")
logs = os.path.join(os.path.dirname(os.path.abspath(out)), "zoo-logs")
os.makedirs(logs, exist_ok=True)

PRELUDE = """
import os, hashlib, torch
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
def digest(t):
    t = t.detach().float().contiguous().cpu()
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
def pdigest(m):
    h = hashlib.sha256()
    for p in m.parameters():
        h.update(p.detach().float().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
def train(m, batch, loss_fn, steps=2, lr=1e-3):
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m, batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
"""

CASES = {
    "torchvision classifiers": """
import torchvision.models as tvm
x = torch.randn(4, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (4,), device="cuda")
ce = torch.nn.CrossEntropyLoss()
for name in ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "densenet121",
             "regnet_y_400mf", "vit_b_16", "swin_t"]:
    torch.manual_seed(0)
    m = getattr(tvm, name)(weights=None).cuda().train()
    losses = train(m, (x, y), lambda m, b: ce(m(b[0]), b[1]))
    print("result", name, " ".join(f"{l:.9g}" for l in losses), pdigest(m))
""",
    "torchvision detection and segmentation": """
import torchvision.models.detection as det
import torchvision.models.segmentation as seg
import torchvision.ops as ops
torch.manual_seed(0)
m = det.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=5).cuda().eval()
imgs = [torch.rand(3, 320, 320, device="cuda") for _ in range(2)]
with torch.no_grad():
    r = m(imgs)
for i, d in enumerate(r):
    print("result detection", i, d["boxes"].shape[0], digest(d["boxes"]), digest(d["scores"]))
b = torch.rand(500, 4, device="cuda") * 100
b[:, 2:] += b[:, :2]
s = torch.rand(500, device="cuda")
print("result nms", digest(ops.nms(b, s, 0.5).float()))
f = torch.randn(2, 16, 32, 32, device="cuda")
rois = torch.tensor([[0, 1., 1., 20., 20.], [1, 5., 5., 30., 25.]], device="cuda")
print("result roi_align", digest(ops.roi_align(f, rois, (7, 7), 1.0, 2)))
torch.manual_seed(0)
sm = seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4).cuda().train()
x = torch.randn(2, 3, 256, 256, device="cuda")
t = torch.randint(0, 4, (2, 256, 256), device="cuda")
ce = torch.nn.CrossEntropyLoss()
losses = train(sm, (x, t), lambda m, b: ce(m(b[0])["out"], b[1]))
print("result deeplabv3", " ".join(f"{l:.9g}" for l in losses))
""",
    "transformers BERT and ViT": """
from transformers import BertConfig, BertForMaskedLM, ViTConfig, ViTForImageClassification
torch.manual_seed(0)
m = BertForMaskedLM(BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                               intermediate_size=1024, vocab_size=8000)).cuda().train()
ids = torch.randint(0, 8000, (8, 128), device="cuda")
losses = train(m, ids, lambda m, b: m(input_ids=b, labels=b).loss, steps=3)
print("result bert", " ".join(f"{l:.9g}" for l in losses), pdigest(m))
torch.manual_seed(0)
v = ViTForImageClassification(ViTConfig(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                                        intermediate_size=768, image_size=64, patch_size=8,
                                        num_labels=10)).cuda().train()
px = torch.randn(8, 3, 64, 64, device="cuda")
lab = torch.randint(0, 10, (8,), device="cuda")
losses = train(v, (px, lab), lambda m, b: m(pixel_values=b[0], labels=b[1]).loss, steps=3)
print("result vit", " ".join(f"{l:.9g}" for l in losses), pdigest(v))
""",
    "transformers Llama (bf16, SDPA, KV cache)": """
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=4096, max_position_embeddings=512,
                  attn_implementation="sdpa")
m = LlamaForCausalLM(cfg).cuda().to(torch.bfloat16).train()
ids = torch.randint(0, 4096, (4, 128), device="cuda")
losses = train(m, ids, lambda m, b: m(input_ids=b, labels=b).loss, steps=3)
print("result llama train", " ".join(f"{l:.9g}" for l in losses), pdigest(m))
m.eval()
with torch.no_grad():
    g = m.generate(ids[:2, :16], max_new_tokens=24, do_sample=False, use_cache=True)
print("result llama generate", g[:, 16:].tolist())
""",
    "transformers T5 and Whisper": """
from transformers import T5Config, T5ForConditionalGeneration, WhisperConfig, WhisperForConditionalGeneration
torch.manual_seed(0)
t5 = T5ForConditionalGeneration(T5Config(d_model=256, d_ff=1024, num_layers=3, num_heads=4,
                                         vocab_size=4000, decoder_start_token_id=0)).cuda().train()
src = torch.randint(1, 4000, (4, 64), device="cuda")
tgt = torch.randint(1, 4000, (4, 32), device="cuda")
losses = train(t5, (src, tgt), lambda m, b: m(input_ids=b[0], labels=b[1]).loss, steps=3)
print("result t5 train", " ".join(f"{l:.9g}" for l in losses))
t5.eval()
with torch.no_grad():
    g = t5.generate(src[:2], max_new_tokens=16, do_sample=False)
print("result t5 generate", g.tolist())
torch.manual_seed(0)
w = WhisperForConditionalGeneration(WhisperConfig(d_model=128, encoder_layers=2, decoder_layers=2,
                                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                                  encoder_ffn_dim=256, decoder_ffn_dim=256, vocab_size=1000,
                                                  num_mel_bins=80, max_source_positions=100,
                                                  max_target_positions=64, pad_token_id=0, bos_token_id=1,
                                                  eos_token_id=2, decoder_start_token_id=1)).cuda().eval()
feats = torch.randn(2, 80, 200, device="cuda")
with torch.no_grad():
    out = w(input_features=feats, decoder_input_ids=torch.ones(2, 8, dtype=torch.long, device="cuda"))
print("result whisper", digest(out.logits))
""",
    "mixed precision (fp16 GradScaler, bf16 autocast)": """
import torchvision.models as tvm
m = tvm.resnet18(weights=None, num_classes=10).cuda().train()
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler("cuda", init_scale=2.0**24)
x = torch.randn(16, 3, 64, 64, device="cuda")
y = torch.randint(0, 10, (16,), device="cuda")
for i in range(4):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print("result fp16 step", i, f"{loss.item():.9g}", scaler.get_scale())
with torch.autocast("cuda", dtype=torch.bfloat16):
    print("result bf16", digest(m(x)))
""",
    "torch.compile of a ResNet training step": """
import torchvision.models as tvm
m = tvm.resnet18(weights=None, num_classes=10).cuda().train()
opt = torch.optim.SGD(m.parameters(), lr=0.05)
x = torch.randn(16, 3, 64, 64, device="cuda")
y = torch.randint(0, 10, (16,), device="cuda")
def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss
cstep = torch.compile(step)
print("result compiled", " ".join(f"{cstep().item():.9g}" for _ in range(3)), pdigest(m))
""",
}


def run(src, remote, timeout=300):
    cmd = [sys.executable, "-c", PRELUDE + src]
    pre = []
    if remote:
        pre = wrap.split() + ["env", f"REMOTE_GPU=127.0.0.1:{port}", f"LD_PRELOAD={lib}",
                              f"LD_LIBRARY_PATH={driver_dir}", f"TRITON_LIBCUDA_PATH={driver_dir}"]
    t = time.time()
    try:
        p = subprocess.run(pre + cmd, capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", e.stdout or "", e.stderr or ""
        so = so.decode(errors="replace") if isinstance(so, bytes) else so
        se = se.decode(errors="replace") if isinstance(se, bytes) else se
    return rc, [l for l in so.splitlines() if l.startswith("result")], se, time.time() - t


NUM = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def max_rel(a, b):
    """The largest relative difference between the numbers of two outputs of the
    same shape (None where their words differ otherwise, e.g. digests)."""
    worst = 0.0
    if len(a) != len(b):
        return None
    for la, lb in zip(a, b):
        na, nb = NUM.findall(la), NUM.findall(lb)
        if NUM.sub("#", la) != NUM.sub("#", lb) or len(na) != len(nb):
            return None
        for x, y in zip(na, nb):
            x, y = float(x), float(y)
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-30))
    return worst


def first_error(err):
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith((" ", "Traceback"))]
    return (lines[-1] if lines else "")[:200].replace("|", "/")


only = [w.strip().lower() for w in os.environ.get("RG_ZOO_ONLY", "").split(",") if w.strip()]
rows, failed = [], 0
for name, src in CASES.items():
    if only and not any(w in name.lower() for w in only):
        continue
    lrc, lout, lerr, lt = run(src, False)
    rrc, rout, rerr, rt = run(src, True)
    safe = re.sub(r"[^A-Za-z0-9]+", "_", name)
    with open(os.path.join(logs, safe + ".remote.err"), "w") as f:
        f.write(rerr[-262144:])
    judged = "bitwise"
    ok = lrc == 0 and rrc == 0 and lout == rout and lout
    if lrc == 0 and rrc == 0 and lout and not ok:
        # Differs: is the local run itself reproducible?
        l2rc, l2out, _, _ = run(src, False)
        rl, ll = max_rel(rout, lout), max_rel(l2out, lout)
        if l2rc == 0 and l2out != lout and rl is not None and ll is not None:
            judged = f"numbers: remote/local {rl:.2e}, local/local {ll:.2e}"
            ok = rl <= max(ll * 10, 1e-6)
        else:
            judged = "bitwise (local reproducible)" if l2out == lout else "words differ"
        for tag, o in (("local", lout), ("remote", rout), ("local2", l2out)):
            with open(os.path.join(logs, f"{safe}.{tag}.out"), "w") as f:
                f.write("\n".join(o) + "\n")
    failed += not ok
    err = "" if ok else (first_error(rerr) if rrc != 0 else first_error(lerr) if lrc != 0 else "output differs")
    rows.append((name, lrc, rrc, "yes" if ok else "NO", judged, f"{lt:.0f}/{rt:.0f}", err,
                 "; ".join(lout)[:300].replace("|", "/")))
    print(f"zoo: {name}: local {lrc} remote {rrc} {'PASS' if ok else 'FAIL'} ({judged}) {err}", flush=True)

with open(out, "w") as f:
    f.write("# Models a user brings, through libremote.so (tests/gpu/zoo.py)\n\n")
    f.write("Each case locally and remotely (GPU-less namespace), deterministic algorithms on; "
            "*equal*: its result lines equal, or, where a second local run differs too, within "
            "ten times the local run-to-run difference.\n\n")
    f.write("| case | local exit | remote exit | equal | judged by | seconds local/remote | remote's error | local result |\n")
    f.write("|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write("| " + " | ".join(str(c) for c in r) + " |\n")
print(f"zoo: {len(rows) - failed} of {len(rows)} equal")
sys.exit(1 if failed else 0)
