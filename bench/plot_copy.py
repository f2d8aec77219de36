#!/usr/bin/env python3
"""Draw remote-bench's copy-bandwidth curves (bench/report.py's markdown reports)
as one PNG: a panel per kind of copy (H2D/D2H, pageable/pinned), GB/s by size,
each transport's remote copies against its own baselines (stream, acked) and
local CUDA.

  plot_copy.py -o OUT.png REPORT.md [REPORT.md ...]

A report's transport is named by its file (...-tls.md: tls, ...-shm.md: shm, else
tcp) or given as NAME=REPORT.md. tls runs share the TCP baselines, which are drawn
once. Exit status 3 when matplotlib is missing (run-gpu.sh notes it and goes on),
1 when a report holds no copy table.
"""
import argparse
import os
import re
import sys

KINDS = ["H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"]
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
COLORS = {"tcp": "tab:blue", "tls": "tab:purple", "shm": "tab:green"}


def transport_of(path):
    m = re.search(r"-(tls|shm)\.md$", path)
    return m.group(1) if m else "tcp"


def read_table(path):
    """{kind: {bytes: (local, remote, stream, acked)}} and the baselines' name, from
    the report's copy bandwidth table (missing values are None)."""
    rows, base, inside = {}, None, False
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                inside = line.startswith("## Copy bandwidth")
                continue
            if not inside or not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "size":
                base = cells[4].rsplit(" ", 1)[0]  # "TCP stream" -> "TCP"
                continue
            m = re.match(r"([\d.]+) (B|KiB|MiB|GiB)$", cells[0])
            if not m or len(cells) < 6:
                continue

            def num(c):
                try:
                    return float(c)
                except ValueError:
                    return None
            size = int(float(m.group(1)) * UNITS[m.group(2)])
            rows.setdefault(cells[1], {})[size] = tuple(num(c) for c in cells[2:6])
    return rows, base


def size_label(n):
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit]:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default=None)
    ap.add_argument("reports", nargs="+", help="REPORT.md or NAME=REPORT.md")
    a = ap.parse_args()
    runs = []
    for spec in a.reports:
        name, path = spec.split("=", 1) if "=" in spec and not os.path.exists(spec) else (None, spec)
        rows, base = read_table(path)
        if not rows:
            print(f"plot_copy.py: {path}: no copy bandwidth table", file=sys.stderr)
            return 1
        runs.append((name or transport_of(path), rows, base))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_copy.py: matplotlib missing ({e}): no plot drawn", file=sys.stderr)
        return 3

    fig, axes = plt.subplots(2, 2, figsize=(13, 9), sharex=True)
    for ax, kind in zip(axes.flat, KINDS):
        drawn_local, drawn_base = False, set()
        for name, rows, base in runs:
            pts = sorted(rows.get(kind, {}).items())
            if not pts:
                continue
            xs = [s for s, _ in pts]

            def col(i):  # a missing value is a gap in the line
                return [float("nan") if v[i] is None else v[i] for _, v in pts]
            c = COLORS.get(name, None)
            if not drawn_local:
                ax.plot(xs, col(0), "k-o", ms=3, lw=2, label="local CUDA")
                drawn_local = True
            ax.plot(xs, col(1), "-o", ms=4, lw=2, color=c, label=f"remote over {name}")
            if base not in drawn_base:
                drawn_base.add(base)
                bc = COLORS.get(base.split()[0].lower(), c)
                ax.plot(xs, col(2), "--", lw=1.2, color=bc, label=f"{base} stream")
                ax.plot(xs, col(3), ":", lw=1.2, color=bc, label=f"{base} acked")
        ax.set_title(f"cudaMemcpy {kind}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("GB/s (1e9 B/s)")
        ticks = sorted({s for _, rows, _ in runs for s in rows.get(kind, {})})
        if ticks:
            ax.set_xticks(ticks)
            ax.set_xticklabels([size_label(t) for t in ticks], rotation=45)
        ax.legend(fontsize=8)
    fig.suptitle(a.title or "remote-bench: synchronous copy bandwidth by size ("
                 + ", ".join(os.path.basename(p.split("=")[-1]) for p in a.reports) + ")", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_copy.py: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
