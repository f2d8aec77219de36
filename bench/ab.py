#!/usr/bin/env python3
"""bench/ab.py: two builds of remote-gpu compared, from remote-bench runs made in
alternation in one call (bench/run-gpu.sh with RG_AB_GPUD/RG_AB_LIB).

    ab.py --label-a 8946959 --label-b 4f1e2d3 --a a1.json --a a2.json \
          --b b1.json --b b2.json --md out.md [--meta meta.json]

Every figure is the median over a build's runs (each run's own figure is already
a median over its iterations); the table gives each run's figure too, so the
reader sees the spread, and B/A: above 1 is better for rates, below 1 for times.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import copy_rows, load, rtt_rows, size_name  # noqa: E402


def figures(run):
    """(key, label, value, better) of one remote-bench JSON: 'lower' or 'higher'."""
    out = [(("rtt", call), f"{call} median (us)", r["median_us"], "lower") for call, r in rtt_rows(run).items()]
    launch = run.get("launch")
    if launch:
        out.append((("launch",), "launch rate (1/s)", launch["rate_per_s"], "higher"))
    for (d, mem, n), c in copy_rows(run).items():
        out.append((("copy", d, mem, n), f"{d} {mem} {size_name(n)} (GB/s)", c["gbps"], "higher"))
    return out


def fmt(v):
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label-a", required=True)
    ap.add_argument("--label-b", required=True)
    ap.add_argument("--a", action="append", default=[])
    ap.add_argument("--b", action="append", default=[])
    ap.add_argument("--meta")
    ap.add_argument("--md", required=True)
    args = ap.parse_args()
    if not args.a or not args.b:
        raise SystemExit("ab.py: runs of both builds are needed")
    runs = {side: [r for r in map(load, getattr(args, side)) if r] for side in ("a", "b")}
    order, label, better, vals = [], {}, {}, {"a": {}, "b": {}}
    for side in ("a", "b"):
        for run in runs[side]:
            for key, text, v, b in figures(run):
                if key not in label:
                    order.append(key)
                    label[key], better[key] = text, b
                vals[side].setdefault(key, []).append(v)
    meta = load(args.meta) or {}
    la, lb = args.label_a, args.label_b
    lines = [f"# remote-bench: {la} (A) against {lb} (B), one call, {meta.get('date', '')}", ""]
    if meta:
        lines += [f"- GPU: {meta.get('gpu_name', '?')}, driver {meta.get('driver', '?')}",
                  f"- CPU: {meta.get('cpu', '?')} ({meta.get('cpus', '?')} cores)"]
    lines += [f"- runs: A {len(runs['a'])}, B {len(runs['b'])}, alternating A, B, A, B; the same "
              "remote-bench binary (B's) through each build's libremote.so against its own "
              "remote-gpud, over 127.0.0.1 TCP, client GPU-less",
              "- B/A: B's median over A's; for times lower is better, for rates higher; "
              "a run of one build moves 5-20% from the next on this host, so only a "
              "difference larger than both builds' spreads means anything", "",
              f"| figure | A ({la}) runs | B ({lb}) runs | A median | B median | B/A |",
              "|---|---|---|---|---|---|"]
    for key in order:
        a, b = vals["a"].get(key), vals["b"].get(key)
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.2f}" if ma else "-"
        lines.append(f"| {label[key]} | {' '.join(fmt(x) for x in a)} | {' '.join(fmt(x) for x in b)} "
                     f"| {fmt(ma)} | {fmt(mb)} | {ratio} |")
    open(args.md, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
