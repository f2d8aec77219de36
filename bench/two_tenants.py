#!/usr/bin/env python3
"""Two tenants on one GPU (issue 22 item 3): the clients and the report of
bench/two_tenants.sh. The model is examples/transformer/gpt2.py's GPT-2-small
(12 layers, d=768, 124M parameters), built locally: nothing is downloaded.

    two_tenants.py gen   --out F [--tokens N] [--warmup N] [--start-file F] [--done-file F]
    two_tenants.py train --out F [--seconds S] [--warmup N] [--ready-file F] [--stop-file F]
    two_tenants.py report --dir D --out REPORT.md

gen: greedy generation, batch 1, from a 32-token prompt, 64 new tokens a round
(no KV cache: each token is a forward pass over the sequence so far, so every
round has the same shape); each token's time from the call to the token on the
host (argmax .item() synchronises). Writes the per-token times and the window
[start, end] of the measured tokens (time.time(), the same clock as train's).
train: gpt2.py's training step (batch 8, 256 tokens, Adam); writes each step's
end time, until --seconds or the stop file.
report: the figures of the runs in D against the targets (generation p50 and p99
together <= 1.25x alone; training together >= 60% of alone)."""
import argparse
import json
import os
import sys
import time

TARGET_LAT, TARGET_THR = 1.25, 0.60


def model_and_args():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "transformer"))
    import torch
    import gpt2
    torch.manual_seed(0)
    return torch, gpt2


def cmd_gen(a):
    torch, gpt2 = model_and_args()
    model = gpt2.GPT2().cuda().eval()
    prompt = torch.arange(32, device="cuda").unsqueeze(0)
    times = []
    with torch.no_grad():
        def round_(n, keep):
            seq = prompt
            for _ in range(n):
                t0 = time.perf_counter()
                nxt = model(seq)[:, -1, :].argmax(-1)
                tok = int(nxt.item())
                dt = time.perf_counter() - t0
                if keep:
                    times.append(dt)
                seq = torch.cat([seq, torch.tensor([[tok]], device="cuda")], dim=1)
        round_(a.warmup, False)
        if a.start_file:  # the other tenant is warm: measure from here
            give_up = time.time() + 180
            while not os.path.exists(a.start_file) and time.time() < give_up:
                time.sleep(0.05)
        start = time.time()
        while len(times) < a.tokens:
            round_(min(64, a.tokens - len(times)), True)
        end = time.time()
    if a.done_file:
        open(a.done_file, "w").close()
    json.dump({"token_s": times, "start": start, "end": end}, open(a.out, "w"))


def cmd_train(a):
    torch, gpt2 = model_and_args()
    from common import lm_loss, tokens
    model = gpt2.GPT2().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(0)
    ends = []
    step = 0
    t_stop = None
    while True:
        opt.zero_grad(set_to_none=True)
        seqs = tokens(gen, gpt2.BATCH, gpt2.SEQ, gpt2.VOCAB, "cuda")
        loss = lm_loss(model(seqs[:, :-1]), seqs[:, 1:])
        loss.backward()
        opt.step()
        loss.item()
        step += 1
        now = time.time()
        if step == a.warmup:
            if a.ready_file:
                open(a.ready_file, "w").close()
            t_stop = now + a.seconds
        if step > a.warmup:
            ends.append(now)
        if a.stop_file and os.path.exists(a.stop_file):
            break
        if not a.stop_file and t_stop and now >= t_stop:
            break
        if a.stop_file and t_stop and now >= t_stop + 300:
            break  # a generation client that never ends
    json.dump({"step_end": ends, "warm_at": ends[0] if ends else None}, open(a.out, "w"))


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))] if s else float("nan")


def steps_per_s(ends, lo=None, hi=None):
    e = [t for t in ends if (lo is None or t >= lo) and (hi is None or t <= hi)]
    return (len(e) - 1) / (e[-1] - e[0]) if len(e) >= 2 else float("nan")


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def cmd_report(a):
    g_alone, t_alone = load(a.dir, "gen-alone.json"), load(a.dir, "train-alone.json")
    rows, lines, ok = [], [], True
    gp50 = pct(g_alone["token_s"], 50) if g_alone else float("nan")
    gp99 = pct(g_alone["token_s"], 99) if g_alone else float("nan")
    tsps = steps_per_s(t_alone["step_end"]) if t_alone else float("nan")
    lines.append("| run | generation p50 (ms) | p99 (ms) | p50 ratio | p99 ratio | training steps/s | of alone | "
                 "targets met |")
    lines.append("|---|---|---|---|---|---|---|---|")
    lines.append("| alone | %.2f | %.2f | 1 | 1 | %.3f | 1 | - |" % (gp50 * 1e3, gp99 * 1e3, tsps))
    summary = []
    met_runs = []
    runs = []
    if os.path.exists(os.path.join(a.dir, "runs.txt")):
        runs = [l.rstrip("\n").split(" ", 1) for l in open(os.path.join(a.dir, "runs.txt")) if l.strip()]
    opts = {r[0]: (r[1] if len(r) > 1 else "") for r in runs}
    for mode in [r[0] for r in runs] or ["admit", "off"]:
        label = "together, %s (%s)" % (mode, opts.get(mode, "").strip() or "defaults")
        g, t = load(a.dir, "gen-%s.json" % mode), load(a.dir, "train-%s.json" % mode)
        if not g or not t:
            lines.append("| %s | (did not run) | | | | | | no |" % label)
            ok = ok and mode != "admit"
            continue
        p50, p99 = pct(g["token_s"], 50), pct(g["token_s"], 99)
        sps = steps_per_s(t["step_end"], g["start"], g["end"])
        r50, r99, rt = p50 / gp50, p99 / gp99, sps / tsps
        met = r50 <= TARGET_LAT and r99 <= TARGET_LAT and rt >= TARGET_THR
        if mode == "admit":
            ok = ok and met
        if met:
            met_runs.append(mode)
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f | %.3f | %.2f | %s |" %
                     (label, p50 * 1e3, p99 * 1e3, r50, r99, sps, rt, "yes" if met else "no"))
        summary.append("%s: p50 %.2fx p99 %.2fx train %.0f%%" % (mode, r50, r99, 100 * rt))
    extra = ""
    for mode in [r[0] for r in runs] or ["admit", "off"]:
        p = os.path.join(a.dir, "smi-%s.json" % mode)
        if os.path.exists(p):
            try:
                srv = json.load(open(p))["servers"][0]
                ts = srv.get("tenants", [])
                extra += "\nremote-smi after the together run %s:\n\n" % mode
                if srv.get("mps", "off") != "off":
                    extra += "- MPS control daemon: %s\n" % srv["mps"]
                for t in ts:
                    extra += ("- %s (%s): holds %s, of them at the bound %s, held %.2f s, waits for work ahead %s\n" %
                              (t["name"], t["class"], t.get("holds"), t.get("hold_timeouts"),
                               t.get("held_seconds", 0.0), t.get("ahead_waits")))
            except (ValueError, KeyError, IndexError):
                pass
        p = os.path.join(a.dir, "mps-%s.txt" % mode)
        if os.path.exists(p):  # the MPS server's log of its clients' priorities (two_tenants.sh)
            said = [l.rstrip() for l in open(p) if l.strip()]
            extra += "- the MPS server's log, client priorities: %s\n" % ("; ".join(said[-4:]) or
                                                                        "none logged (MPS not in force?)")
    meta = open(os.path.join(a.dir, "meta.txt")).read() if os.path.exists(os.path.join(a.dir, "meta.txt")) else ""
    text = ("# Two tenants on one GPU: GPT-2-small generation (latency) and training (batch)\n\n" + meta +
            "\nTargets: generation p50 and p99 together <= %.2fx alone; training together >= %d%% of alone.\n\n" %
            (TARGET_LAT, TARGET_THR * 100) + "\n".join(lines) + "\n" + extra +
            "\nVerdict (run admit, the defaults): %s\n" % ("targets met" if ok else "targets NOT met") +
            "Runs that meet both targets: %s\n" % (", ".join(met_runs) or "none"))
    open(a.out, "w").write(text)
    print(text)
    print("two-tenants: %s; met by: %s; %s" % ("targets met" if ok else "targets NOT met", ",".join(met_runs) or "none",
                                               "; ".join(summary)))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    # (flag, type, default) of each client; files are paths
    spec = {"gen": [("--tokens", int, 960), ("--warmup", int, 8), ("--start-file", str, None),
                    ("--done-file", str, None)],
            "train": [("--seconds", float, 10), ("--warmup", int, 3), ("--ready-file", str, None),
                      ("--stop-file", str, None)]}
    for name, flags in spec.items():
        c = sub.add_parser(name)
        c.add_argument("--out", required=True)
        for flag, typ, default in flags:
            c.add_argument(flag, type=typ, default=default)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--out", required=True)
    a = p.parse_args()
    {"gen": cmd_gen, "train": cmd_train, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
